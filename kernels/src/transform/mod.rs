//! The data-movement family of types.hal 1.0 `OperationType`: CONCATENATION (2),
//! DEPTH_TO_SPACE (5), RESHAPE (22), RESIZE_BILINEAR (23) and SPACE_TO_DEPTH (26); and NNAPI
//! 1.1's BATCH_TO_SPACE_ND, PAD, SPACE_TO_BATCH_ND, SQUEEZE, STRIDED_SLICE and TRANSPOSE.
//!
//! [`mod@reference`] holds the loops (the 1.1 operations' oracles among them; RESHAPE and
//! SQUEEZE need none: they keep the bytes); [`nd`] the row-wise operator loops the 1.1
//! operations run. The NCHW ⇄ NHWC transposes every image operation shares are in
//! [`crate::layout`].

pub mod nd;
pub mod reference;
