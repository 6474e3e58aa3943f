//! nnhal-vts: the conformance suite of the nnhal driver.
//!
//! * [`vector`] loads the golden vectors (`vectors/*.json`, converted from the AOSP NNAPI 1.0
//!   specs);
//! * [`model`] builds HAL models and requests from them, in both constant modes;
//! * [`compare`] applies the AOSP harness tolerance;
//! * [`transport`] is the device abstraction (in-process today, binder later);
//! * [`runner`] runs vectors and mutation classes and reports;
//! * [`mutations`] holds the VTS 1.0 model and request mutators (BI-01…BI-26).
//!
//! The `nnhal-vts` binary and the integration tests in `tests/` are thin layers over these.

pub mod compare;
pub mod model;
pub mod mutations;
pub mod runner;
pub mod transport;
pub mod vector;

pub use model::{build_request, to_model, BuiltRequest, ConstantMode};
pub use mutations::{
    base_models, BaseModel, Bi, ModelMutator, ModelVariant, RequestMutator, RequestVariant,
};
pub use runner::{run_vector, run_vectors, ClassReport, Summary, VectorReport};
pub use transport::{Device, InProcessDevice, Prepared, TransportKind};
pub use vector::{load, Vector};
