//! Generates the Rust stubs of the frozen `android.hardware.neuralnetworks` AIDL interface
//! (version 1) and the `android.hardware.common` (v2) / `android.hardware.graphics.common` (v5)
//! types it imports, from `aidl/`, with `rsbinder-aidl`. `src/binder/ipc.rs` includes the output.
//!
//! Host builds only (feature `host`, the rsbinder transport): the `aosp` build takes its stubs
//! from the platform's aidl_interface modules, and Soong does not run build scripts at all.

#[cfg(feature = "host")]
use std::path::{Path, PathBuf};

/// Version and hash of the frozen API (`aidl_api/android.hardware.neuralnetworks/1/.hash`).
/// Stable AIDL answers them through the `getInterfaceVersion` / `getInterfaceHash` meta
/// transactions, which the platform's NN runtime uses to learn the feature level.
const NN_VERSION: i32 = 1;
#[cfg(feature = "host")]
const NN_HASH: &str = "ae57b48403df6752d8d8d56d215c3e31db74935d";

#[cfg(feature = "host")]
fn aidl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "aidl"))
        .collect();
    files.sort();
    files
}

#[cfg(not(feature = "host"))]
fn main() {
    // Keeps the stamped version in one place for both builds (tests/packaging.rs reads it).
    let _ = NN_VERSION;
}

#[cfg(feature = "host")]
fn main() {
    let root = PathBuf::from("aidl");
    println!("cargo:rerun-if-changed=aidl");
    println!("cargo:rerun-if-changed=build.rs");

    let mut builder = rsbinder_aidl::Builder::new()
        .source(root.join("android/hardware/common"))
        .source(root.join("android/hardware/graphics/common"));
    // One source per file: the version/hash stamp applies to the file added last.
    for file in aidl_files(&root.join("android/hardware/neuralnetworks")) {
        builder = builder.source(&file).version(NN_VERSION).hash(NN_HASH);
    }
    let result = builder
        .include_dir(&root)
        .output(PathBuf::from("nnhal_aidl.rs"))
        .generate();
    if let Err(err) = result {
        eprintln!("rsbinder-aidl failed on aidl/: {err:?}");
        std::process::exit(1);
    }
}
