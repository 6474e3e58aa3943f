//! Compiles proto/onnx.proto into Rust with protox (a protobuf compiler written in Rust) and
//! prost-build: no system `protoc` is needed.

fn main() {
    let proto = "proto/onnx.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"]).expect("proto/onnx.proto compiles");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("prost-build generates the ONNX messages");
}
