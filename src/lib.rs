//! blockwise: flash-aligned disk images built entirely in userspace, and alignment reports
//! for any image or device.
//!
//! This façade re-exports the crates of the workspace:
//! [`geometry`] (units, spec, planner), [`ptable`] (MBR/GPT), [`image`] (spec → image) and
//! [`verify`] (image → report).
//!
//! ```
//! let spec = blockwise::geometry::Spec::from_toml(r#"
//!     [image]
//!     size = "1GiB"
//!     erase-block = "4MiB"
//!     [[partition]]
//!     fs = "none"
//!     size = "256MiB"
//! "#).unwrap();
//! let plan = blockwise::geometry::plan(&spec).unwrap();
//! assert_eq!(plan.partitions[0].start_bytes, 4 << 20);
//! ```

pub use blockwise_geometry as geometry;
pub use blockwise_image as image;
pub use blockwise_ptable as ptable;
pub use blockwise_verify as verify;
