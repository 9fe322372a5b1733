//! Arrays from drives, the room above `records`: making one (`format`), finding a stopped
//! array's drives and putting them in array order (`assembly`), what a drive given holds
//! when it has no superblock (`identify`), starting without absent drives (`degraded`),
//! whether drives allow the zones an array keeps open (`zone_limits`), a drive about to
//! join an array (`new_drive`), and the engine rebuilt from the drives, a cut-short
//! rebuild resumed (`recover`). Nothing here runs: the array's engine thread is `run`'s.
//!
//! Files here take from `records`, `drives` and `error`, and from each other one way:
//! `zone_limits`, `identify`, `degraded`, `new_drive` < `assembly`, `format`;
//! `assembly` < `recover`.

pub mod assembly;
pub mod degraded;
pub mod format;
pub mod identify;
pub mod new_drive;
pub mod recover;
pub mod zone_limits;

pub use assembly::{assemble, assemble_with, Assembled};
pub use degraded::NewlyMissing;
pub use format::{format, format_with_spares, FormatOptions, Formatted};
pub use recover::recover;
