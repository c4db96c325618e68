//! The C API from C: LevelDB 1.23's own `leveldb/c.h` (Debian's) against
//! the generated header, a C test suite written against LevelDB's header
//! run on Debian's libleveldb and on libshaledb, a database passed back and
//! forth between the two libraries, the `shaledb_*` extensions, and the
//! suite under Valgrind (no leak, no invalid access). The library's SONAME
//! (`libshaledb.so.1`), and `scripts/install-capi`'s layout: the versioned
//! file, its links, and programs linked through them (`-lshaledb`,
//! pkg-config, the `-lleveldb` compatibility link) loading it.
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

/// The SONAME `build.rs` gives the library (the C ABI's major version).
const SONAME: &str = "libshaledb.so.1";

/// A folder holding `libshaledb.so.1`, a link to the library cargo built:
/// what a program linked with `-lshaledb` loads at run time (cargo makes no
/// file of that name; an install does).
fn runtime_dir(beside: &Path) -> PathBuf {
    let dir = beside.join("runtime-lib");
    if !dir.join(SONAME).exists() {
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(library_dir().join("libshaledb.so"), dir.join(SONAME)).unwrap();
    }
    dir
}

/// `readelf -d FILE`: the dynamic section, or `None` without binutils.
fn dynamic_section(file: &Path) -> Option<String> {
    let output = Command::new("readelf").arg("-d").arg(file).output().ok()?;
    assert!(
        output.status.success(),
        "readelf -d {}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
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
            // Linked against cargo's libshaledb.so; loaded, by its SONAME,
            // from a folder beside the program.
            let lib = library_dir();
            cc.arg("-L").arg(&lib).arg("-lshaledb");
            let runtime = runtime_dir(out.parent().unwrap());
            cc.arg(format!("-Wl,-rpath,{}", runtime.display()));
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

#[test]
fn the_library_s_soname_is_versioned() {
    let Some(dynamic) = dynamic_section(&library_dir().join("libshaledb.so")) else {
        require("readelf", false, "apt-get install -y binutils");
        return;
    };
    assert!(
        dynamic.contains(&format!("Library soname: [{SONAME}]")),
        "{dynamic}"
    );
}

#[test]
fn install_capi_installs_the_versioned_library_and_its_links() {
    let tools = Command::new("cc").arg("--version").output().is_ok()
        && Command::new("readelf").arg("--version").output().is_ok()
        && Command::new("pkg-config").arg("--version").output().is_ok();
    if !require(
        "a C compiler, readelf and pkg-config",
        tools,
        "apt-get install -y gcc binutils pkg-config",
    ) {
        return;
    }
    // install-capi --no-build takes TARGET/release/libshaledb.{so,a}: this
    // test's build, through links.
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    let built = library_dir();
    for file in ["libshaledb.so", "libshaledb.a"] {
        std::os::unix::fs::symlink(built.join(file), release.join(file)).unwrap();
    }
    let prefix = dir.path().join("prefix");
    // An earlier install's unversioned file, which becomes a link.
    std::fs::create_dir_all(prefix.join("lib")).unwrap();
    std::fs::write(prefix.join("lib/libshaledb.so"), b"old").unwrap();
    let output = Command::new(crate_dir().join("../../scripts/install-capi"))
        .arg("--no-build")
        .arg(&prefix)
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "install-capi: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let lib = prefix.join("lib");
    let real = lib.join("libshaledb.so.1.0.0");
    assert!(std::fs::symlink_metadata(&real).unwrap().is_file());
    let link = |path: &Path| std::fs::read_link(path).unwrap();
    assert_eq!(link(&lib.join(SONAME)), Path::new("libshaledb.so.1.0.0"));
    assert_eq!(link(&lib.join("libshaledb.so")), Path::new(SONAME));
    let compat = lib.join("shaledb/leveldb-compat/libleveldb.so");
    assert_eq!(link(&compat), Path::new("../../libshaledb.so.1"));
    assert_eq!(
        std::fs::canonicalize(&compat).unwrap(),
        std::fs::canonicalize(&real).unwrap()
    );
    assert!(dynamic_section(&real)
        .unwrap()
        .contains(&format!("Library soname: [{SONAME}]")));

    // A program built with pkg-config, and one linked with -lleveldb
    // through the compatibility link: both need libshaledb.so.1 and run on
    // the installed library alone.
    let pkg = Command::new("pkg-config")
        .args(["--cflags", "--libs", "shaledb"])
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .output()
        .unwrap();
    assert!(
        pkg.status.success(),
        "{}",
        String::from_utf8_lossy(&pkg.stderr)
    );
    let flags: Vec<String> = String::from_utf8_lossy(&pkg.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let with_pkg_config = dir.path().join("extensions-pkg-config");
    let with_compat = dir.path().join("extensions-compat");
    for (program, link_flags) in [
        (&with_pkg_config, flags),
        (
            &with_compat,
            vec![
                "-I".to_string(),
                prefix.join("include/shaledb").display().to_string(),
                "-L".to_string(),
                compat.parent().unwrap().display().to_string(),
                "-lleveldb".to_string(),
            ],
        ),
    ] {
        let output = Command::new("cc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(crate_dir().join("tests/c/extensions_test.c"))
            .arg("-o")
            .arg(program)
            .args(&link_flags)
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cc {link_flags:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let dynamic = dynamic_section(program).unwrap();
        assert!(
            dynamic.contains(&format!("Shared library: [{SONAME}]")),
            "{dynamic}"
        );
        let db = dir
            .path()
            .join(program.file_name().unwrap())
            .with_extension("db");
        run(&[], program, &[db.to_str().unwrap()]);
    }
}
