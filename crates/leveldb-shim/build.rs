//! Compiles the C++ shim over the system's LevelDB 1.23 when its headers and
//! library are usable, and sets `cfg(leveldb_available)` if so.
//!
//! Without LevelDB the crate still builds (every function then returns
//! `Error::Unavailable`) so that a developer without `libleveldb-dev` can work
//! on the rest of the workspace. With `SHALE_REQUIRE_ALL=1` (set in CI) a
//! missing LevelDB fails the build instead: compatibility tests must never be
//! skipped there.

use std::env;
use std::fs;
use std::path::PathBuf;

const SHIM_SOURCE: &str = "shim/leveldb_shim.cc";
const INSTALL_LINE: &str = "apt-get install -y --no-install-recommends libleveldb-dev";

/// Includes the headers the shim uses, checks the version and calls into the
/// library; it is built with the same flags as the shim.
const PROBE_SOURCE: &str = r#"
#include <leveldb/db.h>
#include <leveldb/dumpfile.h>
#include <leveldb/filter_policy.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>

static_assert(leveldb::kMajorVersion == 1 && leveldb::kMinorVersion >= 23,
              "ShaleDB compares against LevelDB 1.23 or a later 1.x");

int main() {
  delete leveldb::NewBloomFilterPolicy(10);
  return 0;
}
"#;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(leveldb_available)");
    println!("cargo::rerun-if-changed={SHIM_SOURCE}");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=SHALE_REQUIRE_ALL");

    match probe() {
        Ok(()) => {
            shim_build().file(SHIM_SOURCE).compile("leveldb_shim");
            // After compile(): the linker must see the shim before the library
            // it refers to.
            println!("cargo::rustc-link-lib=dylib=leveldb");
            println!("cargo::rustc-cfg=leveldb_available");
        }
        // The workspace's rule (shale_compact::testing): exactly `1` requires.
        Err(reason) if env::var_os("SHALE_REQUIRE_ALL").is_some_and(|value| value == "1") => {
            panic!(
                "LevelDB 1.23 is required (SHALE_REQUIRE_ALL=1) but is not usable: {reason}\n\
                 Install it with: {INSTALL_LINE}"
            );
        }
        Err(reason) => {
            println!(
                "cargo::warning=LevelDB not found, leveldb-shim built without it \
                 (its tests will skip). Install it with: {INSTALL_LINE}. Reason: {reason}"
            );
        }
    }
}

/// Flags shared by the probe and the shim.
fn shim_build() -> cc::Build {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        // Upstream LevelDB builds without RTTI. Debian's build happens to
        // export typeinfo for WritableFile and friends, but another build may
        // not, and then subclassing them with RTTI on fails to link
        // ("undefined reference to typeinfo for leveldb::WritableFile").
        // The shim needs no RTTI, so it never asks for those symbols.
        .flag("-fno-rtti")
        .warnings(true);
    build
}

/// Compiles and links [`PROBE_SOURCE`] against `-lleveldb`, so that both the
/// headers and the library are checked. Returns why it failed.
fn probe() -> Result<(), String> {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR not set")?);
    let source = out_dir.join("leveldb_probe.cc");
    fs::write(&source, PROBE_SOURCE).map_err(|e| format!("writing probe: {e}"))?;

    let compiler = shim_build().cargo_metadata(false).get_compiler();
    let output = compiler
        .to_command()
        .arg(&source)
        .arg("-o")
        .arg(out_dir.join("leveldb_probe"))
        .arg("-lleveldb")
        .output()
        .map_err(|e| format!("running {:?}: {e}", compiler.path()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "test program including <leveldb/table_builder.h> and linking -lleveldb \
             did not build:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
