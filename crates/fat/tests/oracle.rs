//! Oracle tests: images formatted by blockwise-fat, checked with fsck.fat, mtools, blkid
//! and the `fatfs` crate. Images are sparse files under the target dir.

mod fixtures;

use blockwise_geometry::{FsKind, NodeKind, SparseImage};
use blockwise_test_kit::{
    assert_same_tree, blkid, fsck_fat_clean, fsck_number, have, materialize, mcopy_out, save,
    tempdir,
};
use fixtures::*;

/// Extracts the partition window of a disk image (extents only, holes stay holes).
fn partition(img: &SparseImage, start: u64, len: u64) -> SparseImage {
    use blockwise_geometry::BlockSink;
    let mut out = SparseImage::new(len);
    for (off, data) in img.extents() {
        let end = off + data.len() as u64;
        let (s, e) = (off.max(start), end.min(start + len));
        if s < e {
            out.write_at(s - start, &data[(s - off) as usize..(e - off) as usize])
                .unwrap();
        }
    }
    out
}

fn round_trip(req: &blockwise_fat::FatRequest, files: usize) {
    let (tree, content) = sample_tree(files);
    let (p, disk) = build_disk(req, &tree, &content);
    let dir = tempdir!();
    let disk_path = dir.path().join("disk.img");
    save(&disk, &disk_path);
    let start = req.partition_start_bytes;

    // fsck.fat on the partition alone.
    let part = partition(&disk, start, req.partition_size_bytes);
    let part_path = dir.path().join("part.img");
    save(&part, &part_path);
    if have("fsck.fat") {
        let out = fsck_fat_clean(&part_path);
        assert_eq!(
            fsck_number(&out, "First FAT starts at byte") + start,
            p.fat_start_bytes
        );
        assert_eq!(
            fsck_number(&out, "Data area starts at byte") + start,
            p.data_start_bytes
        );
        assert_eq!(p.data_start_bytes % req.erase_block_bytes, 0);
        // fsck counts files, directories and the volume label.
        let dirs = tree
            .nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Dir { .. }))
            .count()
            - 1;
        let want = format!(": {} files, ", content.len() + dirs + 1);
        assert!(out.contains(&want), "{out}");
    }

    // mcopy out of the whole disk at the partition offset, then diff -r.
    if have("mcopy") && have("diff") {
        let src = dir.path().join("src");
        materialize(&tree, &content, &src);
        let out = dir.path().join("out");
        mcopy_out(&disk_path, start, &out);
        assert_same_tree(&src, &out, &[]);
    }

    // blkid: type, label, UUID.
    if have("blkid") {
        let b = blkid(&disk_path, start);
        assert!(b.contains("TYPE=vfat"), "{b}");
        assert!(b.contains("LABEL=BLOCKWISE"), "{b}");
        let uuid = format!(
            "UUID={:04X}-{:04X}",
            p.volume_id >> 16,
            p.volume_id & 0xffff
        );
        assert!(b.contains(&uuid), "{b} lacks {uuid}");
    }

    // fatfs reads the same tree.
    assert_eq!(read_with_fatfs(part), expected(&tree, &content));
}

#[test]
fn round_trip_fat32_512() {
    round_trip(
        &request(
            4 * MIB,
            GIB,
            4 * MIB,
            512,
            FsKind::Fat(Some(FatType::Fat32)),
        ),
        2100,
    );
}

#[test]
fn round_trip_fat32_4096_sectors() {
    round_trip(
        &request(MIB, 300 * MIB, MIB, 4096, FsKind::Fat(Some(FatType::Fat32))),
        2000,
    );
}

#[test]
fn round_trip_fat16() {
    round_trip(
        &request(
            128 * KIB,
            128 * MIB,
            128 * KIB,
            512,
            FsKind::Fat(Some(FatType::Fat16)),
        ),
        2000,
    );
}

#[test]
fn round_trip_fat12() {
    round_trip(
        &request(
            4 * MIB,
            15 * MIB,
            4 * MIB,
            512,
            FsKind::Fat(Some(FatType::Fat12)),
        ),
        200,
    );
}

#[test]
fn two_builds_are_byte_identical() {
    let (tree, content) = sample_tree(500);
    let req = request(
        4 * MIB,
        GIB,
        4 * MIB,
        512,
        FsKind::Fat(Some(FatType::Fat32)),
    );
    let (_, a, _) = build(&req, &tree, &content);
    let (_, b, _) = build(&req, &tree, &content);
    assert!(a == b, "two builds differ");
}

/// E × sector × size matrix, where valid: fsck clean, FAT and data area on E (absolute).
#[test]
fn alignment_matrix() {
    if !have("fsck.fat") {
        return;
    }
    let dir = tempdir!();
    let (tree, content) = sample_tree(20);
    let sizes = [
        (64 * MIB, FsKind::Fat(Some(FatType::Fat16))),
        (64 * MIB, FsKind::Fat(None)),
        (300 * MIB, FsKind::Fat(Some(FatType::Fat32))),
        (300 * MIB, FsKind::Fat(Some(FatType::Fat16))),
        (GIB, FsKind::Fat(Some(FatType::Fat32))),
        (8 * GIB, FsKind::Fat(Some(FatType::Fat32))),
        (32 * GIB, FsKind::Fat(Some(FatType::Fat32))),
    ];
    let mut checked = 0;
    let mut rejected = Vec::new();
    for e in [128 * KIB, MIB, 4 * MIB, 8 * MIB] {
        for s in [512u32, 4096] {
            for &(size, fs) in &sizes {
                let req = request(e, size, e, s, fs);
                let p = match blockwise_fat::plan(&req) {
                    Ok(p) => p,
                    Err(err) => {
                        rejected.push(format!("E={e} S={s} {size} {fs:?}: {err}"));
                        continue;
                    }
                };
                // Populate only the small volumes; the big ones stay almost empty.
                let (t, c) = if size <= GIB {
                    (tree.clone(), content.clone())
                } else {
                    (blockwise_geometry::Tree::default(), Vec::new())
                };
                let (p2, img, _) = build(&req, &t, &c);
                assert_eq!(p, p2);
                let path = dir.path().join("m.img");
                save(&img, &path);
                let out = fsck_fat_clean(&path);
                let fat = fsck_number(&out, "First FAT starts at byte");
                let data = fsck_number(&out, "Data area starts at byte");
                assert_eq!((e + fat) % e, 0, "FAT start E={e} S={s} size={size}\n{out}");
                assert_eq!(
                    (e + data) % e,
                    0,
                    "data start E={e} S={s} size={size}\n{out}"
                );
                assert_eq!(e + data, p.data_start_bytes);
                assert!(
                    out.contains(&format!("{s} bytes per logical sector")),
                    "{out}"
                );
                std::fs::remove_file(&path).unwrap();
                checked += 1;
            }
        }
    }
    eprintln!(
        "checked {checked} combinations; rejected (with reasons):\n{}",
        rejected.join("\n")
    );
    // Every 512-byte combination is valid; 4096-byte FAT16/FAT32 only where the counts allow.
    assert!(checked >= 48, "only {checked} combinations planned");
}

/// The classic hand-tuned USB stick: MBR partition at sector 256 (128 KiB), E = 128 KiB,
/// 64 KiB clusters; the absolute data-area sector is a multiple of 256.
#[test]
fn classic_usb_stick_layout() {
    let mut req = request(
        256 * 512,
        8 * GIB,
        128 * KIB,
        512,
        FsKind::Fat(Some(FatType::Fat32)),
    );
    req.options.cluster = Some(64 * KIB);
    let (tree, content) = sample_tree(30);
    let (p, disk) = build_disk(&req, &tree, &content);
    assert_eq!(p.cluster_bytes, 64 * 1024);
    assert_eq!((p.data_start_bytes / 512) % 256, 0, "{p:?}");
    assert_eq!((p.fat_start_bytes / 512) % 256, 0, "{p:?}");
    let dir = tempdir!();
    if have("fsck.fat") {
        let part = partition(&disk, req.partition_start_bytes, req.partition_size_bytes);
        let path = dir.path().join("usb-part.img");
        save(&part, &path);
        let out = fsck_fat_clean(&path);
        assert!(out.contains("256 hidden sectors"), "{out}");
        let data = fsck_number(&out, "Data area starts at byte");
        assert_eq!((256 + data / 512) % 256, 0);
    }
    if have("mcopy") {
        let path = dir.path().join("usb.img");
        save(&disk, &path);
        let src = dir.path().join("src");
        materialize(&tree, &content, &src);
        let out = dir.path().join("out");
        mcopy_out(&path, 256 * 512, &out);
        assert_same_tree(&src, &out, &[]);
    }
}

/// A file as a sink (the CLI writes images through one).
struct FileSink(std::fs::File, u64);

impl blockwise_geometry::BlockSink for FileSink {
    type Error = std::io::Error;
    fn len(&self) -> u64 {
        self.1
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        use std::os::unix::fs::FileExt;
        self.0.write_all_at(data, offset)
    }
}

/// One test, every backend: formatting over stale bytes (a reused device) into a `Vec`, and
/// into a file, gives the same clean volume as into a fresh `SparseImage`.
#[test]
fn every_backend_and_stale_bytes() {
    let (tree, content) = sample_tree(300);
    for (size, fs, sector, cluster) in [
        (64 * MIB, FsKind::Fat(Some(FatType::Fat16)), 512u32, None),
        (40 * MIB, FsKind::Fat(Some(FatType::Fat32)), 512, Some(512)),
        (15 * MIB, FsKind::Fat(Some(FatType::Fat12)), 512, None),
        (300 * MIB, FsKind::Fat(Some(FatType::Fat32)), 4096, None),
    ] {
        let mut req = request(MIB, size, MIB, sector, fs);
        req.options.cluster = cluster;
        let (p, sparse, _) = build(&req, &tree, &content);
        let mut stale = vec![0xA5u8; size as usize];
        blockwise_fat::write(&mut stale, &req, &p, &tree, &content, 1_700_000_000).unwrap();
        let dir = tempdir!();
        let path = dir.path().join("vec.img");
        std::fs::write(&path, &stale).unwrap();
        if have("fsck.fat") {
            fsck_fat_clean(&path);
        }
        let mut v = SparseImage::new(size);
        blockwise_geometry::BlockSink::write_at(&mut v, 0, &stale).unwrap();
        assert_eq!(
            read_with_fatfs(v),
            expected(&tree, &content),
            "{fs:?} over stale bytes"
        );

        let fpath = dir.path().join("file.img");
        let f = std::fs::File::create(&fpath).unwrap();
        f.set_len(size).unwrap();
        let mut sink = FileSink(f, size);
        blockwise_fat::write(&mut sink, &req, &p, &tree, &content, 1_700_000_000).unwrap();
        drop(sink);
        let sparse_path = dir.path().join("sparse.img");
        save(&sparse, &sparse_path);
        assert!(
            std::fs::read(&fpath).unwrap() == std::fs::read(&sparse_path).unwrap(),
            "{fs:?}: file sink differs"
        );
    }
}

/// One FAT, FAT not aligned, no label, a partition at the old DOS sector 63.
#[test]
fn one_fat_unaligned_fat_no_label() {
    let (tree, content) = sample_tree(100);
    for fs in [
        FsKind::Fat(Some(FatType::Fat32)),
        FsKind::Fat(Some(FatType::Fat16)),
    ] {
        let mut req = request(63 * 512, 300 * MIB, 128 * KIB, 512, fs);
        req.options.fats = 1;
        req.options.align_fat = false;
        req.label = None;
        let (p, img, _) = build(&req, &tree, &content);
        assert_eq!(p.fat_count, 1);
        assert_eq!(p.data_start_bytes % (128 * KIB), 0, "{p:?}");
        assert!(p.label.is_none());
        let dir = tempdir!();
        let path = dir.path().join("one.img");
        save(&img, &path);
        if have("fsck.fat") {
            let out = fsck_fat_clean(&path);
            assert!(out.contains("1 FATs"), "{out}");
            assert!(out.contains("63 hidden sectors"), "{out}");
            assert_eq!(
                (63 * 512 + fsck_number(&out, "Data area starts at byte")) % (128 * KIB),
                0
            );
        }
        if have("blkid") {
            let b = blkid(&path, 0);
            assert!(b.contains("TYPE=vfat") && !b.contains("LABEL="), "{b}");
        }
        assert_eq!(read_with_fatfs(img), expected(&tree, &content));
    }
}
