//! Writes images to block devices and files, Linux only: the `blockwise write` engine.
//!
//! - [`Target`]: a block device (opened with O_EXCL, kept for the whole write) or a regular
//!   file, O_DIRECT with buffers aligned per statx DIOALIGN (fallback: the logical block size),
//!   buffered + fdatasync with a warning where O_DIRECT is refused ([`DirectMode::Require`]
//!   makes that a [`Refusal`]);
//! - [`Source`]: an image file (its SEEK_DATA/SEEK_HOLE data ranges), a compressed image
//!   streamed ([`Stream`]: xz, gzip, zstd, bzip2), a bmaptool block map with its checksums
//!   checked on the fly ([`Checked`]), or a built spec ([`MapSource`] over
//!   `ImageMap::reader`), see [`open_image`];
//! - [`write()`]: mapped ranges in chunk-aligned pieces, reading overlapped with writing (a
//!   second thread), block 0 and the GPT headers last, stale GPT headers cleared, fdatasync,
//!   BLKRRPART, read-back verify, [`Stats`], cancellation through an `AtomicBool`;
//! - [`inspect`] and [`check`]: the refusals (mounted, swap, holders, `/`, read-only,
//!   partition) before anything is written; [`check_file_target`]: no file is created in
//!   `/dev` (devtmpfs) for a card that is not there; [`DataId`] and
//!   [`refuse_input_as_target`]: a target is never what the write reads (the source through
//!   a link, its `.bmap`, the loop device backed by it);
//! - [`probe`]: what sysfs says about a device (`blockwise probe`), [`Probe::recommend`]
//!   the erase block and sector size to plan with, and [`estimate_erase_block`] an erase
//!   block from read timing when the kernel gives none;
//! - [`write_json`]: the JSON of an [`Outcome`] (the CLI's `--json`, Python's `write`);
//! - [`run_bench`]: `blockwise bench`, O_DIRECT write speed at aligned and shifted offsets
//!   (through [`Device`] and a [`Clock`], so it is tested with fake time);
//! - [`FaultDevice`]: a fault-injecting, alignment-checking [`Device`] for tests.
//!
//! This is the only crate of the workspace with `unsafe` (aligned buffers and ioctls); every
//! block carries a `// SAFETY:` comment.
//!
//! ```
//! use std::sync::atomic::{AtomicBool, AtomicUsize};
//! use blockwise_flash::{write, FaultDevice, MemSource, Options};
//!
//! let image: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
//! let mut dev = FaultDevice::new(vec![0xee; 1 << 20], 512);
//! let mut src = MemSource::with_ranges(image.clone(), vec![(0, 4096), (32768, 65536)]);
//! let out = write(&mut dev, &mut src, &Options::default().verify(true),
//!                 &AtomicBool::new(false), &mut |_| {}).unwrap();
//! assert!(out.stats.verified);
//! assert_eq!(&dev.data[..4096], &image[..4096]);
//! assert_eq!(dev.data[4096], 0xee); // a hole keeps the old bytes
//! ```

mod bench;
mod bmap;
mod buf;
mod device;
mod error;
mod estimate;
mod fault;
mod identity;
mod input;
mod json;
mod probe;
mod safety;
mod source;
mod target;
mod writeback;
mod writer;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

pub use bench::{
    memory_backed, plan_cases, run_bench, BenchEvent, BenchOptions, Case, CaseResult, Clock, Data,
    Outcome as BenchOutcome, Pattern, RealClock, Report as BenchReport, Shift, TargetInfo,
    DEFAULT_CHUNKS,
};
pub use bmap::{bmap_text_for, Bmap, BmapError, BmapRange, Checked, RangeCheck};
pub use buf::AlignedBuf;
pub use device::Device;
pub use error::{Error, Refusal, SourceError};
pub use estimate::{
    analyse, estimate_erase_block, DirectReader, Estimate, EstimateOptions, ReadTimer, Samples,
    SizeEffect,
};
pub use fault::{Fault, FaultDevice};
pub use identity::{data_ids, refuse_input_as_target, DataId};
pub use input::{block_device_size, ContainerSource, DeviceSource, FileInput, InputKind};
pub use json::write_json;
pub use probe::{
    probe, probe_in, probe_sysfs, Probe, ProbeError, Recommendation, Source as ValueSource,
    SysPartition, Transport, DEFAULT_ERASE_BLOCK, MIN_USED_CONFIDENCE,
};
pub use safety::{check, check_file_target, inspect, parse_mountinfo, sysfs_of, DeviceInfo};
pub use source::{
    bmap_beside, data_ranges, open_image, Compression, ImageFile, MapSource, MemSource, OpenError,
    Opened, Source, Stream, Verify,
};
pub use target::{DirectMode, Target, TargetKind};
pub use writeback::start_writeback;
pub use writer::{write, Event, Options, Outcome, Rates, Stats, MAX_CHUNK};

/// The number of the signal that set [`cancel_on_signals`]'s flag, 0 while none did.
static CANCELLED_BY: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();

/// A flag that SIGINT, SIGTERM and SIGHUP (a closed terminal) set instead of killing the
/// process: pass it to [`write()`] as `cancel`, so an interrupted write finishes its chunk,
/// syncs and reports; [`cancelling_signal`] then says which signal it was. A second signal
/// while the flag is set ends the process at once with exit code 128 + that signal.
pub fn cancel_on_signals() -> std::io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let which = CANCELLED_BY.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // Registered first, so it sees the flag before this signal's own handler sets it.
        signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&flag))?;
    }
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
        if let Ok(n) = usize::try_from(sig) {
            signal_hook::flag::register_usize(sig, Arc::clone(which), n)?;
        }
    }
    Ok(flag)
}

/// The signal that set [`cancel_on_signals`]'s flag (SIGINT, SIGTERM or SIGHUP), if one did.
#[must_use]
pub fn cancelling_signal() -> Option<i32> {
    let n = CANCELLED_BY
        .get()?
        .load(std::sync::atomic::Ordering::Relaxed);
    i32::try_from(n).ok().filter(|&n| n != 0)
}
