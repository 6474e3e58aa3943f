//! Canonical NNAPI 1.0 types, the per-operation signature table, shape inference, model and
//! request validation, and memory pools. No binder, no arithmetic: the binder adapter converts
//! into these types, the driver plans and runs what validation accepts.

// Validation writes `ensure!(x > 0.0, ..)`, which expands to `!(x > 0.0)`: exactly the form
// that also rejects NaN, so the lint's suggested rewrite would be a bug here.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

#[macro_use]
pub mod error;
pub mod ahwb;
pub mod builder;
pub mod memory;
pub mod ops;
pub mod shape;
pub mod types;
pub mod validate;

pub use error::{HalError, HalResult};
pub use memory::{MappedPool, Memory};
pub use types::*;
