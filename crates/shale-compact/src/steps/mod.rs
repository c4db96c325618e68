//! The steps more than one executor takes, written once so that no
//! executor borrows another's: the boundary scan (`plan.rs`), block
//! unpacking (`unpack.rs`) and the merge prefix of a key (`key_prefix.rs`),
//! which `parallel` runs and `opencl` runs on the host or holds its kernels
//! to; and the reference's table writing ([`TablePacker`]) and the cursor
//! over an input run ([`RunCursor`]), which `streaming` and the worker's
//! keys-only data side share. The input side of a sliced job is
//! `crate::inputs`; block and file cuts are `crate::boundaries`.

pub(crate) mod key_prefix;
pub(crate) mod plan;
pub mod run_cursor;
pub mod table_packer;
pub(crate) mod unpack;

pub use run_cursor::{open_input_table, RunCursor};
pub use table_packer::TablePacker;
