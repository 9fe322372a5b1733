//! A running array, the room above `assemble`: the engine thread that owns the engine and
//! every drive (`thread`), what frontends and operators send it and get back (`message`,
//! `status`), the failures it carries out (`failures`), the wake-ups between it and its
//! senders (`wake`), and an array run without a block device, asked requests directly
//! (`session`). The ways in (`export`) and what an operator asks (`ops`, `control`) sit
//! above and talk to it only through `message`.
//!
//! An array of S engine shards runs S engine threads, one engine each over its part of
//! every drive (`sharded`), with one superblock record for all (`record`).
//!
//! Files here take from `assemble`, `records`, `drives` and `error`, and from each other
//! one way: `wake`, `failures`, `status` < `record` < `message` < `thread` < `sharded` <
//! `session`.

pub mod failures;
pub mod message;
pub mod record;
pub mod session;
pub mod sharded;
pub mod status;
pub mod thread;
pub mod wake;

pub use failures::FailOutcome;
pub use message::{
    query_status, Answer, EngineSender, Message, ReplyTo, ScrubAnswer, ScrubRequest, ANSWER_TIMEOUT,
    MESSAGE_QUEUE_CAPACITY,
};
pub use record::{FailureRecord, SharedRecord};
pub use session::Session;
pub use status::ArrayStatus;
pub use thread::EngineThread;
