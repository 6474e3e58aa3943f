//! The element-wise family of types.hal 1.0 `OperationType`: ADD (0) and MUL (18) with
//! NumPy-style broadcasting (TENSOR_INT32 from NNAPI 1.3), FLOOR (8), RELU / RELU1 / RELU6
//! (19–21), LOGISTIC (14), and TANH (28); the family NNAPI 1.1–1.3 extend with
//! SUB, DIV and the other per-element operations.
//!
//! [`mod@reference`] holds the plain loops (the test oracles, and the broadcasting and uint8
//! paths that run as they are); [`mod@f32`] the float32 operator loops over the vector
//! micro-kernels (same-shape ADD and MUL, the clamps, LOGISTIC, TANH, and SOFTMAX, which shares
//! their chunking); [`binary_u8`] the uint8 ADD and MUL tables built at prepare.

pub mod binary_u8;
pub mod f32;
pub mod reference;
