//! A running array, the room above `assemble`: the engine thread that owns the engine and
//! every drive (`thread`), what frontends and operators send it and get back (`message`,
//! `status`), the failures it carries out (`failures`), the wake-ups between it and its
//! senders (`wake`), and an array run without a block device, asked requests directly
//! (`session`). The ways in (`export`) and what an operator asks (`ops`, `control`) sit
//! above and talk to it only through `message`.
//!
//! Files here take from `assemble`, `records`, `drives` and `error`, and from each other
//! one way: `wake`, `failures`, `status` < `message` < `thread` < `session`.

pub mod failures;
pub mod message;
pub mod session;
pub mod status;
pub mod thread;
pub mod wake;

pub use failures::FailOutcome;
pub use message::{
    query_status, Answer, EngineSender, Message, ReplyTo, ScrubAnswer, ScrubRequest, ANSWER_TIMEOUT,
    MESSAGE_QUEUE_CAPACITY,
};
pub use session::Session;
pub use status::ArrayStatus;
pub use thread::{EngineThread, FailureRecord};
