//! The binder edge of the driver: the only module that names AIDL or binder types
//! (DESIGN.md §1–§3).
//!
//! - `aidl`: Rust stubs generated from `aidl/` (the frozen `android.hardware.neuralnetworks`
//!   version 1 interface) by `build.rs`.
//! - `convert`: AIDL ↔ canonical `nnhal-hal` types.
//! - `service`: `IDevice`, `IPreparedModel`, `IBurst`, `IFencedExecutionCallback` on top of
//!   the in-process [`Driver`](crate::Driver); the one `HalError` → binder status mapping.
//! - [`server`]: serving the device over binder RPC on a Unix socket (Linux hosts).
//! - [`client`]: the matching client, in canonical types.
//!
//! The transport is the `rsbinder` crate; nothing outside this module depends on it, so an
//! Android build can put AOSP's binder crates behind the same surface.

#[allow(
    clippy::all,
    unused,
    non_snake_case,
    non_camel_case_types,
    non_upper_case_globals
)]
mod aidl {
    rsbinder::include_aidl!("nnhal_aidl");
}

pub mod client;
mod convert;
pub mod server;
mod service;

pub use client::{
    connect, connect_wait, connect_with, ConnectOptions, DeviceKind, ExecuteOptions,
    ExecutionTiming, PrepareOptions, RemoteBurst, RemoteDevice, RemotePreparedModel, WireGarbage,
};
pub use convert::{DeviceCapabilities, NO_PERFORMANCE};
pub use server::{default_socket_path, serve, serve_until_signal, service_name, RunningServer};
pub use service::version_string;
