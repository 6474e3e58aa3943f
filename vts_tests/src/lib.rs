//! nnhal-vts: the conformance suite of the nnhal driver.
//!
//! * [`vector`], [`model`] and [`compare`] are the driver crate's golden-vector support
//!   (`nnhal::vector`: file format, HAL models and requests built from a vector, the AOSP
//!   harness tolerance), re-exported here with the bundled vectors' location;
//! * [`transport`] is the device abstraction: in-process, or over binder RPC to a
//!   `nnhal-service` (a child started on a temporary socket, or one already running);
//! * [`runner`] runs vectors and mutation classes and reports;
//! * [`mutations`] holds the VTS 1.0 model and request mutators (BI-01…BI-26);
//! * [`basic`] holds the VTS BasicTests (status, capabilities, null and invalid arguments);
//! * [`qos`] holds the deadline cases of QualityOfServiceTests;
//! * [`suites`] holds DynamicOutputShapeTest and QuantizationCouplingTest, which derive
//!   models from the golden vectors.
//!
//! The `nnhal-vts` binary and the integration tests in `tests/` are thin layers over these.

pub mod basic;
pub mod load;
pub mod mutations;
pub mod qos;
pub mod runner;
pub mod suites;
pub mod transport;

pub use nnhal::vector::{compare, model};

/// The golden-vector format and loader, plus where this crate keeps its vectors.
pub mod vector {
    pub use nnhal::vector::*;
    use std::path::{Path, PathBuf};

    /// The vectors shipped with this crate (`vts_tests/vectors`).
    pub fn bundled_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors")
    }

    /// The NNAPI 1.1–1.3 vectors (`vts_tests/later/vectors.tar.xz`, see its README).
    pub fn later_archive() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("later/vectors.tar.xz")
    }

    /// Unpacks [`later_archive`] into `dir` (with the system `tar`, which needs `xz`) unless a
    /// previous call already did, and returns `dir`. Each call unpacks into a staging
    /// directory of its own and renames it into place, so concurrent callers (parallel tests,
    /// other processes) never read a half-written tree; a marker file tells a complete one.
    pub fn unpack_later(dir: &Path) -> std::io::Result<PathBuf> {
        static STAGING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let marker = dir.join(".unpacked");
        if marker.exists() {
            return Ok(dir.to_path_buf());
        }
        let n = STAGING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let staging = dir.with_extension(format!("part-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)?;
        let status = std::process::Command::new("tar")
            .arg("-xJf")
            .arg(later_archive())
            .arg("-C")
            .arg(&staging)
            .status()?;
        if !status.success() {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(std::io::Error::other(format!(
                "tar -xJf {} failed ({status})",
                later_archive().display()
            )));
        }
        std::fs::write(staging.join(".unpacked"), b"")?;
        if let Err(e) = std::fs::rename(&staging, dir) {
            let _ = std::fs::remove_dir_all(&staging);
            // Another caller got there first; its tree is complete.
            if !marker.exists() {
                return Err(e);
            }
        }
        Ok(dir.to_path_buf())
    }
}

pub use model::{build_request, to_model, BuiltRequest, ConstantMode};
pub use mutations::{
    base_models, BaseModel, Bi, ModelMutator, ModelVariant, RequestMutator, RequestVariant,
};
pub use runner::{run_vector, run_vectors, ClassReport, Summary, VectorReport};
pub use transport::{Device, InProcessDevice, Prepared, TransportKind};
pub use vector::{load, Vector};
