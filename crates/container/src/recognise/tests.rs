use super::*;

fn check(head: &[u8], want: &str) {
    let got = match recognise_bytes(head, &[], u64::try_from(head.len()).unwrap()) {
        Format::Image(k) => format!("image {}", k.name()),
        Format::Container(c) => format!("container {}", c.name()),
        Format::Refused(r) => format!("refused {}", r.kind),
        Format::Unknown(u) => format!("unknown {}", u.looks_like),
    };
    assert_eq!(got, want, "{:02x?}", &head[..head.len().min(16)]);
}

fn sector(at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; 4096];
    v[at..at + bytes.len()].copy_from_slice(bytes);
    v
}

#[test]
fn containers_by_magic() {
    check(&[0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4], "container xz");
    check(&[0x1f, 0x8b, 8, 0, 0, 0], "container gzip");
    check(&[0x28, 0xb5, 0x2f, 0xfd, 0x24], "container zstd");
    check(b"BZh91AY&SY", "container bzip2");
    check(&[0x04, 0x22, 0x4d, 0x18, 0x64], "container lz4");
    check(
        &[0x02, 0x21, 0x4c, 0x18, 0, 0],
        "container lz4 (legacy format)",
    );
    check(b"PK\x03\x04\x14\x00", "container zip");
    let mut sparse = 0xED26_FF3Au32.to_le_bytes().to_vec();
    sparse.extend([1, 0, 0, 0, 28, 0, 12, 0]);
    check(&sparse, "container Android sparse");
    // Near misses are not containers.
    check(b"BZh0", "unknown text");
    check(
        &[0x1f, 0x8b, 8, 0xff],
        "unknown unrecognised bytes (starts 1F 8B 08 FF)",
    );
}

#[test]
fn refused_formats_by_name() {
    check(b"QFI\xfb\0\0\0\x03", "refused qcow2");
    check(b"QFI\xfb\0\0\0\x01", "refused qcow");
    check(b"KDMV\x01\0\0\0", "refused vmdk");
    check(b"# Disk DescriptorFile\nversion=1\n", "refused vmdk");
    check(b"vhdxfile", "refused vhdx");
    check(b"conectix\0\0\0\x02", "refused vhd");
    check(&sector(0x40, &0xBEDA_107Fu32.to_le_bytes()), "refused vdi");
    check(&[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c], "refused 7z");
    check(b"Rar!\x1a\x07\x01\x00", "refused rar");
    check(b"070701000000", "refused cpio");
    let mut tar = vec![0u8; 1024];
    tar[..6].copy_from_slice(b"os.img");
    tar[257..263].copy_from_slice(b"ustar\0");
    check(&tar, "refused tar");
    // An old (V7) tar header: no "ustar", but a checksum that matches.
    let mut v7 = vec![0u8; 1024];
    v7[..6].copy_from_slice(b"os.img");
    v7[100..107].copy_from_slice(b"000644\0");
    let sum: u32 = v7[..512].iter().map(|&b| u32::from(b)).sum::<u32>() + 8 * 32;
    v7[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    check(&v7, "refused tar");
    v7[0] = b'x';
    check(
        &v7,
        "unknown unrecognised bytes (starts 78 73 2E 69 6D 67 00 00)",
    );
    // A fixed VHD: an MBR image with a footer at the end.
    let mut img = sector(510, &[0x55, 0xaa]);
    img.extend(vec![0u8; 4096]);
    let mut footer = vec![0u8; 512];
    footer[..8].copy_from_slice(b"conectix");
    assert_eq!(
        recognise_bytes(&img, &footer, 1 << 20),
        refusal(
            "vhd",
            "a fixed VHD disk image (a raw image with a VHD footer)",
            CONVERT
        )
    );
}

#[test]
fn images_by_table_or_filesystem() {
    check(&sector(510, &[0x55, 0xaa]), "image MBR disk image");
    let mut gpt = sector(510, &[0x55, 0xaa]);
    gpt[512..520].copy_from_slice(b"EFI PART");
    check(&gpt, "image GPT disk image");
    check(&sector(0, b"hsqs"), "image squashfs");
    let mut ext = vec![0u8; 4096];
    ext[1024 + 56..1024 + 58].copy_from_slice(&[0x53, 0xef]);
    check(&ext, "image ext4");
}

#[test]
fn unknown_bytes_are_described() {
    check(
        &[0xff, 0xd8, 0xff, 0xe0, 0, 0x10, b'J', b'F'],
        "unknown a JPEG picture",
    );
    check(&[0u8; 4096], "unknown all zeros in its first 64 KiB");
    check(b"hello world\n", "unknown text");
    check(b"", "unknown empty");
    check(
        &[1, 2, 3, 0xfe],
        "unknown unrecognised bytes (starts 01 02 03 FE)",
    );
}

#[test]
fn skippable_frames_come_first() {
    let mut z = vec![0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
    z.extend([0x28, 0xb5, 0x2f, 0xfd, 0x24, 0]);
    assert_eq!(
        recognise(&z).unwrap(),
        Format::Container(ContainerKind::Zstd)
    );
    let mut l = vec![0x5f, 0x2a, 0x4d, 0x18, 0, 0, 0, 0];
    l.extend([0x04, 0x22, 0x4d, 0x18, 0x64]);
    assert_eq!(
        recognise(&l).unwrap(),
        Format::Container(ContainerKind::Lz4)
    );
    // A huge skippable size: no allocation, no loop.
    let h = vec![0x50, 0x2a, 0x4d, 0x18, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(
        recognise(&h).unwrap(),
        Format::Container(ContainerKind::Zstd)
    );
}
