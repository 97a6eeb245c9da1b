//! The writer's rules, read back through the raw layouts: entry sets and their checksums,
//! name hashes, NoFatChain runs, the read-only attribute, and the trees it refuses.

use blockwise_exfat::raw::{
    attr, entry_type, name_hash, set_checksum, stream_flags, FileEntryRaw, StreamEntryRaw,
};
use blockwise_exfat::{plan_with_layout, upcase, write, Error, ExfatOptions, ExfatRequest};
use blockwise_geometry::{BlockSource, Meta, NodeKind, SectorSize, SparseImage, Tree};
use zerocopy::FromBytes;

fn request() -> ExfatRequest {
    ExfatRequest {
        partition_start_bytes: 0,
        partition_size_bytes: 64 << 20,
        disk_bytes: 64 << 20,
        device_sector: SectorSize::S512,
        erase_block_bytes: 4 << 20,
        options: ExfatOptions::default(),
        label: Some("T".into()),
        seed: 3,
    }
}

fn file(size: u64, content: u64) -> NodeKind {
    NodeKind::File {
        size,
        content,
        data_ranges: None,
        link: None,
    }
}

fn build(
    tree: &Tree,
    content: &Vec<Vec<u8>>,
) -> Result<(SparseImage, blockwise_exfat::WriteReport), Error> {
    let req = request();
    let (_, p) = plan_with_layout(&req)?;
    let mut img = SparseImage::new(64 << 20);
    let r = write(&mut img, &req, &p, tree, content, 0)?;
    Ok((img, r))
}

#[test]
fn entry_sets_read_back() {
    let mut t = Tree::default();
    let ro = Meta {
        mode: 0o444,
        mtime: 1_700_000_001,
        mtime_nsec: 250_000_000,
        ..Meta::default()
    };
    t.add(0, "Readme.TXT", file(5, 0), ro).unwrap();
    t.add(
        0,
        "sub",
        NodeKind::Dir { children: vec![] },
        Meta {
            mode: 0o755,
            ..Meta::default()
        },
    )
    .unwrap();
    t.add(
        0,
        "link",
        NodeKind::Symlink {
            target: b"x".to_vec(),
        },
        Meta::default(),
    )
    .unwrap();
    let content = vec![b"hello".to_vec()];
    let (img, report) = build(&t, &content).unwrap();
    assert_eq!(report.warnings.len(), 1);
    assert_eq!(report.warnings[0].code, "exfat-skipped-symlink");
    let (layout, _) = plan_with_layout(&request()).unwrap();
    let mut dir = vec![0u8; 4096];
    img.read_at(layout.cluster_offset(layout.root_cluster), &mut dir)
        .unwrap();
    let table = upcase::full_table();
    // Label, bitmap, up-case, then the two sets in name order ("Readme.TXT" < "sub").
    let types: Vec<u8> = dir.chunks(32).take(10).map(|e| e[0]).collect();
    assert_eq!(&types[..4], &[0x83, 0x81, 0x82, entry_type::FILE]);
    let set = &dir[96..96 + 3 * 32];
    let f = FileEntryRaw::read_from_bytes(&set[..32]).unwrap();
    assert_eq!(f.secondary_count, 2);
    assert_eq!(f.set_checksum.get(), set_checksum(set));
    assert_eq!(f.file_attributes.get(), attr::ARCHIVE | attr::READ_ONLY);
    // 1_700_000_001 is an odd second: 100 + 25 hundredths on top of the even second.
    assert_eq!(f.last_modified_10ms_increment, 125);
    assert_eq!(f.last_modified_utc_offset, 0x80);
    let s = StreamEntryRaw::read_from_bytes(&set[32..64]).unwrap();
    let name: Vec<u16> = "Readme.TXT".encode_utf16().collect();
    assert_eq!(
        s.name_hash.get(),
        name_hash(&upcase::upcase_name(&table, &name))
    );
    assert_eq!(
        s.general_secondary_flags,
        stream_flags::ALLOCATION_POSSIBLE | stream_flags::NO_FAT_CHAIN
    );
    assert_eq!(s.data_length.get(), 5);
    let mut data = [0u8; 5];
    img.read_at(
        layout.cluster_offset(u64::from(s.first_cluster.get())),
        &mut data,
    )
    .unwrap();
    assert_eq!(&data, b"hello");
    let d = FileEntryRaw::read_from_bytes(&dir[192..224]).unwrap();
    assert_eq!(d.file_attributes.get(), attr::DIRECTORY);
}

#[test]
fn refused_trees() {
    let content: Vec<Vec<u8>> = vec![vec![0; 10]];
    let mut t = Tree::default();
    t.add(0, "Straße", file(0, 0), Meta::default()).unwrap();
    t.add(0, "STRASSE", file(0, 0), Meta::default()).unwrap();
    // No conflict: ß has no single-unit upper case.
    assert!(build(&t, &content).is_ok());
    let mut t = Tree::default();
    t.add(0, "Été", file(0, 0), Meta::default()).unwrap();
    t.add(0, "éTÉ", file(0, 0), Meta::default()).unwrap();
    assert!(matches!(
        build(&t, &content),
        Err(Error::CaseConflict { .. })
    ));
    let mut t = Tree::default();
    t.add(0, "a:b", file(0, 0), Meta::default()).unwrap();
    let e = build(&t, &content).unwrap_err().to_string();
    assert!(e.contains("exFAT names cannot contain ':'"), "{e}");
    let mut t = Tree::default();
    t.add(0, b"caf\xe9".as_slice(), file(0, 0), Meta::default())
        .unwrap();
    assert!(build(&t, &content)
        .unwrap_err()
        .to_string()
        .contains("not valid UTF-8"));
    let mut t = Tree::default();
    t.add(0, "huge", file(1 << 40, 0), Meta::default()).unwrap();
    assert!(matches!(build(&t, &content), Err(Error::NoSpace { .. })));
    // A plan that is not the request's.
    let req = request();
    let (_, mut p) = plan_with_layout(&req).unwrap();
    p.cluster_bytes *= 2;
    let mut img = SparseImage::new(64 << 20);
    assert!(matches!(
        write(&mut img, &req, &p, &Tree::default(), &content, 0),
        Err(Error::PlanMismatch {
            field: "cluster_bytes"
        })
    ));
}
