//! Names the shared library `libshaledb.so` in its ELF SONAME, so that a
//! program linked through another file name (the `libleveldb.so` link
//! `scripts/install-capi` makes for bindings that hard-code `-lleveldb`,
//! such as Go's levigo) still loads libshaledb at run time.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libshaledb.so");
    }
}
