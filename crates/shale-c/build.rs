//! Names the shared library `libshaledb.so.1` in its ELF SONAME: the `1` is
//! the C ABI's major version, raised only when a change breaks programs
//! linked to an earlier libshaledb. A program linked with `-lshaledb`
//! (through the unversioned `libshaledb.so` link) records
//! `libshaledb.so.1` and loads that at run time, as with any versioned
//! library; one linked through another file name (the `libleveldb.so` link
//! `scripts/install-capi` makes for bindings that hard-code `-lleveldb`,
//! such as Go's levigo) still loads libshaledb. `scripts/install-capi`
//! installs `libshaledb.so.1.0.0` with the `libshaledb.so.1` and
//! `libshaledb.so` links; `tests/c_api.rs` checks the SONAME.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libshaledb.so.1");
    }
}
