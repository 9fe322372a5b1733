//! What an operator asks a running array, the room above `run` and `export`: a failed drive
//! replaced (`replace`), new drives added to a declustered array (`grow`), the hot spares and the rebuild onto one started by itself
//! (`spare_pool`), and what the array is beside the engine's status (`identity`). Each
//! reaches the engine thread through `run::message`; the socket that carries the asks is
//! `control`'s, above.
//!
//! Files here take from `run`, `assemble`, `records`, `drives` and `error`, and from each
//! other one way: `identity` < `grow`, `identity` < `replace` < `spare_pool`.

pub mod grow;
pub mod identity;
pub mod replace;
pub mod spare_pool;

pub use identity::Identity;
