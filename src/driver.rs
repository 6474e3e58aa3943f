//! Driver and prepared model: the in-process form of `IDevice` and `IPreparedModel`
//! (types.hal 1.0 semantics; hal-surface §3, §7).
//!
//! `prepare_model` validates, reports valid-but-unsupported models as GENERAL_FAILURE, and
//! decodes every constant once. `execute` validates and binds the request, copies inputs out of
//! shared memory, runs the operations in order on the driver's kernel pool, frees temporaries
//! after their last reader, and copies outputs back. A prepared model holds no per-execution
//! state, so any number of executions may run on it at once.
//!
//! Small models are dominated by fixed costs, not arithmetic, so two of those are avoided:
//! request-pool mappings are kept between executions in the prepared model's [`PoolCache`],
//! and a plan whose estimated work is tiny runs on the calling thread instead of being handed
//! to the kernel pool (see [`INLINE_MAX_WORK`]).

use crate::executor::{self, OpInputs};
use crate::tensor::{Data, Tensor};
use nnhal_hal::memory::PoolCache;
use nnhal_hal::shape::{self, Arg, InferError, Inferred, Params};
use nnhal_hal::validate::{self, BoundRequest, ValidModel};
use nnhal_hal::{
    Capabilities, HalError, HalResult, Model, OperandLifeTime, OperandType, PerformanceInfo,
    Request,
};
use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Upper bound on the bytes of operand values one execution may hold at once. A model or
/// request that needs more fails with GENERAL_FAILURE instead of exhausting the service.
pub const EXECUTION_MEMORY_BUDGET: u64 = 4 << 30;

/// Plans whose estimated work (`estimated_work`: about one unit per multiply-add or element
/// visited) is at most this run on the thread that asked for the execution. Handing an
/// execution to the kernel pool means waking a worker and sleeping until it is done, some
/// 10–25 µs; below this size the whole plan takes about that long on one core, so the pool
/// cannot win the hand-off back. Kernels called off the pool run sequentially.
pub const INLINE_MAX_WORK: u64 = 1 << 15;

/// The device: owns the kernel thread pool and the micro-kernel table its plans use.
pub struct Driver {
    pool: Arc<rayon::ThreadPool>,
    kernels: &'static Ukernels,
}

/// What one execution reports besides the bytes written to the output pools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecutionResult {
    /// Dimensions of each output, in `Model::output_indexes` order.
    pub output_shapes: Vec<Vec<u32>>,
}

/// A model that passed validation: the synchronous half of prepareModel, handed to
/// [`Driver::prepare_validated`] so the planning half does not validate again.
pub struct ValidatedModel {
    model: Model,
    valid: ValidModel,
}

impl ValidatedModel {
    /// Whether this driver runs each operation (getSupportedOperations).
    pub fn supported(&self) -> &[bool] {
        &self.valid.supported
    }
}

/// A request that passed validation, with its pools mapped: the synchronous half of an
/// execution, run by [`PreparedModel::execute_bound`].
pub struct ValidatedRequest(BoundRequest);

/// A validated, planned model; executions may run concurrently.
pub struct PreparedModel {
    model: ValidModel,
    /// Decoded constant values, by operand index.
    constants: Vec<Option<Arc<Tensor>>>,
    /// Per operation: output shapes and parameters when prepare could resolve them (every
    /// input shape and scalar parameter static); `None` means infer at execution.
    plan: Vec<Option<Inferred>>,
    /// Whether executions run on the calling thread (a static plan of at most
    /// [`INLINE_MAX_WORK`]) rather than on `pool`.
    inline: bool,
    /// Request-pool mappings kept between executions; unmapped when the model is dropped.
    pool_cache: PoolCache,
    pool: Arc<rayon::ThreadPool>,
}

impl Driver {
    /// A driver whose kernels run on `threads` worker threads (0 = one per core), with the
    /// process-wide micro-kernel table ([`ukernels::best`]: the best level the processor
    /// supports, or the one `NNHAL_ISA` names).
    pub fn new(threads: usize) -> HalResult<Driver> {
        Driver::with_kernels(threads, ukernels::best())
    }

    /// A driver that runs `kernels` (any supported level, see [`ukernels::table`]).
    pub fn with_kernels(threads: usize, kernels: &'static Ukernels) -> HalResult<Driver> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("nnhal-kernel-{i}"))
            .build()
            .map_err(|e| HalError::GeneralFailure(format!("cannot start the kernel pool: {e}")))?;
        Ok(Driver {
            pool: Arc::new(pool),
            kernels,
        })
    }

    /// The instruction-set level of the micro-kernels this driver runs.
    pub fn isa(&self) -> Isa {
        self.kernels.isa
    }

    /// Number of kernel worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    pub fn capabilities(&self) -> Capabilities {
        // Relative to the platform's own CPU path: same class of device, so 1.0 on every axis.
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
    pub fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>> {
        Ok(validate::validate_model(model)?.supported)
    }

    /// Validates `model` (the synchronous part of prepareModel).
    pub fn validate_model(&self, model: Model) -> HalResult<ValidatedModel> {
        let valid = validate::validate_model(&model)?;
        Ok(ValidatedModel { model, valid })
    }

    /// Validates and plans `model`.
    pub fn prepare_model(&self, model: Model) -> HalResult<Arc<PreparedModel>> {
        self.prepare_validated(self.validate_model(model)?)
    }

    /// Plans a validated model: decodes every constant once and keeps the shapes and
    /// parameters validation could resolve, so executions only bind data.
    pub fn prepare_validated(&self, validated: ValidatedModel) -> HalResult<Arc<PreparedModel>> {
        let ValidatedModel { model, mut valid } = validated;
        if let Some(k) = valid.supported.iter().position(|s| !s) {
            return Err(HalError::GeneralFailure(format!(
                "operation {k} ({}) is not supported by this driver",
                valid.operations[k].ty
            )));
        }
        let mut constants = vec![None; valid.operands.len()];
        for (i, o) in valid.operands.iter().enumerate() {
            if matches!(
                o.lifetime,
                OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference
            ) {
                let bytes = valid.constant_bytes(&model, i)?;
                let data = Data::decode(o.ty, &bytes)?;
                constants[i] = Some(Arc::new(Tensor {
                    dims: o.dims.clone(),
                    data,
                }));
            }
        }
        let plan = valid
            .operations
            .iter()
            .zip(&valid.static_params)
            .map(|(op, params)| {
                let params = params.clone()?;
                let outputs = op
                    .outputs
                    .iter()
                    .map(|&o| valid.static_dims[o].clone())
                    .collect::<Option<_>>()?;
                Some(Inferred { outputs, params })
            })
            .collect::<Vec<_>>();
        let inline = estimated_work(&valid, &plan).is_some_and(|w| w <= INLINE_MAX_WORK);
        // Constants now live in `constants`; the model's mappings are no longer needed.
        valid.pools.clear();
        Ok(Arc::new(PreparedModel {
            model: valid,
            constants,
            plan,
            inline,
            pool_cache: PoolCache::default(),
            pool: self.pool.clone(),
        }))
    }
}

impl PreparedModel {
    /// Validates `request` and maps its pools (the synchronous part of execute).
    pub fn validate_request(&self, request: &Request) -> HalResult<ValidatedRequest> {
        validate::validate_request(&self.model, request, Some(&self.pool_cache))
            .map(ValidatedRequest)
    }

    /// Validates `request`, runs the model, writes the outputs into the request's pools.
    pub fn execute(&self, request: &Request) -> HalResult<ExecutionResult> {
        self.execute_bound(&self.validate_request(request)?)
    }

    /// Runs a request validated by [`PreparedModel::validate_request`].
    pub fn execute_bound(&self, request: &ValidatedRequest) -> HalResult<ExecutionResult> {
        if self.inline {
            self.run(&request.0, None)
        } else {
            self.pool.install(|| self.run(&request.0, None))
        }
    }

    /// Like [`PreparedModel::execute`], and also measures the wall time of every operation
    /// (in model order), for `nnhal bench --profile`.
    pub fn execute_profiled(
        &self,
        request: &Request,
    ) -> HalResult<(ExecutionResult, Vec<Duration>)> {
        let bound = self.validate_request(request)?;
        let mut times = Vec::with_capacity(self.model.operations.len());
        let result = if self.inline {
            self.run(&bound.0, Some(&mut times))
        } else {
            self.pool.install(|| self.run(&bound.0, Some(&mut times)))
        }?;
        Ok((result, times))
    }

    /// Whether executions of this model run on the calling thread (see [`INLINE_MAX_WORK`]).
    pub fn runs_inline(&self) -> bool {
        self.inline
    }

    /// The request-pool mappings this model keeps between executions.
    pub fn pool_cache(&self) -> &PoolCache {
        &self.pool_cache
    }

    /// Output shapes and parameters of operation `k` from the values bound at execution
    /// (runtime dimensions or scalar parameters); prepare resolved everything static.
    fn infer_at_execution(&self, k: usize, slots: &[Option<Arc<Tensor>>]) -> HalResult<Inferred> {
        let m = &self.model;
        let op = &m.operations[k];
        // Parameter bytes for inference: scalars and small integer tensors (shapes).
        let param_bytes: Vec<Option<Vec<u8>>> = op
            .inputs
            .iter()
            .map(|&i| {
                let o = &m.operands[i];
                let small = !o.ty.is_tensor() || (o.ty == OperandType::TensorInt32);
                slots[i]
                    .as_ref()
                    .filter(|t| small && t.data.len() <= 256)
                    .map(|t| t.data.to_le_bytes())
            })
            .collect();
        let args: Vec<Option<Arg>> = op
            .inputs
            .iter()
            .zip(&param_bytes)
            .map(|(&i, bytes)| {
                let o = &m.operands[i];
                slots[i].as_ref().map(|t| Arg {
                    ty: o.ty,
                    dims: &t.dims,
                    scale: o.scale,
                    zero_point: o.zero_point,
                    value: bytes.as_deref(),
                })
            })
            .collect();
        let inferred = match shape::infer(op.ty, &args) {
            Ok(inferred) => inferred,
            Err(InferError::Invalid(why)) => {
                return Err(HalError::InvalidArgument(format!(
                    "operation {k} ({}): {why}",
                    op.ty
                )))
            }
            Err(InferError::Unknown) => {
                return Err(HalError::InvalidArgument(format!(
                    "operation {k} ({}): a dimension or parameter is still unknown at execution",
                    op.ty
                )))
            }
        };
        for (&o, dims) in op.outputs.iter().zip(&inferred.outputs) {
            validate::check_declared(k, op.ty, o, &m.operands[o].dims, dims)?;
        }
        Ok(inferred)
    }

    fn run(
        &self,
        bound: &BoundRequest,
        mut profile: Option<&mut Vec<Duration>>,
    ) -> HalResult<ExecutionResult> {
        let m = &self.model;
        let mut slots: Vec<Option<Arc<Tensor>>> = self.constants.clone();
        let mut held: u64 = 0;
        for (pos, arg) in bound.inputs.iter().enumerate() {
            let Some(arg) = arg else { continue };
            let info = &m.operands[m.inputs[pos]];
            let need = validate::byte_size(info.ty, &arg.dims)?;
            held = charge(held, need)?;
            let count = shape::element_count(&arg.dims).map_err(HalError::InvalidArgument)?;
            let data = Data::read(info.ty, &bound.pools[arg.pool], arg.offset, count as usize)?;
            slots[m.inputs[pos]] = Some(Arc::new(Tensor {
                dims: arg.dims.clone(),
                data,
            }));
        }

        let mut remaining: Vec<u32> = m.operands.iter().map(|o| o.consumers).collect();
        for (k, op) in m.operations.iter().enumerate() {
            let dynamic;
            let inferred = match &self.plan[k] {
                Some(inferred) => inferred,
                None => {
                    dynamic = self.infer_at_execution(k, &slots)?;
                    &dynamic
                }
            };
            let mut outs = Vec::with_capacity(op.outputs.len());
            for (&o, dims) in op.outputs.iter().zip(&inferred.outputs) {
                let info = &m.operands[o];
                let count = shape::element_count(dims).map_err(HalError::InvalidArgument)?;
                held = charge(held, count * info.ty.element_size().unwrap_or(1) as u64)?;
                outs.push(Tensor {
                    dims: dims.clone(),
                    data: Data::zeros(info.ty, count as usize)?,
                });
            }
            {
                let ins = OpInputs {
                    values: op.inputs.iter().map(|&i| slots[i].as_deref()).collect(),
                    infos: op.inputs.iter().map(|&i| &m.operands[i]).collect(),
                };
                let out_infos: Vec<_> = op.outputs.iter().map(|&o| &m.operands[o]).collect();
                let started = profile.is_some().then(Instant::now);
                executor::run(op, &inferred.params, &ins, &out_infos, &mut outs)?;
                if let (Some(times), Some(t0)) = (profile.as_deref_mut(), started) {
                    times.push(t0.elapsed());
                }
            }
            for (&o, t) in op.outputs.iter().zip(outs) {
                slots[o] = Some(Arc::new(t));
            }
            // Free temporaries after their last reader, as the reference executor does.
            for &i in &op.inputs {
                remaining[i] = remaining[i].saturating_sub(1);
                if remaining[i] == 0 && m.operands[i].lifetime == OperandLifeTime::TemporaryVariable
                {
                    if let Some(t) = slots[i].take() {
                        let bytes = t.data.len() as u64
                            * m.operands[i].ty.element_size().unwrap_or(1) as u64;
                        held = held.saturating_sub(bytes);
                    }
                }
            }
        }

        let mut output_shapes = Vec::with_capacity(m.outputs.len());
        for (pos, arg) in bound.outputs.iter().enumerate() {
            let t = slots[m.outputs[pos]].as_ref().ok_or_else(|| {
                HalError::GeneralFailure(format!("output {pos} was not computed"))
            })?;
            if t.dims != arg.dims {
                return Err(HalError::InvalidArgument(format!(
                    "output {pos}: computed dimensions {:?} differ from the requested {:?}",
                    t.dims, arg.dims
                )));
            }
            let need = t.data.byte_len();
            if need as u64 > arg.length {
                return Err(HalError::OutputInsufficientSize(format!(
                    "output {pos}: {} bytes given, {need} needed",
                    arg.length
                )));
            }
            t.data.write(&bound.pools[arg.pool], arg.offset)?;
            output_shapes.push(t.dims.clone());
        }
        Ok(ExecutionResult { output_shapes })
    }
}

/// A rough count of the arithmetic a fully static plan does: per operation, the elements it
/// reads and writes, with each output element weighted by the inner loop that produces it
/// (filter taps, dot-product length). `None` when a step is only known at execution.
fn estimated_work(model: &ValidModel, plan: &[Option<Inferred>]) -> Option<u64> {
    let elements = |dims: &[u32]| shape::element_count(dims).ok();
    let mut total: u64 = 0;
    for (op, step) in model.operations.iter().zip(plan) {
        let step = step.as_ref()?;
        let input_dims = |pos: usize| -> Option<&[u32]> {
            model.static_dims.get(*op.inputs.get(pos)?)?.as_deref()
        };
        let mut read: u64 = 0;
        for pos in 0..op.inputs.len() {
            read = read.saturating_add(elements(input_dims(pos)?)?);
        }
        let mut written: u64 = 0;
        for dims in &step.outputs {
            written = written.saturating_add(elements(dims)?);
        }
        // The inner loops behind each output element, where there are any.
        let taps = |n: u64| written.saturating_mul(n);
        let inner: u64 = match &step.params {
            // Filter [out_c, h, w, in_c]: each output sums h·w·in_c products.
            Params::Conv { .. } => taps(elements(input_dims(1)?.get(1..)?)?),
            Params::Depthwise { window, .. } | Params::Pool { window, .. } => {
                taps(u64::from(window.filter_h) * u64::from(window.filter_w))
            }
            Params::FullyConnected { input_size, .. } => taps(u64::from(*input_size)),
            Params::Lrn { radius, .. } => taps(u64::from(*radius).saturating_mul(2) + 1),
            // Recurrent cells multiply every weight once per batch row.
            Params::Lstm(p) => read.saturating_mul(u64::from(p.batch)),
            Params::Rnn { batch, .. } | Params::Svdf { batch, .. } => {
                read.saturating_mul(u64::from(*batch))
            }
            _ => 0,
        };
        total = total
            .saturating_add(read)
            .saturating_add(written)
            .saturating_add(inner);
    }
    Some(total)
}

fn charge(held: u64, bytes: u64) -> HalResult<u64> {
    let total = held.saturating_add(bytes);
    if total > EXECUTION_MEMORY_BUDGET {
        return Err(HalError::GeneralFailure(format!(
            "execution needs more than {EXECUTION_MEMORY_BUDGET} bytes of operand memory"
        )));
    }
    Ok(total)
}
