//! The convolution family: CONV_2D (3), DEPTHWISE_CONV_2D (4) and FULLY_CONNECTED (9) of
//! types.hal 1.0 `OperationType`, with NNAPI 1.2's dilation factors; the family NNAPI 1.2
//! extends with GROUPED_CONV_2D and TRANSPOSE_CONV_2D.
//!
//! [`mod@reference`] holds the plain loops (the test oracles, and what runs when the weights are
//! not constant or a parameter has no fast form); the operator loops over the micro-kernels
//! are [`mod@f32`] (CONV_2D and FULLY_CONNECTED float32), [`mod@u8`] (the same on uint8),
//! [`dw_f32`] and [`dw_u8`] (DEPTHWISE_CONV_2D). Each packs its constant filter once, at
//! prepare, into the layout its micro-kernel reads. NNAPI 1.2's GROUPED_CONV_2D
//! ([`grouped`]) and TRANSPOSE_CONV_2D ([`transpose`]) hold their reference loops beside their
//! fast forms on the same packed GEMMs.

pub mod dw_f32;
pub mod dw_u8;
pub mod f32;
pub mod grouped;
pub mod reference;
pub mod transpose;
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

/// How the bytes of a quantized convolution filter stand for values (NNAPI 1.2).
#[derive(Clone, Copy, Debug)]
pub enum FilterQuant<'a> {
    /// TENSOR_QUANT8_ASYMM: uint8 with one scale and zero point.
    Tensor(crate::QuantParams),
    /// TENSOR_QUANT8_SYMM_PER_CHANNEL along the output channels: int8 bytes, zero point 0, one
    /// scale per output channel.
    Channel(&'a [f32]),
}

impl FilterQuant<'_> {
    /// The filter's values with the zero point taken away, `w − zw`, as the accumulators
    /// multiply them.
    pub fn values(&self, filter: &[u8]) -> Vec<i32> {
        match self {
            FilterQuant::Tensor(q) => filter
                .iter()
                .map(|&f| i32::from(f) - q.zero_point)
                .collect(),
            FilterQuant::Channel(_) => filter.iter().map(|&f| i32::from(f as i8)).collect(),
        }
    }
}
