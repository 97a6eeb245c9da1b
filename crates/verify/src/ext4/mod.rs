//! ext2/3/4 superblock and group-descriptor parser, safe on hostile bytes.
//!
//! ```text
//! byte 1024 of the volume: superblock (1024 bytes), magic 0xEF53 at 0x38
//! block first_data_block+1: group descriptor table, 32 bytes per group (64 with 64bit)
//! ```
//! Only metadata is read: the superblock, the first descriptors (bounded) and, for the journal
//! location, the `s_jnl_blocks` backup or inode 8's extent root.
//!
//! Parsing (`parse`) reads the bytes through the shared layouts of [`blockwise_ext4::raw`]
//! (and its checksums), turns them into validated values and never panics; checking
//! (`check`) judges a parsed volume against its partition, the erase block and the device.

mod check;
mod parse;

pub use parse::*;
