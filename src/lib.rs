//! blockwise: flash-aligned disk images built entirely in userspace, and alignment reports
//! for any image or device.
//!
//! This façade re-exports the crates of the workspace:
//! [`geometry`] (units, layout planner, shared types), [`ptable`] (MBR/GPT), [`fat`] and
//! [`ext4`] (filesystem writers and their options), [`image`] (spec → image, pure),
//! [`exfat`] (the exFAT writer), [`container`] (recognising inputs by their bytes; Android
//! sparse, zstd and xz encoders), [`host`] (spec files, content directories, output files,
//! devices read-only), [`flash`] (devices: probe, safety checks, the writer, bench) and
//! [`verify`] (image → report).
//!
//! ```
//! let spec = blockwise::image::Spec::from_toml(r#"
//!     [image]
//!     size = "1GiB"
//!     erase-block = "4MiB"
//!     [[partition]]
//!     fs = "none"
//!     size = "256MiB"
//! "#).unwrap();
//! let plan = blockwise::image::plan_full(&spec, &[], 0).unwrap();
//! assert_eq!(plan.partitions[0].start_bytes, 4 << 20);
//! ```

pub use blockwise_container as container;
pub use blockwise_exfat as exfat;
pub use blockwise_ext4 as ext4;
pub use blockwise_fat as fat;
pub use blockwise_flash as flash;
pub use blockwise_geometry as geometry;
pub use blockwise_host as host;
pub use blockwise_image as image;
pub use blockwise_ptable as ptable;
pub use blockwise_verify as verify;
