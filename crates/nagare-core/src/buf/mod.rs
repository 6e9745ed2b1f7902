//! Packet buffers: a bounded pool of fixed-size buffers and packets made of
//! chains of slices over them.

mod chain;
mod offload;
mod pool;

pub use chain::{PacketBuf, Pieces};
pub use offload::{ChecksumState, Offload, Segmentation, TxOffloads};
pub use pool::{Buffer, BufferPool, ExternalBytes, PoolExhausted, PoolStats};
