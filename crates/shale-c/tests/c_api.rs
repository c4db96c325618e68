//! The C API from C: LevelDB 1.23's own `leveldb/c.h` (Debian's) against
//! the generated header, a C test suite written against LevelDB's header
//! run on Debian's libleveldb and on libshaledb, a database passed back and
//! forth between the two libraries, the `shaledb_*` extensions, and the
//! suite under Valgrind (no leak, no invalid access).
//!
//! Needs a C compiler, `libleveldb-dev`, `valgrind` and `cbindgen`
//! (scripts/test installs them when root). Without them each test says what
//! is missing and passes, unless `SHALE_REQUIRE_ALL=1` (set in CI): then
//! it fails.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate's directory.
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo put `libshaledb.so` for this test binary: `deps/` beside
/// it (a `cargo test` builds it there and copies it up to the profile
/// directory only when the library itself was asked for, as `cargo build`
/// does), else the profile directory above.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    let candidates = [deps.clone(), deps.parent().unwrap().to_path_buf()];
    candidates
        .iter()
        .find(|dir| dir.join("libshaledb.so").exists())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "libshaledb.so not found in {} or above (cargo builds it with this test)",
                deps.display()
            )
        })
}

/// `true` when `what` is usable; otherwise skips (returns `false`), or
/// panics where the test is required ([`shale_compact::testing::skip`]).
fn require(what: &str, usable: bool, install: &str) -> bool {
    if !usable {
        let missing = format!("{what} is missing");
        shale_compact::testing::skip(
            "the C API",
            &missing,
            &format!("install it with: {install}"),
        );
    }
    usable
}

fn leveldb_available() -> bool {
    require(
        "LevelDB 1.23 (headers and library)",
        Path::new("/usr/include/leveldb/c.h").exists()
            && Command::new("cc").arg("--version").output().is_ok(),
        "apt-get install -y --no-install-recommends libleveldb-dev gcc",
    )
}

/// Which library a test program links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Library {
    /// Debian's libleveldb.
    LevelDb,
    /// libshaledb, compiled against LevelDB's own c.h.
    ShaleDb,
    /// libshaledb, compiled against the generated headers.
    ShaleDbOwnHeaders,
}

/// Compiles `source` (in tests/c) into `out`, linked to `library`.
fn compile(source: &str, library: Library, out: &Path) {
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-O1"])
        .arg(crate_dir().join("tests/c").join(source))
        .arg("-o")
        .arg(out);
    match library {
        Library::LevelDb => {
            cc.arg("-lleveldb");
        }
        Library::ShaleDb | Library::ShaleDbOwnHeaders => {
            if library == Library::ShaleDbOwnHeaders {
                cc.arg("-I").arg(crate_dir().join("include"));
            }
            let lib = library_dir();
            cc.arg("-L").arg(&lib).arg("-lshaledb");
            cc.arg(format!("-Wl,-rpath,{}", lib.display()));
        }
    }
    let output = cc.output().unwrap();
    assert!(
        output.status.success(),
        "compiling {source} for {library:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `program args...` (optionally under a wrapper such as valgrind)
/// and asserts it passed.
fn run(wrapper: &[&str], program: &Path, args: &[&str]) {
    let (command, rest) = match wrapper.split_first() {
        Some((first, rest)) => (PathBuf::from(first), rest),
        None => (program.to_path_buf(), &[][..]),
    };
    let mut cmd = Command::new(command);
    cmd.args(rest);
    if !wrapper.is_empty() {
        cmd.arg(program);
    }
    let output = cmd.args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.contains("PASS"),
        "{} {args:?} failed ({}):\n{stderr}",
        program.display(),
        output.status
    );
}

#[test]
fn the_generated_header_declares_what_leveldb_s_header_declares() {
    if !leveldb_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let header = crate_dir().join("include/leveldb/c.h");
    let output = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-c"])
        .arg(format!(
            "-DSHALEDB_GENERATED_HEADER=\"{}\"",
            header.display()
        ))
        .arg(crate_dir().join("tests/c/header_compat.c"))
        .arg("-o")
        .arg(dir.path().join("header_compat.o"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "a declaration of include/leveldb/c.h differs from LevelDB's:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // Every name LevelDB's header declares is in ours (the declarations
    // that are there were checked above).
    let names = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("leveldb_"))
            .map(str::to_string)
            .collect()
    };
    let leveldb = std::fs::read_to_string("/usr/include/leveldb/c.h").unwrap();
    let ours = std::fs::read_to_string(&header).unwrap();
    let ours = names(&ours);
    let theirs = names(&leveldb);
    let missing: Vec<_> = theirs.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "missing from include/leveldb/c.h: {missing:?}"
    );
}

#[test]
fn the_generated_headers_are_up_to_date() {
    let usable = Command::new("cbindgen").arg("--version").output().is_ok();
    if !require("cbindgen", usable, "apt-get install -y cbindgen") {
        return;
    }
    let output = Command::new(crate_dir().join("../../scripts/gen-capi-headers"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_c_suite_passes_on_leveldb_and_on_shaledb() {
    if !leveldb_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for library in [
        Library::LevelDb,
        Library::ShaleDb,
        Library::ShaleDbOwnHeaders,
    ] {
        let program = dir.path().join(format!("c_api_test-{library:?}"));
        compile("c_api_test.c", library, &program);
        let db = dir.path().join(format!("db-{library:?}"));
        run(&[], &program, &["suite", db.to_str().unwrap()]);
    }
}

#[test]
fn a_database_passes_between_leveldb_and_shaledb() {
    if !leveldb_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let leveldb = dir.path().join("c_api_test-leveldb");
    let shaledb = dir.path().join("c_api_test-shaledb");
    compile("c_api_test.c", Library::LevelDb, &leveldb);
    compile("c_api_test.c", Library::ShaleDb, &shaledb);
    // Each step checks what the steps before it wrote (with the other
    // library), and the comparator's name at open, then writes its own.
    for (first, second, name) in [
        (&shaledb, &leveldb, "shaledb-first"),
        (&leveldb, &shaledb, "leveldb-first"),
    ] {
        let db = dir.path().join(name);
        for step in 0..5 {
            let program = if step % 2 == 0 { first } else { second };
            run(
                &[],
                program,
                &["interop", db.to_str().unwrap(), &step.to_string()],
            );
        }
    }
}

#[test]
fn the_extensions_work_from_c() {
    if !require(
        "a C compiler",
        Command::new("cc").arg("--version").output().is_ok(),
        "apt-get install -y gcc",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("extensions_test");
    compile("extensions_test.c", Library::ShaleDbOwnHeaders, &program);
    run(&[], &program, &[dir.path().join("db").to_str().unwrap()]);
}

#[test]
fn the_c_suite_is_clean_under_valgrind() {
    if !leveldb_available() {
        return;
    }
    let usable = Command::new("valgrind").arg("--version").output().is_ok();
    if !require("valgrind", usable, "apt-get install -y valgrind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("c_api_test");
    compile("c_api_test.c", Library::ShaleDb, &program);
    let db = dir.path().join("db");
    // Leaks that count: memory no pointer reaches any more. Threads and
    // process-wide state still reachable at exit are not leaks. The
    // suppressions name a false positive in glibc's loader.
    let suppressions = format!(
        "--suppressions={}",
        crate_dir().join("tests/c/valgrind.supp").display()
    );
    run(
        &[
            "valgrind",
            "--quiet",
            &suppressions,
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect",
            "--error-exitcode=99",
        ],
        &program,
        &["suite", db.to_str().unwrap()],
    );
}
