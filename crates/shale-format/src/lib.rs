//! LevelDB 1.23's on-disk formats, byte for byte: the pieces every file that
//! ShaleDB writes is made of. Pure encoding and decoding: no threads, no file
//! system policy. The prose description of every byte is in `docs/format/`.
//!
//! Every decoder here takes bytes that may come from a damaged disk: it
//! returns [`Error::Corruption`] for anything that does not follow the
//! format, never panics, and never allocates more than the input it was given
//! would justify.

pub mod block;
pub mod block_builder;
pub mod bloom;
pub mod coding;
pub mod comparator;
pub mod concat_iterator;
pub mod crc;
pub mod error;
pub mod filter_block;
pub mod format;
pub mod internal_key;
pub mod iterator;
pub mod log_format;
pub mod log_reader;
pub mod log_writer;
pub mod merging_iterator;
pub mod options;
pub mod table;
pub mod table_assembler;
pub mod table_builder;
pub mod vec_iterator;
pub mod version_edit;
pub mod write_batch;

pub use error::{Error, Location, Result};
