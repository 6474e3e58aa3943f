#[cfg(feature = "tokio")]
mod tokio_rt;
#[cfg(feature = "tokio")]
pub use tokio_rt::*;
