//! The math family of NNAPI 1.2–1.3 (`OperationType` in NeuralNetworks.h): ABS, EXP, LOG, NEG,
//! POW, RSQRT, SIN, SQRT, MAXIMUM, MINIMUM, PRELU, ELU, HARD_SWISH, LOG_SOFTMAX and CAST.
//!
//! [`mod@reference`] holds the plain loops (the test oracles, and the broadcasting paths that
//! run as they are), with the quantized arithmetic of the platform's reference: HARD_SWISH's
//! 16-bit fixed-point algorithm, PRELU's two output multipliers, MAXIMUM / MINIMUM's
//! requantization of each input to the output's scale. [`mod@fast`] holds the operator loops of
//! same-shape operands: contiguous chunks the compiler vectorises, split over the pool.

pub mod fast;
pub mod reference;
