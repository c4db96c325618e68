//! Stand-ins for `ffi` in a build without LevelDB: every operation fails with
//! [`Error::Unavailable`], and no database can be opened.

use crate::db::Batch;
use crate::flat::{FlatBytes, FlatEntries};
use crate::{DbOptions, Entry, Error, TableOptions};

pub(crate) fn build_table(_entries: &FlatEntries, _opts: &TableOptions) -> Result<Vec<u8>, Error> {
    Err(Error::Unavailable)
}

pub(crate) fn read_table(_bytes: &[u8], _opts: &TableOptions) -> Result<Vec<Entry>, Error> {
    Err(Error::Unavailable)
}

pub(crate) fn bloom_create_filter(_bits_per_key: i32, _keys: &FlatBytes) -> Result<Vec<u8>, Error> {
    Err(Error::Unavailable)
}

pub(crate) fn bloom_key_may_match(
    _bits_per_key: i32,
    _key: &[u8],
    _filter: &[u8],
) -> Result<bool, Error> {
    Err(Error::Unavailable)
}

pub(crate) fn dump_file(_path: &str) -> Result<String, Error> {
    Err(Error::Unavailable)
}

pub(crate) fn repair_db(_path: &str) -> Result<(), Error> {
    Err(Error::Unavailable)
}

/// No value of this type exists, so the methods below can never run.
#[derive(Debug)]
pub(crate) enum DbHandle {}

impl DbHandle {
    pub(crate) fn open(_path: &str, _opts: &DbOptions) -> Result<Self, Error> {
        Err(Error::Unavailable)
    }

    pub(crate) fn write(&mut self, _batch: &Batch, _sync: bool) -> Result<(), Error> {
        match *self {}
    }

    pub(crate) fn get(&self, _key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        match *self {}
    }

    pub(crate) fn scan_all(&self) -> Result<Vec<Entry>, Error> {
        match *self {}
    }

    pub(crate) fn compact_range(&mut self, _begin: Option<&[u8]>, _end: Option<&[u8]>) {
        match *self {}
    }

    pub(crate) fn property(&self, _name: &str) -> Option<String> {
        match *self {}
    }
}
