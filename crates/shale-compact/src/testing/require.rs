//! The one rule for tests that need something of their machine (root, a
//! tmpfs, `O_DIRECT`, an OpenCL device such as PoCL, LevelDB, the `shale`
//! binary): with `SHALE_REQUIRE_ALL=1`, exactly `1`, they are required and
//! fail where they cannot run, naming what is missing and how to provide
//! it; otherwise they print why and pass. `scripts/test` sets it when `CI`
//! is set. `leveldb-shim` and the Python tests read it the same way.

/// The variable: `1` makes every environment-dependent test required.
pub const REQUIRE_ALL: &str = "SHALE_REQUIRE_ALL";

/// How to provide an OpenCL device on the CPU (`scripts/test` does it as root).
pub const PROVIDE_OPENCL: &str = "install PoCL: apt-get install pocl-opencl-icd ocl-icd-libopencl1";

/// Whether every environment-dependent test must run (`SHALE_REQUIRE_ALL=1`).
pub fn required() -> bool {
    std::env::var_os(REQUIRE_ALL).is_some_and(|value| value == "1")
}

/// `test` cannot run here because `missing`: panics when [`required`],
/// saying how to `provide` it; otherwise prints why, and the caller returns.
#[track_caller]
pub fn skip(test: &str, missing: &str, provide: &str) {
    assert!(
        !required(),
        "{test}: cannot run: {missing}; {REQUIRE_ALL}=1 requires it ({provide})"
    );
    eprintln!("{test}: skipping: {missing} ({provide}; {REQUIRE_ALL}=1 makes this fail)");
}
