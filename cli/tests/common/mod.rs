//! What the integration tests of `nnhal-cli` share: the repository root, and the binaries of the
//! workspace's other packages that a test runs next to `nnhal`.
//!
//! Cargo hands a test the paths of its own package's binaries only (`CARGO_BIN_EXE_nnhal`);
//! `nnhal-service` belongs to the `nnhal` package and `nnhal-vts` to `nnhal-vts`. A cargo build
//! puts every binary of the workspace in the same directory, so [`sibling`] takes the one beside
//! `nnhal`: `cargo test --workspace` (the README's and CI's command) has just built it there.
//! When it is missing, or older than the sources it is built from (a narrower run such as
//! `cargo test -p nnhal-cli` after the driver changed), [`sibling`] first has the cargo that runs
//! the tests build it there, with the profile and target of this run. No test is skipped for
//! want of a binary, and none runs a service older than the driver sources.
//!
//! The build is not asked for when the binary is current: cargo would resolve the features of
//! the one package afresh and, finding them unlike those of the workspace run, rebuild and
//! replace the binary that run made.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

/// The repository root (the workspace manifest's directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

/// What the driver library and the service are built from.
const DRIVER_SOURCES: [&str; 5] = ["src", "build.rs", "aidl", "hal/src", "kernels/src"];

/// The `nnhal-service` binary of this build.
pub fn service_exe() -> PathBuf {
    sibling("nnhal", "nnhal-service", &DRIVER_SOURCES)
}

/// The `nnhal-vts` binary of this build.
pub fn vts_exe() -> PathBuf {
    let mut sources = DRIVER_SOURCES.to_vec();
    sources.push("vts_tests/src");
    sibling("nnhal-vts", "nnhal-vts", &sources)
}

/// The binary `bin` of the workspace package `package`, built from the sources under `sources`
/// (relative to the repository root), beside `nnhal`; see the module docs.
pub fn sibling(package: &str, bin: &str, sources: &[&str]) -> PathBuf {
    static CHECKED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_nnhal"))
        .parent()
        .expect("the binary has a directory");
    let path = bin_dir.join(bin);
    let mut checked = CHECKED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !checked.iter().any(|b| b == bin) {
        let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let newest = sources
            .iter()
            .filter_map(|rel| newest_modification(&repo_root().join(rel)))
            .max();
        if built.is_none() || newest > built {
            build(bin_dir, package, bin);
        }
        checked.push(bin.to_string());
    }
    path
}

/// The latest modification time of `path` or of any file below it.
fn newest_modification(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(|entry| newest_modification(&entry.ok()?.path()))
        .max()
}

/// `cargo build -p package --bin bin` into the directory `bin_dir`
/// (`<target dir>[/<triple>]/<profile dir>`).
fn build(bin_dir: &Path, package: &str, bin: &str) {
    // `debug` is where both the dev and the test profile build; tests build with the latter.
    let profile = match bin_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "test",
        Some(other) => other,
    };
    let above = bin_dir
        .parent()
        .expect("the profile directory has a parent");
    // Cargo marks the target dir itself; a directory between it and the profile's is the
    // target triple of a cross build.
    let (target_dir, triple) = if above.join("CACHEDIR.TAG").exists() {
        (above, None)
    } else {
        (
            above.parent().expect("the triple directory has a parent"),
            above.file_name().and_then(|n| n.to_str()),
        )
    };
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(repo_root())
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .args(["--profile", profile])
        .arg("--target-dir")
        .arg(target_dir);
    if let Some(triple) = triple {
        cargo.args(["--target", triple]);
    }
    let status = cargo
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {bin}: {e}"));
    assert!(status.success(), "building {bin} failed: {cargo:?}");
    let path = bin_dir.join(bin);
    assert!(path.is_file(), "{cargo:?} left no {}", path.display());
}
