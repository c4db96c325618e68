//! `powerloss-fs`: mounts the power-loss file system (the crate's
//! documentation says what it models) and takes commands on standard input,
//! one a line:
//!
//! * `crash`: a power loss that drops every write not synced;
//! * `crash-torn SEED`: a power loss that keeps a random part of them,
//!   drawn from SEED;
//! * `unmount`: a clean shutdown, every file synced.
//!
//! End of input is a `crash`. Each ends the process: the mount is detached,
//! and exiting closes the FUSE device, which aborts whatever the kernel
//! still had for it. It prints `mounted` when the file system serves
//! requests, and after a crash one line saying what it dropped.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fuser::{Config, MountOption, Session};
use powerloss_fs::{CrashMode, PowerLossFs};

/// A FUSE file system over a backing directory that keeps file data in
/// memory until the file is synced, and drops it on a simulated power loss.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The directory that holds what is durable.
    #[arg(long, value_name = "DIR")]
    backing: PathBuf,
    /// Where to mount the file system.
    #[arg(long, value_name = "DIR")]
    mount: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("powerloss-fs: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let fs = PowerLossFs::new(&args.backing)
        .map_err(|e| format!("backing directory {}: {e}", args.backing.display()))?;
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("powerloss-fs".to_owned()),
        MountOption::Subtype("powerloss".to_owned()),
        MountOption::NoAtime,
    ];
    let session = Session::new(fs.clone(), &args.mount, &config).map_err(|e| {
        format!(
            "cannot mount on {}: {e} (FUSE needs /dev/fuse and root, or fusermount3 from the fuse3 package)",
            args.mount.display()
        )
    })?;
    let background = session
        .spawn()
        .map_err(|e| format!("cannot start the FUSE session: {e}"))?;
    println!("mounted");
    flush_stdout();

    let mut command = String::new();
    let stdin = std::io::stdin();
    let mode = loop {
        command.clear();
        let read = stdin
            .lock()
            .read_line(&mut command)
            .map_err(|e| e.to_string())?;
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            _ if read == 0 => break Some(CrashMode::DropAll),
            ["crash"] => break Some(CrashMode::DropAll),
            ["crash-torn", seed] => {
                let seed = seed
                    .parse()
                    .map_err(|e| format!("crash-torn {seed}: not a seed: {e}"))?;
                break Some(CrashMode::Torn { seed });
            }
            ["unmount"] => break None,
            [] => continue,
            _ => eprintln!("powerloss-fs: unknown command {:?}", command.trim()),
        }
    };
    match mode {
        Some(mode) => {
            let report = fs.crash(mode);
            detach(&args.mount);
            println!(
                "crashed: {} files had unsynced operations; dropped {} operations ({} bytes written), kept {}",
                report.files, report.dropped_ops, report.dropped_bytes, report.kept_ops
            );
            flush_stdout();
            // Exiting closes the FUSE device: the kernel aborts the
            // connection and drops what it still held for it.
            std::process::exit(0);
        }
        None => {
            fs.sync_all_and_stop()
                .map_err(|e| format!("syncing at unmount: {e}"))?;
            detach(&args.mount);
            drop(background);
            println!("unmounted");
            flush_stdout();
            Ok(())
        }
    }
}

/// Detaches the mount at once, even with files open on it (`umount -l`).
fn detach(mount: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(mount.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: a valid C string; the call only reads it.
    let rc = unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
    if rc != 0 {
        // Not root: fusermount3 can do it for the owner of the mount.
        let _ = std::process::Command::new("fusermount3")
            .args(["-u", "-z"])
            .arg(mount)
            .status();
    }
}

fn flush_stdout() {
    let _ = std::io::stdout().flush();
}
