//! How the suite reaches a driver. The runner and the mutation checks only see [`Device`] and
//! [`Prepared`], so the same tests run in-process today and over binder later: a transport is a
//! new implementation of these two traits plus a [`TransportKind`] variant, nothing else.

use nnhal::hal::{Capabilities, HalResult, Model, Request};
use nnhal::{Driver, ExecutionResult, PreparedModel};
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
}

/// `IPreparedModel` as the suite uses it.
pub trait Prepared: Send + Sync {
    /// `execute` and its callback folded into one result; outputs land in the request's pools.
    fn execute(&self, request: &Request) -> HalResult<ExecutionResult>;
}

/// The transports the command line can select.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TransportKind {
    /// Call the driver library directly in this process.
    Inproc,
}

/// Options a transport may need; each kind reads the ones it understands.
#[derive(Clone, Debug, Default)]
pub struct TransportOptions {
    /// Kernel worker threads for an in-process driver (0 = one per core).
    pub threads: usize,
}

/// Opens a device over the chosen transport.
pub fn open(kind: TransportKind, options: &TransportOptions) -> HalResult<Box<dyn Device>> {
    match kind {
        TransportKind::Inproc => Ok(Box::new(InProcessDevice::new(options.threads)?)),
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
