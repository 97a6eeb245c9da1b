//! Unit tests over hand-made images.

#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::panic,
    reason = "tests"
)]

use super::*;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

/// Sets entry `slot` of the MBR or EBR at the start of `disk` (`&mut d[ebr..]` for an EBR)
/// and its 55 AA.
fn mbr_entry(disk: &mut [u8], slot: usize, type_: u8, start: u32, sectors: u32) {
    let at = 0x1be + slot * 16;
    disk[at + 4] = type_;
    disk[at + 8..at + 12].copy_from_slice(&start.to_le_bytes());
    disk[at + 12..at + 16].copy_from_slice(&sectors.to_le_bytes());
    disk[510] = 0x55;
    disk[511] = 0xaa;
}

fn codes(r: &Report) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.code.as_str()).collect()
}

/// A FAT32 boot sector for a volume of `total` sectors, reserved `rsvd`, FAT size `fatsz`.
pub(crate) fn fat32(total: u32, rsvd: u16, fatsz: u32, spc: u8) -> Vec<u8> {
    let mut b = vec![0u8; 512];
    b[0..3].copy_from_slice(&[0xeb, 0x58, 0x90]);
    b[0x0b..0x0d].copy_from_slice(&512u16.to_le_bytes());
    b[0x0d] = spc;
    b[0x0e..0x10].copy_from_slice(&rsvd.to_le_bytes());
    b[0x10] = 2;
    b[0x15] = 0xf8;
    b[0x20..0x24].copy_from_slice(&total.to_le_bytes());
    b[0x24..0x28].copy_from_slice(&fatsz.to_le_bytes());
    b[0x2c..0x30].copy_from_slice(&2u32.to_le_bytes());
    b[0x30..0x32].copy_from_slice(&1u16.to_le_bytes());
    b[0x32..0x34].copy_from_slice(&6u16.to_le_bytes());
    b[0x42] = 0x29;
    b[0x47..0x52].copy_from_slice(b"NO NAME    ");
    b[0x52..0x5a].copy_from_slice(b"FAT32   ");
    b[510] = 0x55;
    b[511] = 0xaa;
    b
}

fn put(img: &mut SparseImage, off: u64, data: &[u8]) {
    use blockwise_geometry::BlockSink;
    img.write_at(off, data).unwrap();
}

#[test]
fn empty_and_tiny_sources() {
    let r = verify_bytes(&[], &Options::new("x"));
    assert_eq!(r.exit_code(), 2);
    assert_eq!(codes(&r), ["empty-source"]);
    let r = verify_bytes(&[0u8; 100], &Options::new("x"));
    assert_eq!(r.exit_code(), 2);
    let r = verify_bytes(&[0u8; 1 << 16], &Options::new("x"));
    assert_eq!(codes(&r), ["unrecognised"]);
}

#[test]
fn sector_63_is_an_error_2048_a_warning_8192_clean() {
    for (start, code, exit) in [
        (63u32, Some("partition-not-4k-aligned"), 1),
        (2048, Some("partition-not-erase-aligned"), 0),
        (8192, None, 0),
    ] {
        let mut d = vec![0u8; 16 << 20];
        mbr_entry(&mut d, 0, 0x83, start, 4096);
        let r = verify_bytes(&d, &Options::new("d"));
        assert_eq!(r.partitions.len(), 1);
        assert_eq!(r.partitions[0].start_bytes, u64::from(start) * 512);
        assert_eq!(
            r.findings
                .iter()
                .find(|f| f.code.as_str().starts_with("partition-"))
                .map(|f| f.code.as_str()),
            code,
            "{r:#?}"
        );
        assert_eq!(r.exit_code(), exit);
        let strict = verify_bytes(&d, &Options::new("d").strict(true));
        if start == 2048 {
            assert_eq!(strict.exit_code(), 1);
        }
    }
    let mut d = vec![0u8; 16 << 20];
    mbr_entry(&mut d, 0, 0x83, 63, 100);
    let r = verify_bytes(&d, &Options::new("d"));
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "partition-not-4k-aligned")
        .unwrap();
    assert!(
        f.message
            .starts_with("partition 1 starts at sector 63 (32256 B): not 4 KiB aligned"),
        "{}",
        f.message
    );
}

#[test]
fn past_end_overlap_and_loop() {
    let mut d = vec![0u8; 4 << 20];
    mbr_entry(&mut d, 0, 0x83, 2048, 100_000);
    mbr_entry(&mut d, 1, 0x83, 4096, 100);
    let r = verify_bytes(&d, &Options::new("d"));
    let c = codes(&r);
    assert!(c.contains(&"partition-past-end"), "{c:?}");
    assert!(c.contains(&"partition-overlap"), "{c:?}");
    assert_eq!(r.exit_code(), 1);

    // An EBR pointing at itself.
    let mut d = vec![0u8; 8 << 20];
    mbr_entry(&mut d, 0, 0x05, 2048, 8192);
    let ebr = 2048 * 512;
    mbr_entry(&mut d[ebr..], 0, 0x83, 2048, 100);
    mbr_entry(&mut d[ebr..], 1, 0x05, 0, 100);
    let r = verify_bytes(&d, &Options::new("d"));
    assert!(codes(&r).contains(&"ebr-chain"), "{:?}", codes(&r));
    assert_eq!(r.partitions.len(), 1);
    assert!(r.partitions[0].logical);
    assert_eq!(r.partitions[0].index, 5);
}

#[test]
fn aligned_fat32_in_sparse_32g_image() {
    // A 32 GiB sparse image: MBR with a FAT32 partition at 4 MiB whose data area lands on 4 MiB.
    let size = 32u64 << 30;
    let mut img = SparseImage::new(size);
    let mut mbr = vec![0u8; 512];
    let part_sectors = u32::try_from((1u64 << 30) / 512).unwrap();
    mbr_entry(&mut mbr, 0, 0x0c, 8192, part_sectors);
    put(&mut img, 0, &mbr);
    // rsvd 8192 sectors (4 MiB), FAT 8192 sectors each: data at 4+4+8 = 16 MiB relative.
    let mut boot = fat32(part_sectors, 8192, 4096, 8);
    boot[0x1c..0x20].copy_from_slice(&8192u32.to_le_bytes());
    put(&mut img, 4 * MIB, &boot);
    put(&mut img, 4 * MIB + 6 * 512, &boot);
    let mut fsinfo = vec![0u8; 512];
    fsinfo[0..4].copy_from_slice(&0x4161_5252u32.to_le_bytes());
    fsinfo[0x1e4..0x1e8].copy_from_slice(&0x6141_7272u32.to_le_bytes());
    fsinfo[0x1e8..0x1ec].copy_from_slice(&u32::MAX.to_le_bytes());
    fsinfo[0x1fc..0x200].copy_from_slice(&0xaa55_0000u32.to_le_bytes());
    put(&mut img, 4 * MIB + 512, &fsinfo);
    let t = std::time::Instant::now();
    let r = verify_sparse(&img, &Options::new("big.img"));
    assert!(t.elapsed().as_millis() < 500);
    assert_eq!(r.exit_code(), 0, "{r:#?}");
    let Some(FsPlan::Fat(f)) = &r.partitions[0].filesystem else {
        panic!("{r:#?}")
    };
    assert_eq!(f.kind.name(), "fat32");
    assert_eq!(f.data_start_bytes, 4 * MIB + (8192 + 2 * 4096) * 512);
    assert_eq!(f.fat_start_bytes, 8 * MIB);
    assert!(f.aligned);
    assert!(r.aligned, "{r:#?}");
    assert!(
        r.to_human().contains("verdict: aligned"),
        "{}",
        r.to_human()
    );

    // Same with the backup boot sector changed: a warning.
    let mut bad = boot.clone();
    bad[0x47] = b'X';
    put(&mut img, 4 * MIB + 6 * 512, &bad);
    let r = verify_sparse(&img, &Options::new("big.img"));
    assert!(codes(&r).contains(&"fat-backup-boot-differs"));
}

#[test]
fn superfloppy_fat_is_bare() {
    let mut d = vec![0u8; 64 << 20];
    let b = fat32(131_072, 32, 1024, 1);
    d[..512].copy_from_slice(&b);
    let r = verify_bytes(&d, &Options::new("f"));
    assert_eq!(r.table.kind, TableKind::None);
    assert_eq!(r.partitions.len(), 1);
    assert_eq!(r.partitions[0].index, 0);
    assert!(matches!(&r.partitions[0].filesystem, Some(FsPlan::Fat(_))));
    // 0 sectors per cluster: a finding, not a panic.
    let mut d2 = d.clone();
    d2[0x0d] = 0;
    let r = verify_bytes(&d2, &Options::new("f"));
    assert!(codes(&r).contains(&"fat-corrupt"), "{:?}", codes(&r));
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn gpt_with_huge_entry_count() {
    // Protective MBR + a GPT header claiming 2^32-1 entries (CRC valid).
    let mut d = vec![0u8; 8 << 20];
    mbr_entry(&mut d, 0, 0xee, 1, 16383);
    let h = &mut d[512..512 + 92];
    h[0..8].copy_from_slice(b"EFI PART");
    h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
    h[12..16].copy_from_slice(&92u32.to_le_bytes());
    h[24..32].copy_from_slice(&1u64.to_le_bytes());
    h[32..40].copy_from_slice(&16383u64.to_le_bytes());
    h[40..48].copy_from_slice(&34u64.to_le_bytes());
    h[48..56].copy_from_slice(&16350u64.to_le_bytes());
    h[72..80].copy_from_slice(&2u64.to_le_bytes());
    h[80..84].copy_from_slice(&u32::MAX.to_le_bytes());
    h[84..88].copy_from_slice(&128u32.to_le_bytes());
    let mut hasher_input = h.to_vec();
    hasher_input[16..20].fill(0);
    let crc = crc32fast::hash(&hasher_input);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    let r = verify_bytes(&d, &Options::new("g"));
    assert_eq!(r.table.kind, TableKind::Gpt);
    assert!(codes(&r).contains(&"gpt-corrupt"), "{:?}", codes(&r));
    assert!(r
        .findings
        .iter()
        .any(|f| f.message.contains("4294967295 entries")));
}

#[test]
fn json_shape() {
    let mut d = vec![0u8; 16 << 20];
    mbr_entry(&mut d, 0, 0x83, 8192, 8192);
    let r = verify_bytes(&d, &Options::new("d"));
    let v = serde_json::to_value(&r).unwrap();
    for k in [
        "source",
        "size_bytes",
        "sector_bytes",
        "erase_block_bytes",
        "table",
        "partitions",
        "findings",
        "aligned",
    ] {
        assert!(v.get(k).is_some(), "missing {k}: {v}");
    }
    assert_eq!(v["table"]["kind"], "mbr");
    assert_eq!(v["sector_bytes"], 512);
    let p = &v["partitions"][0];
    assert_eq!(p["type"], "0x83");
    assert_eq!(p["start_bytes"], 4 * MIB);
    assert_eq!(p["alignment_bytes"], 4 * MIB);
    assert_eq!(p["aligned"], true);
}

fn golden_disk() -> Vec<u8> {
    let mut d = vec![0u8; 48 << 20];
    mbr_entry(&mut d, 0, 0x0c, 8192, 65536);
    let b = fat32(65536, 8192, 512, 1);
    let off = 4 << 20;
    d[off..off + 512].copy_from_slice(&b);
    d
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mutated_images_never_panic(muts in prop::collection::vec((0usize..(4 << 20) + 4096, any::<u8>()), 1..40)) {
        let mut d = golden_disk();
        for (at, v) in muts {
            let at = if at >= 4096 { (4 << 20) + (at % 4096) } else { at };
            d[at] = v;
        }
        let r = verify_bytes(&d, &Options::new("m"));
        let _ = r.to_human();
        let _ = serde_json::to_string(&r).unwrap();
    }

    #[test]
    fn truncations_never_panic(len in 0usize..(5 << 20)) {
        let d = golden_disk();
        let r = verify_bytes(&d[..len], &Options::new("t"));
        prop_assert!(r.exit_code() <= 2);
    }

    #[test]
    fn random_bytes_never_panic(d in prop::collection::vec(any::<u8>(), 0..70_000)) {
        let _ = verify_bytes(&d, &Options::new("r"));
    }
}

/// Architecture invariant, table part: verify(write_table(plan(spec))) reproduces the plan's
/// partitions field for field (filesystems are left to the FAT/ext4 builders' tests).
fn roundtrip(toml: &str) {
    use blockwise_geometry::{plan, FsKind, ImageSpec, Layout, PartitionLayout, SizeSpec};
    /// The layout part of a spec (verify does not depend on the image crate's full spec).
    #[derive(serde::Deserialize)]
    struct Text {
        #[serde(default)]
        image: ImageSpec,
        partition: Vec<Part>,
    }
    #[derive(serde::Deserialize)]
    struct Part {
        fs: FsKind,
        size: SizeSpec,
        #[serde(rename = "type")]
        type_: Option<String>,
        #[serde(default)]
        bootable: bool,
        name: Option<String>,
    }
    let t: Text = toml::from_str(toml).unwrap();
    let layout = Layout {
        image: t.image,
        partitions: t
            .partition
            .into_iter()
            .map(|p| PartitionLayout {
                type_: p.type_,
                bootable: p.bootable,
                name: p.name,
                ..PartitionLayout::new(p.fs, p.size)
            })
            .collect(),
    };
    let Ok(p) = plan(&layout) else { return };
    let mut img = SparseImage::new(p.size_bytes);
    blockwise_ptable::write_table(&mut img, &p).unwrap();
    // An MBR carries no sector size: the builder passes it on (GPT is detected).
    let forced = (p.table.kind == TableKind::Mbr).then_some(p.sector_bytes);
    let r = verify_sparse(
        &img,
        &Options::new("rt")
            .erase_block(p.erase_block_bytes)
            .sector_size(forced),
    );
    assert_eq!(r.exit_code(), 0, "{toml}\n{:#?}", r.findings);
    assert_eq!(r.table, p.table, "{toml}");
    assert_eq!(r.sector_bytes, p.sector_bytes);
    assert_eq!(r.size_bytes, p.size_bytes);
    assert_eq!(r.partitions.len(), p.partitions.len(), "{toml}\n{r:#?}");
    for (a, b) in r.partitions.iter().zip(&p.partitions) {
        let strip = |x: &PartitionPlan| {
            let mut x = x.clone();
            x.spec_index = 0;
            x.content = FsKind::None;
            x
        };
        assert_eq!(strip(a), strip(b), "{toml}");
    }
    assert_eq!(r.aligned, p.aligned);
    assert!(
        r.findings.iter().all(|f| f.severity == Severity::Info),
        "{:#?}",
        r.findings
    );
}

#[test]
fn roundtrip_examples() {
    roundtrip("[image]\nsize = \"1GiB\"\n[[partition]]\nfs = \"none\"\nsize = \"256MiB\"\nbootable = true\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n");
    roundtrip("[image]\ntable = \"gpt\"\nsector-size = 4096\nsize = \"1GiB\"\n[[partition]]\nfs = \"none\"\nname = \"boot\"\nsize = \"256MiB\"\n[[partition]]\nfs = \"none\"\nsize = \"fill\"\n");
    let six = "[[partition]]\nfs = \"none\"\nsize = \"1MiB\"\n".repeat(6);
    roundtrip(&format!("[image]\nerase-block = \"1MiB\"\n{six}"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn roundtrip_random_layouts(
        gpt in any::<bool>(),
        s4k in any::<bool>(),
        eshift in 17u32..=24,
        sizes in prop::collection::vec(1u64..64, 1..8),
        fill in any::<bool>(),
    ) {
        let mut t = format!(
            "[image]\ntable = \"{}\"\nsector-size = {}\nerase-block = \"{}KiB\"\n",
            if gpt { "gpt" } else { "mbr" },
            if s4k { 4096 } else { 512 },
            (1u64 << eshift) >> 10
        );
        if fill {
            t.push_str("size = \"1GiB\"\n");
        }
        let n = sizes.len();
        for (i, s) in sizes.into_iter().enumerate() {
            let size = if fill && i + 1 == n { "\"fill\"".to_string() } else { format!("\"{s}MiB\"") };
            t.push_str(&format!("[[partition]]\nfs = \"none\"\nsize = {size}\n"));
        }
        roundtrip(&t);
    }
}

#[test]
fn device_hints_flag_small_fat_sectors() {
    let mut d = vec![0u8; 64 << 20];
    d[..512].copy_from_slice(&fat32(131_072, 32, 1024, 8));
    let phys = DeviceHints {
        logical_block_bytes: Some(512),
        physical_block_bytes: Some(4096),
        ..DeviceHints::default()
    };
    let r = verify_bytes(&d, &Options::new("dev").device(Some(phys)));
    assert!(
        codes(&r).contains(&"fat-sector-smaller-than-device"),
        "{:?}",
        codes(&r)
    );
    assert!(r.to_human().contains("512 bytes / 4096 bytes"));
    let logical = DeviceHints {
        logical_block_bytes: Some(4096),
        physical_block_bytes: Some(4096),
        ..DeviceHints::default()
    };
    let r = verify_bytes(&d, &Options::new("dev").device(Some(logical)));
    assert!(
        codes(&r).contains(&"fat-sector-below-logical"),
        "{:?}",
        codes(&r)
    );
    assert_eq!(r.exit_code(), 1);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["device"]["logical_block_bytes"], 4096);
}

#[test]
fn logical_outside_extended() {
    let mut d = vec![0u8; 16 << 20];
    mbr_entry(&mut d, 0, 0x05, 2048, 4096);
    let ebr = 2048 * 512;
    mbr_entry(&mut d[ebr..], 0, 0x83, 2048, 8192);
    let r = verify_bytes(&d, &Options::new("d"));
    assert!(
        codes(&r).contains(&"logical-outside-extended"),
        "{:?}",
        codes(&r)
    );
}

/// An EBR chain of `n` logical partitions of 8 sectors each, one EBR every 16 sectors from
/// sector 2048 (relative next-EBR pointers, as the format wants).
fn ebr_chain(n: u32) -> Vec<u8> {
    let n_us = usize::try_from(n).unwrap();
    let mut d = vec![0u8; (2048 + 16 * n_us + 64) * 512];
    mbr_entry(&mut d, 0, 0x05, 2048, 16 * n);
    for k in 0..n {
        let ebr = usize::try_from(2048 + 16 * k).unwrap() * 512;
        mbr_entry(&mut d[ebr..], 0, 0x83, 8, 8);
        if k + 1 < n {
            mbr_entry(&mut d[ebr..], 1, 0x05, 16 * (k + 1), 16);
        }
    }
    d
}

/// r26: verify reads an EBR chain as far as Linux does (logical partitions up to 255) and
/// warns past 60, where fdisk and sfdisk stop listing and drop partitions when they save.
#[test]
fn r26_long_ebr_chains() {
    let opts = Options::new("d").erase_block(4096);
    let r = verify_bytes(&ebr_chain(56), &opts);
    assert_eq!(r.partitions.len(), 56);
    assert!(
        !codes(&r).contains(&"mbr-many-partitions"),
        "{:?}",
        codes(&r)
    );
    let r = verify_bytes(&ebr_chain(57), &opts);
    assert_eq!(r.partitions.len(), 57);
    assert!(
        codes(&r).contains(&"mbr-many-partitions"),
        "{:?}",
        codes(&r)
    );
    let r = verify_bytes(&ebr_chain(251), &opts);
    assert_eq!(r.partitions.len(), 251);
    assert_eq!(r.partitions.last().map(|p| p.index), Some(255));
    assert!(!codes(&r).contains(&"ebr-chain"), "{:?}", codes(&r));
    let r = verify_bytes(&ebr_chain(252), &opts);
    assert_eq!(r.partitions.len(), 251);
    assert!(codes(&r).contains(&"ebr-chain"), "{:?}", codes(&r));
}

/// r25: a source whose size is not a whole number of sectors is a warning, an error with
/// `strict`.
#[test]
fn r25_size_not_a_multiple_of_the_sector() {
    let mut d = vec![0u8; 8 << 20];
    mbr_entry(&mut d, 0, 0x83, 8192, 4096);
    d.extend_from_slice(&[0u8; 100]);
    let r = verify_bytes(&d, &Options::new("d"));
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "size-not-sector-multiple")
        .unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.message.contains("100 bytes past the last full one"),
        "{}",
        f.message
    );
    let r = verify_bytes(&d, &Options::new("d").strict(true));
    assert_eq!(r.exit_code(), 1, "{:?}", codes(&r));
    d.truncate(8 << 20);
    let r = verify_bytes(&d, &Options::new("d"));
    assert!(!codes(&r).contains(&"size-not-sector-multiple"));
}
