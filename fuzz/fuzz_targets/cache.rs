//! Fuzz target: `nnhal_cli::fuzzing::run_cache` (docs/fuzzing.md): compilation-cache payloads
//! re-sealed with a correct checksum, restored and run.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = nnhal_cli::fuzzing::run_cache(data);
});
