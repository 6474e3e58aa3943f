//! nnhal-vts: the conformance suite of the nnhal driver.
//!
//! * [`vector`], [`model`] and [`compare`] are the golden-vector support: the file format and
//!   loader, the HAL models and requests built from a vector, the AOSP harness tolerance, and
//!   where the bundled vectors are (also used by the `nnhal` CLI and benchmark, crate
//!   `nnhal-cli`, and the fuzz targets);
//! * [`probe`] holds the tiny built-in workloads: the ADD round trip and one small model per
//!   operation;
//! * [`transport`] is the device abstraction: in-process, or over binder RPC to a
//!   `nnhal-service` (a child started on a temporary socket, or one already running);
//! * [`runner`] runs vectors and mutation classes and reports;
//! * [`mutations`] holds the VTS 1.0 model and request mutators (BI-01…BI-26);
//! * [`basic`] holds the VTS BasicTests (status, capabilities, null and invalid arguments);
//! * [`qos`] holds the deadline cases of QualityOfServiceTests;
//! * [`caching`] holds CompilationCachingTest: save, restore, damaged and mismatched caches;
//! * [`suites`] holds DynamicOutputShapeTest and QuantizationCouplingTest, which derive
//!   models from the golden vectors.
//!
//! The `nnhal-vts` binary and the integration tests in `tests/` are thin layers over these.

pub mod basic;
pub mod caching;
pub mod load;
pub mod mutations;
pub mod probe;
pub mod qos;
pub mod runner;
pub mod suites;
pub mod transport;
pub mod vector;

pub use model::{build_request, to_model, BuiltRequest, ConstantMode};
pub use mutations::{
    base_models, BaseModel, Bi, ModelMutator, ModelVariant, RequestMutator, RequestVariant,
};
pub use runner::{run_vector, run_vectors, ClassReport, Summary, VectorReport};
pub use transport::{Device, InProcessDevice, Prepared, TransportKind};
pub use vector::{compare, load, model, Vector};
