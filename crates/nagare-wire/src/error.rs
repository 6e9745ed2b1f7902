//! The error type shared by every parser and emitter in this crate.

use core::fmt;

/// Why a buffer could not be parsed or a representation could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header or a length field requires.
    Truncated,
    /// A field holds a value that the format does not allow.
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// Well-formed, but a variant this crate does not handle.
    Unsupported,
}

/// `core::result::Result` specialised to this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "checksum mismatch",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn display_is_distinct() {
        let all = [Error::Truncated, Error::Malformed, Error::Checksum, Error::Unsupported];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.to_string(), b.to_string());
            }
        }
        assert_eq!(Error::Checksum.to_string(), "checksum mismatch");
    }
}
