//! The header parsers of the formats verify recognises without checking their insides (NTFS
//! boot sector and `$Volume` record, btrfs, XFS, ISO 9660 descriptors, LUKS 1/2 with the JSON
//! area, swap) on arbitrary bytes. The first byte picks the parser; the rest is its input.
#![no_main]

use blockwise_verify::other::{btrfs, iso9660, luks, ntfs, swap, xfs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 6 {
        0 => {
            let (boot, record) = rest.split_at(rest.len().min(512));
            if let Ok(b) = ntfs::parse_boot(boot) {
                let _ = b.volume_record();
                let _ = b.to_fs(record);
            }
            let _ = ntfs::volume_name(rest);
        }
        1 => {
            let _ = btrfs::parse(rest);
        }
        2 => {
            let _ = xfs::parse(rest);
        }
        3 => {
            let _ = iso9660::parse(rest);
        }
        4 => {
            let (head, json) = rest.split_at(rest.len().min(4096));
            let _ = luks::json_len(head);
            let _ = luks::parse(head, json, u64::MAX);
        }
        _ => {
            let (head, tail) = rest.split_at(rest.len().min(4096));
            let _ = swap::parse(head, tail);
        }
    }
});
