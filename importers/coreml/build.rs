//! Compiles proto/coreml.proto (the subset of CoreML's specification the importer decodes)
//! with protox and prost-build, as the ONNX importer does: no system `protoc` is needed.

fn main() {
    let proto = "proto/coreml.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"]).expect("proto/coreml.proto compiles");
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("prost-build generates the CoreML messages");
}
