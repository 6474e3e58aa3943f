//! nnhal: an Android Neural Networks HAL driver for the NNAPI 1.0 operation set.
//!
//! The in-process surface mirrors `IDevice`/`IPreparedModel` without binder:
//! [`Driver::capabilities`], [`Driver::supported_operations`], [`Driver::prepare_model`] and
//! [`PreparedModel::execute`]. The binder adapter, the CLI, the conformance suite and the
//! benchmarks all go through it.

#[cfg(not(feature = "aosp"))]
pub mod bench;
pub mod binder;
pub mod cli;
pub mod driver;
pub mod executor;
pub mod fuzzing;
pub mod limits;
pub mod mobilenet;
pub mod plan;
pub mod probe;
pub mod tensor;
pub mod vector;
pub mod workers;

pub use driver::{Driver, ExecutionResult, PreparedModel, ValidatedModel, ValidatedRequest};
pub use nnhal_hal as hal;
pub use nnhal_kernels as kernels;
