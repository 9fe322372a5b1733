//! The zoned-device layer of zapraid.
//!
//! It owns the zone model (`zone`), device geometry (`geometry`), the submission/completion
//! device interface every backend implements (`device`), the emulated ZNS drive over memory
//! or file media (`emulator`, `media`, `drive_file`), its virtual-time performance model
//! (`timing`, `calibrate`), real NVMe ZNS drives through io_uring passthrough (`nvme`), the
//! stand-in for an absent drive that fails every command (`missing`), windows onto a run of
//! a drive's zones (`window`; `reserved` hides an array's superblock zones with one), the
//! parts a drive splits into for threads of their own (`part`), and the conformance suite
//! any backend must pass (`conformance`).

pub mod calibrate;
pub mod conformance;
pub mod device;
pub mod drive_file;
pub mod emulator;
pub mod error;
pub mod geometry;
mod media;
pub mod missing;
pub mod nvme;
pub mod part;
pub mod reserved;
pub mod timing;
pub mod window;
pub mod zone;

pub use device::{execute, report_all_zones, Command, Completion, Done, Tag, ZonedDevice};
pub use emulator::{EmulatedDrive, PowerCutReport};
pub use error::{Error, Result};
pub use geometry::Geometry;
pub use missing::MissingDrive;
pub use nvme::NvmeDrive;
pub use part::DrivePart;
pub use reserved::ReservedZones;
pub use timing::TimingParams;
pub use window::{ZoneSpan, ZoneWindow};
pub use zone::{ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget};
