//! The data-movement family of types.hal 1.0 `OperationType`: CONCATENATION (2),
//! DEPTH_TO_SPACE (5), RESHAPE (22), RESIZE_BILINEAR (23) and SPACE_TO_DEPTH (26); NNAPI
//! 1.1's BATCH_TO_SPACE_ND, PAD, SPACE_TO_BATCH_ND, SQUEEZE, STRIDED_SLICE and TRANSPOSE; and
//! NNAPI 1.2's CHANNEL_SHUFFLE, EXPAND_DIMS, PAD_V2, SLICE, SPLIT and TILE.
//!
//! [`mod@reference`] holds the loops (the 1.1 and 1.2 operations' oracles among them; RESHAPE,
//! SQUEEZE and EXPAND_DIMS need none: they keep the bytes); [`nd`] the row-wise operator loops
//! the 1.1 operations and PAD_V2 run, [`blocks`] those of the other 1.2 operations. The
//! NCHW ⇄ NHWC transposes every image operation shares are in [`crate::layout`].

pub mod blocks;
pub mod nd;
pub mod reference;
