//! nnhal-vts: the conformance suite of the nnhal driver.
//!
//! * [`vector`], [`model`] and [`compare`] are the driver crate's golden-vector support
//!   (`nnhal::vector`: file format, HAL models and requests built from a vector, the AOSP
//!   harness tolerance), re-exported here with the bundled vectors' location;
//! * [`transport`] is the device abstraction: in-process, or over binder RPC to a
//!   `nnhal-service` (a child started on a temporary socket, or one already running);
//! * [`runner`] runs vectors and mutation classes and reports;
//! * [`mutations`] holds the VTS 1.0 model and request mutators (BI-01…BI-26);
//! * [`basic`] holds the VTS BasicTests (status, capabilities, null and invalid arguments).
//!
//! The `nnhal-vts` binary and the integration tests in `tests/` are thin layers over these.

pub mod basic;
pub mod load;
pub mod mutations;
pub mod runner;
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
}

pub use model::{build_request, to_model, BuiltRequest, ConstantMode};
pub use mutations::{
    base_models, BaseModel, Bi, ModelMutator, ModelVariant, RequestMutator, RequestVariant,
};
pub use runner::{run_vector, run_vectors, ClassReport, Summary, VectorReport};
pub use transport::{Device, InProcessDevice, Prepared, TransportKind};
pub use vector::{load, Vector};
