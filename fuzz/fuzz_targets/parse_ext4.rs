//! ext2/3/4 superblock, group descriptor summary and extent-root parsing on arbitrary bytes
//! (input = superblock followed by descriptor bytes).
#![no_main]

use blockwise_verify::ext4::{first_data_block, parse_superblock, summarise_groups};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = parse_superblock(data) {
        let _ = (
            sb.groups(),
            sb.kind(),
            sb.features(),
            sb.uuid_string(),
            sb.gdt_offset(),
        );
        let gdt = data.get(1024..).unwrap_or_default();
        let _ = summarise_groups(&sb, gdt, sb.groups());
        let _ = first_data_block(&sb.jnl_blocks, true);
        let _ = first_data_block(&sb.jnl_blocks, false);
    }
});
