//! What the state machines (the engine, recovery) ask of the drives: one command for one
//! drive, handed to the driver that owns the drives (the simulator, the io_uring driver).

use zapraid_zns::{Command, Tag};

/// A command for one drive of the array.
#[derive(Debug)]
pub struct DriveCommand {
    pub drive: usize,
    pub tag: Tag,
    pub command: Command,
    /// Modelled engine CPU time spent before this command could be issued (stripe table
    /// lookups); the simulator holds the command back this long. 0 for most commands.
    pub delay_ns: u64,
}
