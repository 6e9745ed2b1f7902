//! IPv4: routing, fragmentation and reassembly. Header parsing and emitting
//! live in `nagare-wire`; the input and output paths live in the interface.

pub mod fragment;
pub mod reassembly;
pub mod route;
