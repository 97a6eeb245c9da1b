//! What the peer-comparison benches share: generated host trees and the printed ratio.

use std::path::Path;
use std::time::Duration;

use crate::random::bytes;

/// ~5,000 files, ~150 MB under `dir`: 50 directories of 100 files (half of them in a
/// subdirectory), incompressible. Returns (files, bytes).
pub fn nested(dir: &Path) -> (usize, u64) {
    let mut n = 0;
    let mut total = 0u64;
    for d in 0..50 {
        let top = dir.join(format!("directory {d:02} with a long name"));
        let sub = top.join("Sub Dir");
        std::fs::create_dir_all(&sub).expect("mkdir");
        for k in 0..100 {
            let len = 1000 + (n * 7919) % 59_000;
            let parent = if k % 2 == 0 { &top } else { &sub };
            std::fs::write(
                parent.join(format!("File number {n} of the bench.dat")),
                bytes(n as u64, len),
            )
            .expect("write");
            n += 1;
            total += len as u64;
        }
    }
    (n, total)
}

/// 20,000 small files in `dir/many`, named by `name(i)`. Returns the count.
pub fn flat(dir: &Path, name: impl Fn(usize) -> String) -> usize {
    let many = dir.join("many");
    std::fs::create_dir_all(&many).expect("mkdir");
    for i in 0..20_000 {
        std::fs::write(many.join(name(i)), format!("{i}\n")).expect("write");
    }
    20_000
}

/// Prints both times and the ratio ours / peer (or ours alone when the peer was not timed).
pub fn report(
    what: &str,
    ours_name: &str,
    peer_name: &str,
    ours: Duration,
    peer: Option<Duration>,
) {
    match peer {
        Some(p) => println!(
            "{what}: {ours_name} {:.3} s, {peer_name} {:.3} s, ratio {:.3}",
            ours.as_secs_f64(),
            p.as_secs_f64(),
            ours.as_secs_f64() / p.as_secs_f64()
        ),
        None => println!(
            "{what}: {ours_name} {:.3} s ({peer_name} not timed)",
            ours.as_secs_f64()
        ),
    }
}

/// Runs `ours` and `peer` alternately `runs` times (so both see the same machine state) and
/// returns their medians; the peer's is `None` when it failed or is not installed.
pub fn medians(
    runs: usize,
    mut ours: impl FnMut() -> Duration,
    mut peer: impl FnMut() -> Option<Duration>,
) -> (Duration, Option<Duration>) {
    let mut a = Vec::with_capacity(runs);
    let mut b = Vec::with_capacity(runs);
    for _ in 0..runs {
        a.push(ours());
        if let Some(t) = peer() {
            b.push(t);
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    };
    let ours = median(&mut a).unwrap_or_default();
    let peer = if b.len() == runs {
        median(&mut b)
    } else {
        None
    };
    (ours, peer)
}

/// The first line `tool args` prints (stdout, else stderr): the peer's version for the
/// bench report.
pub fn tool_version(tool: &str, args: &[&str]) -> String {
    let o = crate::run(tool, args);
    let text = crate::output_text(&o);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("unknown version")
        .trim()
        .to_string()
}
