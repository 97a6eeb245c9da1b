//! The one copy of the helpers that blockwise's integration tests and benches share: finding
//! and running the oracle tools (`have`, `run`, `DISKIMG_REQUIRE_ORACLES`), temp dirs under the
//! target dir, the `fsck.fat` / `e2fsck` / `debugfs` / `mcopy` / `diff` / `sfdisk` checks, loop
//! devices and kernel mounts, deterministic pseudo-random bytes, a reference CRC-32, and the
//! generated trees of the peer benches.
//!
//! Dev-only and host-only: it runs host tools, makes temp dirs and loop devices, and panics
//! on purpose (a failed check is a failed test). It is only ever a `[dev-dependencies]` entry
//! (`publish = false`); no library crate may depend on it normally, and nothing here is meant
//! for wasm.
//!
//! Two helpers are macros because they need what Cargo sets only while compiling an
//! integration test or bench: [`tempdir!`] (`CARGO_TARGET_TMPDIR`) and [`blockwise!`]
//! (`CARGO_BIN_EXE_blockwise`).

mod bench;
mod checks;
mod cli;
mod exfat;
mod files;
mod loopdev;
mod random;
mod readback;
mod tools;

pub use bench::{flat, medians, nested, report, tool_version};
pub use checks::{
    assert_same_json, assert_same_tree, blkid, debugfs, e2fsck_clean, fsck_fat_clean,
    fsck_fat_fields, fsck_number, mcopy_out, sfdisk_json, FsckFatFields,
};
pub use cli::Blockwise;
pub use exfat::{
    fsck_exfat_clean, fsck_exfat_clean_except, mounted_files, with_exfat_fuse, Mounted,
};
pub use files::{corpus_files, materialize, save, tempdir_in, write_file};
pub use loopdev::{with_kernel_mount, LoopDevice};
pub use random::{bytes, crc32, xorshift64star_bytes, XorShift64};
pub use readback::{ext4_files, ext4_view_at, fatfs_files, tree_files, Cursor, Files};
pub use tools::{
    assert_success, command, have, have_loop, installed, is_root, oracles_required, output_text,
    run, which,
};

/// A temp dir on a disk-backed filesystem (under the target dir's `tmp/`), removed on drop.
///
/// A macro because `CARGO_TARGET_TMPDIR` is known only while an integration test or bench is
/// compiled; it expands to [`tempdir_in`] of that directory.
#[macro_export]
macro_rules! tempdir {
    () => {
        $crate::tempdir_in(env!("CARGO_TARGET_TMPDIR"))
    };
}

/// The `blockwise` binary under test, as a [`Blockwise`], for the root package's tests.
///
/// A macro because `CARGO_BIN_EXE_blockwise` is known only while one of that package's
/// integration tests is compiled.
#[macro_export]
macro_rules! blockwise {
    () => {
        $crate::Blockwise::at(env!("CARGO_BIN_EXE_blockwise"))
    };
}
