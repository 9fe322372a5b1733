//! Records, the room above `drives`: the bytes zapraid keeps on a drive beside what the
//! engine writes, each read and written on one drive at a time, knowing nothing of arrays
//! as wholes. Where they lie (`layout`: zone 0, then the checkpoint area), the array
//! superblock's generations and what a drive without one holds (`superblock`), a hot
//! spare's record (`spare`), the checkpoint copies (`checkpoint`), the name an array may
//! have (`names`) and the stamps that identify it (`identity`). What is read from a drive
//! is untrusted: a record that does not decode or check is passed over, never a panic.
//!
//! Files here take from `drives` and `error` only, and from each other one way: `spare`
//! from `superblock`; `superblock` and `checkpoint` from `layout` and `identity`.

pub mod checkpoint;
pub mod identity;
pub mod layout;
pub mod names;
pub mod spare;
pub mod superblock;

pub use identity::uuid_text;
pub use layout::SUPERBLOCK_ZONES;
