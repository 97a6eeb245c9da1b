//! Writer tests on the fault-injecting device: what reaches it, in which order, and every
//! fault as a typed error with the offset.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::{write, Error, Event, Fault, FaultDevice, MemSource, Options, Outcome, Refusal};

fn image(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) % 253) as u8 ^ 0x5a)
        .collect()
}

fn run(dev: &mut FaultDevice, src: &mut MemSource, opts: &Options) -> Result<Outcome, Error> {
    write(dev, src, opts, &AtomicBool::new(false), &mut |_| {})
}

const OLD: u8 = 0xee;

#[test]
fn mapped_ranges_written_holes_kept_block0_last() {
    for block in [512u32, 4096] {
        let img = image(3 << 20);
        let ranges: Vec<(u64, u64)> = vec![
            (0, 70_000),
            (1 << 20, (1 << 20) + 5000),
            ((3 << 20) - 100, 3 << 20),
        ];
        let mut dev = FaultDevice::new(vec![OLD; 8 << 20], block);
        let mut src = MemSource::with_ranges(img.clone(), ranges.clone());
        let out = run(
            &mut dev,
            &mut src,
            &Options::default().chunk(1 << 20).verify(true),
        )
        .unwrap();
        assert!(out.stats.verified);
        let b = block as usize;
        for &(s, e) in &ranges {
            let (s, e) = (s as usize / b * b, (e as usize).next_multiple_of(b));
            assert_eq!(dev.data[s..e], img[s..e], "block {block} range {s}..{e}");
        }
        assert!(dev.data[80_000..(1 << 20)].iter().all(|&x| x == OLD));
        assert!(dev.data[3 << 20..].iter().all(|&x| x == OLD));
        // The last writes: the image's last block, then LBA 1, then LBA 0.
        let n = dev.writes.len();
        let last: Vec<u64> = dev.writes[n - 3..].iter().map(|w| w.0).collect();
        assert_eq!(last, [(3 << 20) - u64::from(block), u64::from(block), 0]);
        // No write crosses a chunk boundary.
        for &(o, l) in &dev.writes {
            assert_eq!(o / (1 << 20), (o + l - 1) / (1 << 20), "{o}+{l}");
        }
        assert!(out.notes.iter().any(|n| n.contains("holes")));
    }
}

#[test]
fn zero_holes_writes_everything() {
    let img = image(1 << 20);
    let mut dev = FaultDevice::new(vec![OLD; 2 << 20], 4096);
    let mut src = MemSource::with_ranges(img.clone(), vec![(8192, 12288)]);
    let out = run(
        &mut dev,
        &mut src,
        &Options::default().zero_holes(true).verify(true),
    )
    .unwrap();
    assert_eq!(dev.data[..1 << 20], img[..]);
    assert_eq!(out.stats.bytes_written, 1 << 20);
}

#[test]
fn faults_are_typed_errors_with_the_offset() {
    let at = (2 << 20) + 4096;
    for fault in [Fault::Eio, Fault::Enospc, Fault::Eperm, Fault::Short] {
        let img = image(4 << 20);
        let mut dev = FaultDevice::new(vec![OLD; 4 << 20], 512).with_fault(fault, at);
        let mut src = MemSource::new(img);
        let err = run(&mut dev, &mut src, &Options::default().chunk(1 << 20)).unwrap_err();
        assert!(err.is_device_failure(), "{fault:?}: {err}");
        let (offset, written) = err.progress().unwrap();
        match fault {
            Fault::Short => assert_eq!(offset, at),
            _ => assert_eq!(offset, 2 << 20),
        }
        assert!(written <= offset, "{fault:?}");
        assert!(dev.data[..512].iter().all(|&x| x == OLD), "block 0 written");
    }
    let mut dev = FaultDevice::new(vec![OLD; 1 << 20], 512).with_fault(Fault::SyncEio, 0);
    let err = run(
        &mut dev,
        &mut MemSource::new(image(1 << 19)),
        &Options::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Sync { .. }), "{err}");
    assert!(dev.data[..512].iter().all(|&x| x == OLD), "block 0 written");
}

#[test]
fn verify_reports_the_first_differing_block() {
    // A device that silently drops one write: a "success" the read-back must catch.
    #[derive(Debug)]
    struct Liar(FaultDevice);
    impl crate::Device for Liar {
        fn size(&self) -> Option<u64> {
            self.0.size()
        }
        fn block_size(&self) -> u32 {
            self.0.block_size()
        }
        fn mem_align(&self) -> usize {
            4096
        }
        fn write_at(&mut self, o: u64, b: &[u8]) -> std::io::Result<usize> {
            if o == 1 << 20 {
                return Ok(b.len());
            }
            self.0.write_at(o, b)
        }
        fn read_at(&mut self, o: u64, b: &mut [u8]) -> std::io::Result<usize> {
            self.0.read_at(o, b)
        }
        fn sync(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut dev = Liar(FaultDevice::new(vec![OLD; 4 << 20], 512));
    let mut src = MemSource::new(image(3 << 20));
    let err = write(
        &mut dev,
        &mut src,
        &Options::default().chunk(1 << 20).verify(true),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::VerifyMismatch { offset } if offset == 1 << 20),
        "{err}"
    );
}

#[test]
fn cancel_stops_after_the_current_chunk_with_block0_unwritten() {
    let cancel = AtomicBool::new(false);
    let mut dev = FaultDevice::new(vec![OLD; 8 << 20], 512);
    let mut src = MemSource::new(image(8 << 20));
    let mut n = 0;
    let out = write(
        &mut dev,
        &mut src,
        &Options::default().chunk(1 << 20),
        &cancel,
        &mut |e| {
            if matches!(e, Event::Written(_)) {
                n += 1;
                if n == 2 {
                    cancel.store(true, Ordering::Relaxed);
                }
            }
        },
    )
    .unwrap();
    assert!(out.interrupted);
    assert!(out.stats.bytes_written < 8 << 20);
    assert!(dev.data[..1024].iter().all(|&x| x == OLD));
    assert!(dev.syncs >= 1);
}

#[test]
fn too_small_and_bad_chunk_are_refused_before_writing() {
    let mut dev = FaultDevice::new(vec![OLD; 1 << 20], 512);
    let err = run(
        &mut dev,
        &mut MemSource::new(image(2 << 20)),
        &Options::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Refused(Refusal::TooSmall { .. })));
    let err = run(
        &mut dev,
        &mut MemSource::new(image(1000)),
        &Options::default().chunk(1000),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Options(_)));
    assert!(dev.writes.is_empty());
}

#[test]
fn stale_gpt_is_cleared_under_an_mbr_image() {
    let mut old = vec![OLD; 4 << 20];
    old[512..520].copy_from_slice(b"EFI PART");
    let end = old.len() - 512;
    old[end..end + 8].copy_from_slice(b"EFI PART");
    let mut dev = FaultDevice::new(old, 512);
    let mut img = image(1 << 20);
    img[510] = 0x55;
    img[511] = 0xaa;
    let mut src = MemSource::with_ranges(img, vec![(0, 512), (4096, 8192)]);
    let out = run(&mut dev, &mut src, &Options::default()).unwrap();
    assert!(dev.data[512..1024].iter().all(|&x| x == 0));
    assert!(dev.data[end..].iter().all(|&x| x == 0));
    assert_eq!(
        out.notes.iter().filter(|n| n.contains("stale GPT")).count(),
        2
    );
}

#[test]
fn short_stream_pads_the_last_block() {
    // A stream of unknown size: the last partial block is padded with zeros.
    struct Unsized(Vec<u8>);
    impl crate::Source for Unsized {
        fn size(&self) -> Option<u64> {
            None
        }
        fn ranges(&self) -> Option<Vec<(u64, u64)>> {
            None
        }
        fn read(&mut self, o: u64, b: &mut [u8]) -> Result<usize, crate::SourceError> {
            let s = (o as usize).min(self.0.len());
            let n = b.len().min(self.0.len() - s);
            b[..n].copy_from_slice(&self.0[s..s + n]);
            Ok(n)
        }
    }
    let img = image(10_000);
    let mut dev = FaultDevice::new(vec![OLD; 1 << 20], 512);
    let out = write(
        &mut dev,
        &mut Unsized(img.clone()),
        &Options::default().verify(true),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(out.image_size, 10_000);
    assert_eq!(dev.data[..10_000], img[..]);
    assert!(dev.data[10_000..10_240].iter().all(|&x| x == 0));
    assert_eq!(dev.data[10_240], OLD);
}

/// r25: the first cancel during the read-back stops it after the read in flight (at most
/// 1 MiB), not at its end; the outcome says how far it checked.
#[test]
fn r25_cancel_stops_the_read_back_within_one_read() {
    let cancel = AtomicBool::new(false);
    let mut dev = FaultDevice::new(vec![OLD; 16 << 20], 512);
    let mut src = MemSource::new(image(16 << 20));
    let mut verified = Vec::new();
    let out = write(
        &mut dev,
        &mut src,
        &Options::default().chunk(8 << 20).verify(true),
        &cancel,
        &mut |e| {
            if let Event::Verified(n) = e {
                verified.push(n);
                // The second read is the first MiB of an 8 MiB chunk.
                if verified.len() == 2 {
                    cancel.store(true, Ordering::Relaxed);
                }
            }
        },
    )
    .unwrap();
    assert!(out.interrupted && out.interrupted_verifying);
    assert!(!out.stats.verified);
    // The held-back head (LBA 0 and 1), 1 MiB of the next chunk, then the stop.
    assert_eq!(verified, [1024, 1024 + (1 << 20)]);
    assert_eq!(out.verified_bytes, 1024 + (1 << 20));
    // Everything was written (block 0 too) before the read-back began.
    assert_eq!(dev.data[..16 << 20], image(16 << 20)[..]);
    let j = crate::write_json(&out, "a", "b", true);
    assert_eq!(j["interrupted_verifying"], true);
    assert_eq!(j["verified_bytes"], out.verified_bytes);
}

/// r25: chunks above 64 MiB are refused before anything is read, allocated or written; a
/// chunk larger than the image allocates buffers of the image's size only.
#[test]
fn r25_chunk_is_capped_and_buffers_follow_the_image() {
    let mut dev = FaultDevice::new(vec![OLD; 1 << 20], 512);
    let err = run(
        &mut dev,
        &mut MemSource::new(image(4096)),
        &Options::default().chunk(1 << 30),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Options(m) if m.contains("at most") && m.contains("64 MiB")),
        "{err}"
    );
    assert!(dev.writes.is_empty());
    let out = run(
        &mut dev,
        &mut MemSource::new(image(8192)),
        &Options::default().chunk(crate::MAX_CHUNK).verify(true),
    )
    .unwrap();
    assert!(out.stats.verified);
    assert_eq!(dev.data[..8192], image(8192)[..]);
}

/// r25: a regular file larger than the image, full of old bytes, ends up byte-identical to
/// the image (emptied, holes read as zeros, cut to the image's size), and no note claims
/// the holes kept old contents.
#[test]
fn r25_a_larger_regular_file_ends_up_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.img");
    std::fs::write(&path, vec![OLD; 3 << 20]).unwrap();
    let img = image(1 << 20);
    let mut expect = img.clone();
    expect[8192..(512 << 10)].fill(0);
    let mut src = MemSource::with_ranges(img, vec![(0, 8192), (512 << 10, 1 << 20)]);
    let (mut t, _) = crate::Target::open(&path, crate::DirectMode::Prefer).unwrap();
    let out = write(
        &mut t,
        &mut src,
        &Options::default().verify(true),
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    assert!(out.stats.verified);
    assert!(
        !out.notes.iter().any(|n| n.contains("holes")),
        "{:?}",
        out.notes
    );
    drop(t);
    assert_eq!(std::fs::read(&path).unwrap(), expect);
}
