//! Operator loops of the fast path: each tiles one operation over the micro-kernels of a
//! [`crate::ukernels::Ukernels`] table and splits the tiles over the thread pool. Weights are
//! packed once (at prepare) into the layout the chosen micro-kernel reads. The reference
//! kernels in the family modules at the crate root ([`crate::conv`], [`crate::pool`], …) are the
//! oracles these loops are tested against.

pub mod aligned;
pub mod conv_f32;
pub mod dwconv_f32;
pub mod elementwise_f32;
pub mod pool_f32;

pub use aligned::AlignedBuf;
pub use conv_f32::PackedConvF32;

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

pub mod conv_u8;
pub mod dwconv_u8;
pub mod pool_u8;
