//! Units, the layout planner and the shared vocabulary of blockwise: plan types, the I/O
//! traits, the in-memory tree and the deserialisers every part of a spec uses.
//!
//! Everything here is arithmetic: no files, no clocks, no environment. It builds for
//! `wasm32-unknown-unknown`. The full spec (with filesystem options and contents) lives in
//! `blockwise-image`; the planner here takes its disk part, a [`Layout`].
//!
//! ```
//! use blockwise_geometry::{plan, FatType, FsKind, ImageSpec, Layout, PartitionLayout, SizeSpec};
//! let layout = Layout {
//!     image: ImageSpec { size: Some(1 << 30), erase_block: 4 << 20, ..ImageSpec::default() },
//!     partitions: vec![
//!         PartitionLayout::new(FsKind::Fat(Some(FatType::Fat32)), SizeSpec::Bytes(256 << 20)),
//!         PartitionLayout::new(FsKind::Ext4, SizeSpec::Fill),
//!     ],
//! };
//! let plan = plan(&layout).unwrap();
//! assert_eq!(plan.partitions[0].start_bytes / 512, 8192);
//! assert_eq!(plan.partitions[1].start_bytes / 512, 532480);
//! ```

pub mod attrs;
pub mod bootcode;
pub mod de;
pub mod extent;
pub mod fsplan;
pub mod guid;
pub mod hybrid;
pub mod io;
pub mod layout;
pub mod plan;
pub mod slots;
pub mod tree;
pub mod types;
pub mod units;

pub use attrs::GptAttributes;
pub use bootcode::{boot_code_bytes, BootCode, BOOT_CODE_BYTES};
pub use extent::{
    copy_content, ContentRef, ImageMap, MapError, MapReadError, MapReader, Piece, PlaceError,
    SpillError, SpillStore,
};
pub use fsplan::{
    sda_exfat_params, ErofsPlan, ExfatPlan, Ext4Plan, F2fsOptions, F2fsPlan, FatPlan, FatType,
    FsPlan, OtherFs, SquashfsPlan, VerityPlan, MAX_FAT32_CLUSTERS,
};
pub use guid::{derive_u64, Guid};
pub use io::{BlockSink, BlockSource, OutOfBounds, SparseImage, SubSink, SubSource, WindowError};
pub use layout::{
    check_erase_block, AutoSize, DiskId, FsKind, ImageKey, ImageSpec, Layout, LayoutError,
    LayoutKey, PartKey, PartitionLayout, SeedChoice, SizeSpec, TableKind, ERASE_BLOCK_RANGE,
    MAX_MBR_PARTITIONS,
};
pub use plan::{place_raw, plan, ExtendedPlan, GptPlan, PartitionPlan, Plan, RawPlan, TablePlan};
pub use slots::{infer_slots, slot_groups, SlotGroup, SlotMember};
pub use tree::{
    display_bytes, display_path, display_str, ContentError, ContentSource, Meta, Name, Node,
    NodeId, NodeKind, Tree,
};
pub use types::PartType;
pub use units::{alignment_of, format_size, parse_size, round_down, round_up, SectorSize};
