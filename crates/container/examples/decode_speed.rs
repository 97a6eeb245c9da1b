//! Decoding speed of the container decoders, by hand (README "Containers" has the numbers):
//!
//! ```text
//! cargo run --release -p blockwise-container --example decode_speed -- IMG.xz IMG.zst ...
//! cargo run --release -p blockwise-container --features native --example decode_speed -- ...
//! ```
//!
//! Each file is opened by its bytes and read front to back in 4 MiB pieces, as `write` does;
//! the decoded MB/s is printed (best of three). With `native`, the decoders `blockwise-flash`
//! used before the container crate (libzstd, liblzma, flate2 over a 1 MiB `BufReader`) are
//! timed too, as the baseline.

use std::os::unix::fs::FileExt;
use std::time::Instant;

/// The file, read with positioned reads (as `write` reads it).
struct FileSrc(std::fs::File, u64);

impl blockwise_geometry::BlockSource for FileSrc {
    type Error = std::io::Error;
    fn len(&self) -> u64 {
        self.1
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

fn main() {
    for path in std::env::args().skip(1) {
        let mut best = f64::MAX;
        let mut total = 0u64;
        for _ in 0..3 {
            let t = Instant::now();
            let file = std::fs::File::open(&path).expect("open the file");
            let len = file.metadata().expect("stat").len();
            let opened = blockwise_container::open(FileSrc(file, len)).expect("open");
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
            if cfg!(feature = "native") {
                "native"
            } else {
                "pure Rust"
            }
        );
        #[cfg(feature = "native")]
        baseline(&path);
    }
}

/// The decoders of `blockwise-flash` before the container crate, over a 1 MiB `BufReader`.
#[cfg(feature = "native")]
fn baseline(path: &str) {
    use std::io::{BufReader, Read};
    let mut best = f64::MAX;
    let mut total = 0u64;
    for _ in 0..3 {
        let t = Instant::now();
        let f = BufReader::with_capacity(1 << 20, std::fs::File::open(path).expect("open"));
        let mut r: Box<dyn Read> = if path.ends_with(".zst") {
            Box::new(zstd::stream::read::Decoder::with_buffer(f).expect("zstd"))
        } else if path.ends_with(".xz") {
            let s = xz2::stream::Stream::new_auto_decoder(512 << 20, xz2::stream::CONCATENATED)
                .expect("xz");
            Box::new(xz2::bufread::XzDecoder::new_stream(f, s))
        } else if path.ends_with(".gz") {
            Box::new(flate2::bufread::MultiGzDecoder::new(f))
        } else {
            return;
        };
        let mut buf = vec![0u8; 4 << 20];
        total = 0;
        loop {
            let n = r.read(&mut buf).expect("decode");
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "{path}: {} MB in {best:.2} s: {:.0} MB/s (before: flash's decoders)",
        total / 1_000_000,
        total as f64 / 1e6 / best
    );
}
