//! The data-movement family of types.hal 1.0 `OperationType`: CONCATENATION (2),
//! DEPTH_TO_SPACE (5), RESHAPE (22), RESIZE_BILINEAR (23) and SPACE_TO_DEPTH (26); the family
//! NNAPI 1.1–1.2 extend with PAD, TRANSPOSE, SQUEEZE, STRIDED_SLICE, SPACE_TO_BATCH_ND and
//! BATCH_TO_SPACE_ND.
//!
//! [`mod@reference`] holds the loops (RESHAPE needs none: it keeps the bytes). The NCHW ⇄ NHWC
//! transposes every image operation shares are in [`crate::layout`].

pub mod reference;
