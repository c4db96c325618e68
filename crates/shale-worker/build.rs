//! Compiles the server half of the compaction worker protocol
//! (`crates/shale-compact/proto/worker.proto`, where the protocol lives)
//! with protox, a protobuf compiler written in Rust, so that building needs
//! no system `protoc`. The messages are `shale-compact`'s: only the service
//! is generated here, over them.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../shale-compact/proto";
    println!("cargo:rerun-if-changed={proto}/worker.proto");
    let descriptors = protox::compile([format!("{proto}/worker.proto")], [proto])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .extern_path(".shale.worker.v1", "::shale_compact::remote::proto")
        .compile_fds(descriptors)?;
    Ok(())
}
