//! A client of the service over binder RPC, in canonical types (`docs/transport.md`).
//!
//! [`connect`] opens a session on the service's Unix socket and returns a [`RemoteDevice`]
//! whose methods mirror the in-process [`Driver`](crate::Driver): `capabilities`,
//! `supported_operations`, `prepare_model` (a fresh callback object per call, waiting for its
//! one `notify`), and [`RemotePreparedModel::execute`] (`executeSynchronously`). Models and
//! requests are converted to AIDL here; pools travel as file descriptors (memfds).
//!
//! Session settings follow `docs/transport.md`: Android 13+ wire profile, fd transport mode
//! Unix, one incoming connection for the service's callbacks, and an explicit
//! `close_session` when the last handle is dropped.

use super::aidl::android::hardware::neuralnetworks::{
    BufferDesc::BufferDesc,
    DeviceType::DeviceType as AidlDeviceType,
    ErrorStatus::ErrorStatus as AidlStatus,
    ExecutionPreference::ExecutionPreference,
    IBurst::IBurst,
    IDevice::IDevice,
    IPreparedModel::IPreparedModel,
    IPreparedModelCallback::{BnPreparedModelCallback, IPreparedModelCallback},
    Priority::Priority,
    Timing::Timing,
};
use super::convert::{self, DeviceCapabilities};
use super::server::WIRE_VERSION;
use super::service_name;
use crate::driver::ExecutionResult;
use nnhal_hal::{Capabilities, HalError, HalResult, Model, Request};
use rsbinder::rpc::{FileDescriptorTransportMode, RpcClientConfig, RpcSession};
use rsbinder::{BinderResult, ExceptionCode, Interface, ParcelFileDescriptor, Status, Strong};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A binder status → canonical error. Service-specific codes carry the `ErrorStatus`; a failed
/// transaction (the service died, the session ended) means the device is unavailable.
fn from_status(status: Status, call: &str) -> HalError {
    let message = status.message().unwrap_or("").to_string();
    match status.exception_code() {
        ExceptionCode::ServiceSpecific => {
            convert::error_from_code(status.service_specific_error(), message)
        }
        ExceptionCode::TransactionFailed => HalError::DeviceUnavailable(format!(
            "{call}: binder transaction failed: {:?}",
            status.transaction_error()
        )),
        _ => HalError::GeneralFailure(format!("{call}: {status}")),
    }
}

fn call<T>(result: BinderResult<T>, name: &str) -> HalResult<T> {
    result.map_err(|s| from_status(s, name))
}

/// How to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Instance name: the service is looked up as `android.hardware.neuralnetworks.IDevice/<instance>`.
    pub instance: String,
    /// Connections for calls to the service; calls on one connection run one at a time, so
    /// concurrent executions from one client need more than one.
    pub outgoing_connections: u32,
    /// How long connecting (every connection's handshake and the device lookup) may take. A
    /// service at its connection limit, or one that hangs, makes the connect fail after this
    /// instead of waiting forever.
    pub connect_timeout: Duration,
}

/// The default [`ConnectOptions::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            instance: "default".into(),
            outgoing_connections: 1,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// Raw `prepareModel` arguments (AIDL values, not checked here).
#[derive(Clone, Copy, Debug)]
pub struct PrepareOptions {
    /// `ExecutionPreference`: 0 LOW_POWER, 1 FAST_SINGLE_ANSWER, 2 SUSTAINED_SPEED.
    pub preference: i32,
    /// `Priority`: 0 LOW, 1 MEDIUM, 2 HIGH.
    pub priority: i32,
    /// Nanoseconds since boot; -1 for none.
    pub deadline_ns: i64,
    /// Length of the (zero) compilation-cache token; the interface requires 32.
    pub cache_token_len: usize,
}

impl Default for PrepareOptions {
    fn default() -> Self {
        PrepareOptions {
            preference: ExecutionPreference::FAST_SINGLE_ANSWER.0,
            priority: Priority::MEDIUM.0,
            deadline_ns: -1,
            cache_token_len: 32,
        }
    }
}

/// Raw `executeSynchronously` arguments (AIDL values, not checked here).
#[derive(Clone, Copy, Debug)]
pub struct ExecuteOptions {
    pub measure_timing: bool,
    /// Nanoseconds since boot; -1 for none.
    pub deadline_ns: i64,
    /// -1 for the default.
    pub loop_timeout_ns: i64,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        ExecuteOptions {
            measure_timing: false,
            deadline_ns: -1,
            loop_timeout_ns: -1,
        }
    }
}

/// Ends the session when the last device or prepared-model handle goes away: its callback
/// thread would otherwise keep it alive.
struct Session(RpcSession);

impl Drop for Session {
    fn drop(&mut self) {
        self.0.close_session();
    }
}

/// The service's `IDevice`, seen through binder.
pub struct RemoteDevice {
    // Declared before `session` so the proxy is released while the session is still open.
    device: Strong<dyn IDevice>,
    session: Arc<Session>,
}

/// What `getType` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    Other,
    Cpu,
    Gpu,
    Accelerator,
    Unknown(i32),
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceKind::Other => f.write_str("OTHER"),
            DeviceKind::Cpu => f.write_str("CPU"),
            DeviceKind::Gpu => f.write_str("GPU"),
            DeviceKind::Accelerator => f.write_str("ACCELERATOR"),
            DeviceKind::Unknown(v) => write!(f, "unknown ({v})"),
        }
    }
}

/// Connects to the `default` instance on `socket`.
pub fn connect(socket: impl AsRef<Path>) -> HalResult<RemoteDevice> {
    connect_with(socket, &ConnectOptions::default())
}

/// Connects to `options.instance` on `socket`. A failure is `DEVICE_UNAVAILABLE` with a
/// reason in words: whether anything listens on the socket, and whether it serves the
/// instance.
pub fn connect_with(socket: impl AsRef<Path>, options: &ConnectOptions) -> HalResult<RemoteDevice> {
    use nix::errno::Errno;
    let socket = socket.as_ref();
    let path = socket.display();
    let session = RpcSession::setup_client_android13plus_with_config(
        RpcClientConfig::unix(socket, WIRE_VERSION)
            .fd_mode(FileDescriptorTransportMode::Unix)
            .outgoing_connections(options.outgoing_connections.max(1))
            .incoming_connections(1)
            .timeout(options.connect_timeout),
    )
    .map_err(|e| {
        let why = match super::status_errno(e).map(Errno::from_raw) {
            _ if e == rsbinder::StatusCode::TimedOut
                || super::status_errno(e) == Some(Errno::ETIMEDOUT as i32)
                || super::status_errno(e) == Some(Errno::EAGAIN as i32) =>
            {
                return timed_out(options.connect_timeout, &path);
            }
            Some(Errno::ENOENT) => format!("no service is listening on {path} (no such socket)"),
            // A socket file without a listener: a service that stopped without cleaning up.
            Some(Errno::ECONNREFUSED) => format!(
                "no service is listening on {path} (connection refused; the socket file is \
                 left over from a service that stopped)"
            ),
            _ => format!("cannot connect to {path}: {}", super::status_words(e)),
        };
        HalError::DeviceUnavailable(why)
    })?;
    let session = Arc::new(Session(session));
    let name = service_name(&options.instance);
    let device = session.0.get_interface::<dyn IDevice>(&name).map_err(|e| {
        if e == rsbinder::StatusCode::TimedOut {
            return timed_out(options.connect_timeout, &path);
        }
        HalError::DeviceUnavailable(format!(
            "the service on {path} does not serve {name} ({}); check --instance",
            super::status_words(e)
        ))
    })?;
    // The timeout was for connecting; calls (a long preparation) wait as long as they take.
    session.0.set_timeout(None);
    Ok(RemoteDevice { device, session })
}

fn timed_out(after: Duration, path: &std::path::Display<'_>) -> HalError {
    HalError::DeviceUnavailable(format!(
        "timed out after {:.1} s connecting to {path}: the service accepted the connection but \
         did not answer (it may be at its connection limit, or hung)",
        after.as_secs_f64()
    ))
}

/// Connects, retrying until `timeout` while the service is starting (socket not there yet).
pub fn connect_wait(
    socket: impl AsRef<Path>,
    options: &ConnectOptions,
    timeout: Duration,
) -> HalResult<RemoteDevice> {
    let start = Instant::now();
    loop {
        match connect_with(socket.as_ref(), options) {
            Ok(device) => return Ok(device),
            Err(e) if start.elapsed() >= timeout => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The client end of one `prepareModel`: keeps the first notification only.
type Prepared = (AidlStatus, Option<Strong<dyn IPreparedModel>>);

struct PrepareCallback {
    tx: Mutex<Option<mpsc::Sender<Prepared>>>,
    notified: Arc<AtomicUsize>,
}

impl PrepareCallback {
    fn new(tx: mpsc::Sender<Prepared>) -> PrepareCallback {
        PrepareCallback {
            tx: Mutex::new(Some(tx)),
            notified: Arc::default(),
        }
    }
}

/// How many times a prepare callback has been notified so far; the contract allows one.
#[derive(Clone, Debug)]
pub struct Notifications(Arc<AtomicUsize>);

impl Notifications {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Interface for PrepareCallback {}

impl IPreparedModelCallback for PrepareCallback {
    fn notify(
        &self,
        status: AidlStatus,
        prepared: Option<&Strong<dyn IPreparedModel>>,
    ) -> BinderResult<()> {
        self.notified.fetch_add(1, Ordering::SeqCst);
        let sender = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        match sender {
            Some(tx) => {
                let _ = tx.send((status, prepared.cloned()));
            }
            None => log::warn!("prepare callback notified more than once (status {status:?})"),
        }
        Ok(())
    }
}

impl RemoteDevice {
    /// The NNAPI 1.0 view of `getCapabilities`.
    pub fn capabilities(&self) -> HalResult<Capabilities> {
        Ok(self.capabilities_full()?.to_canonical())
    }

    /// Every figure `getCapabilities` reports.
    pub fn capabilities_full(&self) -> HalResult<DeviceCapabilities> {
        let caps = call(self.device.getCapabilities(), "getCapabilities")?;
        Ok(convert::capabilities_from_aidl(&caps))
    }

    pub fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>> {
        let model = convert::model_to_aidl(model)?;
        call(
            self.device.getSupportedOperations(&model),
            "getSupportedOperations",
        )
    }

    pub fn device_type(&self) -> HalResult<DeviceKind> {
        let t = call(self.device.getType(), "getType")?;
        Ok(match t {
            AidlDeviceType::OTHER => DeviceKind::Other,
            AidlDeviceType::CPU => DeviceKind::Cpu,
            AidlDeviceType::GPU => DeviceKind::Gpu,
            AidlDeviceType::ACCELERATOR => DeviceKind::Accelerator,
            other => DeviceKind::Unknown(other.0),
        })
    }

    pub fn version_string(&self) -> HalResult<String> {
        call(self.device.getVersionString(), "getVersionString")
    }

    /// The frozen interface version the service implements (stable-AIDL meta call).
    pub fn interface_version(&self) -> HalResult<i32> {
        call(self.device.getInterfaceVersion(), "getInterfaceVersion")
    }

    /// The frozen interface hash the service reports (stable-AIDL meta call).
    pub fn interface_hash(&self) -> HalResult<String> {
        call(self.device.getInterfaceHash(), "getInterfaceHash")
    }

    /// Names of the supported vendor extensions.
    pub fn supported_extensions(&self) -> HalResult<Vec<String>> {
        let ext = call(
            self.device.getSupportedExtensions(),
            "getSupportedExtensions",
        )?;
        Ok(ext.into_iter().map(|e| e.name).collect())
    }

    /// (model cache files, data cache files) the service wants per prepared model.
    pub fn number_of_cache_files(&self) -> HalResult<(i32, i32)> {
        let n = call(
            self.device.getNumberOfCacheFilesNeeded(),
            "getNumberOfCacheFilesNeeded",
        )?;
        Ok((n.numModelCache, n.numDataCache))
    }

    /// One bare round trip (`getType`): the binder-RPC cost without any driver work.
    pub fn ping(&self) -> HalResult<()> {
        call(self.device.getType(), "getType").map(|_| ())
    }

    /// `prepareModel` with a fresh callback object; waits for its notification.
    pub fn prepare_model(&self, model: Model) -> HalResult<RemotePreparedModel> {
        self.prepare_model_with(&model, &PrepareOptions::default())
    }

    /// `prepareModel` with explicit (possibly invalid) arguments, for conformance tests. A
    /// failed launch is returned once the callback has confirmed it with the same status.
    pub fn prepare_model_with(
        &self,
        model: &Model,
        options: &PrepareOptions,
    ) -> HalResult<RemotePreparedModel> {
        self.launch_prepare(model, options)?.wait()
    }

    /// `prepareModel` without waiting for the callback: the launch's own answer is in
    /// [`PendingPrepare::launched`], the callback's in [`PendingPrepare::wait`]. `Err` only
    /// when the model cannot be sent.
    pub fn launch_prepare(
        &self,
        model: &Model,
        options: &PrepareOptions,
    ) -> HalResult<PendingPrepare> {
        // No cache files are offered; the (zero) token is then unused.
        let token = vec![0u8; options.cache_token_len];
        self.launch_prepare_cached(model, options, &CacheFiles::none(&token))
    }

    /// `prepareModel` with compilation-cache handles and a token, waiting for the callback:
    /// the service writes the cache into the files (when there are as many as
    /// [`RemoteDevice::number_of_cache_files`] says, writable).
    pub fn prepare_model_cached(
        &self,
        model: &Model,
        cache: &CacheFiles<'_>,
    ) -> HalResult<RemotePreparedModel> {
        self.launch_prepare_cached(model, &PrepareOptions::default(), cache)?
            .wait()
    }

    /// `prepareModel` with `options` and the cache handles of `cache`, without waiting.
    pub fn launch_prepare_cached(
        &self,
        model: &Model,
        options: &PrepareOptions,
        cache: &CacheFiles<'_>,
    ) -> HalResult<PendingPrepare> {
        let aidl = convert::model_to_aidl(model)?;
        let (tx, rx) = mpsc::channel();
        let callback = PrepareCallback::new(tx);
        let notified = Notifications(Arc::clone(&callback.notified));
        let callback = BnPreparedModelCallback::new_binder(callback);
        let (model_cache, data_cache) = cache.parcels()?;
        let launched = call(
            self.device.prepareModel(
                &aidl,
                ExecutionPreference(options.preference),
                Priority(options.priority),
                options.deadline_ns,
                &model_cache,
                &data_cache,
                cache.token,
                Some(&callback),
            ),
            "prepareModel",
        );
        Ok(PendingPrepare {
            launched,
            notified,
            rx,
            _callback: callback,
            session: Arc::clone(&self.session),
        })
    }

    /// `prepareModel` with a null callback (the service must answer INVALID_ARGUMENT).
    pub fn prepare_model_null_callback(&self, model: &Model) -> HalResult<()> {
        let aidl = convert::model_to_aidl(model)?;
        let o = PrepareOptions::default();
        call(
            self.device.prepareModel(
                &aidl,
                ExecutionPreference(o.preference),
                Priority(o.priority),
                o.deadline_ns,
                &[],
                &[],
                &[0u8; 32],
                None,
            ),
            "prepareModel",
        )
    }

    /// `prepareModelFromCache` with no cache files and a zero token. The service keeps no
    /// cache, so this is an error; when it is, the callback's status must agree with the
    /// returned one, which is checked here.
    pub fn prepare_model_from_cache(&self) -> HalResult<RemotePreparedModel> {
        self.prepare_model_from_cache_with(&CacheFiles::none(&[0u8; 32]))
    }

    /// `prepareModelFromCache` with the handles and token of `cache`; waits for the callback
    /// and checks that it agrees with what the call returned.
    pub fn prepare_model_from_cache_with(
        &self,
        cache: &CacheFiles<'_>,
    ) -> HalResult<RemotePreparedModel> {
        let (tx, rx) = mpsc::channel();
        let callback = BnPreparedModelCallback::new_binder(PrepareCallback::new(tx));
        let (model_cache, data_cache) = cache.parcels()?;
        let launched = call(
            self.device.prepareModelFromCache(
                -1,
                &model_cache,
                &data_cache,
                cache.token,
                Some(&callback),
            ),
            "prepareModelFromCache",
        );
        let (status, prepared) = wait_notified(&self.session, &rx, None)?;
        drop(callback);
        match (launched, status, prepared) {
            (Ok(()), AidlStatus::NONE, Some(prepared)) => Ok(RemotePreparedModel {
                prepared,
                _session: Arc::clone(&self.session),
            }),
            (Err(e), status, None) if status.0 == e.status().raw() => Err(e),
            // Launched, then failed on the preparer (or the deadline passed).
            (Ok(()), status, None) if status != AidlStatus::NONE => Err(convert::error_from_code(
                status.0,
                "prepareModelFromCache: restore failed (reported by the callback)".into(),
            )),
            (launched, status, prepared) => Err(HalError::GeneralFailure(format!(
                "prepareModelFromCache: returned {:?} but notified {status:?} with{} a model",
                launched.err().map(|e| e.status()),
                if prepared.is_some() { "" } else { "out" }
            ))),
        }
    }

    /// `allocate` of an unshaped buffer with no roles: this driver has no device buffers.
    pub fn allocate_empty(&self) -> HalResult<()> {
        let desc = BufferDesc { dimensions: vec![] };
        call(self.device.allocate(&desc, &[], &[], &[]), "allocate").map(|_| ())
    }
}

/// Waits for a prepare callback, noticing when the session dies underneath; `limit` bounds the
/// wait where the callback is owed already (after a failed launch).
fn wait_notified(
    session: &Session,
    rx: &mpsc::Receiver<Prepared>,
    limit: Option<Duration>,
) -> HalResult<Prepared> {
    let start = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(v) => return Ok(v),
            Err(mpsc::RecvTimeoutError::Timeout)
                if !session.0.is_ended() && limit.is_none_or(|l| start.elapsed() < l) =>
            {
                continue
            }
            Err(_) => {
                return Err(HalError::GeneralFailure(
                    "prepareModel: the callback was never notified".into(),
                ))
            }
        }
    }
}

/// The compilation-cache arguments of `prepareModel` and `prepareModelFromCache`: the
/// model-cache and data-cache file handles (sent as duplicates) and the token.
pub struct CacheFiles<'a> {
    pub model: Vec<BorrowedFd<'a>>,
    pub data: Vec<BorrowedFd<'a>>,
    pub token: &'a [u8],
}

impl<'a> CacheFiles<'a> {
    /// The given handles and token.
    pub fn new(model: &[BorrowedFd<'a>], data: &[BorrowedFd<'a>], token: &'a [u8]) -> Self {
        CacheFiles {
            model: model.to_vec(),
            data: data.to_vec(),
            token,
        }
    }

    /// No handles, only a token.
    pub fn none(token: &'a [u8]) -> Self {
        CacheFiles {
            model: Vec::new(),
            data: Vec::new(),
            token,
        }
    }

    fn parcels(&self) -> HalResult<(Vec<ParcelFileDescriptor>, Vec<ParcelFileDescriptor>)> {
        let dup = |fds: &[BorrowedFd<'_>]| {
            fds.iter()
                .map(|fd| {
                    fd.try_clone_to_owned()
                        .map(super::ipc::pfd_new)
                        .map_err(|e| {
                            HalError::GeneralFailure(format!(
                                "cannot duplicate a cache handle: {e}"
                            ))
                        })
                })
                .collect::<HalResult<Vec<_>>>()
        };
        Ok((dup(&self.model)?, dup(&self.data)?))
    }
}

/// A launched `prepareModel` whose callback has not been waited for yet.
pub struct PendingPrepare {
    launched: HalResult<()>,
    notified: Notifications,
    rx: mpsc::Receiver<Prepared>,
    // The callback object lives until its notification has been taken.
    _callback: Strong<dyn IPreparedModelCallback>,
    session: Arc<Session>,
}

impl PendingPrepare {
    /// The callback's notification count, to check later that it stays at one.
    pub fn notifications(&self) -> Notifications {
        self.notified.clone()
    }

    /// What `prepareModel` itself returned.
    pub fn launched(&self) -> Result<(), &HalError> {
        self.launched.as_ref().map(|_| ())
    }

    /// The callback's outcome. After a failed launch the callback must already carry the same
    /// status (the contract notifies before returning); a mismatch or a missing notification
    /// is a `GeneralFailure` naming both.
    pub fn wait(self) -> HalResult<RemotePreparedModel> {
        let limit = self.launched.is_err().then_some(Duration::from_secs(10));
        let notified = wait_notified(&self.session, &self.rx, limit);
        if self.session.0.is_ended() && notified.is_err() {
            return Err(HalError::DeviceUnavailable(
                "prepareModel: the service went away before notifying".into(),
            ));
        }
        let (status, prepared) = notified?;
        if let Err(e) = self.launched {
            return match (status.0 == e.status().raw(), prepared) {
                (true, None) => Err(e),
                (_, prepared) => Err(HalError::GeneralFailure(format!(
                    "prepareModel returned {} ({e}) but notified {status:?} with{} a model",
                    e.status(),
                    if prepared.is_some() { "" } else { "out" }
                ))),
            };
        }
        match (status, prepared) {
            (AidlStatus::NONE, Some(prepared)) => Ok(RemotePreparedModel {
                prepared,
                _session: self.session,
            }),
            (AidlStatus::NONE, None) => Err(HalError::GeneralFailure(
                "prepareModel: notified NONE without a prepared model".into(),
            )),
            (status, _) => Err(convert::error_from_code(
                status.0,
                "prepareModel: preparation failed (reported by the callback)".into(),
            )),
        }
    }
}

/// A prepared model living in the service. Holds the session open.
pub struct RemotePreparedModel {
    prepared: Strong<dyn IPreparedModel>,
    _session: Arc<Session>,
}

/// Durations reported by the service (`None` where it did not measure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutionTiming {
    pub on_device: Option<Duration>,
    pub in_driver: Option<Duration>,
}

fn timing_from_aidl(t: &Timing) -> ExecutionTiming {
    let d = |ns: i64| u64::try_from(ns).ok().map(Duration::from_nanos);
    ExecutionTiming {
        on_device: d(t.timeOnDeviceNs),
        in_driver: d(t.timeInDriverNs),
    }
}

impl RemotePreparedModel {
    /// `executeSynchronously`; outputs land in the request's pools.
    pub fn execute(&self, request: &Request) -> HalResult<ExecutionResult> {
        self.execute_with(request, &ExecuteOptions::default())
            .map(|(result, _)| result)
    }

    /// `executeSynchronously` with `measureTiming` set.
    pub fn execute_timed(
        &self,
        request: &Request,
    ) -> HalResult<(ExecutionResult, ExecutionTiming)> {
        let options = ExecuteOptions {
            measure_timing: true,
            ..ExecuteOptions::default()
        };
        self.execute_with(request, &options)
    }

    /// `executeSynchronously` with explicit (possibly invalid) arguments.
    pub fn execute_with(
        &self,
        request: &Request,
        options: &ExecuteOptions,
    ) -> HalResult<(ExecutionResult, ExecutionTiming)> {
        let request = convert::request_to_aidl(request)?;
        let result = call(
            self.prepared.executeSynchronously(
                &request,
                options.measure_timing,
                options.deadline_ns,
                options.loop_timeout_ns,
            ),
            "executeSynchronously",
        )?;
        let timing = timing_from_aidl(&result.timing);
        Ok((convert::execution_result_from_aidl(&result)?, timing))
    }

    /// `executeFenced` with no fences to wait for; waits for completion (a returned sync
    /// fence is polled) and reports the status `getExecutionInfo` gives.
    pub fn execute_fenced(&self, request: &Request) -> HalResult<()> {
        self.execute_fenced_with(request, Vec::new(), -1, -1)
    }

    /// `executeFenced` waiting for `wait_for` (fds that become readable when signalled), with
    /// a deadline (boot-time nanoseconds, -1 for none) and a duration (-1 for none).
    pub fn execute_fenced_with(
        &self,
        request: &Request,
        wait_for: Vec<std::os::fd::OwnedFd>,
        deadline_ns: i64,
        duration_ns: i64,
    ) -> HalResult<()> {
        let request = convert::request_to_aidl(request)?;
        let fences: Vec<_> = wait_for.into_iter().map(super::ipc::pfd_new).collect();
        let result = call(
            self.prepared
                .executeFenced(&request, &fences, false, deadline_ns, -1, duration_ns),
            "executeFenced",
        )?;
        if let Some(fence) = &result.syncFence {
            use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
            let mut fds = [PollFd::new(super::ipc::pfd_fd(fence), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::NONE).map_err(|e| {
                HalError::GeneralFailure(format!("executeFenced: waiting on the fence: {e}"))
            })?;
        }
        let callback = result.callback.ok_or_else(|| {
            HalError::GeneralFailure("executeFenced: reply has no callback".into())
        })?;
        let mut launched = convert::NO_TIMING;
        let mut fenced = convert::NO_TIMING;
        let status = call(
            callback.getExecutionInfo(&mut launched, &mut fenced),
            "getExecutionInfo",
        )?;
        if status == AidlStatus::NONE {
            Ok(())
        } else {
            Err(convert::error_from_code(
                status.0,
                "executeFenced: execution failed (reported by getExecutionInfo)".into(),
            ))
        }
    }

    /// `configureExecutionBurst`.
    pub fn burst(&self) -> HalResult<RemoteBurst> {
        let burst = call(
            self.prepared.configureExecutionBurst(),
            "configureExecutionBurst",
        )?;
        Ok(RemoteBurst {
            burst,
            _session: Arc::clone(&self._session),
        })
    }
}

/// A burst object living in the service.
pub struct RemoteBurst {
    burst: Strong<dyn IBurst>,
    _session: Arc<Session>,
}

impl RemoteBurst {
    /// `IBurst::executeSynchronously` with no memory identifiers (-1 per pool).
    pub fn execute(&self, request: &Request) -> HalResult<ExecutionResult> {
        self.execute_with(request, -1)
    }

    /// [`RemoteBurst::execute`] with a deadline (nanoseconds since boot, -1 for none).
    pub fn execute_with(&self, request: &Request, deadline_ns: i64) -> HalResult<ExecutionResult> {
        let tokens = vec![-1i64; request.pools.len()];
        let request = convert::request_to_aidl(request)?;
        let result = call(
            self.burst
                .executeSynchronously(&request, &tokens, false, deadline_ns, -1),
            "IBurst::executeSynchronously",
        )?;
        convert::execution_result_from_aidl(&result)
    }
}

/// The transaction code of an interface's first method; the others follow in declaration
/// order (for the codes of [`RemoteDevice::send_raw`]).
pub const FIRST_CALL_TRANSACTION: u32 = rsbinder::FIRST_CALL_TRANSACTION;

/// One piece of a raw transaction's parcel ([`RemoteDevice::send_raw`]).
#[derive(Debug)]
pub enum RawPiece {
    Bytes(Vec<u8>),
    I32(i32),
    String(String),
    /// Written as a file descriptor object (the parcel carries it out of band).
    Fd(std::os::fd::OwnedFd),
}

/// Sends a raw transaction to `binder`: the interface token, then `pieces`; the answer in
/// words (a transport status or the reply's status), or `DeviceUnavailable` when the service
/// is gone.
fn send_raw_to(
    binder: &rsbinder::SIBinder,
    code: u32,
    pieces: Vec<RawPiece>,
    one_way: bool,
) -> HalResult<String> {
    use rsbinder::{StatusCode, FLAG_ONEWAY};
    let proxy = binder
        .as_remote()
        .ok_or_else(|| HalError::GeneralFailure("the handle is not a remote proxy".into()))?;
    let failed = |e: StatusCode| HalError::GeneralFailure(format!("building the parcel: {e:?}"));
    let mut data = proxy.prepare_transact(true).map_err(failed)?;
    for piece in pieces {
        match piece {
            RawPiece::Bytes(bytes) => {
                for chunk in bytes.chunks(4) {
                    let mut word = [0u8; 4];
                    word[..chunk.len()].copy_from_slice(chunk);
                    data.write(&i32::from_le_bytes(word)).map_err(failed)?;
                }
            }
            RawPiece::I32(v) => data.write(&v).map_err(failed)?,
            RawPiece::String(text) => data.write(&text).map_err(failed)?,
            RawPiece::Fd(fd) => data.write(&super::ipc::pfd_new(fd)).map_err(failed)?,
        }
    }
    let flags = if one_way { FLAG_ONEWAY } else { 0 };
    match proxy.submit_transact(code, &data, flags) {
        Err(StatusCode::DeadObject) => {
            Err(HalError::DeviceUnavailable("the service is gone".into()))
        }
        Err(e) => Ok(format!("transport status {e:?}")),
        Ok(None) => Ok("no reply".into()),
        Ok(Some(mut reply)) => Ok(match reply.read::<Status>() {
            Ok(status) => format!("reply status {status}"),
            Err(e) => format!("unreadable reply ({e:?})"),
        }),
    }
}

impl RemotePreparedModel {
    /// A raw transaction to this prepared model's `IPreparedModel` (fuzzing; see
    /// [`RemoteDevice::send_raw`]).
    pub fn send_raw(&self, code: u32, pieces: Vec<RawPiece>, one_way: bool) -> HalResult<String> {
        send_raw_to(&self.prepared.as_binder(), code, pieces, one_way)
    }
}

/// Malformed transactions a hostile client can send the device (BI-62 in `docs/bad-inputs.md`), for
/// conformance tests of the service's decoding. None of them can be built through the typed
/// client calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireGarbage {
    /// A transaction code no IDevice method has.
    UnknownCode,
    /// `getType` without the interface header (the token check must refuse it).
    MissingInterfaceToken,
    /// `getSupportedOperations` whose Model parcelable claims 4 KiB and holds 4 bytes.
    TruncatedModel,
    /// `getSupportedOperations` whose operand vector claims `i32::MAX` elements.
    HugeVectorLength,
    /// `getSupportedOperations` whose operand vector has length -2.
    NegativeVectorLength,
    /// `prepareModel` with nothing after the header.
    EmptyPrepareModel,
}

impl WireGarbage {
    pub const ALL: &'static [WireGarbage] = &[
        WireGarbage::UnknownCode,
        WireGarbage::MissingInterfaceToken,
        WireGarbage::TruncatedModel,
        WireGarbage::HugeVectorLength,
        WireGarbage::NegativeVectorLength,
        WireGarbage::EmptyPrepareModel,
    ];
}

impl RemoteDevice {
    /// Sends a raw transaction to the device: the interface token, then `pieces`, under any
    /// transaction `code` (fuzzing the stubs; `Ok` is whatever the service answered).
    pub fn send_raw(&self, code: u32, pieces: Vec<RawPiece>, one_way: bool) -> HalResult<String> {
        send_raw_to(&self.device.as_binder(), code, pieces, one_way)
    }

    /// Sends one malformed transaction. `Ok(answer)` describes how the service refused it (a
    /// transport status or a non-OK reply status); a reply of success is a `GeneralFailure`,
    /// and no answer at all (a dead service) is `DeviceUnavailable`.
    pub fn send_garbage(&self, kind: WireGarbage) -> HalResult<String> {
        use rsbinder::StatusCode;
        // The IDevice transaction codes: methods in declaration order from the first call.
        const GET_SUPPORTED_OPERATIONS: u32 = FIRST_CALL_TRANSACTION + 4;
        const GET_TYPE: u32 = FIRST_CALL_TRANSACTION + 5;
        const PREPARE_MODEL: u32 = FIRST_CALL_TRANSACTION + 7;
        let binder = self.device.as_binder();
        let proxy = binder.as_remote().ok_or_else(|| {
            HalError::GeneralFailure("the device handle is not a remote proxy".into())
        })?;
        let failed = |e: StatusCode| HalError::GeneralFailure(format!("{kind:?}: {e:?}"));
        let mut data = proxy
            .prepare_transact(kind != WireGarbage::MissingInterfaceToken)
            .map_err(failed)?;
        let code = match kind {
            WireGarbage::UnknownCode => FIRST_CALL_TRANSACTION + 500,
            WireGarbage::MissingInterfaceToken => {
                data.write(&7i32).map_err(failed)?;
                GET_TYPE
            }
            WireGarbage::TruncatedModel => {
                // The argument's non-null marker, then a size the data does not have.
                for word in [1i32, 4096, 1] {
                    data.write(&word).map_err(failed)?;
                }
                GET_SUPPORTED_OPERATIONS
            }
            WireGarbage::HugeVectorLength | WireGarbage::NegativeVectorLength => {
                let length = if kind == WireGarbage::HugeVectorLength {
                    i32::MAX
                } else {
                    -2
                };
                // Model { main: Subgraph { operands: [..] } }: a parcelable opens with a
                // non-null marker and its size in bytes, a vector with its length.
                for word in [1, 64, 1, 56, length] {
                    data.write(&word).map_err(failed)?;
                }
                for _ in 0..13 {
                    data.write(&0i32).map_err(failed)?;
                }
                GET_SUPPORTED_OPERATIONS
            }
            WireGarbage::EmptyPrepareModel => PREPARE_MODEL,
        };
        match proxy.submit_transact(code, &data, 0) {
            Err(StatusCode::DeadObject) => Err(HalError::DeviceUnavailable(format!(
                "{kind:?}: the service is gone"
            ))),
            Err(e) => Ok(format!("transport status {e:?}")),
            Ok(None) => Err(HalError::GeneralFailure(format!(
                "{kind:?}: no reply to a two-way call"
            ))),
            Ok(Some(mut reply)) => match reply.read::<Status>() {
                Ok(status) if status.is_ok() => Err(HalError::GeneralFailure(format!(
                    "{kind:?}: the service answered success"
                ))),
                Ok(status) => Ok(format!("reply status {status}")),
                Err(e) => Ok(format!("unreadable reply ({e:?})")),
            },
        }
    }
}
