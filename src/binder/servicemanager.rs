//! Publishing `IDevice` through the platform's servicemanager (Android builds only;
//! `docs/transport.md`).
//!
//! The device is registered as `android.hardware.neuralnetworks.IDevice/<instance>`; the VINTF
//! manifest fragment must declare the same instance, or servicemanager refuses the
//! registration. Calls are served by libbinder's thread pool: the threads it starts on demand
//! plus the main thread once it joins.

use super::aidl::android::hardware::neuralnetworks::IDevice::BnDevice;
use super::ipc::{self, ProcessState};
use super::service::Device;
use super::service_name;
use crate::driver::Driver;
use crate::limits::Limits;
use std::sync::Arc;

/// Starts the binder thread pool (up to `binder_threads` threads besides the main thread) and
/// registers `driver` as `instance`, serving within `limits` (`docs/limits.md`), as a lazy HAL
/// when `lazy` (see `ipc::register_service`).
pub fn register(
    driver: Arc<Driver>,
    instance: &str,
    binder_threads: u32,
    limits: Limits,
    lazy: bool,
) -> Result<(), String> {
    // The pool size must be set before the pool starts; starting it before the registration
    // means a client that finds the device at once is already served.
    ProcessState::set_thread_pool_max_thread_count(binder_threads);
    ProcessState::start_thread_pool();
    let device =
        Device::with_limits(driver, limits).map_err(|e| format!("cannot start the device: {e}"))?;
    let device = ipc::new_binder!(BnDevice, device);
    let name = service_name(instance);
    ipc::register_service(&name, device.as_binder(), lazy)?;
    let how = if lazy { "lazy, " } else { "" };
    log::info!("registered {name} ({how}{binder_threads} binder threads + main)");
    Ok(())
}

/// Adds the calling thread to the binder thread pool; it serves calls until the process ends.
pub fn join_thread_pool() {
    ProcessState::join_thread_pool();
}
