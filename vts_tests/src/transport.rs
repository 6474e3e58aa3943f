//! How the suite reaches a driver. The runner, the mutation checks and the basic tests only see
//! [`Device`] and [`Prepared`], so the same tests run over binder and in-process:
//!
//! * [`TransportKind::Rpc`] (the default): the real service. Models and requests are converted to
//!   the AIDL parcelables, pools travel as file descriptors over binder RPC on a Unix socket, and
//!   errors come back as binder statuses. Without a socket the transport starts its own
//!   `nnhal-service` child on a temporary socket and stops it when the device is dropped.
//! * [`TransportKind::Inproc`]: the driver library called directly, for debugging a failure
//!   without a process boundary.

use nnhal::binder::child::{service_program, ChildOptions, ServiceChild};
use nnhal::binder::{
    self, CacheFiles, ConnectOptions, PrepareOptions, RemoteDevice, RemotePreparedModel,
};
use nnhal::hal::{Capabilities, ErrorStatus, HalError, HalResult, Model, Request};
use nnhal::{Driver, ExecutionResult, PreparedModel};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `IDevice` as the suite uses it.
pub trait Device: Send + Sync {
    /// A short description for reports ("in-process", a socket path, ...).
    fn describe(&self) -> String;
    fn capabilities(&self) -> HalResult<Capabilities>;
    /// `getSupportedOperations`: INVALID_ARGUMENT for a malformed model.
    fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>>;
    /// `prepareModel` and its callback folded into one result.
    fn prepare_model(&self, model: Model) -> HalResult<Box<dyn Prepared>>;
    /// `prepareModel` with compilation-cache handles and a token.
    fn prepare_model_cached(
        &self,
        model: Model,
        model_cache: &[BorrowedFd<'_>],
        data_cache: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>>;
    /// `prepareModelFromCache` and its callback folded into one result.
    fn prepare_model_from_cache(
        &self,
        model_cache: &[BorrowedFd<'_>],
        data_cache: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>>;
    /// The binder client, when the device is reached over binder (for binder-only checks).
    fn remote(&self) -> Option<&RemoteDevice> {
        None
    }
    /// Whether a model's `numberOfConsumers` reaches the driver as given. The canonical (HIDL
    /// 1.0) model has the field; the AIDL `Operand` does not, the service derives it.
    fn carries_consumer_counts(&self) -> bool {
        true
    }
}

/// `IPreparedModel` as the suite uses it.
pub trait Prepared: Send + Sync {
    /// `execute` and its callback folded into one result; outputs land in the request's pools.
    fn execute(&self, request: &Request) -> HalResult<ExecutionResult>;
    /// `executeFenced` without fences, where the transport has it (binder only: fenced
    /// execution is an interface call, the driver library has no separate path for it).
    fn execute_fenced(&self, _request: &Request) -> Option<HalResult<()>> {
        None
    }
}

/// The transports the command line can select.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportKind {
    /// The HAL service over binder RPC (a child `nnhal-service` unless a socket is given).
    #[default]
    Rpc,
    /// Call the driver library directly in this process.
    Inproc,
}

/// Options a transport may need; each kind reads the ones it understands.
#[derive(Clone, Debug, Default)]
pub struct TransportOptions {
    /// Kernel worker threads of the driver, in-process or in a started service (0 = one per core).
    pub threads: usize,
    /// rpc: a running service's socket. `None` starts a child service.
    pub socket: Option<PathBuf>,
    /// rpc: the service instance name; `None` means `default`.
    pub instance: Option<String>,
    /// rpc: the `nnhal-service` binary to start. `None`: `$NNHAL_SERVICE`, else the binary next
    /// to the running executable (cargo puts every binary of the workspace there).
    pub service: Option<PathBuf>,
    /// rpc: when no `nnhal-service` binary is found, start this executable with `serve` as its
    /// first argument instead (the `nnhal-vts` binary serves with the same library call, so a
    /// bare `cargo run --bin nnhal-vts` still tests through a separate service process).
    pub self_serve: bool,
}

/// Opens a device over the chosen transport.
pub fn open(kind: TransportKind, options: &TransportOptions) -> HalResult<Box<dyn Device>> {
    match kind {
        TransportKind::Inproc => Ok(Box::new(InProcessDevice::new(options.threads)?)),
        TransportKind::Rpc => Ok(Box::new(RpcDevice::open(options)?)),
    }
}

/// The driver library called directly.
pub struct InProcessDevice {
    driver: Driver,
}

impl InProcessDevice {
    pub fn new(threads: usize) -> HalResult<InProcessDevice> {
        Ok(InProcessDevice {
            driver: Driver::new(threads)?,
        })
    }

    /// A driver that compiles its plans for the micro-kernels of one instruction-set level
    /// (the in-process form of `NNHAL_ISA`).
    pub fn with_kernels(
        threads: usize,
        kernels: &'static nnhal::kernels::ukernels::Ukernels,
    ) -> HalResult<InProcessDevice> {
        Ok(InProcessDevice {
            driver: Driver::with_kernels(threads, kernels)?,
        })
    }

    pub fn driver(&self) -> &Driver {
        &self.driver
    }
}

impl Device for InProcessDevice {
    fn describe(&self) -> String {
        "in-process".into()
    }

    fn capabilities(&self) -> HalResult<Capabilities> {
        Ok(self.driver.capabilities())
    }

    fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>> {
        self.driver.supported_operations(model)
    }

    fn prepare_model(&self, model: Model) -> HalResult<Box<dyn Prepared>> {
        Ok(Box::new(InProcessPrepared(
            self.driver.prepare_model(model)?,
        )))
    }

    fn prepare_model_cached(
        &self,
        model: Model,
        model_cache: &[BorrowedFd<'_>],
        data_cache: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        Ok(Box::new(InProcessPrepared(
            self.driver
                .prepare_model_to_files(model, model_cache, data_cache, token)?,
        )))
    }

    fn prepare_model_from_cache(
        &self,
        model_cache: &[BorrowedFd<'_>],
        data_cache: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        Ok(Box::new(InProcessPrepared(
            self.driver
                .prepare_model_from_files(model_cache, data_cache, token)?,
        )))
    }
}

struct InProcessPrepared(Arc<PreparedModel>);

impl Prepared for InProcessPrepared {
    fn execute(&self, request: &Request) -> HalResult<ExecutionResult> {
        self.0.execute(request)
    }
}

/// The service over binder RPC.
pub struct RpcDevice {
    // Declared first so the session closes before a child service is stopped.
    device: RemoteDevice,
    socket: PathBuf,
    child: Option<ServiceChild>,
}

impl RpcDevice {
    /// Connects to `options.socket`, or starts a child service and connects to it.
    pub fn open(options: &TransportOptions) -> HalResult<RpcDevice> {
        let instance = options.instance.clone().unwrap_or_else(|| "default".into());
        let connect = ConnectOptions {
            instance: instance.clone(),
            // The suite may execute from several threads; calls on one connection serialise.
            outgoing_connections: 2,
            ..ConnectOptions::default()
        };
        match &options.socket {
            Some(socket) => Ok(RpcDevice {
                device: binder::connect_with(socket, &connect)?,
                socket: socket.clone(),
                child: None,
            }),
            None => {
                let mut child = ServiceChild::start(&ChildOptions {
                    program: options.service.clone(),
                    self_serve: options.self_serve,
                    instance: instance.clone(),
                    threads: options.threads,
                    log_level: std::env::var("NNHAL_SERVICE_LOG")
                        .unwrap_or_else(|_| "warn,rsbinder=error".into()),
                    env: Vec::new(),
                    tag: "nnhal-vts",
                })?;
                let device = child.connect(&connect)?;
                Ok(RpcDevice {
                    device,
                    socket: child.socket().to_path_buf(),
                    child: Some(child),
                })
            }
        }
    }

    /// The child service's process id, when this device started one.
    pub fn child_pid(&self) -> Option<u32> {
        self.child.as_ref().map(ServiceChild::pid)
    }

    /// The socket the device is reached on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Device for RpcDevice {
    fn describe(&self) -> String {
        match &self.child {
            Some(child) => format!(
                "binder RPC to `{}` (pid {}) on {}",
                child.program(),
                child.pid(),
                self.socket.display()
            ),
            None => format!("binder RPC, {}", self.socket.display()),
        }
    }

    fn capabilities(&self) -> HalResult<Capabilities> {
        self.device.capabilities()
    }

    fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>> {
        self.device.supported_operations(model)
    }

    fn prepare_model(&self, model: Model) -> HalResult<Box<dyn Prepared>> {
        let pending = self
            .device
            .launch_prepare(&model, &PrepareOptions::default())?;
        let launched = pending.launched().is_ok();
        match pending.wait() {
            Ok(prepared) => Ok(Box::new(RpcPrepared(prepared))),
            // VTS's validatePrepareModel wants an invalid model refused by the call itself as
            // well as through the callback: a launch that succeeded does not count.
            Err(e) if launched && e.status() == ErrorStatus::InvalidArgument => {
                Err(HalError::GeneralFailure(format!(
                    "prepareModel returned OK but its callback reported INVALID_ARGUMENT: {}",
                    e.message()
                )))
            }
            Err(e) => Err(e),
        }
    }

    fn prepare_model_cached(
        &self,
        model: Model,
        model_cache: &[BorrowedFd<'_>],
        data_cache: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        let files = CacheFiles::new(model_cache, data_cache, token);
        Ok(Box::new(RpcPrepared(
            self.device.prepare_model_cached(&model, &files)?,
        )))
    }

    fn prepare_model_from_cache(
        &self,
        model_cache: &[BorrowedFd<'_>],
        data_cache: &[BorrowedFd<'_>],
        token: &[u8],
    ) -> HalResult<Box<dyn Prepared>> {
        let files = CacheFiles::new(model_cache, data_cache, token);
        Ok(Box::new(RpcPrepared(
            self.device.prepare_model_from_cache_with(&files)?,
        )))
    }

    fn remote(&self) -> Option<&RemoteDevice> {
        Some(&self.device)
    }

    fn carries_consumer_counts(&self) -> bool {
        false
    }
}

struct RpcPrepared(RemotePreparedModel);

impl Prepared for RpcPrepared {
    fn execute(&self, request: &Request) -> HalResult<ExecutionResult> {
        self.0.execute(request)
    }

    fn execute_fenced(&self, request: &Request) -> Option<HalResult<()>> {
        Some(self.0.execute_fenced(request))
    }
}

/// The program (and leading arguments) that starts a service; see [`TransportOptions`].
pub fn service_command(options: &TransportOptions) -> HalResult<(PathBuf, Vec<&'static str>)> {
    service_program(options.service.as_deref(), options.self_serve)
}
