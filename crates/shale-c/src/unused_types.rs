//! Types LevelDB 1.23's `c.h` declares although no function of it takes or
//! returns them (leftovers of an env API it never exported). They are
//! declared here so that the generated header declares them too, and a
//! program that names them still compiles.

/// Declared by LevelDB's c.h; no function uses it.
#[derive(Debug)]
pub struct leveldb_filelock_t {
    _private: (),
}

/// Declared by LevelDB's c.h; no function uses it.
#[derive(Debug)]
pub struct leveldb_randomfile_t {
    _private: (),
}

/// Declared by LevelDB's c.h; no function uses it.
#[derive(Debug)]
pub struct leveldb_seqfile_t {
    _private: (),
}

/// Declared by LevelDB's c.h; no function uses it.
#[derive(Debug)]
pub struct leveldb_writablefile_t {
    _private: (),
}
