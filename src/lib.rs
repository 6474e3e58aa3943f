//! nnhal: an Android Neural Networks HAL driver for the NNAPI 1.0 operation set.
//!
//! The in-process surface mirrors `IDevice`/`IPreparedModel` without binder:
//! [`Driver::capabilities`], [`Driver::supported_operations`], [`Driver::prepare_model`] and
//! [`PreparedModel::execute`]. The binder adapter, the CLI, the conformance suite and the
//! benchmarks all go through it.

//!
//! Cargo features pick the build: `host` (default) for Linux hosts, with the rsbinder RPC
//! transport and the host-only modules below; `aosp` alone (`--no-default-features --features
//! aosp`, as Android.bp builds it) for the device library, which carries the driver and the
//! binder service and nothing else.

#[cfg(all(feature = "host", feature = "aosp"))]
compile_error!("`aosp` is the device build: combine it with --no-default-features, not `host`");
#[cfg(not(any(feature = "host", feature = "aosp")))]
compile_error!("pick a build: feature `host` (the default) or `aosp`");

pub mod binder;
pub mod cli;
pub mod driver;
pub mod executor;
pub mod limits;
pub mod plan;
pub mod tensor;
pub mod workers;

// Host only: what the CLIs, the conformance suite and the benchmarks need, never the device.
#[cfg(feature = "host")]
pub mod bench;
#[cfg(feature = "host")]
pub mod fuzzing;
#[cfg(feature = "host")]
pub mod mobilenet;
// Model files (ONNX, through nnhal-onnx) and their .npy inputs and outputs.
#[cfg(feature = "host")]
pub mod modelfile;
#[cfg(feature = "host")]
pub mod probe;
#[cfg(feature = "host")]
pub mod vector;

pub use driver::{Driver, ExecutionResult, PreparedModel, ValidatedModel, ValidatedRequest};
pub use nnhal_hal as hal;
pub use nnhal_kernels as kernels;
