//! Units, spec parsing and the pure alignment planner of blockwise.
//!
//! Everything here is arithmetic: no files, no clocks, no environment. It builds for
//! `wasm32-unknown-unknown`.
//!
//! ```
//! use blockwise_geometry::{plan, Spec};
//! let spec = Spec::from_toml(r#"
//!     [image]
//!     size = "1GiB"
//!     erase-block = "4MiB"
//!     [[partition]]
//!     fs = "fat32"
//!     size = "256MiB"
//!     [[partition]]
//!     fs = "ext4"
//!     size = "fill"
//! "#).unwrap();
//! let plan = plan(&spec).unwrap();
//! assert_eq!(plan.partitions[0].start_bytes / 512, 8192);
//! assert_eq!(plan.partitions[1].start_bytes / 512, 532480);
//! ```

pub mod fsplan;
pub mod guid;
pub mod io;
pub mod plan;
pub mod spec;
pub mod tree;
pub mod types;
pub mod units;

pub use fsplan::{Ext4Plan, FatPlan, FsPlan, OtherFs};
pub use guid::{derive_u64, Guid};
pub use io::{BlockSink, BlockSource, OutOfBounds, SparseImage, SubSink, SubSource, WindowError};
pub use plan::{plan, ExtendedPlan, GptPlan, PartitionPlan, Plan, TablePlan};
pub use spec::{
    DiskId, EntryKind, EntrySpec, Ext4Backend, Ext4Options, Ext4Profile, FatOptions, FsKind,
    ImageSpec, PartitionSpec, SizeSpec, Spec, SpecError, TableKind,
};
pub use tree::{ContentError, ContentSource, Meta, Node, NodeId, NodeKind, Tree};
pub use types::PartType;
pub use units::{alignment_of, format_size, parse_size, round_down, round_up, SectorSize};
