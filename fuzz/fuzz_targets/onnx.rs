//! Fuzz target: `nnhal::fuzzing::run_onnx`, the ONNX importer (docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    nnhal::fuzzing::run_onnx(data);
});
