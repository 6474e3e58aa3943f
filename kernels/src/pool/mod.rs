//! The pooling family of types.hal 1.0 `OperationType`: AVERAGE_POOL_2D (1), L2_POOL_2D (12)
//! and MAX_POOL_2D (17), NHWC (the NCHW `layout` of NNAPI 1.2 runs transposed).
//!
//! [`mod@reference`] holds the plain loops (the test oracles, and L2_POOL_2D as it runs);
//! [`mod@f32`] and [`mod@u8`] the operator loops over the pooling micro-kernels.

pub mod f32;
pub mod reference;
pub mod u8;
