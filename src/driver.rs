//! Driver and prepared model: the in-process form of `IDevice` and `IPreparedModel`
//! (types.hal 1.0 semantics; docs/hal-contract.md).
//!
//! `prepare_model` validates, reports valid-but-unsupported models as GENERAL_FAILURE, decodes
//! every constant once and compiles the model ([`crate::plan`]: kernels chosen and weights
//! packed, arena planned). `execute` validates and binds the request, copies inputs out of
//! shared memory, runs the plan on the driver's kernel pool and copies outputs back. A
//! prepared model holds no per-execution state outside its arena pool, so any number of
//! executions may run on it at once.
//!
//! Small models are dominated by fixed costs, not arithmetic, so two of those are avoided:
//! request-pool mappings are kept between executions in the prepared model's [`PoolCache`],
//! and a plan whose estimated work is tiny runs on the calling thread instead of being handed
//! to the kernel pool (see [`INLINE_MAX_WORK`]).

use crate::cache::{self, CacheImage, TOKEN_BYTES};
use crate::plan::{Plan, StoredPack};
use crate::tensor::{Data, Tensor};
use nnhal_hal::memory::PoolCache;
use nnhal_hal::validate::{self, BoundRequest, ValidModel};
use nnhal_hal::{
    Capabilities, HalError, HalResult, Model, OperandLifeTime, OperationType, PerformanceInfo,
    Request,
};
use nnhal_kernels::parallel;
use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::plan::{
    DEFAULT_LOOP_TIMEOUT, EXECUTION_MEMORY_BUDGET, INLINE_MAX_WORK, MAXIMUM_LOOP_TIMEOUT,
};

/// The device: owns the kernel thread pool and the micro-kernel table its plans use.
pub struct Driver {
    pool: Arc<parallel::Pool>,
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
    /// The model as its compilation cache keeps it ([`cache::cacheable_model`]), kept when
    /// the preparation is to write a cache and the model can be cached.
    cache_model: Option<cache::KeptModel>,
    /// Restored from a cache: by operand, the constants whose values the cache left out
    /// (zeros in `model`; packed entries replace them), and what the cache stored for each
    /// operation.
    restored: Option<(Vec<bool>, Vec<StoredPack>)>,
    /// Bytes of constants a compilation cache left out beyond the zeros standing in for
    /// them, so that [`ValidatedModel::constant_bytes`] counts every declared constant.
    values_left_out: u64,
}

impl ValidatedModel {
    /// Whether this driver runs each operation (getSupportedOperations).
    pub fn supported(&self) -> &[bool] {
        &self.valid.supported
    }

    /// The constant bytes the model declares (`operandValues` and its pools), as the
    /// service's model-size limit counts them.
    pub fn constant_bytes(&self) -> u64 {
        self.model
            .pools
            .iter()
            .map(|p| p.size())
            .fold(self.model.operand_values.len() as u64, u64::saturating_add)
            .saturating_add(self.values_left_out)
    }

    /// Operands plus operations of the main graph, as the service's limit counts them.
    pub fn operand_count(&self) -> usize {
        self.valid.operands.len() + self.valid.operations.len()
    }

    /// About how much memory keeping this model prepared takes, from its declared sizes alone
    /// (nothing is allocated to find out): its constants, decoded, and its temporaries whose
    /// size is known before execution. Model inputs and outputs live in the client's pools.
    pub fn memory_estimate(&self) -> u64 {
        let mut total = 0u64;
        for (i, o) in self.valid.operands.iter().enumerate() {
            let kept = matches!(
                o.lifetime,
                OperandLifeTime::ConstantCopy
                    | OperandLifeTime::ConstantReference
                    | OperandLifeTime::TemporaryVariable
            );
            let Some(element) = o.ty.element_size().filter(|_| kept) else {
                continue;
            };
            let dims = self.valid.static_dims[i].as_deref().unwrap_or(&o.dims);
            let bytes = dims.iter().fold(element as u64, |n, &d| {
                n.saturating_mul(u64::from(d.max(1)))
            });
            total = total.saturating_add(bytes);
        }
        total
    }
}

/// A request that passed validation, with its pools mapped: the synchronous half of an
/// execution, run by [`PreparedModel::execute_bound`].
pub struct ValidatedRequest(BoundRequest);

/// A validated, compiled model; executions may run concurrently.
pub struct PreparedModel {
    plan: Plan,
    /// Request-pool mappings kept between executions; unmapped when the model is dropped.
    pool_cache: PoolCache,
    pool: Arc<parallel::Pool>,
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
        let pool = parallel::Pool::new(threads, "nnhal-kernel")
            .map_err(|e| HalError::GeneralFailure(format!("cannot start the kernel pool: {e}")))?;
        Ok(Driver {
            pool: Arc::new(pool),
            kernels,
        })
    }

    /// The micro-kernel table this driver's plans are compiled for.
    pub fn kernels(&self) -> &'static Ukernels {
        self.kernels
    }

    /// A driver on the same worker pool as this one that runs `kernels` instead: two plans of
    /// one model, one per driver, can then be timed alternately on the same threads (an A/B
    /// comparison of kernel choices in the same seconds).
    pub fn sibling(&self, kernels: &'static Ukernels) -> Driver {
        Driver {
            pool: Arc::clone(&self.pool),
            kernels,
        }
    }

    /// The instruction-set level of the micro-kernels this driver runs.
    pub fn isa(&self) -> Isa {
        self.kernels.isa
    }

    /// Number of kernel worker threads.
    pub fn threads(&self) -> usize {
        self.pool.threads()
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
        let valid = validate::validate_model(model)?;
        Ok(match run_image(model) {
            Some((_, image)) => image.supported,
            None => valid.supported,
        })
    }

    /// Validates `model` (the synchronous part of prepareModel).
    pub fn validate_model(&self, model: Model) -> HalResult<ValidatedModel> {
        self.validate(model, false)
    }

    /// Like [`Driver::validate_model`], for a preparation that writes a compilation cache:
    /// also keeps the model's cache encoding (nothing when the model cannot be cached, see
    /// [`cache`]).
    pub fn validate_model_for_cache(&self, model: Model) -> HalResult<ValidatedModel> {
        self.validate(model, true)
    }

    fn validate(&self, model: Model, for_cache: bool) -> HalResult<ValidatedModel> {
        let valid = validate::validate_model(&model)?;
        let image = run_image(&model);
        let cache_model = if for_cache {
            let started = cache::Phase::start();
            // The values are shared with the model planned when it is this one (not an
            // image of it), so the cache copies only what it writes, once planned.
            let share = image.is_none();
            let kept = cache::cacheable_model(&model, |i| valid.constant_bytes(&model, i), share)?;
            log::debug!(
                target: "nnhal::cache",
                "write: model kept for the cache {}",
                started.took()
            );
            kept
        } else {
            None
        };
        let (model, valid) = match image {
            Some(image) => image,
            None => (model, valid),
        };
        Ok(ValidatedModel {
            model,
            valid,
            cache_model,
            restored: None,
            values_left_out: 0,
        })
    }

    /// Plans a model validated by [`Driver::validate_model_for_cache`] and builds the cache
    /// files for `token`: `None` when the model cannot be cached.
    pub fn prepare_validated_for_cache(
        &self,
        mut validated: ValidatedModel,
        token: &[u8; TOKEN_BYTES],
    ) -> HalResult<(Arc<PreparedModel>, Option<CacheImage>)> {
        let cacheable = validated.cache_model.take();
        let (prepared, model) = self.prepare_keeping(validated)?;
        let image = cacheable.map(|kept| {
            let (packed, omit) = cache::encode_packed(prepared.plan());
            cache::seal_image(
                self.kernels,
                token,
                &kept.encode(&model.operand_values, &omit),
                &packed,
            )
        });
        Ok((prepared, image))
    }

    /// Plans a model validated by [`Driver::validate_model_for_cache`] and writes its cache
    /// files for `token` into `model_file` and `data_file` ([`cache::write_files`]: the
    /// files [`Driver::prepare_validated_for_cache`] builds, written without building the
    /// data file in memory). A cache that cannot be written only leaves the files empty.
    pub fn prepare_validated_to_files(
        &self,
        mut validated: ValidatedModel,
        token: &[u8; TOKEN_BYTES],
        model_file: BorrowedFd<'_>,
        data_file: BorrowedFd<'_>,
    ) -> HalResult<Arc<PreparedModel>> {
        let cacheable = validated.cache_model.take();
        let started = cache::Phase::start();
        let (prepared, model) = self.prepare_keeping(validated)?;
        log::debug!(target: "nnhal::cache", "write: planned {}", started.took());
        cache::write_files(
            self.kernels,
            token,
            cacheable
                .as_ref()
                .map(|kept| (kept, model.operand_values.as_slice())),
            prepared.plan(),
            model_file,
            data_file,
        );
        Ok(prepared)
    }

    /// Validates the model a compilation cache holds (the synchronous part of
    /// prepareModelFromCache): the model file's checksum and header first (a cache written by
    /// another build, kernel level or tile geometry, or for another token, is a miss), then
    /// the model through the normal validator, then the data file, read once into the
    /// buffers its packed constants are restored in and its checksum compared before any of
    /// them is kept. Every failure is GENERAL_FAILURE: a cache that cannot be used is a miss,
    /// whatever is wrong with it.
    pub fn validate_cached(
        &self,
        model_file: &[u8],
        data_file: cache::DataFile<'_>,
        token: &[u8; TOKEN_BYTES],
    ) -> HalResult<ValidatedModel> {
        let started = Instant::now();
        let encoded = cache::open_model(model_file, self.kernels, token)?;
        let (model, omitted) = cache::decode_model(encoded)?;
        let decoded = started.elapsed();
        let lengths = omitted
            .iter()
            .zip(&model.operands)
            .filter(|(&o, _)| o)
            .map(|(_, o)| u64::from(o.location.length));
        let values_left_out = lengths
            .clone()
            .sum::<u64>()
            .saturating_sub(lengths.max().unwrap_or(0));
        let mut validated = self.validate_model(model).map_err(|e| {
            HalError::GeneralFailure(format!("compilation cache holds an invalid model: {e}"))
        })?;
        let checked = started.elapsed();
        let reading = cache::Phase::start();
        // On a pool of several threads, the restore runs as one of its teams, so the large
        // reads and the faulting in of the buffers are split over its threads.
        let operations = validated.valid.operations.len();
        let kernels = self.kernels;
        let restore = || cache::restore_packed(data_file, model_file, operations, kernels, token);
        let packs = if self.pool.threads() > 1 {
            self.pool.run(restore)
        } else {
            restore()
        }?;
        log::debug!(
            target: "nnhal::cache",
            "restore: model file checked and decoded {:.3} ms, model validated {:.3} ms, \
             data file read {}",
            decoded.as_secs_f64() * 1e3,
            (checked - decoded).as_secs_f64() * 1e3,
            reading.took(),
        );
        validated.restored = Some((omitted, packs));
        validated.values_left_out = values_left_out;
        Ok(validated)
    }

    /// Validates and plans `model`, and builds its compilation-cache files for `token`
    /// (`None`: the model cannot be cached).
    pub fn prepare_model_for_cache(
        &self,
        model: Model,
        token: &[u8; TOKEN_BYTES],
    ) -> HalResult<(Arc<PreparedModel>, Option<CacheImage>)> {
        self.prepare_validated_for_cache(self.validate_model_for_cache(model)?, token)
    }

    /// `prepareModel` with compilation-cache files, in process: validates and plans
    /// `model`, then writes its cache into `model_files` and `data_files` when there are as
    /// many as the driver asks for ([`cache::MODEL_CACHE_FILES`],
    /// [`cache::DATA_CACHE_FILES`]). As over binder, a cache that cannot be written (a
    /// read-only file, the wrong number of files, a model that cannot be cached) leaves the
    /// files empty and the preparation succeeds; a token that is not 32 bytes is
    /// INVALID_ARGUMENT.
    pub fn prepare_model_to_files(
        &self,
        model: Model,
        model_files: &[BorrowedFd<'_>],
        data_files: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Arc<PreparedModel>> {
        let token = cache::token(token)?;
        if model_files.len() != cache::MODEL_CACHE_FILES
            || data_files.len() != cache::DATA_CACHE_FILES
        {
            model_files
                .iter()
                .chain(data_files)
                .for_each(|&fd| cache::clear_file(fd));
            return self.prepare_model(model);
        }
        self.prepare_validated_to_files(
            self.validate_model_for_cache(model)?,
            &token,
            model_files[0],
            data_files[0],
        )
    }

    /// `prepareModelFromCache` in process: reads the files with `pread` and restores the
    /// prepared model; any problem with them is GENERAL_FAILURE.
    pub fn prepare_model_from_files(
        &self,
        model_files: &[BorrowedFd<'_>],
        data_files: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Arc<PreparedModel>> {
        let token = cache::token(token)?;
        let started = Instant::now();
        let model_file = cache::read_model_file(model_files, data_files)?;
        let read = started.elapsed();
        let validated =
            self.validate_cached(&model_file, cache::DataFile::Fd(data_files[0]), &token)?;
        let restored = started.elapsed();
        let prepared = self.prepare_validated(validated);
        log::debug!(
            target: "nnhal::cache",
            "restore: model file read {:.3} ms, planned {:.3} ms, {:.3} ms in all",
            read.as_secs_f64() * 1e3,
            (started.elapsed() - restored).as_secs_f64() * 1e3,
            started.elapsed().as_secs_f64() * 1e3,
        );
        prepared
    }

    /// Restores a prepared model from its compilation-cache files.
    pub fn prepare_from_cache(
        &self,
        model_file: &[u8],
        data_file: &[u8],
        token: &[u8; TOKEN_BYTES],
    ) -> HalResult<Arc<PreparedModel>> {
        self.prepare_validated(self.validate_cached(
            model_file,
            cache::DataFile::Bytes(data_file),
            token,
        )?)
    }

    /// Validates and plans `model`.
    pub fn prepare_model(&self, model: Model) -> HalResult<Arc<PreparedModel>> {
        self.prepare_validated(self.validate_model(model)?)
    }

    /// Plans a validated model: decodes every constant once and keeps the shapes and
    /// parameters validation could resolve, so executions only bind data.
    pub fn prepare_validated(&self, validated: ValidatedModel) -> HalResult<Arc<PreparedModel>> {
        self.prepare_keeping(validated)
            .map(|(prepared, _)| prepared)
    }

    /// [`Driver::prepare_validated`], handing back the model planned (its values no longer
    /// needed by the plan, but by a cache being written).
    fn prepare_keeping(&self, validated: ValidatedModel) -> HalResult<(Arc<PreparedModel>, Model)> {
        let ValidatedModel {
            model,
            mut valid,
            restored,
            ..
        } = validated;
        if let Some(k) = valid.supported.iter().position(|s| !s) {
            return Err(HalError::GeneralFailure(format!(
                "operation {k} ({}) is not supported by this driver",
                valid.operations[k].ty
            )));
        }
        // Every referenced subgraph gets a plan of its own (validation has checked that the
        // ones IF/WHILE name run, and that their references form no cycle).
        let subgraphs = std::mem::take(&mut valid.referenced)
            .into_iter()
            .map(|mut sub| {
                let constants = decode_constants(&model, &sub, &[])?;
                sub.pools.clear();
                Plan::compile_subgraph(sub, constants, self.kernels)
            })
            .collect::<HalResult<Vec<_>>>()?;
        let (omitted, stored) = restored.unzip();
        let constants = decode_constants(&model, &valid, omitted.as_deref().unwrap_or(&[]))?;
        // Constants now live in `constants`; the model's mappings are no longer needed.
        valid.pools.clear();
        let mut plan =
            Plan::compile_restored(valid, constants, self.kernels, self.pool.threads(), stored)?;
        plan.set_subgraphs(subgraphs);
        let prepared = Arc::new(PreparedModel {
            plan,
            pool_cache: PoolCache::default(),
            pool: self.pool.clone(),
        });
        Ok((prepared, model))
    }
}

/// Every constant of `valid` (the main graph or a referenced subgraph of `model`), decoded,
/// but those marked in `omitted` (values a compilation cache left out).
fn decode_constants(
    model: &Model,
    valid: &ValidModel,
    omitted: &[bool],
) -> HalResult<Vec<Option<Arc<Tensor>>>> {
    let mut constants = vec![None; valid.operands.len()];
    for (i, o) in valid.operands.iter().enumerate() {
        if matches!(
            o.lifetime,
            OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference
        ) && !omitted.get(i).copied().unwrap_or(false)
        {
            let bytes = valid.constant_bytes(model, i)?;
            let data = Data::decode(o.ty, &bytes)?;
            constants[i] = Some(Arc::new(Tensor {
                dims: o.dims.clone(),
                data,
            }));
        }
    }
    Ok(constants)
}

/// The model a valid model runs as, validated in that form: float16 operands as float32
/// ([`validate::float16_as_float32`]), then TENSOR_QUANT8_ASYMM_SIGNED operands as their
/// unsigned image (an exact shift by 128 into the uint8 kernels). `None`: the model runs as
/// given.
fn run_image(model: &Model) -> Option<(Model, validate::ValidModel)> {
    let (model, half) = match validate::float16_as_float32(model) {
        Some((image, half, in_subgraphs)) => {
            (std::borrow::Cow::Owned(image), Some((half, in_subgraphs)))
        }
        None => (std::borrow::Cow::Borrowed(model), None),
    };
    let (image, mut valid) = match validate::signed_as_unsigned(&model) {
        Some((image, signed)) => {
            let mut valid = validate::validate_model(&image).ok()?;
            valid.signed = signed;
            (image, valid)
        }
        None if half.is_some() => {
            let valid = validate::validate_model(&model).ok()?;
            (model.into_owned(), valid)
        }
        None => return None,
    };
    if let Some((half, in_subgraphs)) = half {
        // LSH_PROJECTION hashes the bytes of its input's elements: a float16 input hashes 2
        // bytes an element, which its float32 image cannot reproduce.
        let hashes_halves = |v: &validate::ValidModel, half: &[bool]| -> Vec<usize> {
            v.operations
                .iter()
                .enumerate()
                .filter(|(_, op)| {
                    op.ty == OperationType::LshProjection
                        && op.inputs.get(1).is_some_and(|&i| half[i])
                })
                .map(|(k, _)| k)
                .collect()
        };
        for k in hashes_halves(&valid, &half) {
            valid.supported[k] = false;
        }
        let mut inner = false;
        for (sub, half) in valid.referenced.iter_mut().zip(in_subgraphs) {
            inner |= !hashes_halves(sub, &half).is_empty();
            sub.half = half;
        }
        if inner {
            // Which IF or WHILE reaches that subgraph is not worth tracing for so rare a
            // model: none of them runs.
            for (k, op) in valid.operations.iter().enumerate() {
                if matches!(op.ty, OperationType::If | OperationType::While) {
                    valid.supported[k] = false;
                }
            }
        }
        valid.half = half;
    }
    Some((image, valid))
}

impl PreparedModel {
    /// The validated model this was prepared from.
    pub fn model(&self) -> &ValidModel {
        self.plan.model()
    }

    /// Validates `request` and maps its pools (the synchronous part of execute).
    pub fn validate_request(&self, request: &Request) -> HalResult<ValidatedRequest> {
        validate::validate_request(self.plan.model(), request, Some(&self.pool_cache))
            .map(ValidatedRequest)
    }

    /// Validates `request` for a fenced execution (AIDL `IPreparedModel::executeFenced`): its
    /// result travels through a sync fence with no output shapes, so every output's
    /// dimensions must be known from the model or the request; unspecified ones are
    /// INVALID_ARGUMENT, as the platform's validator rules when it disallows them.
    pub fn validate_fenced_request(&self, request: &Request) -> HalResult<ValidatedRequest> {
        let bound = self.validate_request(request)?;
        let model = self.plan.model();
        for (p, out) in bound.0.outputs.iter().enumerate() {
            let tensor = model.operands[model.outputs[p]].ty.is_tensor();
            if tensor && (out.dims.is_empty() || out.dims.contains(&0)) {
                return Err(HalError::InvalidArgument(format!(
                    "output {p}: dimensions {:?} are not fully specified, which a fenced \
                     execution does not allow",
                    out.dims
                )));
            }
        }
        Ok(bound)
    }

    /// Validates `request`, runs the model, writes the outputs into the request's pools.
    pub fn execute(&self, request: &Request) -> HalResult<ExecutionResult> {
        self.execute_bound(&self.validate_request(request)?)
    }

    /// Runs a request validated by [`PreparedModel::validate_request`], WHILE loops under
    /// the default timeout ([`DEFAULT_LOOP_TIMEOUT`]).
    pub fn execute_bound(&self, request: &ValidatedRequest) -> HalResult<ExecutionResult> {
        self.run(&request.0, None, DEFAULT_LOOP_TIMEOUT)
    }

    /// Like [`PreparedModel::execute_bound`], with the client's `loopTimeoutDurationNs`: a
    /// WHILE loop running longer fails the execution with MISSED_DEADLINE_TRANSIENT.
    pub fn execute_bound_with_loop_timeout(
        &self,
        request: &ValidatedRequest,
        loop_timeout: Duration,
    ) -> HalResult<ExecutionResult> {
        self.run(&request.0, None, loop_timeout.min(MAXIMUM_LOOP_TIMEOUT))
    }

    /// Like [`PreparedModel::execute`], and also measures the wall time of every operation
    /// (in model order), for `nnhal bench --profile`.
    pub fn execute_profiled(
        &self,
        request: &Request,
    ) -> HalResult<(ExecutionResult, Vec<Duration>)> {
        let bound = self.validate_request(request)?;
        let mut times = Vec::with_capacity(self.plan.model().operations.len());
        let result = self.run(&bound.0, Some(&mut times), DEFAULT_LOOP_TIMEOUT)?;
        Ok((result, times))
    }

    fn run(
        &self,
        bound: &BoundRequest,
        profile: Option<&mut Vec<Duration>>,
        loop_timeout: Duration,
    ) -> HalResult<ExecutionResult> {
        let output_shapes = if self.runs_inline() {
            self.plan
                .run_with_loop_timeout(bound, profile, loop_timeout)
        } else {
            self.pool.run(|| {
                self.plan
                    .run_with_loop_timeout(bound, profile, loop_timeout)
            })
        }?;
        Ok(ExecutionResult { output_shapes })
    }

    /// Whether executions of this model run on the calling thread: small static models (see
    /// [`INLINE_MAX_WORK`]), and every model on a one-thread driver, where handing the work to
    /// the pool's single worker and waking the caller afterwards would only add two thread
    /// wake-ups per execution. Off the pool every kernel runs sequentially.
    pub fn runs_inline(&self) -> bool {
        self.plan.runs_inline() || self.pool.threads() <= 1
    }

    /// The compiled plan (arena layout, chosen kernels).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The request-pool mappings this model keeps between executions.
    pub fn pool_cache(&self) -> &PoolCache {
        &self.pool_cache
    }
}
