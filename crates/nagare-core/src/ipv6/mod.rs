//! IPv6 state of an interface that needs no link to test: its addresses
//! and their duplicate address detection (`addr.rs`), the interface
//! identifiers of those it makes itself (`iid.rs`), the retransmissions
//! of the MLDv2 reports that join and leave their groups (`mld.rs`), the neighbour
//! cache (`neighbor.rs`), what routers tell (`router.rs`) and redirect
//! (`redirect.rs`), addresses
//! formed from their prefixes (`slaac.rs`), fragmentation
//! (`fragment.rs`) and the identifications of fragmented datagrams
//! (`frag_ident.rs`), and reassembly (`reassembly.rs`). The interface
//! drives them (`crate::iface`).

pub mod addr;
pub mod frag_ident;
pub mod fragment;
pub mod iid;
pub mod mld;
pub mod neighbor;
pub mod reassembly;
pub mod redirect;
pub mod router;
pub mod slaac;
