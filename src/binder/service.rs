//! The binder objects of the service: `IDevice`, `IPreparedModel`, `IBurst` and
//! `IFencedExecutionCallback` of `android.hardware.neuralnetworks` (version 1), implemented on
//! top of the in-process [`Driver`] (`docs/hal-contract.md`).
//!
//! Each method converts its AIDL arguments to canonical types, calls the driver and converts
//! the answer back. Every error leaves through [`to_status`], the one place where a
//! [`HalError`] becomes a binder `ServiceSpecificException` carrying the `ErrorStatus` code,
//! and where it is logged.

use super::aidl::android::hardware::neuralnetworks::{
    BufferDesc::BufferDesc,
    BufferRole::BufferRole,
    Capabilities::Capabilities,
    DeviceBuffer::DeviceBuffer,
    DeviceType::DeviceType,
    ErrorStatus::ErrorStatus as AidlStatus,
    ExecutionPreference::ExecutionPreference,
    ExecutionResult::ExecutionResult as AidlResult,
    Extension::Extension,
    FencedExecutionResult::FencedExecutionResult,
    IBurst::{BnBurst, IBurst},
    IDevice::{self as idev, IDevice},
    IFencedExecutionCallback::{BnFencedExecutionCallback, IFencedExecutionCallback},
    IPreparedModel::{self as ipm, BnPreparedModel, IPreparedModel},
    IPreparedModelCallback::IPreparedModelCallback,
    IPreparedModelParcel::IPreparedModelParcel,
    Model::Model as AidlModel,
    NumberOfCacheFiles::NumberOfCacheFiles,
    Priority::Priority,
    Request::Request as AidlRequest,
    Timing::Timing,
};
use super::convert;
use super::ipc::{
    self, BinderResult, Interface, ParcelFileDescriptor, PrepareCallbackArg, Status, Strong,
};
use crate::cache;
use crate::driver::{Driver, PreparedModel, ValidatedModel};
use crate::limits::{Budget, Charge, Limits};
use crate::workers::Workers;
use nnhal_hal::{HalError, HalResult};
use nnhal_kernels::ukernels::Isa;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The version string `getVersionString` reports for a driver running `kernels`: the release,
/// then the micro-kernel level in parentheses (it decides the speed a client sees).
pub fn version_string(kernels: Isa) -> String {
    format!("nnhal-{} ({kernels} kernels)", env!("CARGO_PKG_VERSION"))
}

/// The single mapping from the driver's typed error to a binder status: a
/// `ServiceSpecificException` whose code is the `ErrorStatus` and whose message is the reason.
/// Logged here, at a level that reflects whose fault it is: malformed input is the client's
/// and the answer the contract asks for, so it is only of interest when debugging a client
/// (debug; conformance tests provoke thousands of them); anything else is the driver's or the
/// machine's (warn, with runs of the same warning summarised).
pub fn to_status(err: &HalError, call: &str) -> Status {
    match err {
        HalError::InvalidArgument(_)
        | HalError::OutputInsufficientSize(_)
        | HalError::OutputInsufficientShapes { .. } => {
            log::debug!("{call}: {err}")
        }
        HalError::GeneralFailure(_)
        | HalError::DeviceUnavailable(_)
        | HalError::MissedDeadline(_) => repeated_warnings().warn(format!("{call}: {err}")),
    }
    status_of(err)
}

/// A refusal the driver makes by design (a feature it does not offer, as the contract lets
/// it): the client asked for something optional, nothing is wrong, so it is logged at debug.
fn refuse(err: &HalError, call: &str) -> Status {
    log::debug!("{call}: {err}");
    status_of(err)
}

fn status_of(err: &HalError) -> Status {
    // The code already says the kind; the message is the reason alone.
    ipc::service_specific_error(err.status().raw(), err.message())
}

/// Collapses runs of one identical warning: a client that floods a full queue would otherwise
/// fill the log with hundreds of the same line. The first of a run is logged; the rest are
/// counted and reported in one line when a different warning comes, when the run has lasted
/// [`RepeatedWarnings::WINDOW`], or when the service stops ([`flush_repeated_warnings`]).
struct RepeatedWarnings {
    last: std::sync::Mutex<Option<(String, Instant, usize)>>,
}

impl RepeatedWarnings {
    const WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

    fn warn(&self, text: String) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((previous, since, repeats)) = last.as_mut() {
            if *previous == text && since.elapsed() < Self::WINDOW {
                *repeats += 1;
                return;
            }
        }
        Self::summarise(last.take());
        log::warn!("{text}");
        *last = Some((text, Instant::now(), 0));
    }

    fn flush(&self) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        Self::summarise(last.take());
    }

    fn summarise(run: Option<(String, Instant, usize)>) {
        if let Some((text, since, repeats)) = run.filter(|r| r.2 > 0) {
            log::warn!(
                "{text} (repeated {repeats} more times in {:.1} s)",
                since.elapsed().as_secs_f64()
            );
        }
    }
}

fn repeated_warnings() -> &'static RepeatedWarnings {
    static WARNINGS: RepeatedWarnings = RepeatedWarnings {
        last: std::sync::Mutex::new(None),
    };
    &WARNINGS
}

/// Logs the count of a warning run still pending (called when the service stops).
pub fn flush_repeated_warnings() {
    repeated_warnings().flush();
}

/// Runs driver code so that a panic in it becomes GENERAL_FAILURE for this one call instead
/// of taking down the thread serving the call (neither binder crate catches panics in
/// handlers). Soong compiles device code with `panic=abort`: there a panic still ends the
/// process, clients see the binder die, and init restarts the service.
fn guarded<T>(what: &str, f: impl FnOnce() -> HalResult<T>) -> HalResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let reason = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(HalError::GeneralFailure(format!(
            "the driver panicked in {what}: {reason}"
        )))
    })
}

/// A status the canonical error has no kind for (AIDL-only deadlines).
fn aidl_status(status: AidlStatus, message: String, call: &str) -> Status {
    log::debug!("{call}: {message}");
    ipc::service_specific_error(status.0, &message)
}

/// Tells a prepare callback how preparation ended. A client that died meanwhile makes the
/// call fail; that is logged and dropped, the service goes on. It is the client's doing, not
/// a fault of the service, so it is logged at info.
fn notify(
    callback: &Strong<dyn IPreparedModelCallback>,
    status: AidlStatus,
    model: Option<&Strong<dyn IPreparedModel>>,
) {
    if let Err(e) = ipc::notify_prepared(callback, status, model) {
        log::info!("prepareModel: notify({status:?}) could not reach the client: {e}");
    }
}

/// The callback of a prepare call; a null one is INVALID_ARGUMENT (nobody could be told).
fn require_callback<'a>(
    callback: PrepareCallbackArg<'a>,
    call: &str,
) -> BinderResult<&'a Strong<dyn IPreparedModelCallback>> {
    ipc::prepare_callback(callback).ok_or_else(|| {
        to_status(
            &HalError::InvalidArgument("the callback is null".into()),
            call,
        )
    })
}

/// The cache handles of one call, duplicated so that a preparer thread can use them after
/// the call has returned: `None` unless there are exactly as many of each kind as
/// `getNumberOfCacheFilesNeeded` asks for.
fn cache_handles(
    model_cache: &[ParcelFileDescriptor],
    data_cache: &[ParcelFileDescriptor],
) -> Option<(OwnedFd, OwnedFd)> {
    if model_cache.len() != cache::MODEL_CACHE_FILES || data_cache.len() != cache::DATA_CACHE_FILES
    {
        return None;
    }
    let dup = |p: &ParcelFileDescriptor| ipc::pfd_fd(p).try_clone_to_owned().ok();
    Some((dup(&model_cache[0])?, dup(&data_cache[0])?))
}

/// Where a preparation writes its compilation cache.
struct CacheTarget {
    model: OwnedFd,
    data: OwnedFd,
    token: [u8; cache::TOKEN_BYTES],
}

/// `deadlineNs` (and other `-1`-means-none durations) must be -1 or non-negative.
fn check_optional_ns(value: i64, name: &str) -> HalResult<()> {
    if value < -1 {
        return Err(HalError::InvalidArgument(format!(
            "{name} = {value}: only -1 (none) or a non-negative time is valid"
        )));
    }
    Ok(())
}

fn check_loop_timeout(value: i64) -> HalResult<()> {
    check_optional_ns(value, "loopTimeoutDurationNs")?;
    if value > ipm::MAXIMUM_LOOP_TIMEOUT_DURATION_NS {
        return Err(HalError::InvalidArgument(format!(
            "loopTimeoutDurationNs = {value} exceeds the maximum {}",
            ipm::MAXIMUM_LOOP_TIMEOUT_DURATION_NS
        )));
    }
    Ok(())
}

/// The loop timeout of an execution: the client's `loopTimeoutDurationNs` (checked by
/// [`check_loop_timeout`]), or `DEFAULT_LOOP_TIMEOUT_DURATION_NS` when it gave -1.
fn loop_timeout(loop_timeout_ns: i64) -> std::time::Duration {
    let ns = if loop_timeout_ns < 0 {
        ipm::DEFAULT_LOOP_TIMEOUT_DURATION_NS
    } else {
        loop_timeout_ns.min(ipm::MAXIMUM_LOOP_TIMEOUT_DURATION_NS)
    };
    std::time::Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

/// Nanoseconds since boot, the clock AIDL deadlines are expressed in.
fn boot_time_ns() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0)
}

/// `Err` with MISSED_DEADLINE_PERSISTENT when a deadline has already passed: the work would
/// finish late whatever happens, so it is not started. A deadline still ahead is not
/// enforced: the contract lets a driver finish late work rather than abort it ("may be
/// aborted").
fn check_deadline(deadline_ns: i64, call: &str) -> BinderResult<()> {
    if deadline_ns >= 0 && boot_time_ns() > deadline_ns {
        return Err(aidl_status(
            AidlStatus::MISSED_DEADLINE_PERSISTENT,
            format!("deadline {deadline_ns} ns has passed"),
            call,
        ));
    }
    Ok(())
}

fn elapsed_ns(since: Instant) -> i64 {
    i64::try_from(since.elapsed().as_nanos()).unwrap_or(i64::MAX)
}

/// `IDevice`.
pub struct Device {
    driver: Arc<Driver>,
    /// Where accepted preparations run once `prepareModel` has returned (BI-61).
    preparers: Workers,
    /// The service's limits and the prepared-model memory they allow (`docs/limits.md`).
    budget: Arc<Budget>,
}

/// Threads planning prepared models. Preparation decodes constants and resolves shapes; the
/// heavy arithmetic is in executions, so a couple suffice.
const PREPARE_THREADS: usize = 2;
/// Preparations that may wait for a preparer; beyond this `prepareModel` answers
/// DEVICE_UNAVAILABLE at once instead of queueing without bound.
pub const PREPARE_QUEUE_DEPTH: usize = 64;

impl Device {
    pub fn with_limits(driver: Arc<Driver>, limits: Limits) -> std::io::Result<Device> {
        Ok(Device {
            driver,
            preparers: Workers::new("nnhal-prepare", PREPARE_THREADS, PREPARE_QUEUE_DEPTH)?,
            budget: Budget::new(limits),
        })
    }
}

ipc::impl_interface_with_dump!(Device);

impl Device {
    /// What `dump` (`dumpsys android.hardware.neuralnetworks.IDevice/<instance>`) prints.
    fn dump_text(&self) -> String {
        dump_text(&self.driver, &COUNTERS.snapshot(), self.budget.limits())
    }
}

/// Counts for `dump`, per process: a service process serves one device.
struct Counters {
    prepared: AtomicU64,
    preparations_failed: AtomicU64,
    live_models: AtomicU64,
    executions: AtomicU64,
    executions_failed: AtomicU64,
}

static COUNTERS: Counters = Counters {
    prepared: AtomicU64::new(0),
    preparations_failed: AtomicU64::new(0),
    live_models: AtomicU64::new(0),
    executions: AtomicU64::new(0),
    executions_failed: AtomicU64::new(0),
};

/// The counters at one moment, in the order `dump` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CountersSnapshot {
    pub prepared: u64,
    pub preparations_failed: u64,
    pub live_models: u64,
    pub executions: u64,
    pub executions_failed: u64,
}

impl Counters {
    fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            prepared: self.prepared.load(Ordering::Relaxed),
            preparations_failed: self.preparations_failed.load(Ordering::Relaxed),
            live_models: self.live_models.load(Ordering::Relaxed),
            executions: self.executions.load(Ordering::Relaxed),
            executions_failed: self.executions_failed.load(Ordering::Relaxed),
        }
    }

    /// Counts one execution that reached the driver.
    fn executed<T, E>(&self, outcome: &Result<T, E>) {
        self.executions.fetch_add(1, Ordering::Relaxed);
        if outcome.is_err() {
            self.executions_failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The `dump` text: version, kernels, capabilities, prepared models, execution counters and
/// the service's limits, one fact per line as `key: value` so people and scripts read it alike.
pub fn dump_text(driver: &Driver, counters: &CountersSnapshot, limits: &Limits) -> String {
    let caps = driver.capabilities();
    let perf = |p: nnhal_hal::PerformanceInfo| {
        format!("execTime {} powerUsage {}", p.exec_time, p.power_usage)
    };
    let lines = [
        format!("version: {}", version_string(driver.isa())),
        "interface: android.hardware.neuralnetworks V1 (frozen AIDL), NNAPI 1.0 operations"
            .to_string(),
        format!("isa: {}", driver.isa()),
        format!("kernel threads: {}", driver.threads()),
        format!("capabilities float32: {}", perf(caps.float32_performance)),
        format!("capabilities quant8: {}", perf(caps.quantized8_performance)),
        format!("prepared models live: {}", counters.live_models),
        format!("prepared models total: {}", counters.prepared),
        format!("preparations failed: {}", counters.preparations_failed),
        format!("executions: {}", counters.executions),
        format!("executions failed: {}", counters.executions_failed),
        format!("limit preparation threads: {PREPARE_THREADS}"),
        format!("limit queued preparations: {PREPARE_QUEUE_DEPTH}"),
        format!("limit tensor elements: {}", nnhal_hal::shape::MAX_ELEMENTS),
        format!("limit connections: {}", limits.max_connections),
        format!("limit handshake timeout: {:?}", limits.handshake_timeout),
        format!(
            "limit idle timeout: {}",
            limits
                .idle_timeout
                .map_or_else(|| "never".to_string(), |d| format!("{d:?}"))
        ),
        format!(
            "limit idle eviction when full after: {:?}",
            limits.evict_when_full_after()
        ),
        format!("limit send timeout: {:?}", limits.send_timeout),
        format!("limit model bytes: {}", limits.max_model_bytes),
        format!("limit operands: {}", limits.max_operands),
        format!("limit prepared bytes: {}", limits.max_prepared_bytes),
        format!(
            "limit prepared bytes per client: {}",
            limits.max_prepared_bytes_per_client
        ),
        format!("limit execution bytes: {}", limits.max_execution_bytes),
        format!("limit fence wait: {:?}", limits.max_fence_wait),
    ];
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The sizes a valid model declares, checked against the limits before it is prepared. The
/// check follows validation so that a malformed model is INVALID_ARGUMENT whatever its size;
/// what validating an oversized model costs is bounded by the transport's frame size.
fn check_model_limits(limits: &Limits, model: &AidlModel) -> HalResult<()> {
    let pools = model.pools.iter().map(|pool| {
        use super::aidl::android::hardware::neuralnetworks::Memory::Memory as M;
        match pool {
            M::Ashmem(a) => u64::try_from(a.size).unwrap_or(u64::MAX),
            M::MappableFile(m) => u64::try_from(m.length).unwrap_or(u64::MAX),
            M::HardwareBuffer(_) => 0,
        }
    });
    let constant_bytes = pools.fold(model.operandValues.len() as u64, u64::saturating_add);
    let operands = model.main.operands.len() + model.main.operations.len();
    limits.check_model(constant_bytes, operands)
}

/// The bytes a request's arguments name, checked before anything is mapped or copied.
fn check_request_limits(limits: &Limits, request: &AidlRequest) -> HalResult<()> {
    let bytes = request
        .inputs
        .iter()
        .chain(&request.outputs)
        .map(|a| u64::try_from(a.location.length).unwrap_or(u64::MAX))
        .fold(0u64, u64::saturating_add);
    limits.check_execution(bytes)
}

impl IDevice for Device {
    fn allocate(
        &self,
        _desc: &BufferDesc,
        _prepared_models: &[IPreparedModelParcel],
        _input_roles: &[BufferRole],
        _output_roles: &[BufferRole],
    ) -> BinderResult<DeviceBuffer> {
        // The contract's status for an unsupported buffer property or role.
        Err(refuse(
            &HalError::GeneralFailure(
                "driver-managed buffers (IDevice::allocate) are not supported by this driver"
                    .into(),
            ),
            "allocate",
        ))
    }

    fn getCapabilities(&self) -> BinderResult<Capabilities> {
        Ok(convert::capabilities_to_aidl(&self.driver.capabilities()))
    }

    fn getNumberOfCacheFilesNeeded(&self) -> BinderResult<NumberOfCacheFiles> {
        // One file for the validated model, one for the plan's packed constants (src/cache.rs).
        Ok(NumberOfCacheFiles {
            numModelCache: cache::MODEL_CACHE_FILES as i32,
            numDataCache: cache::DATA_CACHE_FILES as i32,
        })
    }

    fn getSupportedExtensions(&self) -> BinderResult<Vec<Extension>> {
        Ok(Vec::new())
    }

    fn getSupportedOperations(&self, model: &AidlModel) -> BinderResult<Vec<bool>> {
        let call = "getSupportedOperations";
        // Validation first: a malformed model is INVALID_ARGUMENT whatever its size; only a
        // valid one is then measured against the limits (docs/limits.md).
        let canonical = convert::model_from_aidl(model).map_err(|e| to_status(&e, call))?;
        let supported = guarded(call, || self.driver.supported_operations(&canonical))
            .map_err(|e| to_status(&e, call))?;
        check_model_limits(self.budget.limits(), model).map_err(|e| to_status(&e, call))?;
        Ok(supported)
    }

    fn getType(&self) -> BinderResult<DeviceType> {
        Ok(DeviceType::CPU)
    }

    fn getVersionString(&self) -> BinderResult<String> {
        Ok(version_string(self.driver.isa()))
    }

    fn prepareModel(
        &self,
        model: &AidlModel,
        preference: ExecutionPreference,
        priority: Priority,
        deadline_ns: i64,
        model_cache: &[ParcelFileDescriptor],
        data_cache: &[ParcelFileDescriptor],
        token: &[u8],
        callback: PrepareCallbackArg<'_>,
    ) -> BinderResult<()> {
        let call = "prepareModel";
        let callback = require_callback(callback, call)?;
        // The contract: cache problems (wrong number of handles, handles that cannot be
        // written) never fail a preparation; the model is then just not cached.
        let mut target = None;
        let checked = (|| -> HalResult<ValidatedModel> {
            if !(0..=2).contains(&preference.0) {
                return Err(HalError::InvalidArgument(format!(
                    "execution preference {} is not a defined value",
                    preference.0
                )));
            }
            if !(0..=2).contains(&priority.0) {
                return Err(HalError::InvalidArgument(format!(
                    "priority {} is not a defined value",
                    priority.0
                )));
            }
            check_optional_ns(deadline_ns, "deadlineNs")?;
            const _: () = assert!(idev::BYTE_SIZE_OF_CACHE_TOKEN as usize == cache::TOKEN_BYTES);
            let token = cache::token(token)?;
            target = match cache_handles(model_cache, data_cache) {
                Some((model, data)) => Some(CacheTarget { model, data, token }),
                None => {
                    // What an earlier preparation left in these files must not be restored
                    // for this one.
                    for p in model_cache.iter().chain(data_cache) {
                        cache::clear_file(ipc::pfd_fd(p));
                    }
                    None
                }
            };
            // Validation before the limits: an invalid model is INVALID_ARGUMENT whatever its
            // size; a valid one past a limit is GENERAL_FAILURE (docs/limits.md).
            let canonical = convert::model_from_aidl(model)?;
            let valid = guarded(call, || match target {
                Some(_) => self.driver.validate_model_for_cache(canonical),
                None => self.driver.validate_model(canonical),
            })?;
            check_model_limits(self.budget.limits(), model)?;
            Ok(valid)
        })()
        .and_then(|model| {
            // Reserved before the preparation allocates; held as long as the prepared model.
            let charge = self
                .budget
                .charge(ipc::calling_pid(), model.memory_estimate())?;
            Ok((model, charge))
        });
        let (model, charge) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                // Synchronous failure: the callback hears it once, the caller gets it too.
                notify(callback, convert::error_status_to_aidl(e.status()), None);
                return Err(to_status(&e, call));
            }
        };
        if check_deadline(deadline_ns, call).is_err() {
            // The launch itself succeeds; the missed deadline is the preparation's outcome,
            // which the callback carries (as QualityOfServiceTests checks).
            notify(callback, AidlStatus::MISSED_DEADLINE_PERSISTENT, None);
            return Ok(());
        }

        self.launch(model, charge, callback, target, call)
    }

    fn prepareModelFromCache(
        &self,
        deadline_ns: i64,
        model_cache: &[ParcelFileDescriptor],
        data_cache: &[ParcelFileDescriptor],
        token: &[u8],
        callback: PrepareCallbackArg<'_>,
    ) -> BinderResult<()> {
        let call = "prepareModelFromCache";
        let callback = require_callback(callback, call)?;
        let checked = (|| -> HalResult<ValidatedModel> {
            check_optional_ns(deadline_ns, "deadlineNs")?;
            let token = cache::token(token)?;
            // Any handle the contract does not expect is a miss: GENERAL_FAILURE.
            let model_fds: Vec<_> = model_cache.iter().map(ipc::pfd_fd).collect();
            let data_fds: Vec<_> = data_cache.iter().map(ipc::pfd_fd).collect();
            let model_file = cache::read_model_file(&model_fds, &data_fds)?;
            let valid = guarded(call, || {
                self.driver
                    .validate_cached(&model_file, cache::DataFile::Fd(data_fds[0]), &token)
            })?;
            self.budget
                .limits()
                .check_model(valid.constant_bytes(), valid.operand_count())?;
            Ok(valid)
        })()
        .and_then(|model| {
            let charge = self
                .budget
                .charge(ipc::calling_pid(), model.memory_estimate())?;
            Ok((model, charge))
        });
        let (model, charge) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                notify(callback, convert::error_status_to_aidl(e.status()), None);
                // A cache that cannot be used is an ordinary event (another build, a cleared
                // or damaged file): the client then prepares the model, nothing is wrong here.
                return Err(match e {
                    HalError::GeneralFailure(_) => {
                        log::info!("{call}: {e}");
                        status_of(&e)
                    }
                    _ => to_status(&e, call),
                });
            }
        };
        if check_deadline(deadline_ns, call).is_err() {
            notify(callback, AidlStatus::MISSED_DEADLINE_PERSISTENT, None);
            return Ok(());
        }
        self.launch(model, charge, callback, None, call)
    }
}

impl Device {
    /// Plans `model` on a preparer thread (writing its compilation cache to `target`, if
    /// any) and notifies `callback` when done.
    fn launch(
        &self,
        model: ValidatedModel,
        charge: Charge,
        callback: &Strong<dyn IPreparedModelCallback>,
        target: Option<CacheTarget>,
        call: &'static str,
    ) -> BinderResult<()> {
        let driver = Arc::clone(&self.driver);
        let worker_callback = callback.clone();
        let queued = self.preparers.submit(move || {
            // A panic in the driver must still reach the client as a failure: the callback
            // is waited on without a timeout.
            let prepared = guarded(call, || match &target {
                // Written before the client hears of the model, so that a restore right
                // after the callback finds the files complete.
                Some(target) => driver.prepare_validated_to_files(
                    model,
                    &target.token,
                    target.model.as_fd(),
                    target.data.as_fd(),
                ),
                None => driver.prepare_validated(model),
            });
            match prepared {
                Ok(prepared) => {
                    COUNTERS.prepared.fetch_add(1, Ordering::Relaxed);
                    let binder = ipc::new_binder!(
                        BnPreparedModel,
                        PreparedModelService::new(prepared, Arc::new(charge))
                    );
                    notify(&worker_callback, AidlStatus::NONE, Some(&binder));
                }
                Err(e) => {
                    COUNTERS.preparations_failed.fetch_add(1, Ordering::Relaxed);
                    // Logged through the one mapping; the status travels in the callback.
                    let _ = to_status(&e, "prepareModel (worker)");
                    notify(
                        &worker_callback,
                        convert::error_status_to_aidl(e.status()),
                        None,
                    );
                }
            }
        });
        if let Err(refused) = queued {
            let e = HalError::DeviceUnavailable(format!("preparation not started: {refused}"));
            notify(callback, convert::error_status_to_aidl(e.status()), None);
            return Err(to_status(&e, call));
        }
        Ok(())
    }
}

/// Runs one execution for `executeSynchronously` (prepared model and burst alike).
fn execute(
    prepared: &PreparedModel,
    limits: &Limits,
    request: &AidlRequest,
    measure: bool,
    deadline_ns: i64,
    loop_timeout_ns: i64,
    call: &str,
) -> BinderResult<AidlResult> {
    let start = Instant::now();
    let request = (|| {
        check_optional_ns(deadline_ns, "deadlineNs")?;
        check_loop_timeout(loop_timeout_ns)?;
        check_request_limits(limits, request)?;
        convert::request_from_aidl(request)
    })()
    .map_err(|e| to_status(&e, call))?;
    check_deadline(deadline_ns, call)?;
    let run = Instant::now();
    let result = guarded(call, || {
        let bound = prepared.validate_request(&request)?;
        prepared.execute_bound_with_loop_timeout(&bound, loop_timeout(loop_timeout_ns))
    });
    COUNTERS.executed(&result);
    let result = match result {
        // Too-small outputs whose shapes are known are a reply, not an error: AIDL reports
        // them with outputSufficientSize = false and every output's shape.
        Err(HalError::OutputInsufficientShapes { message, shapes }) => {
            log::debug!("{call}: {message}");
            return convert::insufficient_result_to_aidl(&shapes).map_err(|e| to_status(&e, call));
        }
        other => other.map_err(|e| to_status(&e, call))?,
    };
    let timing = if measure {
        Timing {
            timeOnDeviceNs: elapsed_ns(run),
            timeInDriverNs: elapsed_ns(start),
        }
    } else {
        convert::NO_TIMING
    };
    convert::execution_result_to_aidl(&result, timing).map_err(|e| to_status(&e, call))
}

/// `IPreparedModel`: holds the prepared model; the binder object (and any burst made from
/// it) keeps it alive for as long as a client or an execution uses it.
struct PreparedModelService {
    prepared: Arc<PreparedModel>,
    /// The model's share of the prepared-model budget, shared with its bursts; declared last
    /// so that it is released (and freed memory handed back to the system) after the model.
    charge: Arc<Charge>,
}

impl PreparedModelService {
    fn new(prepared: Arc<PreparedModel>, charge: Arc<Charge>) -> PreparedModelService {
        COUNTERS.live_models.fetch_add(1, Ordering::Relaxed);
        PreparedModelService { prepared, charge }
    }
}

impl Drop for PreparedModelService {
    fn drop(&mut self) {
        COUNTERS.live_models.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Interface for PreparedModelService {}

impl IPreparedModel for PreparedModelService {
    fn executeSynchronously(
        &self,
        request: &AidlRequest,
        measure_timing: bool,
        deadline_ns: i64,
        loop_timeout_ns: i64,
    ) -> BinderResult<AidlResult> {
        execute(
            &self.prepared,
            self.charge.limits(),
            request,
            measure_timing,
            deadline_ns,
            loop_timeout_ns,
            "executeSynchronously",
        )
    }

    fn executeFenced(
        &self,
        request: &AidlRequest,
        wait_for: &[ParcelFileDescriptor],
        measure_timing: bool,
        deadline_ns: i64,
        loop_timeout_ns: i64,
        duration_ns: i64,
    ) -> BinderResult<FencedExecutionResult> {
        let call = "executeFenced";
        let launched = Instant::now();
        let request = (|| {
            check_optional_ns(deadline_ns, "deadlineNs")?;
            check_loop_timeout(loop_timeout_ns)?;
            check_optional_ns(duration_ns, "durationNs")?;
            check_request_limits(self.charge.limits(), request)?;
            let request = convert::request_from_aidl(request)?;
            guarded(call, || self.prepared.validate_fenced_request(&request))
        })()
        .map_err(|e| to_status(&e, call))?;
        check_deadline(deadline_ns, call)?;

        // No sync-fence driver on a Linux host: wait for the given fences (sync files signal
        // readability) right here, run, and hand back a null fence, which the contract allows
        // when the work finished before the call returned. The callback reports the outcome.
        // The wait holds a binder thread, so it never outlasts the caller's deadline, its
        // duration, or the service's own bound when it gave neither (BI-61).
        let wait_until = fence_wait_end(
            launched,
            deadline_ns,
            duration_ns,
            self.charge.limits().max_fence_wait,
        );
        match wait_for_fences(wait_for, wait_until) {
            Ok(()) => {}
            Err(FenceWait::Failed(e)) => return Err(to_status(&e, call)),
            Err(FenceWait::TimedOut) => {
                return Err(aidl_status(
                    if deadline_ns >= 0 {
                        AidlStatus::MISSED_DEADLINE_TRANSIENT
                    } else {
                        AidlStatus::GENERAL_FAILURE
                    },
                    format!(
                        "the fences were not signalled within {:.3} s",
                        launched.elapsed().as_secs_f64()
                    ),
                    call,
                ))
            }
        }
        let fenced = Instant::now();
        let outcome = guarded(call, || {
            self.prepared
                .execute_bound_with_loop_timeout(&request, loop_timeout(loop_timeout_ns))
        });
        COUNTERS.executed(&outcome);
        let (status, timing_launched, timing_fenced) = match outcome {
            Ok(_) if measure_timing => (
                AidlStatus::NONE,
                Timing {
                    timeOnDeviceNs: elapsed_ns(fenced),
                    timeInDriverNs: elapsed_ns(launched),
                },
                Timing {
                    timeOnDeviceNs: elapsed_ns(fenced),
                    timeInDriverNs: elapsed_ns(fenced),
                },
            ),
            Ok(_) => (AidlStatus::NONE, convert::NO_TIMING, convert::NO_TIMING),
            Err(e) => {
                let _ = to_status(&e, call);
                (
                    convert::error_status_to_aidl(e.status()),
                    convert::NO_TIMING,
                    convert::NO_TIMING,
                )
            }
        };
        Ok(FencedExecutionResult {
            callback: Some(ipc::new_binder!(
                BnFencedExecutionCallback,
                FencedCallback {
                    status,
                    timing_launched,
                    timing_fenced,
                }
            )),
            syncFence: None,
        })
    }

    fn configureExecutionBurst(&self) -> BinderResult<Strong<dyn IBurst>> {
        Ok(ipc::new_binder!(
            BnBurst,
            Burst {
                prepared: Arc::clone(&self.prepared),
                charge: Arc::clone(&self.charge),
            }
        ))
    }
}

/// When a fenced execution stops waiting for its fences: at the deadline (boot-time
/// nanoseconds), at `duration_ns` after the launch, or after `max_wait` when the caller gave
/// neither; the earliest of those that apply.
fn fence_wait_end(
    launched: Instant,
    deadline_ns: i64,
    duration_ns: i64,
    max_wait: std::time::Duration,
) -> Instant {
    use std::time::Duration;
    let mut end = launched + max_wait;
    if deadline_ns >= 0 {
        let left = u64::try_from(deadline_ns.saturating_sub(boot_time_ns())).unwrap_or(0);
        end = end.min(Instant::now() + Duration::from_nanos(left));
    }
    if duration_ns >= 0 {
        end = end.min(launched + Duration::from_nanos(duration_ns as u64));
    }
    end
}

enum FenceWait {
    Failed(HalError),
    TimedOut,
}

/// Blocks until every fence fd is readable (signalled), or until `until`. A fence in an
/// error state is an invalid argument, as the contract says.
fn wait_for_fences(fences: &[ParcelFileDescriptor], until: Instant) -> Result<(), FenceWait> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    for (i, fence) in fences.iter().enumerate() {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(FenceWait::TimedOut);
            }
            // Whole milliseconds, rounded up so that a wait never ends before `until`.
            let ms = left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
            let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(ipc::pfd_fd(fence), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) => continue,
                Ok(_) => {
                    let revents = fds[0].revents().unwrap_or(PollFlags::empty());
                    if revents.intersects(PollFlags::POLLERR | PollFlags::POLLNVAL) {
                        return Err(FenceWait::Failed(HalError::InvalidArgument(format!(
                            "waitFor[{i}]: fence is in an error state"
                        ))));
                    }
                    if revents.intersects(PollFlags::POLLIN | PollFlags::POLLHUP) {
                        break;
                    }
                }
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    return Err(FenceWait::Failed(HalError::InvalidArgument(format!(
                        "waitFor[{i}]: cannot wait on the fence: {e}"
                    ))))
                }
            }
        }
    }
    Ok(())
}

fn copy_timing(t: &Timing) -> Timing {
    Timing {
        timeOnDeviceNs: t.timeOnDeviceNs,
        timeInDriverNs: t.timeInDriverNs,
    }
}

/// `IFencedExecutionCallback` of an execution that has already finished.
struct FencedCallback {
    status: AidlStatus,
    timing_launched: Timing,
    timing_fenced: Timing,
}

impl Interface for FencedCallback {}

impl IFencedExecutionCallback for FencedCallback {
    fn getExecutionInfo(
        &self,
        timing_launched: &mut Timing,
        timing_fenced: &mut Timing,
    ) -> BinderResult<AidlStatus> {
        *timing_launched = copy_timing(&self.timing_launched);
        *timing_fenced = copy_timing(&self.timing_fenced);
        Ok(self.status)
    }
}

/// `IBurst`: executions through the same path as `executeSynchronously`. Memory identifier
/// tokens are checked for shape but not used: the prepared model already keeps request-pool
/// mappings between executions, keyed by the file itself rather than by a client's token.
struct Burst {
    prepared: Arc<PreparedModel>,
    charge: Arc<Charge>,
}

impl Interface for Burst {}

impl IBurst for Burst {
    fn executeSynchronously(
        &self,
        request: &AidlRequest,
        memory_identifier_tokens: &[i64],
        measure_timing: bool,
        deadline_ns: i64,
        loop_timeout_ns: i64,
    ) -> BinderResult<AidlResult> {
        let call = "IBurst::executeSynchronously";
        if memory_identifier_tokens.len() != request.pools.len() {
            return Err(to_status(
                &HalError::InvalidArgument(format!(
                    "{} memory identifier tokens for {} pools",
                    memory_identifier_tokens.len(),
                    request.pools.len()
                )),
                call,
            ));
        }
        if let Some(t) = memory_identifier_tokens.iter().find(|&&t| t < -1) {
            return Err(to_status(
                &HalError::InvalidArgument(format!("memory identifier token {t} is invalid")),
                call,
            ));
        }
        execute(
            &self.prepared,
            self.charge.limits(),
            request,
            measure_timing,
            deadline_ns,
            loop_timeout_ns,
            call,
        )
    }

    fn releaseMemoryResource(&self, memory_identifier_token: i64) -> BinderResult<()> {
        if memory_identifier_token < -1 {
            return Err(to_status(
                &HalError::InvalidArgument(format!(
                    "memory identifier token {memory_identifier_token} is invalid"
                )),
                "IBurst::releaseMemoryResource",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nnhal_hal::ErrorStatus;

    // Reads the status back with rsbinder's accessors.
    #[cfg(not(feature = "aosp"))]
    #[test]
    fn every_error_kind_becomes_its_service_specific_code() {
        for (err, code) in [
            (HalError::InvalidArgument("x".into()), 4),
            (HalError::OutputInsufficientSize("x".into()), 3),
            (HalError::GeneralFailure("x".into()), 2),
            (HalError::DeviceUnavailable("x".into()), 1),
        ] {
            let status = to_status(&err, "test");
            assert_eq!(
                status.exception_code(),
                rsbinder::ExceptionCode::ServiceSpecific
            );
            assert_eq!(status.service_specific_error(), code);
            assert_eq!(status.message(), Some("x"));
        }
    }

    /// The value of the `key: value` line `key` in a dump.
    fn dump_value(text: &str, key: &str) -> u64 {
        let prefix = format!("{key}: ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no `{key}` line in\n{text}"))
            .parse()
            .unwrap()
    }

    /// `dump` through the device's `Interface::dump` (what the binder crate's dump handler
    /// calls), after a model was prepared and run through the RPC transport: the counters
    /// move with the traffic. Other tests in this process may add to them too, so the checks
    /// are on increases.
    #[cfg(not(feature = "aosp"))]
    #[test]
    fn dump_reports_version_isa_capabilities_counters_and_limits() {
        use nnhal_vts::probe::{self, AddRun};
        let dump = |device: &Device| {
            let mut out = Vec::new();
            Interface::dump(device, &mut out, &[]).unwrap();
            String::from_utf8(out).unwrap()
        };
        let driver = Arc::new(Driver::new(1).unwrap());
        let limits = Limits {
            max_connections: 7,
            max_model_bytes: 12_345,
            idle_timeout: Some(std::time::Duration::from_secs(30)),
            send_timeout: std::time::Duration::from_secs(7),
            ..Limits::default()
        };
        let device = Device::with_limits(Arc::clone(&driver), limits).unwrap();
        let before = dump(&device);
        assert!(before.starts_with(&format!("version: {}\n", version_string(driver.isa()))));
        for line in [
            format!("isa: {}", driver.isa()),
            "kernel threads: 1".to_string(),
            "capabilities float32: execTime 1 powerUsage 1".to_string(),
            "capabilities quant8: execTime 1 powerUsage 1".to_string(),
            format!("limit preparation threads: {PREPARE_THREADS}"),
            format!("limit queued preparations: {PREPARE_QUEUE_DEPTH}"),
            format!("limit tensor elements: {}", i32::MAX),
            "limit connections: 7".to_string(),
            "limit model bytes: 12345".to_string(),
            "limit fence wait: 60s".to_string(),
            "limit idle timeout: 30s".to_string(),
            "limit idle eviction when full after: 1s".to_string(),
            "limit send timeout: 7s".to_string(),
        ] {
            assert!(
                before.lines().any(|l| l == line),
                "no `{line}` in\n{before}"
            );
        }

        let dir = std::env::temp_dir().join(format!("nnhal-dump-test-{}", std::process::id()));
        let socket = dir.join("dump.sock");
        let server = crate::binder::serve(Arc::clone(&driver), &socket, "dump").unwrap();
        let client = crate::binder::connect_with(
            &socket,
            &crate::binder::ConnectOptions {
                instance: "dump".into(),
                ..Default::default()
            },
        )
        .unwrap();
        let prepared = client.prepare_model(probe::add_model()).unwrap();
        let run = AddRun::new(&[1.0; 4], &[2.0; 4]).unwrap();
        prepared.execute(&run.request).unwrap();
        let during = dump(&device);
        for key in ["prepared models total", "executions"] {
            assert!(
                dump_value(&during, key) > dump_value(&before, key),
                "{key}: {before}\n{during}"
            );
        }
        assert!(dump_value(&during, "prepared models live") >= 1, "{during}");
        drop(prepared);
        drop(client);
        server.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn optional_times_and_loop_timeouts() {
        assert!(check_optional_ns(-1, "d").is_ok());
        assert!(check_optional_ns(0, "d").is_ok());
        assert!(check_optional_ns(-2, "d").is_err());
        assert!(check_loop_timeout(ipm::MAXIMUM_LOOP_TIMEOUT_DURATION_NS).is_ok());
        assert!(check_loop_timeout(ipm::MAXIMUM_LOOP_TIMEOUT_DURATION_NS + 1).is_err());
        assert!(check_deadline(-1, "t").is_ok());
        assert!(check_deadline(1, "t").is_err());
        assert!(check_deadline(i64::MAX, "t").is_ok());
    }

    #[test]
    fn a_panic_in_driver_code_is_a_general_failure() {
        let err = guarded("test", || -> HalResult<()> { panic!("boom") }).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::GeneralFailure);
        assert!(err.message().contains("boom"), "{err}");
        assert_eq!(guarded("test", || Ok(3)).unwrap(), 3);
    }
}
