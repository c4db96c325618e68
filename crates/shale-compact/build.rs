//! Compiles `proto/worker.proto` (the compaction worker protocol) into Rust
//! with protox, a protobuf compiler written in Rust, so that building needs
//! no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "remote")]
    compile_protocol()?;
    Ok(())
}

/// Only the `remote` feature speaks the protocol.
#[cfg(feature = "remote")]
fn compile_protocol() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/worker.proto");
    let descriptors = protox::compile(["proto/worker.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
