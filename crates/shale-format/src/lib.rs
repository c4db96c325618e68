//! LevelDB 1.23's on-disk formats, byte for byte: the pieces every file that
//! ShaleDB writes is made of. Pure encoding and decoding: no threads, no file
//! system policy. The prose description of every byte is in `docs/format/`.
//!
//! Every decoder here takes bytes that may come from a damaged disk: it
//! returns [`Error::Corruption`] for anything that does not follow the
//! format, never panics, and never allocates more than the input it was given
//! would justify.

pub mod coding;
pub mod comparator;
pub mod crc;
pub mod error;
pub mod internal_key;

pub use error::{Error, Location, Result};
