//! Running the `shale` binary in the command's tests, written once: with
//! arguments (and input, or environment variables), its output as text,
//! and the check that it succeeded.

#![allow(dead_code, reason = "each test binary uses its own part")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// The `shale` command with `args`.
pub fn shale_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shale"));
    command.args(args);
    command
}

/// Runs `shale` with `args` and no input.
pub fn shale(args: &[&str]) -> Output {
    shale_command(args)
        .stdin(Stdio::null())
        .output()
        .expect("run shale")
}

/// Runs `shale` with `args` and the environment variables `env` set.
pub fn shale_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    shale_command(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run shale")
}

/// Runs `shale` with `args`, feeding `input` to its stdin.
pub fn shale_with_input(args: &[&str], input: &[u8]) -> Output {
    let mut child = shale_command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run shale");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // The child may exit early on bad input: ignore a broken pipe.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

/// Bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The command's stdout as text.
pub fn stdout(output: &Output) -> String {
    text(&output.stdout)
}

/// The command's stderr as text.
pub fn stderr(output: &Output) -> String {
    text(&output.stderr)
}

/// Fails, showing what the command printed, unless it succeeded.
#[track_caller]
pub fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        stdout(output),
        stderr(output)
    );
}
