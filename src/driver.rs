//! Driver and prepared model (IDevice / IPreparedModel semantics, types.hal 1.0).
//! PLACEHOLDER: the API is fixed, the bodies are being written.

use nnhal_hal::{Capabilities, HalError, HalResult, Model, PerformanceInfo, Request};
use std::sync::Arc;

/// The device: owns the kernel thread pool.
pub struct Driver {
    pool: Arc<rayon::ThreadPool>,
}

/// What one execution reports besides the bytes written to the output pools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecutionResult {
    /// Dimensions of each output, in `Model::output_indexes` order.
    pub output_shapes: Vec<Vec<u32>>,
}

/// A validated, planned model; executions may run concurrently.
pub struct PreparedModel {
    _pool: Arc<rayon::ThreadPool>,
}

impl Driver {
    /// A driver whose kernels run on `threads` worker threads (0 = one per core).
    pub fn new(threads: usize) -> HalResult<Driver> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("nnhal-kernel-{i}"))
            .build()
            .map_err(|e| HalError::GeneralFailure(format!("cannot start the kernel pool: {e}")))?;
        Ok(Driver {
            pool: Arc::new(pool),
        })
    }

    pub fn capabilities(&self) -> Capabilities {
        let p = PerformanceInfo {
            exec_time: 1.0,
            power_usage: 1.0,
        };
        Capabilities {
            float32_performance: p,
            quantized8_performance: p,
        }
    }

    /// Validates `model` (INVALID_ARGUMENT when malformed), then says per operation whether
    /// this driver can run it.
    pub fn supported_operations(&self, _model: &Model) -> HalResult<Vec<bool>> {
        Err(HalError::GeneralFailure("not yet implemented".into()))
    }

    /// Validates `model` only (the synchronous part of prepareModel).
    pub fn validate_model(&self, _model: &Model) -> HalResult<()> {
        Err(HalError::GeneralFailure("not yet implemented".into()))
    }

    /// Validates and plans `model`.
    pub fn prepare_model(&self, _model: Model) -> HalResult<Arc<PreparedModel>> {
        let _ = &self.pool;
        Err(HalError::GeneralFailure("not yet implemented".into()))
    }
}

impl PreparedModel {
    /// Validates `request` only (the synchronous part of execute).
    pub fn validate_request(&self, _request: &Request) -> HalResult<()> {
        Err(HalError::GeneralFailure("not yet implemented".into()))
    }

    /// Validates `request`, runs the model, writes the outputs into the request's pools.
    pub fn execute(&self, _request: &Request) -> HalResult<ExecutionResult> {
        Err(HalError::GeneralFailure("not yet implemented".into()))
    }
}
