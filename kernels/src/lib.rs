//! HAL-blind CPU kernels for the NNAPI 1.0 operation set (types.hal 1.0, `OperationType`).
//!
//! Every kernel works on plain slices in row-major order (NHWC for 4-D image tensors) plus a
//! few small geometry and quantization structs defined here. Nothing in this crate knows about
//! models, operands or the binder surface: the driver's executor resolves shapes and parameters
//! and hands this crate only what the arithmetic needs.
//!
//! Callers guarantee that slice lengths match the shapes they pass (the driver validates and
//! infers every shape before running); kernels check with `debug_assert!` only. Data-dependent
//! failures that validation cannot see (a lookup index out of range) come back as
//! [`KernelError`].
//!
//! uint8 arithmetic follows the NNAPI 1.0 reference semantics: int32 accumulation with zero
//! points, fixed-point requantization with the reference rounding (see [`quant`]) and fused
//! activation clamps applied in the quantized domain.
//!
//! Parallel kernels split their work through [`parallel`] alone: over the team of a
//! [`parallel::Pool`] execution (led by the calling thread or by a pool worker), over the rayon
//! pool they run on, or — called from any other thread — sequentially on it: the driver runs
//! small models on the calling thread, where handing work to a pool would cost more than the
//! work, and nothing may fall through to rayon's implicit global pool, which would ignore the
//! driver's thread count.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

// One module per operation family, named as in the driver's executor (`src/executor/`) and
// in shape inference (`hal/src/shape/`); each holds the family's reference loops
// (`reference`) beside its fast operator loops.
pub mod conv;
pub mod detection;
pub mod elementwise;
pub mod index;
pub mod logic;
pub mod lookup;
pub mod math;
pub mod normalization;
pub mod pool;
pub mod quantize;
pub mod random;
pub mod recurrent;
pub mod reduce;
pub mod transform;

// Shared by the families.
pub mod aligned;
pub mod layout;
pub mod parallel;
pub mod persist;
pub mod quant;
pub mod ukernels;

pub use parallel::in_worker;

/// A data-dependent failure found while running a kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// Run-time data the operation cannot accept (e.g. a lookup index out of range).
    #[error("invalid data: {0}")]
    InvalidData(String),
}

/// Affine quantization parameters of a TENSOR_QUANT8_ASYMM tensor:
/// `real = scale * (q - zero_point)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantParams {
    pub scale: f32,
    pub zero_point: i32,
}

impl QuantParams {
    pub const fn new(scale: f32, zero_point: i32) -> Self {
        Self { scale, zero_point }
    }
}

/// Fused activation function (`FusedActivationFunc` in types.hal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Activation {
    #[default]
    None,
    Relu,
    Relu1,
    Relu6,
}

impl Activation {
    /// Clamp bounds in the float domain.
    pub fn range_f32(self) -> (f32, f32) {
        match self {
            Activation::None => (f32::NEG_INFINITY, f32::INFINITY),
            Activation::Relu => (0.0, f32::INFINITY),
            Activation::Relu1 => (-1.0, 1.0),
            Activation::Relu6 => (0.0, 6.0),
        }
    }

    /// Clamp bounds in the quantized domain of `out`, as the reference computes them: each
    /// real bound is quantized with `zero_point + round(bound / scale)` (round half away from
    /// zero, in float32) and then intersected with 0..=255.
    pub fn range_u8(self, out: QuantParams) -> (i32, i32) {
        let quantize = |f: f32| {
            out.zero_point
                .saturating_add((f / out.scale).round() as i32)
        };
        match self {
            Activation::None => (0, 255),
            Activation::Relu => (quantize(0.0).max(0), 255),
            Activation::Relu1 => (quantize(-1.0).max(0), quantize(1.0).min(255)),
            Activation::Relu6 => (quantize(0.0).max(0), quantize(6.0).min(255)),
        }
    }

    #[inline]
    pub fn apply_f32(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::Relu1 => x.clamp(-1.0, 1.0),
            Activation::Relu6 => x.clamp(0.0, 6.0),
        }
    }
}

/// Explicit padding, in elements, on each side of the two spatial axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Padding {
    pub left: usize,
    pub right: usize,
    pub top: usize,
    pub bottom: usize,
}

/// The extents of a rank-4 NHWC tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Nhwc {
    pub n: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
}

impl Nhwc {
    pub const fn new(n: usize, h: usize, w: usize, c: usize) -> Self {
        Self { n, h, w, c }
    }

    pub const fn len(&self) -> usize {
        self.n * self.h * self.w * self.c
    }

    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Flat offset of element (n, y, x, c).
    #[inline]
    pub const fn offset(&self, n: usize, y: usize, x: usize, c: usize) -> usize {
        ((n * self.h + y) * self.w + x) * self.c + c
    }
}

/// Geometry shared by the sliding-window operations (convolutions and pooling): the input and
/// output extents, the window (filter) size, strides and explicit padding. Implicit SAME/VALID
/// padding is resolved to explicit padding by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub input: Nhwc,
    pub output: Nhwc,
    pub filter_h: usize,
    pub filter_w: usize,
    pub stride_h: usize,
    pub stride_w: usize,
    pub padding: Padding,
}
