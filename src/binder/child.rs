//! A service started for one client run (`nnhal bench --transport rpc`, the conformance suite)
//! on a socket in a private temporary directory, so a client always tests across a real
//! process boundary without a service set up beforehand (docs/transport.md).
//!
//! The program is `$NNHAL_SERVICE`, an explicit path, the `nnhal-service` binary beside the
//! running executable (or one level up, for cargo's test executables in `deps/`), or — when the
//! caller allows it — the running executable's own hidden `serve` subcommand, which makes the
//! same library call as `nnhal-service`. Dropping a [`ServiceChild`] stops the service
//! (SIGTERM, then SIGKILL if it lingers) and removes the directory.

use super::client::{connect_with, ConnectOptions, RemoteDevice};
use nnhal_hal::{HalError, HalResult};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a started service may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// What to start and how.
#[derive(Clone, Debug)]
pub struct ChildOptions {
    /// The program, or `None` to look for one (see the module docs).
    pub program: Option<PathBuf>,
    /// Whether the running executable may serve itself (`<exe> serve`) when no `nnhal-service`
    /// binary is found.
    pub self_serve: bool,
    pub instance: String,
    /// Kernel threads (0 = one per core).
    pub threads: usize,
    /// The service's `--log-level`.
    pub log_level: String,
    /// Extra environment of the service (e.g. `NNHAL_ISA`).
    pub env: Vec<(String, String)>,
    /// Names the temporary directory (`<tag>-<pid>-<n>`).
    pub tag: &'static str,
}

impl Default for ChildOptions {
    fn default() -> Self {
        ChildOptions {
            program: None,
            self_serve: true,
            instance: "default".into(),
            threads: 0,
            log_level: "warn,rsbinder=error".into(),
            env: Vec::new(),
            tag: "nnhal",
        }
    }
}

/// A running service started by [`ServiceChild::start`].
pub struct ServiceChild {
    process: Child,
    /// What was started, for reports.
    program: String,
    socket: PathBuf,
    dir: PathBuf,
}

fn unavailable(why: String) -> HalError {
    HalError::DeviceUnavailable(why)
}

/// The program (and leading arguments) that serves the device; see the module docs.
pub fn service_program(
    explicit: Option<&Path>,
    self_serve: bool,
) -> HalResult<(PathBuf, Vec<&'static str>)> {
    if let Some(path) = explicit {
        return Ok((path.to_path_buf(), vec![]));
    }
    if let Some(path) = std::env::var_os("NNHAL_SERVICE") {
        return Ok((PathBuf::from(path), vec![]));
    }
    let hint = |why: String| {
        unavailable(format!(
            "{why}; build it (`cargo build --bin nnhal-service`), set NNHAL_SERVICE, or pass \
             --service or --socket"
        ))
    };
    let exe =
        std::env::current_exe().map_err(|e| hint(format!("cannot locate this executable: {e}")))?;
    let candidates: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("nnhal-service"))
        .collect();
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok((found.clone(), vec![]));
    }
    if self_serve {
        return Ok((exe, vec!["serve"]));
    }
    Err(hint(format!(
        "no nnhal-service binary at {}",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" or ")
    )))
}

impl ServiceChild {
    /// Starts the service; it may still be binding its socket when this returns (see
    /// [`ServiceChild::connect`]).
    pub fn start(options: &ChildOptions) -> HalResult<ServiceChild> {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let (binary, leading) = service_program(options.program.as_deref(), options.self_serve)?;
        let dir = std::env::temp_dir().join(format!(
            "{}-{}-{}",
            options.tag,
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let failed =
            |what: &str, e: std::io::Error| unavailable(format!("{what} {}: {e}", dir.display()));
        // A leftover from a killed run with the same pid is ours to replace.
        let _ = std::fs::remove_dir_all(&dir);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .map_err(|e| failed("cannot create", e))?;
        }
        let socket = dir.join(format!("{}.sock", options.instance));
        let mut command = Command::new(&binary);
        command
            .args(&leading)
            .arg("--socket")
            .arg(&socket)
            .arg("--instance")
            .arg(&options.instance)
            .arg("--threads")
            .arg(options.threads.to_string())
            .arg("--log-level")
            .arg(&options.log_level)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        // Where the C library offers it (glibc; not bionic in this nix version).
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the forked child before exec and makes one
            // async-signal-safe system call (prctl); it allocates nothing and takes no locks.
            unsafe {
                command.pre_exec(|| {
                    // The service must not outlive a client run that is killed outright.
                    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                        .map_err(std::io::Error::from)
                });
            }
        }
        let process = command.spawn().map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            unavailable(format!("cannot start {}: {e}", binary.display()))
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
    pub fn connect(&mut self, options: &ConnectOptions) -> HalResult<RemoteDevice> {
        let start = Instant::now();
        loop {
            match connect_with(&self.socket, options) {
                Ok(device) => return Ok(device),
                Err(e) => {
                    if let Ok(Some(status)) = self.process.try_wait() {
                        return Err(unavailable(format!(
                            "the service exited ({status}) before accepting a connection"
                        )));
                    }
                    if start.elapsed() > START_TIMEOUT {
                        return Err(unavailable(format!(
                            "the service did not accept a connection within {START_TIMEOUT:?}: {e}"
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The command line that was started.
    pub fn program(&self) -> &str {
        &self.program
    }

    pub fn pid(&self) -> u32 {
        self.process.id()
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
