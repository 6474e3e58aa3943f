//! How the suite reaches a driver. The runner, the mutation checks and the basic tests only see
//! [`Device`] and [`Prepared`], so the same tests run over binder and in-process:
//!
//! * [`TransportKind::Rpc`] (the default): the real service. Models and requests are converted to
//!   the AIDL parcelables, pools travel as file descriptors over binder RPC on a Unix socket, and
//!   errors come back as binder statuses. Without a socket the transport starts its own
//!   `nnhal-service` child on a temporary socket and stops it when the device is dropped.
//! * [`TransportKind::Inproc`]: the driver library called directly, for debugging a failure
//!   without a process boundary.

use nnhal::binder::{self, ConnectOptions, RemoteDevice, RemotePreparedModel};
use nnhal::hal::{Capabilities, HalError, HalResult, Model, Request};
use nnhal::{Driver, ExecutionResult, PreparedModel};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `IDevice` as the suite uses it.
pub trait Device: Send + Sync {
    /// A short description for reports ("in-process", a socket path, ...).
    fn describe(&self) -> String;
    fn capabilities(&self) -> HalResult<Capabilities>;
    /// `getSupportedOperations`: INVALID_ARGUMENT for a malformed model.
    fn supported_operations(&self, model: &Model) -> HalResult<Vec<bool>>;
    /// `prepareModel` and its callback folded into one result.
    fn prepare_model(&self, model: Model) -> HalResult<Box<dyn Prepared>>;
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

/// How long a started service may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(20);

impl RpcDevice {
    /// Connects to `options.socket`, or starts a child service and connects to it.
    pub fn open(options: &TransportOptions) -> HalResult<RpcDevice> {
        let instance = options.instance.clone().unwrap_or_else(|| "default".into());
        let connect = ConnectOptions {
            instance: instance.clone(),
            // The suite may execute from several threads; calls on one connection serialise.
            outgoing_connections: 2,
        };
        match &options.socket {
            Some(socket) => Ok(RpcDevice {
                device: binder::connect_with(socket, &connect)?,
                socket: socket.clone(),
                child: None,
            }),
            None => {
                let mut child = ServiceChild::start(options, &instance)?;
                let device = child.connect(&connect)?;
                Ok(RpcDevice {
                    device,
                    socket: child.socket.clone(),
                    child: Some(child),
                })
            }
        }
    }

    /// The child service's process id, when this device started one.
    pub fn child_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.process.id())
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
                child.program,
                child.process.id(),
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
        Ok(Box::new(RpcPrepared(self.device.prepare_model(model)?)))
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
}

/// A `nnhal-service` started for this run, on a socket in a private temporary directory.
/// Dropping it stops the service (SIGTERM, then SIGKILL if it lingers) and removes the directory.
struct ServiceChild {
    process: Child,
    /// What was started, for reports.
    program: String,
    socket: PathBuf,
    dir: PathBuf,
}

/// The program (and leading arguments) that starts a service; see [`TransportOptions`].
pub fn service_command(options: &TransportOptions) -> HalResult<(PathBuf, Vec<&'static str>)> {
    if let Some(path) = &options.service {
        return Ok((path.clone(), vec![]));
    }
    if let Some(path) = std::env::var_os("NNHAL_SERVICE") {
        return Ok((PathBuf::from(path), vec![]));
    }
    let unavailable = |why: String| {
        HalError::DeviceUnavailable(format!(
            "{why}; build it (`cargo build --bin nnhal-service`), set NNHAL_SERVICE, or pass \
             --service or --socket"
        ))
    };
    let exe = std::env::current_exe()
        .map_err(|e| unavailable(format!("cannot locate this executable: {e}")))?;
    // A binary sits in target/<profile>/; a test executable one level deeper, in deps/.
    let candidates: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("nnhal-service"))
        .collect();
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok((found.clone(), vec![]));
    }
    if options.self_serve {
        return Ok((exe, vec!["serve"]));
    }
    Err(unavailable(format!(
        "no nnhal-service binary at {}",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    )))
}

impl ServiceChild {
    fn start(options: &TransportOptions, instance: &str) -> HalResult<ServiceChild> {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let (binary, leading) = service_command(options)?;
        let dir = std::env::temp_dir().join(format!(
            "nnhal-vts-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let failed = |what: &str, e: std::io::Error| {
            HalError::DeviceUnavailable(format!("{what} {}: {e}", dir.display()))
        };
        // A leftover from a killed run with the same pid is ours to replace.
        let _ = std::fs::remove_dir_all(&dir);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|e| failed("cannot create", e))?;
        }
        let socket = dir.join(format!("{instance}.sock"));
        let log_level =
            std::env::var("NNHAL_SERVICE_LOG").unwrap_or_else(|_| "warn,rsbinder=error".into());
        let mut command = Command::new(&binary);
        command
            .args(&leading)
            .arg("--socket")
            .arg(&socket)
            .arg("--instance")
            .arg(instance)
            .arg("--threads")
            .arg(options.threads.to_string())
            .arg("--log-level")
            .arg(log_level)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the forked child before exec and only makes one
            // async-signal-safe system call (prctl); it allocates nothing and takes no locks.
            unsafe {
                command.pre_exec(|| {
                    // The service must not outlive a suite that is killed outright.
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                        .map_err(std::io::Error::from)
                });
            }
        }
        let process = command.spawn().map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            HalError::DeviceUnavailable(format!("cannot start {}: {e}", binary.display()))
        })?;
        let program = std::iter::once(binary.display().to_string())
            .chain(leading.iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(ServiceChild {
            process,
            program,
            socket,
            dir,
        })
    }

    /// Waits for the service to accept a connection, noticing when it exits instead.
    fn connect(&mut self, options: &ConnectOptions) -> HalResult<RemoteDevice> {
        let start = Instant::now();
        loop {
            match binder::connect_with(&self.socket, options) {
                Ok(device) => return Ok(device),
                Err(e) => {
                    if let Ok(Some(status)) = self.process.try_wait() {
                        return Err(HalError::DeviceUnavailable(format!(
                            "the service exited ({status}) before accepting a connection"
                        )));
                    }
                    if start.elapsed() > START_TIMEOUT {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

impl Drop for ServiceChild {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        if let Ok(pid) = i32::try_from(self.process.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.process.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => {
                    let _ = self.process.kill();
                    let _ = self.process.wait();
                    break;
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
