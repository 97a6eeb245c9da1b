//! Spec → sparse disk image. Composes the planner (`blockwise-geometry`), the partition
//! tables (`blockwise-ptable`) and the filesystem writers (`blockwise-fat`,
//! `blockwise-ext4`).
//!
//! The pure part ([`plan_full`], [`assemble`]) builds for wasm32. The `host` feature adds
//! spec files, content directories, atomic output files, `.bmap` files and the mke2fs
//! fallback.
//!
//! ```
//! use blockwise_geometry::{BlockSource, Spec, Tree};
//! use blockwise_image::{assemble, plan_full, Fill};
//! let spec = Spec::from_toml(r#"
//!     [image]
//!     size = "64MiB"
//!     [[partition]]
//!     fs = "none"
//!     size = "fill"
//! "#).unwrap();
//! let plan = plan_full(&spec, &[], 0).unwrap();
//! let (img, _warnings) = assemble(&spec, &plan, &mut [Fill::Nothing], &Vec::<Vec<u8>>::new(), 0).unwrap();
//! let mut sig = [0u8; 2];
//! img.read_at(510, &mut sig).unwrap();
//! assert_eq!(sig, [0x55, 0xaa]);
//! ```

mod assemble;
mod error;
#[cfg(feature = "host")]
mod host;
#[cfg(feature = "host")]
mod mke2fs;

pub use assemble::{assemble, ext4_request, fat_request, plan_full, Fill, RawReader};
pub use error::Error;
#[cfg(feature = "host")]
pub use host::{
    apply_entries, build, plan_file, resolve_inputs, resolve_timestamp, tree_from_dir, write_bmap,
    write_image_file, Built, HostContent, SpecFile,
};
