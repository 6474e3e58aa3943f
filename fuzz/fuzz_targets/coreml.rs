//! Fuzz target: `nnhal::fuzzing::run_coreml`, the CoreML importer (docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    nnhal::fuzzing::run_coreml(data);
});
