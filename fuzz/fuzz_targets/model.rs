//! Fuzz target: `nnhal_cli::fuzzing::run_model` (docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = nnhal_cli::fuzzing::run_model(data);
});
