//! Compiled kernels kept on disk between processes, so that opening the
//! device does not compile the kernels again: that build was most of what
//! an open cost on NVIDIA's driver (`docs/results/opencl-gpu-runs.md`),
//! and PoCL's own build is slower still.
//!
//! OpenCL gives no portable way to keep a compiled program except its
//! binary: after a build, `CL_PROGRAM_BINARIES` hands out one
//! driver-specific blob per device (PTX on NVIDIA, PoCL's own bundle on
//! the CPU), and `clCreateProgramWithBinary` takes it back. The blob is
//! only good for the device and driver that made it, and OpenCL still
//! requires `clBuildProgram` on a program made from a binary before its
//! kernels can be created (cheap: there is nothing left to compile). Hence:
//!
//! - a file is named by a SHA-256 over the platform's name and version,
//!   the device's name and version, the driver version, the build options
//!   and the full source ([`cache_key`]): a new driver or a changed kernel
//!   finds no file and builds from source;
//! - the file has a header (magic, format version, the key again, length,
//!   CRC-32C of the binary), so a torn, truncated or foreign file is
//!   refused before its bytes reach the driver;
//! - it is written to a temporary file in the same directory and renamed
//!   into place, so two processes opening at once each see a whole file or
//!   none;
//! - nothing about the cache ever fails an open: a missing or unwritable
//!   directory, a bad file, or a binary the driver rejects (creating or
//!   building the program from it fails) means a build from source, whose
//!   binary then replaces the file.
//!
//! The file layout is described in `docs/opencl.md` ("Compiled kernels on
//! disk"); its constants are the ones below.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::platform::Platform;
use opencl3::program::Program;
use opencl3::types::cl_device_id;
use sha2::{Digest, Sha256};
use shale_format::crc;

use super::device_error::DeviceError;

/// The variable that names the cache directory; empty or `off` turns the
/// cache off.
pub const PROGRAM_CACHE_VARIABLE: &str = "SHALE_OPENCL_CACHE";

/// First bytes of every cache file. Frozen.
const MAGIC: [u8; 8] = *b"SHALECLB";
/// Version of the file layout; also hashed into the key, so a new layout
/// never reads an old file. Frozen per version.
const FORMAT_VERSION: u32 = 1;
/// Magic, format version, key, binary length, CRC-32C of the binary.
const HEADER_LEN: usize = 8 + 4 + 32 + 8 + 4;
/// A cache file larger than this is not read (no driver's binary of these
/// kernels comes near it).
const MAX_FILE_LEN: u64 = 256 << 20;

/// Where compiled programs are kept between processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProgramCache {
    /// `SHALE_OPENCL_CACHE` when set (empty or `off`: no cache), else
    /// `$XDG_CACHE_HOME/shaledb/opencl`, else `$HOME/.cache/shaledb/opencl`.
    #[default]
    Default,
    /// No cache: every process builds from source.
    Off,
    /// This directory, whatever the environment says.
    At(PathBuf),
}

impl ProgramCache {
    /// The directory to use, with the process's environment; `None`: no
    /// cache.
    pub fn directory(&self) -> Option<PathBuf> {
        cache_directory(self, |name| std::env::var_os(name))
    }
}

/// The cache directory `setting` names, `env` answering for environment
/// variables; `None`: no cache.
pub(crate) fn cache_directory(
    setting: &ProgramCache,
    env: impl Fn(&str) -> Option<OsString>,
) -> Option<PathBuf> {
    match setting {
        ProgramCache::Off => None,
        ProgramCache::At(dir) => Some(dir.clone()),
        ProgramCache::Default => {
            if let Some(value) = env(PROGRAM_CACHE_VARIABLE) {
                if value.is_empty() || value.eq_ignore_ascii_case("off") {
                    return None;
                }
                return Some(PathBuf::from(value));
            }
            // The XDG base directory rules: a relative value is ignored.
            let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
            if let Some(cache_home) = absolute("XDG_CACHE_HOME") {
                return Some(cache_home.join("shaledb").join("opencl"));
            }
            absolute("HOME").map(|home| home.join(".cache").join("shaledb").join("opencl"))
        }
    }
}

/// Where a program came from when the device was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramOrigin {
    /// Its binary was loaded from the on-disk cache.
    CacheHit,
    /// Built from source (no file yet, or a file that could not be used);
    /// its binary was offered to the cache.
    BuiltFromSource,
    /// Built from source with no cache in use.
    CacheOff,
}

impl fmt::Display for ProgramOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProgramOrigin::CacheHit => "cache hit",
            ProgramOrigin::BuiltFromSource => "built from source",
            ProgramOrigin::CacheOff => "cache off",
        })
    }
}

/// What a compiled binary is only good for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeviceIdentity {
    pub(crate) platform_name: String,
    pub(crate) platform_version: String,
    pub(crate) device_name: String,
    pub(crate) device_version: String,
    pub(crate) driver_version: String,
}

impl DeviceIdentity {
    /// The identity of `device`; `None` when the driver does not say (then
    /// nothing is cached: a key without the driver could load a stale
    /// binary).
    pub(crate) fn of(device: Device) -> Option<DeviceIdentity> {
        let platform = Platform::new(device.platform().ok()?);
        Some(DeviceIdentity {
            platform_name: platform.name().ok()?,
            platform_version: platform.version().ok()?,
            device_name: device.name().ok()?,
            device_version: device.version().ok()?,
            driver_version: device.driver_version().ok()?,
        })
    }
}

/// The cache key of the program built from `source` with `options` for
/// `device`. Each field is hashed with its length first, so no two
/// different field lists hash the same bytes.
pub(crate) fn cache_key(device: &DeviceIdentity, options: &str, source: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(MAGIC);
    hasher.update(FORMAT_VERSION.to_le_bytes());
    for field in [
        &device.platform_name,
        &device.platform_version,
        &device.device_name,
        &device.device_version,
        &device.driver_version,
        options,
        source,
    ] {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hasher.finalize().into()
}

/// The file name of `key`: its hex digits.
fn file_name(key: &[u8; 32]) -> String {
    let mut name: String = key.iter().map(|byte| format!("{byte:02x}")).collect();
    name.push_str(".bin");
    name
}

/// The program for `source` built with `options` on `device` (a member of
/// `context`): from its binary in the cache directory `dir` when there is a
/// good one, else built from source, its binary then written to `dir`.
/// Only a failed build from source is an error (it carries the compiler's
/// log).
pub(crate) fn load_or_build(
    context: &Context,
    device: cl_device_id,
    source: &str,
    options: &str,
    dir: Option<&Path>,
) -> Result<(Program, ProgramOrigin), DeviceError> {
    let cache = dir.and_then(|dir| {
        let key = cache_key(&DeviceIdentity::of(Device::new(device))?, options, source);
        Some((dir, key))
    });
    let Some((dir, key)) = cache else {
        let program = build_from_source(context, device, source, options)?;
        return Ok((program, ProgramOrigin::CacheOff));
    };
    let path = dir.join(file_name(&key));
    if let Some(program) = read_entry(&path, &key)
        .and_then(|binary| build_from_binary(context, device, &binary, options))
    {
        return Ok((program, ProgramOrigin::CacheHit));
    }
    let program = build_from_source(context, device, source, options)?;
    if let Some(binary) = binary_of(&program) {
        // A cache that cannot be written only costs the next process a
        // build.
        let _ = write_entry(dir, &path, &key, &binary);
    }
    Ok((program, ProgramOrigin::BuiltFromSource))
}

/// Compiles `source` for `device`.
fn build_from_source(
    context: &Context,
    device: cl_device_id,
    source: &str,
    options: &str,
) -> Result<Program, DeviceError> {
    let mut program = Program::create_from_source(context, source)
        .map_err(|e| DeviceError::cl("creating the OpenCL program", e))?;
    if let Err(e) = program.build(&[device], options) {
        let log = program.get_build_log(device).unwrap_or_default();
        return Err(DeviceError::new(format!(
            "building the OpenCL program failed: {e}\n{log}"
        )));
    }
    Ok(program)
}

/// The program `binary` holds, built (as OpenCL requires before its
/// kernels can be made); `None` when the driver refuses it.
fn build_from_binary(
    context: &Context,
    device: cl_device_id,
    binary: &[u8],
    options: &str,
) -> Option<Program> {
    // SAFETY: `device` is a member of `context` (the caller's contract,
    // kept by `DeviceContext`, whose context is made from that device);
    // one device, one binary.
    let mut program = unsafe { Program::create_from_binary(context, &[device], &[binary]) }.ok()?;
    program.build(&[device], options).ok()?;
    Some(program)
}

/// The binary of a program built for one device; `None` when the driver
/// gives none.
fn binary_of(program: &Program) -> Option<Vec<u8>> {
    let binary = program.get_binaries().ok()?.into_iter().next()?;
    (!binary.is_empty()).then_some(binary)
}

/// The binary in the cache file at `path`, when the file is whole and made
/// for `key`.
fn read_entry(path: &Path, key: &[u8; 32]) -> Option<Vec<u8>> {
    if fs::metadata(path).ok()?.len() > MAX_FILE_LEN {
        return None;
    }
    decode_entry(&fs::read(path).ok()?, key).map(<[u8]>::to_vec)
}

/// The binary in `file`, when it is a whole cache file made for `key`.
pub(crate) fn decode_entry<'a>(file: &'a [u8], key: &[u8; 32]) -> Option<&'a [u8]> {
    let (header, binary) = file.split_at_checked(HEADER_LEN)?;
    let (magic, rest) = header.split_at(8);
    let (version, rest) = rest.split_at(4);
    let (stored_key, rest) = rest.split_at(32);
    let (length, checksum) = rest.split_at(8);
    let version = u32::from_le_bytes(version.try_into().ok()?);
    let length = u64::from_le_bytes(length.try_into().ok()?);
    let checksum = u32::from_le_bytes(checksum.try_into().ok()?);
    let whole = magic == MAGIC
        && version == FORMAT_VERSION
        && stored_key == key
        && length == binary.len() as u64
        && checksum == crc::value(binary);
    whole.then_some(binary)
}

/// The cache file holding `binary` for `key`.
pub(crate) fn encode_entry(key: &[u8; 32], binary: &[u8]) -> Vec<u8> {
    let mut file = Vec::with_capacity(HEADER_LEN + binary.len());
    file.extend_from_slice(&MAGIC);
    file.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    file.extend_from_slice(key);
    file.extend_from_slice(&(binary.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc::value(binary).to_le_bytes());
    file.extend_from_slice(binary);
    file
}

/// Writes the cache file for `key` at `path` in `dir`: a temporary file
/// beside it, renamed over it (atomic within a directory), so a reader sees
/// the old file, the new one, or none. Not synced: a file torn by a crash
/// fails its checksum and is rebuilt.
fn write_entry(dir: &Path, path: &Path, key: &[u8; 32], binary: &[u8]) -> std::io::Result<()> {
    static TEMPORARY_FILES: AtomicU64 = AtomicU64::new(0);
    fs::create_dir_all(dir)?;
    let temporary = dir.join(format!(
        ".{}.{}.{}.tmp",
        file_name(key),
        std::process::id(),
        TEMPORARY_FILES.fetch_add(1, Ordering::Relaxed)
    ));
    let written = fs::File::create_new(&temporary)
        .and_then(|mut file| file.write_all(&encode_entry(key, binary)))
        .and_then(|()| fs::rename(&temporary, path));
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::opencl::executor::BUILD_OPTIONS;
    use crate::opencl::session::{mem, Arg, Session};
    use crate::opencl::tests::test_device;
    use crate::opencl::{kernel_source, DeviceContext};

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(name, value)| (name.to_string(), OsString::from(value)))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn an_explicit_setting_wins_over_the_environment() {
        let everything = env(&[
            (PROGRAM_CACHE_VARIABLE, "/from/variable"),
            ("XDG_CACHE_HOME", "/xdg"),
            ("HOME", "/home/u"),
        ]);
        assert_eq!(
            cache_directory(&ProgramCache::At("/explicit".into()), &everything),
            Some(PathBuf::from("/explicit"))
        );
        assert_eq!(cache_directory(&ProgramCache::Off, &everything), None);
        assert_eq!(
            cache_directory(&ProgramCache::Default, &everything),
            Some(PathBuf::from("/from/variable"))
        );
    }

    #[test]
    fn the_variable_empty_or_off_turns_the_cache_off() {
        for off in ["", "off", "OFF"] {
            let vars = env(&[(PROGRAM_CACHE_VARIABLE, off), ("HOME", "/home/u")]);
            assert_eq!(
                cache_directory(&ProgramCache::Default, vars),
                None,
                "{off:?}"
            );
        }
    }

    #[test]
    fn without_the_variable_the_xdg_cache_then_home() {
        assert_eq!(
            cache_directory(
                &ProgramCache::Default,
                env(&[("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/u")])
            ),
            Some(PathBuf::from("/xdg/shaledb/opencl"))
        );
        // A relative XDG_CACHE_HOME is invalid by the XDG rules.
        assert_eq!(
            cache_directory(
                &ProgramCache::Default,
                env(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/home/u")])
            ),
            Some(PathBuf::from("/home/u/.cache/shaledb/opencl"))
        );
        assert_eq!(cache_directory(&ProgramCache::Default, env(&[])), None);
        assert_eq!(
            cache_directory(&ProgramCache::Default, env(&[("HOME", "")])),
            None
        );
    }

    fn identity() -> DeviceIdentity {
        DeviceIdentity {
            platform_name: "Portable Computing Language".into(),
            platform_version: "OpenCL 3.0 PoCL 6.0".into(),
            device_name: "cpu".into(),
            device_version: "OpenCL 3.0".into(),
            driver_version: "6.0".into(),
        }
    }

    #[test]
    fn every_input_of_the_key_changes_it() {
        let key = cache_key(&identity(), "-cl-std=CL1.2", "kernel void k() {}");
        assert_eq!(
            key,
            cache_key(&identity(), "-cl-std=CL1.2", "kernel void k() {}")
        );
        let mut changed = vec![
            cache_key(&identity(), "-cl-std=CL2.0", "kernel void k() {}"),
            cache_key(&identity(), "-cl-std=CL1.2", "kernel void k2() {}"),
            // The same bytes split differently between options and source.
            cache_key(&identity(), "-cl-std=CL1.2k", "ernel void k() {}"),
        ];
        let edits: [fn(&mut DeviceIdentity); 5] = [
            |d| d.platform_name.push('x'),
            |d| d.platform_version.push('x'),
            |d| d.device_name.push('x'),
            |d| d.device_version.push('x'),
            |d| d.driver_version.push('x'),
        ];
        for edit in edits {
            let mut device = identity();
            edit(&mut device);
            changed.push(cache_key(&device, "-cl-std=CL1.2", "kernel void k() {}"));
        }
        for (i, other) in changed.iter().enumerate() {
            assert_ne!(key, *other, "change {i}");
        }
    }

    #[test]
    fn a_cache_file_decodes_only_whole_and_for_its_key() {
        let key = cache_key(&identity(), "", "source");
        let binary: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let file = encode_entry(&key, &binary);
        assert_eq!(decode_entry(&file, &key), Some(binary.as_slice()));
        for len in 0..file.len() {
            assert_eq!(decode_entry(&file[..len], &key), None, "cut at {len}");
        }
        let mut longer = file.clone();
        longer.push(0);
        assert_eq!(decode_entry(&longer, &key), None);
        for at in [0, 8, 12, 44, 52, HEADER_LEN, file.len() - 1] {
            let mut flipped = file.clone();
            flipped[at] ^= 1;
            assert_eq!(decode_entry(&flipped, &key), None, "byte {at} flipped");
        }
        let other = cache_key(&identity(), "", "other source");
        assert_eq!(decode_entry(&file, &other), None);
    }

    /// The device tests build the whole program several times; one at a
    /// time keeps a small machine responsive.
    static ONE_BUILD_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// Loads the executor's program through the cache in `dir`, as a new
    /// process would (a fresh `Program` each time, on the one context).
    fn load(device: &DeviceContext, dir: Option<&Path>) -> (Program, ProgramOrigin) {
        load_or_build(
            device.context(),
            device.device_id(),
            &kernel_source(),
            BUILD_OPTIONS,
            dir,
        )
        .unwrap()
    }

    /// The key `load` uses.
    fn program_key(device: &DeviceContext) -> [u8; 32] {
        let identity = DeviceIdentity::of(Device::new(device.device_id())).unwrap();
        cache_key(&identity, BUILD_OPTIONS, &kernel_source())
    }

    /// The cache file `load` uses in `dir`.
    fn cache_file(device: &DeviceContext, dir: &Path) -> PathBuf {
        dir.join(file_name(&program_key(device)))
    }

    /// `program` computes CRC-32C as `shale_format` does (one tiny test
    /// kernel of `kernels/tests.cl`).
    fn assert_runs(device: &DeviceContext, program: Program) {
        let arena = device.new_arena();
        let mut session = Session::new(
            device,
            &arena,
            Arc::new(program),
            Default::default(),
            // The budget counts every job on the shared test device, and
            // other tests run jobs on it at the same time: give room.
            1 << 30,
            None,
        )
        .unwrap();
        let data = b"123456789 and some more bytes";
        let n = 2;
        let bytes = session.upload("t", data.as_slice()).unwrap();
        let start = session.upload("t", &[0u32, 9]).unwrap();
        let len = session.upload("t", &[9u32, 20]).unwrap();
        let crcs = session.alloc::<u32>("t", n).unwrap();
        let masked = session.alloc::<u32>("t", n).unwrap();
        session
            .launch(
                "test_crc32c",
                n,
                None,
                0,
                &[
                    mem(&bytes),
                    mem(&start),
                    mem(&len),
                    Arg::U32(n as u32),
                    mem(&crcs),
                    mem(&masked),
                ],
            )
            .unwrap();
        let crcs = session.download("t", &crcs, n).unwrap();
        assert_eq!(crcs, [crc::value(&data[..9]), crc::value(&data[9..])]);
    }

    #[test]
    fn the_second_load_is_a_cache_hit_and_runs() {
        let Some(device) = test_device() else { return };
        let _one = ONE_BUILD_AT_A_TIME
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let (built, origin) = load(&device, Some(dir.path()));
        assert_eq!(origin, ProgramOrigin::BuiltFromSource);
        let file = fs::read(cache_file(&device, dir.path())).unwrap();
        let (cached, origin) = load(&device, Some(dir.path()));
        assert_eq!(origin, ProgramOrigin::CacheHit);
        assert_eq!(fs::read(cache_file(&device, dir.path())).unwrap(), file);
        assert_eq!(
            decode_entry(&file, &program_key(&device)),
            binary_of(&built).as_deref()
        );
        assert_eq!(
            cached.get_kernel_names().unwrap(),
            built.get_kernel_names().unwrap()
        );
        assert_runs(&device, cached);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_bad_cache_file_is_rebuilt_and_replaced() {
        let Some(device) = test_device() else { return };
        let _one = ONE_BUILD_AT_A_TIME
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let (_, origin) = load(&device, Some(dir.path()));
        assert_eq!(origin, ProgramOrigin::BuiltFromSource);
        let path = cache_file(&device, dir.path());
        let good = fs::read(&path).unwrap();
        let key = program_key(&device);
        let mut flipped = good.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        let bad_files = [
            ("truncated", good[..good.len() / 2].to_vec()),
            ("a flipped byte", flipped),
            ("empty", Vec::new()),
            // Whole and checksummed, but not a binary the driver takes.
            ("garbage", encode_entry(&key, b"not a program binary")),
        ];
        for (what, bad) in bad_files {
            fs::write(&path, &bad).unwrap();
            let (program, origin) = load(&device, Some(dir.path()));
            assert_eq!(origin, ProgramOrigin::BuiltFromSource, "{what}");
            assert!(
                decode_entry(&fs::read(&path).unwrap(), &key).is_some(),
                "{what}: the file is replaced by a good one"
            );
            assert_runs(&device, program);
            let (_, origin) = load(&device, Some(dir.path()));
            assert_eq!(origin, ProgramOrigin::CacheHit, "{what}: then a hit");
        }
    }

    #[test]
    fn a_cache_that_cannot_be_written_still_builds() {
        let Some(device) = test_device() else { return };
        let _one = ONE_BUILD_AT_A_TIME
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let dir = tempfile::tempdir().unwrap();
        // A directory below a plain file: unwritable even for root.
        let blocker = dir.path().join("a-file");
        fs::write(&blocker, b"").unwrap();
        let unwritable = blocker.join("cache");
        for _ in 0..2 {
            let (program, origin) = load(&device, Some(&unwritable));
            assert_eq!(origin, ProgramOrigin::BuiltFromSource);
            assert_runs(&device, program);
        }
        let (program, origin) = load(&device, None);
        assert_eq!(origin, ProgramOrigin::CacheOff);
        assert_runs(&device, program);
    }
}
