//! See ../../check.rs.
// Items of the shim that only the service code calls are unused here.
#![allow(unused, non_snake_case, non_upper_case_globals, clippy::all)]

include!("../../check.rs");

/// nnhal's binder shim itself.
#[path = "../../../../src/binder/ipc.rs"]
mod ipc;

/// The shim at the path it has in nnhal (`crate::binder::ipc`), so its macros expand here as
/// they do there.
pub mod binder {
    pub(crate) use super::ipc;
}
