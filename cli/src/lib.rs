//! nnhal-cli: the host tools of the nnhal driver, kept out of the driver crate (the device
//! library carries the driver and the binder service alone; `docs/design.md`).
//!
//! - the `nnhal` binary (`src/bin/nnhal.rs`): device queries, golden vectors and model files
//!   through the service or in-process, the benchmarks;
//! - [`bench`](mod@bench): the benchmark behind `nnhal bench`;
//! - [`mobilenet`]: the built-in float32 MobileNet v1 workload;
//! - [`modelfile`]: model files (ONNX through nnhal-onnx, CoreML through nnhal-coreml,
//!   TensorFlow Lite through nnhal-tflite) and
//!   their `.npy` inputs and outputs;
//! - [`fuzzing`]: what the fuzz targets under `fuzz/` run, so that the tests replay the same
//!   inputs.
//!
//! The golden-vector loader and the ADD probe these share with the conformance suite live in
//! `nnhal-vts` (`nnhal_vts::vector`, `nnhal_vts::probe`).

pub mod bench;
pub mod fuzzing;
pub mod mobilenet;
pub mod modelfile;
