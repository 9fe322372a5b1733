//! Ways in, the room above `run`: the array exported to the kernel as a block device
//! (`ublk`). Each frontend turns its own protocol's requests into block requests and hands
//! them to the array through one small trait (`Blocks`), which the engine thread answers
//! (`run::EngineSender` is one): answers come back on the frontend's own channel
//! (`run::ReplyTo`), tagged as sent. A frontend knows nothing of the drives, the records,
//! the engine thread's other messages or the other frontends, so another (NBD, a zoned
//! device) sits next to `ublk` behind the same trait.
//!
//! Files here take from `run` and `error` only; `ublk` takes `Blocks` from here.

use std::sync::Arc;

use zapraid_engine::Request;

use crate::error::{Error, Result};
use crate::run::message::{EngineSender, Message, ReplyTo};

pub mod ublk;

/// The array as a frontend sees it: where block requests go.
pub trait Blocks: Clone + Send + Sync + 'static {
    /// Sends `request`, tagged `tag`; its answer comes on `reply`'s channel, `reply`'s
    /// wake-up called after it. An error: the array has stopped, no answer will come.
    fn submit(&self, tag: u64, request: Request, reply: &Arc<ReplyTo>) -> Result<()>;
}

/// The engine thread answers block requests sent as `Message::Io`.
impl Blocks for EngineSender {
    fn submit(&self, tag: u64, request: Request, reply: &Arc<ReplyTo>) -> Result<()> {
        self.send(Message::Io { tag, request, reply: reply.clone() }).map_err(|_| Error::EngineGone)
    }
}
