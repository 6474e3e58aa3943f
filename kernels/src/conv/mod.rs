//! The convolution family: CONV_2D (3), DEPTHWISE_CONV_2D (4) and FULLY_CONNECTED (9) of
//! types.hal 1.0 `OperationType`, with NNAPI 1.2's dilation factors; the family NNAPI 1.2
//! extends with GROUPED_CONV_2D and TRANSPOSE_CONV_2D.
//!
//! [`mod@reference`] holds the plain loops (the test oracles, and what runs when the weights are
//! not constant or a parameter has no fast form); the operator loops over the micro-kernels
//! are [`mod@f32`] (CONV_2D and FULLY_CONNECTED float32), [`mod@u8`] (the same on uint8),
//! [`dw_f32`] and [`dw_u8`] (DEPTHWISE_CONV_2D). Each packs its constant filter once, at
//! prepare, into the layout its micro-kernel reads.

pub mod dw_f32;
pub mod dw_u8;
pub mod f32;
pub mod reference;
pub mod u8;

/// Extents of a convolution filter in the HAL layout `[out_c, kh, kw, in_c]`; FULLY_CONNECTED
/// weights `[units, input_size]` are the case `kh = kw = 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterShape {
    pub out_c: usize,
    pub kh: usize,
    pub kw: usize,
    pub in_c: usize,
}

impl FilterShape {
    /// Multiply-adds behind one output element.
    pub const fn taps(&self) -> usize {
        self.kh * self.kw * self.in_c
    }
}
