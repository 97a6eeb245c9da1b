//! The raw layouts read back what the writer wrote, through the public `raw` and `csum`
//! modules only (the way the verifier reads ext4): superblock, descriptors, the root inode
//! and its extent root, the journal superblock, and their checksums.

use blockwise_ext4::csum::{crc16, crc32c_raw, inode_seed};
use blockwise_ext4::raw::{
    ExtentHeaderRaw, ExtentRaw, GroupDesc64Raw, GroupDescRaw, GroupFlags, InodeFlags, InodeRaw,
    JournalSuperblockRaw, RoCompatFeatures, SuperblockRaw, EXT_MAGIC, GOOD_OLD_FIRST_INO,
    JBD2_MAGIC_NUMBER, JBD2_SUPERBLOCK_V2, JOURNAL_INO, ROOT_INO, SUPERBLOCK_OFFSET, SUPER_MAGIC,
    S_IFDIR, S_IFMT,
};
use blockwise_ext4::{plan, write, Ext4Options, Ext4Profile, Ext4Request};
use blockwise_geometry::{BlockSource, SparseImage, Tree};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

fn read(img: &SparseImage, offset: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    img.read_at(offset, &mut b).unwrap();
    b
}

fn check(opts: Ext4Options) {
    let req = Ext4Request {
        partition_start_bytes: 4 << 20,
        partition_size_bytes: 64 << 20,
        erase_block_bytes: 4 << 20,
        options: opts,
        label: Some("raw".into()),
        seed: 3,
        timestamp: 1_700_000_000,
    };
    let p = plan(&req, Some(&Tree::default())).unwrap();
    let mut img = SparseImage::new(req.partition_size_bytes);
    write(&mut img, &req, &p, &Tree::default(), &Vec::<Vec<u8>>::new()).unwrap();

    // Superblock.
    let sb = SuperblockRaw::read_from_bytes(&read(&img, SUPERBLOCK_OFFSET, 1024)).unwrap();
    assert_eq!(sb.s_magic.get(), SUPER_MAGIC);
    let bs = 1024u64 << sb.s_log_block_size.get();
    assert_eq!(bs, u64::from(p.block_bytes));
    assert_eq!(u64::from(sb.s_blocks_count_lo.get()), p.blocks);
    assert_eq!(u64::from(sb.s_inodes_count.get()), p.inodes);
    assert_eq!(sb.features().names(), p.features);
    assert_eq!(&sb.s_volume_name[..4], b"raw\0");
    let csum = sb
        .features()
        .ro_compat
        .contains(RoCompatFeatures::METADATA_CSUM);
    if csum {
        assert_eq!(sb.s_checksum.get(), sb.checksum());
    }
    let seed = crc32c_raw(0xffff_ffff, &sb.s_uuid);

    // Group 0's descriptor and its checksum.
    let ds = match sb.s_desc_size.get() {
        0 => 32,
        n => usize::from(n),
    };
    let gdt = read(&img, (u64::from(sb.s_first_data_block.get()) + 1) * bs, ds);
    let mut d = GroupDesc64Raw::new_zeroed();
    d.as_mut_bytes()[..ds].copy_from_slice(&gdt);
    let lo: GroupDescRaw = d.base;
    let mut zeroed = gdt.clone();
    zeroed[0x1E..0x20].fill(0);
    let stored = lo.bg_checksum.get();
    if csum {
        let c = crc32c_raw(crc32c_raw(seed, &0u32.to_le_bytes()), &zeroed);
        assert_eq!(stored, c as u16);
    } else {
        let c = crc16(
            crc16(crc16(0xffff, &sb.s_uuid), &0u32.to_le_bytes()),
            &zeroed[..0x1E],
        );
        assert_eq!(stored, crc16(c, &zeroed[0x20..]));
    }
    assert!(GroupFlags::from_bits_retain(lo.bg_flags.get()).contains(GroupFlags::ITABLE_ZEROED));
    let itable =
        u64::from(lo.bg_inode_table_lo.get()) | (u64::from(d.bg_inode_table_hi.get()) << 32);
    assert_eq!(
        Some(req.partition_start_bytes + itable * bs),
        p.inode_table_start_bytes
    );

    // The root directory inode and its extent root.
    let isz = usize::from(sb.s_inode_size.get());
    let slot = u64::from(ROOT_INO - 1) * isz as u64;
    let rec = read(&img, itable * bs + slot, isz);
    let (root, _) = InodeRaw::read_from_prefix(&rec).unwrap();
    assert_eq!(root.i_mode.get() & S_IFMT, S_IFDIR);
    let flags = InodeFlags::from_bits_retain(root.i_flags.get());
    assert!(flags.contains(InodeFlags::EXTENTS));
    let (eh, rest) = ExtentHeaderRaw::read_from_prefix(&root.i_block).unwrap();
    assert_eq!(
        (eh.eh_magic.get(), eh.eh_entries.get(), eh.eh_depth.get()),
        (EXT_MAGIC, 1, 0)
    );
    let (ext, _) = ExtentRaw::read_from_prefix(rest).unwrap();
    assert_eq!((ext.ee_block.get(), ext.ee_len.get()), (0, 1));
    // 2 + lost+found.
    assert_eq!(root.i_links_count.get(), 3);
    assert!(u64::from(sb.s_inodes_count.get()) > u64::from(GOOD_OLD_FIRST_INO));
    if csum {
        let mut z = rec.clone();
        z[0x7C..0x7E].fill(0);
        z[0x82..0x84].fill(0);
        let c = crc32c_raw(inode_seed(seed, ROOT_INO, root.i_generation.get()), &z);
        assert_eq!(root.l_i_checksum_lo.get(), c as u16);
        assert_eq!(root.i_checksum_hi.get(), (c >> 16) as u16);
    }

    // The journal: s_jnl_blocks holds inode 8's extent root; its first block the JBD2
    // superblock (big-endian).
    if let Some(js) = p.journal_start_bytes {
        assert_eq!(sb.s_journal_inum.get(), JOURNAL_INO);
        let words = sb.s_jnl_blocks;
        let (eh, rest) = ExtentHeaderRaw::read_from_prefix(words.as_bytes()).unwrap();
        assert_eq!(eh.eh_magic.get(), EXT_MAGIC);
        let (ext, _) = ExtentRaw::read_from_prefix(rest).unwrap();
        let start = u64::from(ext.ee_start_lo.get()) | (u64::from(ext.ee_start_hi.get()) << 32);
        assert_eq!(req.partition_start_bytes + start * bs, js);
        let jsb = JournalSuperblockRaw::read_from_bytes(&read(&img, start * bs, 1024)).unwrap();
        assert_eq!(jsb.s_header.h_magic.get(), JBD2_MAGIC_NUMBER);
        assert_eq!(jsb.s_header.h_blocktype.get(), JBD2_SUPERBLOCK_V2);
        assert_eq!(u64::from(jsb.s_blocksize.get()), bs);
        assert_eq!(jsb.s_start.get(), 0);
        assert_eq!(jsb.s_uuid, sb.s_uuid);
        assert_eq!(
            u64::from(words[16].get()),
            u64::from(jsb.s_maxlen.get()) * bs
        );
    }
}

#[test]
fn raw_layouts_read_back_the_default_profile() {
    check(Ext4Options::default());
}

#[test]
fn raw_layouts_read_back_compat_and_small_blocks() {
    check(Ext4Options {
        profile: Ext4Profile::Compat,
        ..Ext4Options::default()
    });
    check(Ext4Options {
        block_size: 1024,
        ..Ext4Options::default()
    });
}
