//! Fuzz target: raw transactions into the live service's stubs,
//! `nnhal_cli::fuzzing::ParcelTarget::run` (docs/fuzzing.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    nnhal_cli::fuzzing::ParcelTarget::get().run(data);
});
