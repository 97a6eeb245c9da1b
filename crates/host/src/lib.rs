//! The host side of blockwise: everything that touches files, devices and processes, shared
//! by the CLI, the Python package and the device writer.
//!
//! - [`SpecFile`]: a spec read from disk, relative paths resolved against its directory;
//!   for a device, [`take_device_values`] fills `"auto"` and left-out `[image]` keys with
//!   its values and [`Probed::device_notes`] says where each came from;
//! - [`tree_from_dir`] and [`HostContent`]: content directories scanned into
//!   [`blockwise_geometry::Tree`]s, file data read on demand;
//! - [`build`] / [`plan_file`]: a spec file planned and assembled into an
//!   [`ImageMap`](blockwise_geometry::ImageMap) (metadata bytes plus references to the
//!   files in [`HostContent`], which record what each file looked like when scanned);
//! - [`write_image_file`] / [`Built::write`]: atomic output files (temp file, fsync, rename)
//!   with holes kept, content copied by `copy_file_range`, sources checked for changes, and
//!   bmaptool 2.0 block maps hashed while writing; [`Progress`] reports the phases;
//! - [`write_output`] / [`Built::write_as`]: the same image as an Android sparse image
//!   (`.simg`), seekable zstd (`.img.zst`) or multi-block xz (`.img.xz`), encoded straight
//!   from the map on all cores ([`OutputFormat`], [`OutputOptions`]);
//! - [`FileSource`]: a read-only image file or block device for `verify`, with the device's
//!   sysfs queue limits;
//! - [`probe_report`] / [`probe_device`]: `blockwise probe` without the terminal: a block
//!   device's sysfs values and erase-block estimate ([`blockwise_flash`]), the recommendation,
//!   and the `verify` analysis of the device read-only ([`ProbeReport`]);
//! - [`json`]: the plan, build and probe JSON the CLI prints and the Python package returns;
//! - the mke2fs fallback ext4 backend (feature `mke2fs`, on by default);
//! - the F2FS backend, mkfs.f2fs + sload.f2fs (feature `f2fs`, on by default).
//!
//! ```no_run
//! use std::path::Path;
//! let mut sf = blockwise_host::SpecFile::load(Path::new("examples/rpi.toml")).unwrap();
//! let built = blockwise_host::build(&mut sf, Path::new(".")).unwrap();
//! built.write(Path::new("rpi.img"), None, &mut ()).unwrap();
//! ```

mod build;
mod container_out;
mod content;
mod error;
#[cfg(feature = "f2fs")]
pub mod f2fs;
#[cfg(feature = "f2fs")]
mod f2fs_entries;
mod gather;
pub mod json;
#[cfg(feature = "mke2fs")]
pub mod mke2fs;
mod output;
mod probe;
mod progress;
pub mod rofs;
mod source;
mod spec_file;
mod spill;
pub mod syslinux;
mod tree;

pub use build::{
    build, build_with_progress, plan_file, plan_file_with_progress, resolve_inputs, Built,
};
pub use container_out::{write_output, OutputFormat, OutputOptions, Summary, Written};
pub use content::HostContent;
pub use error::Clash;
pub use error::Error;
pub use output::{
    check_output_path, check_outputs, remove_stale_temps, write_image_file, WriteStats,
};
pub use probe::{
    estimate_budget, layout, probe_device, probe_report, probe_report_cancellable, DeviceNotes,
    LayoutError, ProbeOptions, ProbeReport, Probed, MAX_ESTIMATE_SECONDS,
};
pub use progress::{Phase, Progress};
pub use source::FileSource;
pub use spec_file::{
    explain_auto, explain_auto_toml, is_spec_file, resolve_timestamp, take_device_values,
    DeviceValues, SpecFile, Taken,
};
pub use tree::tree_from_dir;
