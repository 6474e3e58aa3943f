//! Fuzz target: `nnhal_cli::fuzzing::run_xmodel`, the XModel importer (docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    nnhal_cli::fuzzing::run_xmodel(data);
});
