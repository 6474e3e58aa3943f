//! Serving `IDevice` over binder RPC on a Unix-domain socket (Linux hosts;
//! `docs/transport.md`).
//!
//! The settings are the ones `docs/transport.md` explains: the Android 13+ wire
//! profile (several connections per session, callback connections) and fd transport mode
//! Unix (pools travel as memfds over `SCM_RIGHTS`). The device is published under
//! `android.hardware.neuralnetworks.IDevice/<instance>` in the server's service directory, the
//! same name it has in servicemanager on Android.

use super::aidl::android::hardware::neuralnetworks::IDevice::BnDevice;
use super::ipc;
use super::service::Device;
use super::service_name;
use crate::driver::Driver;
use crate::limits::Limits;
use rsbinder::rpc::{FileDescriptorTransportMode, RpcServer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Highest android13plus wire version offered (2 = Android 16); peers negotiate down.
pub(crate) const WIRE_VERSION: u32 = 2;

/// Connections one client session may open towards the service: calls on one connection are
/// serialized, so a client that wants concurrent executions opens several.
pub const MAX_CONNECTIONS_PER_CLIENT: u32 = 16;

/// The default socket of an instance: `$XDG_RUNTIME_DIR/nnhal/<instance>.sock` when the
/// runtime directory is set, else `/tmp/nnhal-<uid>/<instance>.sock`.
pub fn default_socket_path(instance: &str) -> PathBuf {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(runtime) => PathBuf::from(runtime).join("nnhal"),
        None => PathBuf::from(format!("/tmp/nnhal-{}", nix::unistd::getuid())),
    };
    dir.join(format!("{instance}.sock"))
}

/// A running RPC server. [`RunningServer::shutdown`] (or dropping it) stops accepting, ends
/// every session and removes the socket file.
pub struct RunningServer {
    server: Arc<RpcServer>,
    accept_loop: Option<JoinHandle<()>>,
    socket: PathBuf,
}

impl RunningServer {
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept_loop) = self.accept_loop.take() else {
            return;
        };
        self.server.stop_accepting();
        // Joining the accept loop first is what lets `terminate` join every worker.
        if accept_loop.join().is_err() {
            log::warn!("the RPC accept loop panicked");
        }
        self.server.terminate();
        super::service::flush_repeated_warnings();
        match std::fs::remove_file(&self.socket) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("cannot remove {}: {e}", self.socket.display()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Creates the socket's directory (owner-only when we create it), binds the socket and starts
/// serving `driver` as `instance` on a background accept loop.
///
/// A failure to listen says why in words; a live service already on `socket` is
/// [`std::io::ErrorKind::AddrInUse`] ("another nnhal-service is already serving on …").
pub fn serve(driver: Arc<Driver>, socket: &Path, instance: &str) -> std::io::Result<RunningServer> {
    serve_with_limits(driver, socket, instance, Limits::default())
}

/// [`serve`] with the given resource limits (`docs/limits.md`).
pub fn serve_with_limits(
    driver: Arc<Driver>,
    socket: &Path,
    instance: &str,
    limits: Limits,
) -> std::io::Result<RunningServer> {
    use std::io::{Error, ErrorKind};
    let path = socket.display();
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    Error::new(
                        e.kind(),
                        format!("cannot create the socket directory {}: {e}", dir.display()),
                    )
                })?;
        }
    }
    // A stale socket left by a crashed server is removed; a live one is refused.
    let server = RpcServer::setup_unix_server(socket).map_err(|e| {
        use nix::errno::Errno;
        match super::status_errno(e).map(Errno::from_raw) {
            Some(Errno::EADDRINUSE) => Error::new(
                ErrorKind::AddrInUse,
                format!(
                    "another nnhal-service is already serving on {path}; stop it, or give this \
                     one another --socket or --instance"
                ),
            ),
            _ if e == rsbinder::StatusCode::AlreadyExists => Error::new(
                ErrorKind::AlreadyExists,
                format!("cannot listen on {path}: it exists and is not a socket"),
            ),
            _ => Error::other(format!(
                "cannot listen on {path}: {}",
                super::status_words(e)
            )),
        }
    })?;
    server.set_android13plus(WIRE_VERSION);
    server.set_supported_fd_modes(&[FileDescriptorTransportMode::Unix]);
    server.set_max_threads(MAX_CONNECTIONS_PER_CLIENT);
    // Every connection costs a thread and fds: beyond the cap new clients wait in the listen
    // backlog, and one that connects but never completes its handshake is dropped in time
    // instead of holding a slot.
    server.set_max_connections(limits.max_connections);
    server.set_handshake_timeout(Some(limits.handshake_timeout));
    // A connection that finished its handshake and then says nothing would hold its slot
    // forever: one that holds nothing (a client keeping a prepared model, a burst or a
    // callback is left alone) is closed after the idle timeout, and at the limit the one
    // silent longest makes room for a waiting client (docs/limits.md).
    server.set_idle_eviction(limits.idle_timeout, limits.evict_when_full_after());
    // A client that stops reading its replies would hold the thread writing to it forever.
    server.set_reply_timeout(Some(limits.send_timeout));
    let device = ipc::new_binder!(BnDevice, Device::with_limits(driver, limits)?);
    server
        .add_service(&service_name(instance), device.as_binder())
        .map_err(|e| {
            Error::other(format!(
                "cannot publish the device on {path}: {}",
                super::status_words(e)
            ))
        })?;
    let accept_loop = server.run_background();
    log::info!("serving {} on {}", service_name(instance), socket.display());
    Ok(RunningServer {
        server,
        accept_loop: Some(accept_loop),
        socket: socket.to_path_buf(),
    })
}

/// A whole host service: a driver with `threads` kernel workers serving `instance` on `socket`
/// until SIGINT or SIGTERM, then a clean shutdown (sessions ended, socket removed).
///
/// Must be called before the process starts any thread: the termination signals are blocked
/// here so every thread created afterwards inherits the mask and only the waiting caller
/// receives them.
pub fn serve_until_signal(socket: &Path, instance: &str, threads: usize) -> Result<(), String> {
    serve_until_signal_with_limits(socket, instance, threads, Limits::default())
}

/// [`serve_until_signal`] with the given resource limits (`docs/limits.md`).
pub fn serve_until_signal_with_limits(
    socket: &Path,
    instance: &str,
    threads: usize,
    limits: Limits,
) -> Result<(), String> {
    use nix::sys::signal::{SigSet, Signal};
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .map_err(|e| format!("cannot block SIGINT/SIGTERM: {e}"))?;
    let driver = Arc::new(Driver::new(threads).map_err(|e| e.to_string())?);
    log::info!(
        "kernels: {} on {} thread(s)",
        driver.isa(),
        driver.threads()
    );
    let server = serve_with_limits(driver, socket, instance, limits).map_err(|e| e.to_string())?;
    match signals.wait() {
        Ok(sig) => log::info!("{sig}: shutting down"),
        Err(e) => log::error!("waiting for a signal failed: {e}; shutting down"),
    }
    server.shutdown();
    log::info!("stopped; removed {}", socket.display());
    Ok(())
}
