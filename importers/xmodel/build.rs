//! Compiles proto/graph_proto_v2.proto into Rust with protox (a protobuf compiler written in
//! Rust) and prost-build: no system `protoc` is needed.

fn main() {
    let proto = "proto/graph_proto_v2.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors =
        protox::compile([proto], ["proto"]).expect("proto/graph_proto_v2.proto compiles");
    // Ordered maps: a graph encodes to the same bytes every time (fixtures regenerate exactly).
    prost_build::Config::new()
        .btree_map(["."])
        .compile_fds(descriptors)
        .expect("prost-build generates the serial_v2 messages");
}
