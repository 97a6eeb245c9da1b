//! Spec → disk image. Composes the planner (`blockwise-geometry`), the partition tables
//! (`blockwise-ptable`) and the filesystem writers (`blockwise-fat`, `blockwise-ext4`),
//! and owns the spec: its input structs, its validation and the one map from every crate's
//! error fields to spec keys.
//!
//! Everything here is pure (no files, processes, clocks or environment) and builds for
//! wasm32; `blockwise-host` adds spec files, content directories, output files, `.bmap`
//! files and the mke2fs fallback on top.
//!
//! ```
//! use blockwise_geometry::{BlockSource, SparseImage};
//! use blockwise_image::{assemble, plan_full, Fill, Spec};
//! let spec = Spec::from_toml(r#"
//!     [image]
//!     size = "64MiB"
//!     [[partition]]
//!     fs = "none"
//!     size = "fill"
//! "#).unwrap();
//! let plan = plan_full(&spec, &[], 0).unwrap();
//! let mut img = SparseImage::new(plan.size_bytes);
//! let _warnings = assemble(&mut img, &spec, &plan, &[Fill::Nothing], &Vec::<Vec<u8>>::new(), 0).unwrap();
//! let mut sig = [0u8; 2];
//! img.read_at(510, &mut sig).unwrap();
//! assert_eq!(sig, [0x55, 0xaa]);
//! ```

mod assemble;
mod auto;
mod entries;
mod error;
pub mod files;
mod mounts;
pub mod rofs;
mod seed;
pub mod spec;
pub mod swap;

pub use assemble::{
    assemble, assemble_sparse, assemble_sparse_verity, assemble_with_raw, exfat_request,
    ext4_request, f2fs_request, fat_request, id_index, plan_full, Fill, RawFill,
};
pub use entries::apply_entries;
pub use error::{Error, ErrorKind, PartitionError};
pub use files::{files_unsupported, graft, FileSpec};
pub use mounts::{glob_match, split_mounts};
pub use rofs::{
    fill_unmapped, root_hashes, takes_tree, verity_data_regions, verity_trees, write_verity,
    Prebuilt, VerityMode, VerityTree,
};
pub use seed::{derived_seed, resolve_seed};
pub use spec::{EntryKind, EntrySpec, PartitionSpec, RawSpec, Spec, SpecError};
