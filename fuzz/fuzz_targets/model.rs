//! Fuzz target: `nnhal::fuzzing::run_model` (docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = nnhal::fuzzing::run_model(data);
});
