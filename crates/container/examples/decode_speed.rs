//! Decoding speed of the container decoders, by hand (README "Containers" has the numbers):
//!
//! ```text
//! cargo run --release -p blockwise-container --example decode_speed -- IMG.xz IMG.zst ...
//! cargo run --release -p blockwise-container --features native --example decode_speed -- ...
//! ```
//!
//! Each file is opened by its bytes and read front to back in 4 MiB pieces, as `write` does;
//! the decoded MB/s is printed (best of three).

use std::time::Instant;

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).expect("read the file");
        let mut best = f64::MAX;
        let mut total = 0u64;
        for _ in 0..3 {
            let t = Instant::now();
            let opened = blockwise_container::open(bytes.clone()).expect("open");
            let blockwise_container::Opened::Container { decoded, .. } = opened else {
                println!("{path}: not a container");
                break;
            };
            let mut buf = vec![0u8; 4 << 20];
            let mut at = 0u64;
            loop {
                let n = decoded.read_forward(at, &mut buf).expect("decode");
                at += n as u64;
                if n < buf.len() {
                    break;
                }
            }
            total = at;
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{path}: {} MB in {best:.2} s: {:.0} MB/s ({})",
            total / 1_000_000,
            total as f64 / 1e6 / best,
            if cfg!(feature = "native") { "native" } else { "pure Rust" }
        );
    }
}
