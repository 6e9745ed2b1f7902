//! The descriptor: one request or completion, the unit a descriptor ring
//! carries, and its encoding as eight little-endian `u64` words (one cache
//! line). Every bit pattern decodes to some descriptor; what its fields
//! mean, and whether they are acceptable, is checked by whoever reads it
//! ([`crate::Pool::take`] for the buffer fields, the protocol above for the
//! rest).

/// `Descriptor::buffer` when the descriptor names no buffer.
pub const NO_BUFFER: u32 = u32::MAX;

/// Words of an encoded descriptor.
pub(crate) const WORDS: usize = 8;

/// One request or completion: 64 bytes, one cache line. The meaning of
/// `kind`, `flags`, `status` and `aux` belongs to the protocol above; the
/// buffer fields are checked by [`crate::Pool::take`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// Operation.
    pub kind: u32,
    /// Operation flags.
    pub flags: u32,
    /// Request identifier, returned in the completion (and, for a multi-stage
    /// request, the return address).
    pub id: u64,
    /// Buffer index, or [`NO_BUFFER`].
    pub buffer: u32,
    /// Offset of the data in the buffer.
    pub offset: u32,
    /// Length of the data.
    pub len: u32,
    /// Result of a completion (0 or a negative errno).
    pub status: i32,
    /// Operation-specific words (addresses, ports, socket handles).
    pub aux: [u64; 4],
}

impl Descriptor {
    /// The words stored in a slot.
    pub(crate) fn to_words(self) -> [u64; WORDS] {
        [
            u64::from(self.kind) | u64::from(self.flags) << 32,
            self.id,
            u64::from(self.buffer) | u64::from(self.offset) << 32,
            u64::from(self.len) | u64::from(self.status as u32) << 32,
            self.aux[0],
            self.aux[1],
            self.aux[2],
            self.aux[3],
        ]
    }

    /// The descriptor in words copied out of a slot (any values).
    pub(crate) fn from_words(w: [u64; WORDS]) -> Descriptor {
        Descriptor {
            kind: w[0] as u32,
            flags: (w[0] >> 32) as u32,
            id: w[1],
            buffer: w[2] as u32,
            offset: (w[2] >> 32) as u32,
            len: w[3] as u32,
            status: (w[3] >> 32) as u32 as i32,
            aux: [w[4], w[5], w[6], w[7]],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_round_trips_through_words() {
        let x = Descriptor {
            kind: u32::MAX,
            flags: 1,
            id: u64::MAX - 1,
            buffer: 5,
            offset: 9,
            len: 10,
            status: -22,
            aux: [1, 2, 3, u64::MAX],
        };
        assert_eq!(Descriptor::from_words(x.to_words()), x);
    }
}
