//! The binder edge of the driver: the only module that names AIDL or binder types
//! (`docs/design.md`, `docs/transport.md`).
//!
//! - `ipc`: the binder crate and the generated AIDL stubs, selected per transport; nothing
//!   else names a binder crate's common types.
//! - `convert`: AIDL ↔ canonical `nnhal-hal` types.
//! - `service`: `IDevice`, `IPreparedModel`, `IBurst`, `IFencedExecutionCallback` on top of
//!   the in-process [`Driver`](crate::Driver); the one `HalError` → binder status mapping.
//! - Linux hosts (cargo): `server` serves the device over binder RPC on a Unix socket with
//!   `rsbinder`, `client` is the matching client, in canonical types, and `child` starts a
//!   private service for one client run.
//! - Android (Soong, cargo feature `aosp`): `servicemanager` registers the device with the
//!   platform's servicemanager through AOSP's `libbinder_rs`. The RPC server and client are
//!   left out.

#[cfg(not(feature = "aosp"))]
pub mod child;
#[cfg(not(feature = "aosp"))]
pub mod client;
// The canonical → AIDL half of the conversions serves the host RPC client, which the Android
// build leaves out.
#[cfg_attr(feature = "aosp", allow(dead_code))]
mod convert;
mod ipc;
#[cfg(not(feature = "aosp"))]
pub mod server;
mod service;
#[cfg(feature = "aosp")]
mod servicemanager;

use self::ipc::aidl;

#[cfg(not(feature = "aosp"))]
pub use client::{
    connect, connect_wait, connect_with, CacheFiles, ConnectOptions, DeviceKind, ExecuteOptions,
    ExecutionTiming, Notifications, PendingPrepare, PrepareOptions, RawPiece, RemoteBurst,
    RemoteDevice, RemotePreparedModel, WireGarbage, DEFAULT_CONNECT_TIMEOUT,
    FIRST_CALL_TRANSACTION,
};
pub use convert::{DeviceCapabilities, NO_PERFORMANCE};
#[cfg(not(feature = "aosp"))]
pub use server::{
    default_socket_path, serve, serve_until_signal, serve_until_signal_with_limits,
    serve_with_limits, RunningServer,
};
pub use service::{dump_text, version_string, CountersSnapshot};
#[cfg(feature = "aosp")]
pub use servicemanager::{join_thread_pool, register};

/// `android.hardware.neuralnetworks.IDevice/<instance>`: the name the device is published
/// under, in servicemanager on Android and in the RPC server's directory on a host.
pub fn service_name(instance: &str) -> String {
    format!("android.hardware.neuralnetworks.IDevice/{instance}")
}

/// A binder transport status in words, for messages a person reads. The binder crate carries
/// OS errors as negated errnos (`Errno(-111)`); those become the system's own text.
#[cfg(not(feature = "aosp"))]
pub(crate) fn status_words(status: rsbinder::StatusCode) -> String {
    use rsbinder::StatusCode;
    match status {
        StatusCode::NameNotFound => "no such file".into(),
        StatusCode::PermissionDenied => "permission denied".into(),
        StatusCode::AlreadyExists => "a file that is not a socket is in the way".into(),
        StatusCode::DeadObject => "the service closed the connection".into(),
        StatusCode::TimedOut => "timed out".into(),
        StatusCode::Errno(errno) if errno < 0 && errno > i32::MIN + 4096 => {
            let text = std::io::Error::from_raw_os_error(-errno).to_string();
            // "Connection refused (os error 111)": the number adds nothing for a reader.
            let text = text.split(" (os error").next().unwrap_or(&text);
            text.to_lowercase()
        }
        other => format!("binder status {other:?}"),
    }
}

/// The negated errno a binder status carries, if it carries one.
#[cfg(not(feature = "aosp"))]
pub(crate) fn status_errno(status: rsbinder::StatusCode) -> Option<i32> {
    match status {
        rsbinder::StatusCode::Errno(errno) if errno < 0 => Some(-errno),
        rsbinder::StatusCode::NameNotFound => Some(nix::errno::Errno::ENOENT as i32),
        rsbinder::StatusCode::PermissionDenied => Some(nix::errno::Errno::EACCES as i32),
        _ => None,
    }
}
