//! `build -o OUT.simg | OUT.img.zst | OUT.img.xz` (issue 27): images encoded straight from
//! the image map decode, with the formats' own tools, to the raw build's bytes.
//!
//! For the RPi example, random specs and a 5 GiB image with an extent across 4 GiB:
//! `simg2img` / `zstd -d` / `xz -d` of each output `cmp` equal to the raw build; the sparse
//! image's chunks (parsed here strictly, and listed by `simg_dump -v`) never cross an erase
//! block, DONT_CARE chunks are whole 4 KiB blocks and add up to the image size minus the
//! `.bmap`'s mapped bytes; the zstd seek table and the xz index have one entry per erase
//! block; two builds are byte-identical; the `.bmap` written beside a container is the raw
//! build's. Refusals (a `.gz` name, levels out of range) exit 2 and write nothing; a write
//! failure (file-size limit) exits 3 and leaves no temp file.

use std::path::{Path, PathBuf};
use std::process::Output;

use blockwise_test_kit::{
    assert_success, blockwise, bytes, have, output_text, run, tempdir, write_file, XorShift64,
};

const SIMG_MAGIC: u32 = 0xED26_FF3A;

fn rpi_spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rpi.toml")
}

/// `blockwise build SPEC -o OUT -q EXTRA…`, whatever its outcome.
fn build(spec: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "build".into(),
        spec.into(),
        "-o".into(),
        out.into(),
        "-q".into(),
    ];
    args.extend(extra.iter().map(Into::into));
    blockwise!().run(&args)
}

fn build_ok(spec: &Path, out: &Path, extra: &[&str]) {
    let o = build(spec, out, extra);
    assert_success(&o, &format!("blockwise build -o {}", out.display()));
}

/// The files of one spec built every way.
struct Built {
    raw: PathBuf,
    raw_bmap: PathBuf,
    simg: PathBuf,
    simg_bmap: PathBuf,
    zst: PathBuf,
    xz: PathBuf,
}

fn build_all(dir: &Path, spec: &Path, xz_level: &str) -> Built {
    let p = |n: &str| dir.join(n);
    let b = Built {
        raw: p("out.img"),
        raw_bmap: p("out.img.bmap"),
        simg: p("out.simg"),
        simg_bmap: p("out.simg.bmap"),
        zst: p("out.img.zst"),
        xz: p("out.img.xz"),
    };
    build_ok(spec, &b.raw, &["--bmap", b.raw_bmap.to_str().unwrap()]);
    build_ok(spec, &b.simg, &["--bmap", b.simg_bmap.to_str().unwrap()]);
    build_ok(spec, &b.zst, &[]);
    build_ok(spec, &b.xz, &["--level", xz_level]);
    b
}

/// Where `f` (of `len` bytes) may hold data (`SEEK_DATA`/`SEEK_HOLE`); everything, where the
/// filesystem cannot tell. Outside these ranges the file reads zeros.
fn data_ranges(f: &std::fs::File, len: u64) -> Vec<(u64, u64)> {
    use rustix::fs::{seek, SeekFrom};
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < len {
        let data = match seek(f, SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => return vec![(0, len)],
        };
        let hole = seek(f, SeekFrom::Hole(data)).unwrap_or(len).min(len);
        out.push((data, hole));
        pos = hole.max(data + 1);
    }
    out
}

/// `cmp a b` for images that are mostly holes: the same length, and the same bytes wherever
/// either file holds data (elsewhere both read zeros). `cmp` itself reads every hole: 17 s of
/// the kernel zeroing pages for each 5 GiB image.
fn cmp(a: &Path, b: &Path) {
    use std::os::unix::fs::FileExt as _;
    let (fa, fb) = (
        std::fs::File::open(a).unwrap(),
        std::fs::File::open(b).unwrap(),
    );
    let len = fa.metadata().unwrap().len();
    assert_eq!(
        len,
        fb.metadata().unwrap().len(),
        "{} and {} differ in length",
        a.display(),
        b.display()
    );
    let mut ranges = data_ranges(&fa, len);
    ranges.extend(data_ranges(&fb, len));
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    for (start, end) in ranges {
        let mut off = start;
        while off < end {
            let n = usize::try_from((end - off).min(1 << 20)).unwrap();
            fa.read_exact_at(&mut x[..n], off).unwrap();
            fb.read_exact_at(&mut y[..n], off).unwrap();
            if x[..n] != y[..n] {
                let at = x[..n]
                    .iter()
                    .zip(&y[..n])
                    .position(|(p, q)| p != q)
                    .unwrap();
                panic!(
                    "{} and {} differ at byte {}",
                    a.display(),
                    b.display(),
                    off + at as u64
                );
            }
            off += n as u64;
        }
    }
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes(b[i..i + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}

/// An Android sparse chunk: type, first block, blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    ty: u16,
    block: u64,
    blocks: u64,
}

/// The chunks of a sparse image, parsed strictly (header fields, sizes, coverage).
fn chunks(simg: &[u8]) -> (u64, u64, Vec<Chunk>) {
    assert_eq!(u32_at(simg, 0), SIMG_MAGIC);
    assert_eq!(
        (
            u16_at(simg, 4),
            u16_at(simg, 6),
            u16_at(simg, 8),
            u16_at(simg, 10)
        ),
        (1, 0, 28, 12)
    );
    let block = u64::from(u32_at(simg, 12));
    let total = u64::from(u32_at(simg, 16));
    let count = u32_at(simg, 20);
    let mut at = 28usize;
    let mut pos = 0u64;
    let mut out = Vec::new();
    for _ in 0..count {
        let ty = u16_at(simg, at);
        let blocks = u64::from(u32_at(simg, at + 4));
        let size = u32_at(simg, at + 8) as usize;
        let body = size - 12;
        match ty {
            0xCAC1 => assert_eq!(body as u64, blocks * block),
            0xCAC2 => assert_eq!(body, 4),
            0xCAC3 => assert_eq!(body, 0),
            t => panic!("unexpected chunk type {t:#x}"),
        }
        assert!(size as u64 <= 64 << 20, "a chunk of {size} bytes");
        out.push(Chunk {
            ty,
            block: pos,
            blocks,
        });
        pos += blocks;
        at += size;
    }
    assert_eq!(at, simg.len(), "bytes after the last chunk");
    assert_eq!(pos, total, "the chunks cover the image");
    (block, total, out)
}

/// `MappedBlocksCount` and `BlockSize` of a `.bmap`.
fn bmap_mapped_bytes(bmap: &Path) -> u64 {
    let text = std::fs::read_to_string(bmap).unwrap();
    let field = |name: &str| -> u64 {
        let open = format!("<{name}>");
        let s = text.find(&open).unwrap() + open.len();
        let e = text[s..].find('<').unwrap() + s;
        text[s..e].trim().parse().unwrap()
    };
    field("MappedBlocksCount") * field("BlockSize")
}

/// The chunks `simg_dump -v` lists: (type word, first block, blocks).
fn simg_dump(simg: &Path) -> Option<Vec<(String, u64, u64)>> {
    if !have("simg_dump") {
        return None;
    }
    let o = run("simg_dump", &[Path::new("-v"), simg]);
    assert_success(&o, "simg_dump -v");
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // chunk  input-offset  input-bytes  output-block  output-blocks  type…
        if f.len() >= 6 && f[0].parse::<u64>().is_ok() {
            out.push((
                f[5].to_string(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
            ));
        }
    }
    assert!(!out.is_empty(), "simg_dump listed no chunks:\n{text}");
    Some(out)
}

/// Everything the issue asks of the outputs of one spec whose erase block is `erase`.
fn check(b: &Built, erase: u64) {
    let raw_len = std::fs::metadata(&b.raw).unwrap().len();
    // The formats' own decoders give back the raw build.
    if have("simg2img") {
        let x = b.raw.with_extension("from-simg");
        assert_success(&run("simg2img", &[&b.simg, &x]), "simg2img");
        cmp(&x, &b.raw);
        std::fs::remove_file(&x).unwrap();
    }
    if have("zstd") {
        let x = b.raw.with_extension("from-zst");
        let o = run(
            "zstd",
            &[
                Path::new("-d"),
                Path::new("-q"),
                Path::new("-f"),
                &b.zst,
                Path::new("-o"),
                &x,
            ],
        );
        assert_success(&o, "zstd -d");
        cmp(&x, &b.raw);
        std::fs::remove_file(&x).unwrap();
    }
    if have("xz") {
        // `xz -d -k y.img.xz` writes y.img (sparse, as xz does for files).
        let y = b.raw.with_extension("from.img.xz");
        let x = b.raw.with_extension("from.img");
        std::fs::hard_link(&b.xz, &y).unwrap();
        let o = run(
            "xz",
            &[Path::new("-d"), Path::new("-k"), Path::new("-f"), &y],
        );
        assert_success(&o, "xz -d");
        std::fs::remove_file(&y).unwrap();
        cmp(&x, &b.raw);
        std::fs::remove_file(&x).unwrap();
        // One block per erase block, in one stream with its index.
        let o = run("xz", &[Path::new("--robot"), Path::new("--list"), &b.xz]);
        assert_success(&o, "xz --list");
        let text = String::from_utf8_lossy(&o.stdout);
        let totals: Vec<&str> = text
            .lines()
            .find(|l| l.starts_with("totals"))
            .unwrap()
            .split('\t')
            .collect();
        assert_eq!(totals[1], "1", "streams: {text}");
        assert_eq!(
            totals[2],
            raw_len.div_ceil(erase).to_string(),
            "blocks: {text}"
        );
    }
    // Android sparse: chunk rules, checked on our parse and on simg_dump's listing.
    let simg = std::fs::read(&b.simg).unwrap();
    let (block, total, list) = chunks(&simg);
    assert_eq!(block, 4096);
    assert_eq!(total * block, raw_len, "total blocks cover the whole image");
    let per_erase = erase / block;
    let mut dont_care = 0;
    for c in &list {
        assert_eq!(
            c.block / per_erase,
            (c.block + c.blocks - 1) / per_erase,
            "{c:?} crosses an erase block"
        );
        if c.ty == 0xCAC3 {
            dont_care += c.blocks * block;
        }
    }
    assert_eq!(
        dont_care,
        raw_len - bmap_mapped_bytes(&b.raw_bmap),
        "DONT_CARE is exactly what the .bmap leaves unmapped"
    );
    if let Some(dump) = simg_dump(&b.simg) {
        assert_eq!(dump.len(), list.len(), "simg_dump lists every chunk");
        for ((kind, first, n), c) in dump.iter().zip(&list) {
            assert_eq!((*first, *n), (c.block, c.blocks), "simg_dump: {kind}");
            assert_eq!(first / per_erase, (first + n - 1) / per_erase);
            assert_eq!(kind == "Don't", c.ty == 0xCAC3, "{kind} vs {c:?}");
        }
    }
    // The .bmap beside a sparse image describes the raw image: the raw build's own.
    assert_eq!(
        std::fs::read(&b.simg_bmap).unwrap(),
        std::fs::read(&b.raw_bmap).unwrap()
    );
    // The seek table: one frame per erase block, sizes adding up to the file.
    let zst = std::fs::read(&b.zst).unwrap();
    let n = zst.len();
    assert_eq!(u32_at(&zst, n - 4), 0x8F92_EAB1);
    let frames = u32_at(&zst, n - 9) as usize;
    assert_eq!(frames as u64, raw_len.div_ceil(erase));
    let table = &zst[n - 9 - 12 * frames..n - 9];
    let (mut c_sum, mut d_sum) = (0u64, 0u64);
    for (i, e) in table.chunks(12).enumerate() {
        let d = u64::from(u32_at(e, 4));
        assert_eq!(d, erase.min(raw_len - i as u64 * erase), "frame {i}");
        c_sum += u64::from(u32_at(e, 0));
        d_sum += d;
    }
    assert_eq!(d_sum, raw_len);
    assert_eq!(
        c_sum as usize + 8 + 12 * frames + 9,
        n,
        "frames then the seek table"
    );
}

#[test]
fn rpi_example_in_every_container() {
    let dir = tempdir!();
    let b = build_all(dir.path(), &rpi_spec(), "6");
    check(&b, 4 << 20);
    // Deterministic: a second build of each is byte-identical.
    for first in [&b.simg, &b.zst, &b.xz] {
        let again = dir.path().join(format!(
            "again.{}",
            first.file_name().unwrap().to_string_lossy()
        ));
        // (xz was built at --level 6, the default.)
        build_ok(&rpi_spec(), &again, &[]);
        cmp(first, &again);
    }
    // --format wins over the name; the JSON says what was written.
    let odd = dir.path().join("card.bin");
    let o = blockwise!().run([
        "build".as_ref(),
        rpi_spec().as_os_str(),
        "-o".as_ref(),
        odd.as_os_str(),
        "--format".as_ref(),
        "simg".as_ref(),
        "--json".as_ref(),
    ]);
    assert_success(&o, "build --format simg --json");
    cmp(&odd, &b.simg);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "simg");
    assert_eq!(
        v["output_bytes"].as_u64().unwrap(),
        std::fs::metadata(&odd).unwrap().len()
    );
    let c = &v["container"];
    assert_eq!(
        c["data_bytes"].as_u64().unwrap()
            + c["fill_bytes"].as_u64().unwrap()
            + c["dont_care_bytes"].as_u64().unwrap(),
        v["size_bytes"].as_u64().unwrap()
    );
}

#[test]
fn refusals_exit_2_and_write_nothing() {
    let dir = tempdir!();
    let cases: [(&str, &[&str], &str); 5] = [
        ("out.img.gz", &[], "does not write .gz"),
        ("out.img.zst", &["--level", "23"], "levels are 1 to 22"),
        ("out.img.xz", &["--level", "10"], "levels are 0 to 9"),
        ("out.simg", &["--level", "3"], "not compressed"),
        ("out.img", &["--level", "3"], "not compressed"),
    ];
    for (name, extra, needle) in cases {
        let out = dir.path().join(name);
        let o = build(&rpi_spec(), &out, extra);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{name} {extra:?}: {}",
            output_text(&o)
        );
        assert!(
            output_text(&o).contains(needle),
            "{name}: {}",
            output_text(&o)
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{name}: left files behind"
        );
    }
    let o = build(&rpi_spec(), &dir.path().join("x"), &["--format", "gz"]);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    // --format raw writes a raw image under any name.
    let gz = dir.path().join("really-raw.img.gz");
    build_ok(&rpi_spec(), &gz, &["--format", "raw"]);
    assert_eq!(std::fs::metadata(&gz).unwrap().len(), 1 << 30);
}

/// A write that fails (the file-size limit, EFBIG) exits 3 and leaves no temp file.
#[test]
fn write_failure_exits_3_and_leaves_nothing() {
    if !have("prlimit") {
        return;
    }
    let dir = tempdir!();
    for name in ["out.simg", "out.img.zst"] {
        let out = dir.path().join(name);
        // Larger than the RPi example's zstd output (~40 KiB) would be; the sparse image
        // is ~160 KiB: limit below both.
        let o = blockwise_test_kit::command("prlimit")
            .arg("--fsize=20000")
            .arg(blockwise!().path())
            .args([
                "build".as_ref(),
                rpi_spec().as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
                "-q".as_ref(),
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{name}: {}", output_text(&o));
        assert!(output_text(&o).contains("writing"), "{}", output_text(&o));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "{name}");
    }
}

/// Random layouts: tables, sectors, erase blocks 128 KiB–8 MiB, FAT/ext4/raw/empty
/// partitions with files of random, repeating, zero and empty contents.
#[test]
fn random_specs_in_every_container() {
    let cases: u64 = std::env::var("BLOCKWISE_ENCODE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let mut built = 0;
    for seed in 1..=cases {
        let dir = tempdir!();
        let (spec, erase) = random_spec(dir.path(), seed);
        let raw = dir.path().join("out.img");
        let o = build(&spec, &raw, &[]);
        if o.status.code() == Some(2) {
            // A combination the planner refuses with a reason: not this test's business.
            eprintln!("seed {seed}: refused: {}", output_text(&o));
            continue;
        }
        assert_success(&o, &format!("seed {seed}: build"));
        let b = build_all(dir.path(), &spec, "0");
        check(&b, erase);
        built += 1;
    }
    assert!(
        built * 2 >= cases,
        "only {built} of {cases} random specs built"
    );
}

/// A random spec in `dir` (contents included); returns it and its erase block.
fn random_spec(dir: &Path, seed: u64) -> (PathBuf, u64) {
    let mut r = XorShift64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut pick = |n: u64| r.next_u64() % n;
    let erase = 1u64 << (17 + pick(7));
    let sector = if pick(4) == 0 { 4096 } else { 512 };
    let table = ["mbr", "gpt", "none"][pick(3) as usize];
    let mut toml = format!(
        "[image]\ntable = \"{table}\"\nsector-size = {sector}\nerase-block = {erase}\nseed = {seed}\ntimestamp = 1700000000\n"
    );
    let parts = if table == "none" { 1 } else { 1 + pick(3) };
    for i in 0..parts {
        let fs = if table == "none" {
            ["fat16", "ext4", "fat32"][pick(3) as usize]
        } else {
            ["fat16", "ext4", "fat32", "raw", "none", "fat12"][pick(6) as usize]
        };
        let size = match fs {
            "fat12" => 4 + pick(4),
            "fat16" => 32 + pick(64),
            "fat32" => 300 + pick(100),
            "ext4" => 24 + pick(64),
            _ => 1 + pick(4),
        };
        toml.push_str(&format!("[[partition]]\nfs = \"{fs}\"\n"));
        match fs {
            "raw" => {
                let name = format!("raw{i}.bin");
                std::fs::write(
                    dir.join(&name),
                    file_bytes(pick(5), 1 + pick(3 << 20), seed + i),
                )
                .unwrap();
                toml.push_str(&format!("source = \"{name}\"\n"));
            }
            "none" => toml.push_str(&format!("size = \"{size}MiB\"\n")),
            _ => {
                let c = dir.join(format!("c{i}"));
                std::fs::create_dir_all(c.join("sub")).unwrap();
                for f in 0..pick(14) {
                    let len = [0, 1 + pick(5000), 4096 * (1 + pick(40)), 1 + pick(300_000)]
                        [pick(4) as usize];
                    let at = if f % 3 == 0 { c.join("sub") } else { c.clone() };
                    std::fs::write(
                        at.join(format!("f{f}.bin")),
                        file_bytes(pick(5), len, seed * 100 + f),
                    )
                    .unwrap();
                }
                toml.push_str(&format!("size = \"{size}MiB\"\ncontents = \"c{i}\"\n"));
            }
        }
    }
    (write_file(dir, "spec.toml", &toml), erase)
}

/// `len` bytes of one of five kinds: random, zeros, a repeated 32-bit value, a repeated
/// 5-byte pattern, random with zero 4 KiB blocks.
fn file_bytes(kind: u64, len: u64, seed: u64) -> Vec<u8> {
    let len = len as usize;
    match kind {
        0 => bytes(seed, len),
        1 => vec![0; len],
        2 => [0xDE, 0xAD, 0xBE, 0xEF].repeat(len.div_ceil(4))[..len].to_vec(),
        3 => [1, 2, 3, 4, 5].repeat(len.div_ceil(5))[..len].to_vec(),
        _ => {
            let mut b = bytes(seed, len);
            for (i, blk) in b.chunks_mut(4096).enumerate() {
                if i % 3 == 1 {
                    blk.fill(0);
                }
            }
            b
        }
    }
}

/// A 5 GiB image whose raw partition (8 MiB of data) spans the 4 GiB mark: offsets and block
/// numbers past 2^32 bytes in every container (genimage#204).
#[test]
fn extent_across_4gib() {
    let dir = tempdir!();
    let data = file_bytes(4, 8 << 20, 77);
    std::fs::write(dir.path().join("blob.bin"), &data).unwrap();
    let spec = write_file(
        dir.path(),
        "big.toml",
        "[image]\nsize = \"5GiB\"\nerase-block = \"4MiB\"\ntable = \"mbr\"\nseed = 3\ntimestamp = 1700000000\n\
         [[partition]]\nfs = \"none\"\nsize = \"4088MiB\"\n\
         [[partition]]\nfs = \"raw\"\nsource = \"blob.bin\"\n",
    );
    let b = build_all(dir.path(), &spec, "0");
    // The raw partition starts 4 MiB below 4 GiB and ends 4 MiB above.
    let raw = std::fs::File::open(&b.raw).unwrap();
    let mut got = vec![0u8; 8 << 20];
    std::os::unix::fs::FileExt::read_exact_at(&raw, &mut got, (4 << 30) - (4 << 20)).unwrap();
    assert!(got == data, "the raw build holds the source across 4 GiB");
    check(&b, 4 << 20);
    let (_, total, list) = chunks(&std::fs::read(&b.simg).unwrap());
    assert_eq!(total, 5 << 18);
    assert!(
        list.iter().any(|c| c.ty != 0xCAC3 && c.block == 1 << 20),
        "data chunks start at the 4 GiB block"
    );
}

/// SIGINT while a container is written: the build stops, removes its temp files and exits
/// 130; the output does not appear (as for the raw build, tests/hostile.rs).
#[test]
fn an_interrupted_container_build_leaves_nothing() {
    if !have("kill") {
        return;
    }
    let dir = tempdir!();
    std::fs::write(dir.path().join("blob.bin"), bytes(5, 48 << 20)).unwrap();
    let spec = write_file(
        dir.path(),
        "slow.toml",
        "[image]\nsize = \"256MiB\"\nerase-block = \"4MiB\"\ntable = \"mbr\"\n\
         [[partition]]\nfs = \"raw\"\nsource = \"blob.bin\"\n",
    );
    for (name, level) in [("int.img.xz", "9"), ("int.img.zst", "22")] {
        let out = dir.path().join(name);
        let child = std::process::Command::new(blockwise!().path())
            .args([
                "build".as_ref(),
                spec.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ])
            .args(["-q", "--level", level, "--bmap"])
            .arg(dir.path().join(format!("{name}.bmap")))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let prefix = format!(".{name}.tmp-");
        let t = std::time::Instant::now();
        while !std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        {
            assert!(t.elapsed().as_secs() < 120, "{name}: never began writing");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(run("kill", &["-INT", &child.id().to_string()])
            .status
            .success());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(130), "{name}: {err}");
        assert!(err.contains("temp files removed"), "{err}");
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("int.img"))
            .collect();
        assert!(left.is_empty(), "{name}: left behind {left:?}");
    }
}

/// An erase block that is partly random file data and partly text (the xz encoder stores
/// the random 1 MiB pieces and compresses the rest, in one block): `xz -d` gives the raw
/// build back byte for byte, and the text is compressed, not stored.
#[test]
fn xz_of_mixed_erase_blocks_decodes_to_the_raw_image() {
    if !have("xz") {
        assert!(!blockwise_test_kit::oracles_required(), "xz is missing");
        return;
    }
    let d = tempdir!();
    let mut data = bytes(11, 3 << 20);
    let text = b"console=serial0,115200 root=PARTUUID=00000000-02 rootwait quiet\n";
    data.extend(text.iter().copied().cycle().take(5 << 20));
    std::fs::write(d.path().join("mixed.bin"), &data).unwrap();
    let spec = write_file(
        d.path(),
        "mixed.toml",
        "[image]\ntable = \"mbr\"\nerase-block = \"8MiB\"\nseed = 3\n[[partition]]\nfs = \"raw\"\nsource = \"mixed.bin\"\n",
    );
    let (raw, xz) = (d.path().join("raw.img"), d.path().join("m.img.xz"));
    build_ok(&spec, &raw, &[]);
    build_ok(&spec, &xz, &[]);
    let o = run("xz", &[Path::new("-d"), Path::new("-k"), &xz]);
    assert_success(&o, "xz -d");
    cmp(&d.path().join("m.img"), &raw);
    // 3 MiB stored, 5 MiB of text in a few KiB: well under the 8 MiB of the block.
    let len = std::fs::metadata(&xz).unwrap().len();
    assert!(
        len > 3 << 20 && len < (3 << 20) + (256 << 10),
        "{len} bytes"
    );
}

/// The sparse-aware `cmp` finds a byte in one file's data where the other has a hole, and a
/// difference in the length; equal files pass.
#[test]
fn cmp_sees_data_where_the_other_has_a_hole() {
    use std::os::unix::fs::FileExt as _;
    let dir = tempdir!();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for p in [&a, &b] {
        std::fs::File::create(p).unwrap().set_len(1 << 30).unwrap();
    }
    cmp(&a, &b);
    let f = std::fs::OpenOptions::new().write(true).open(&b).unwrap();
    f.write_all_at(b"x", 700 << 20).unwrap();
    assert!(std::panic::catch_unwind(|| cmp(&a, &b)).is_err());
    assert!(std::panic::catch_unwind(|| cmp(&b, &a)).is_err());
    f.set_len((1 << 30) + 1).unwrap();
    let g = std::fs::OpenOptions::new().write(true).open(&a).unwrap();
    g.write_all_at(b"x", 700 << 20).unwrap();
    assert!(std::panic::catch_unwind(|| cmp(&a, &b)).is_err());
    g.set_len((1 << 30) + 1).unwrap();
    cmp(&a, &b);
}
