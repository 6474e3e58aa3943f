//! nnhal: an Android Neural Networks HAL driver for the NNAPI 1.0 operation set.
//!
//! The in-process surface mirrors `IDevice`/`IPreparedModel` without binder:
//! [`Driver::capabilities`], [`Driver::supported_operations`], [`Driver::prepare_model`] and
//! [`PreparedModel::execute`]. The binder adapter, the `nnhal` CLI (crate `nnhal-cli`), the
//! conformance suite (`nnhal-vts`) and the benchmarks all go through it.
//!
//! Cargo features pick the build: `host` (default) for Linux hosts, with the rsbinder RPC
//! transport and stderr logging; `aosp` alone (`--no-default-features --features aosp`, as
//! Android.bp builds it) for the device library, with libbinder_rs and logcat. Either way the
//! library is the driver, the binder service (on a host also its RPC client) and what the
//! three programs share in [`cli`]; the host tools (the `nnhal` CLI, the benchmark, the
//! built-in workloads, the model importers) live in the `nnhal-cli` crate (`cli/`), the
//! golden-vector loader in `nnhal-vts` (`vts_tests/`).

#[cfg(all(feature = "host", feature = "aosp"))]
compile_error!("`aosp` is the device build: combine it with --no-default-features, not `host`");
#[cfg(not(any(feature = "host", feature = "aosp")))]
compile_error!("pick a build: feature `host` (the default) or `aosp`");

pub mod binder;
pub mod cache;
pub mod cli;
pub mod driver;
pub mod executor;
pub mod limits;
pub mod plan;
pub mod tensor;
pub mod workers;

pub use driver::{Driver, ExecutionResult, PreparedModel, ValidatedModel, ValidatedRequest};
pub use nnhal_hal as hal;
pub use nnhal_kernels as kernels;
