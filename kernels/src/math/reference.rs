//! Reference loops of the math family (see [`crate::math`]): one scalar function per operation
//! and operand type, applied element by element, with NumPy-style broadcasting for the
//! two-input operations.

use crate::quant::{
    quantize_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul,
};
use crate::QuantParams;

/// Strides of `dims` seen through the broadcast output shape `out` (rank aligned at the
/// trailing axis): 0 along an axis the operand repeats.
fn broadcast_strides(dims: &[usize], out: &[usize]) -> Vec<usize> {
    let lead = out.len() - dims.len();
    let mut strides = vec![0; out.len()];
    let mut s = 1;
    for i in (0..dims.len()).rev() {
        strides[lead + i] = if dims[i] == 1 { 0 } else { s };
        s *= dims[i];
    }
    strides
}

/// `out[i] = f(a[ia], b[ib])` over the broadcast of `a` (shape `ad`) and `b` (shape `bd`) into
/// `out` (shape `od`, the broadcast shape).
pub fn broadcast_map<A: Copy, B: Copy, O>(
    a: &[A],
    ad: &[usize],
    b: &[B],
    bd: &[usize],
    out: &mut [O],
    od: &[usize],
    f: impl Fn(A, B) -> O,
) {
    if out.is_empty() {
        return;
    }
    if od.is_empty() {
        out[0] = f(a[0], b[0]);
        return;
    }
    let (sa, sb) = (broadcast_strides(ad, od), broadcast_strides(bd, od));
    let rank = od.len();
    let inner = od[rank - 1];
    let (ia_step, ib_step) = (sa[rank - 1], sb[rank - 1]);
    let mut index = vec![0usize; rank];
    for row in out.chunks_mut(inner) {
        let ia: usize = index.iter().zip(&sa).map(|(i, s)| i * s).sum();
        let ib: usize = index.iter().zip(&sb).map(|(i, s)| i * s).sum();
        for (j, o) in row.iter_mut().enumerate() {
            *o = f(a[ia + j * ia_step], b[ib + j * ib_step]);
        }
        // Advance the index over every axis but the last.
        for axis in (0..rank - 1).rev() {
            index[axis] += 1;
            if index[axis] < od[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// `out[i] = f(input[i])`.
pub fn map<T: Copy, U>(input: &[T], out: &mut [U], f: impl Fn(T) -> U) {
    debug_assert_eq!(input.len(), out.len());
    for (o, &x) in out.iter_mut().zip(input) {
        *o = f(x);
    }
}

// ---- float32 -----------------------------------------------------------------------------

/// RSQRT: `1 / sqrt(x)`.
#[inline]
pub fn rsqrt(x: f32) -> f32 {
    1.0 / x.sqrt()
}

/// MAXIMUM as `std::max(a, b)` writes it: `a < b ? b : a`, so a NaN in `a` wins and one in
/// `b` loses.
#[inline]
pub fn max_of<T: PartialOrd>(a: T, b: T) -> T {
    if a < b {
        b
    } else {
        a
    }
}

/// MINIMUM as `std::min(a, b)` writes it: `b < a ? b : a`.
#[inline]
pub fn min_of<T: PartialOrd>(a: T, b: T) -> T {
    if b < a {
        b
    } else {
        a
    }
}

/// PRELU, float32: `x` where `x ≥ 0`, `x · alpha` elsewhere.
#[inline]
pub fn prelu(x: f32, alpha: f32) -> f32 {
    if x >= 0.0 {
        x
    } else {
        x * alpha
    }
}

/// ELU: `max(0, x) + min(0, alpha · (eˣ − 1))`.
#[inline]
pub fn elu(x: f32, alpha: f32) -> f32 {
    x.max(0.0) + (alpha * (x.exp() - 1.0)).min(0.0)
}

/// HARD_SWISH, float32: `x · min(6, max(0, x + 3)) / 6`, in that order.
#[inline]
pub fn hard_swish(x: f32) -> f32 {
    x * (x + 3.0).clamp(0.0, 6.0) / 6.0
}

/// LOG_SOFTMAX along an axis of `depth` elements `inner` apart: `(x − max) · beta − log Σ
/// e^((x − max) · beta)`, the exponentials taken in float64 and summed into a float32, as the
/// platform's reference does.
pub fn log_softmax(input: &[f32], beta: f32, depth: usize, inner: usize, out: &mut [f32]) {
    let block = depth * inner;
    if block == 0 {
        return;
    }
    for (x, y) in input.chunks(block).zip(out.chunks_mut(block)) {
        for i in 0..inner {
            let max = (1..depth).fold(x[i], |m, d| max_of(m, x[d * inner + i]));
            let mut sum = 0.0f32;
            for d in 0..depth {
                sum = (f64::from(sum) + f64::from((x[d * inner + i] - max) * beta).exp()) as f32;
            }
            let log_sum = f64::from(sum).ln() as f32;
            for d in 0..depth {
                y[d * inner + i] = (x[d * inner + i] - max) * beta - log_sum;
            }
        }
    }
}

// ---- CAST --------------------------------------------------------------------------------

/// CAST to uint8 (the platform's reference): values below 0 become 0, above 255 become 255,
/// the rest are truncated toward zero.
#[inline]
pub fn f32_to_u8(x: f32) -> u8 {
    if x < 0.0 {
        0
    } else if x > 255.0 {
        255
    } else {
        x as u8
    }
}

/// CAST int32 to uint8, saturating.
#[inline]
pub fn i32_to_u8(x: i32) -> u8 {
    x.clamp(0, 255) as u8
}

// ---- quant8 ------------------------------------------------------------------------------

/// Requantizes one value from `from` to `to` as the platform's `requantize` does: the real
/// value `(q − zero point) · scale` in float32, divided by the output scale and offset in
/// float64, clamped to the type's range and rounded half away from zero. `signed` says the
/// operands are the unsigned image of TENSOR_QUANT8_ASYMM_SIGNED ones (zero points shifted by
/// 128): clamping and rounding then happen in the signed domain, where a tie at a negative
/// half rounds differently than at the shifted positive one.
#[inline]
pub fn requantize(q: u8, from: QuantParams, to: QuantParams, signed: bool) -> u8 {
    let shift = if signed { 128 } else { 0 };
    let real = f64::from((i32::from(q) - from.zero_point) as f32 * from.scale);
    let v = real / f64::from(to.scale) + f64::from(to.zero_point - shift);
    let (lo, hi) = (f64::from(-shift), f64::from(255 - shift));
    let r = if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v.round()
    };
    (r as i32 + shift) as u8
}

/// A real multiplier as TFLite's `QuantizeMultiplier` gives it: a Q31 mantissa and a signed
/// shift, tiny multipliers (shift below −31) becoming zero.
fn multiplier(real: f64) -> (i32, i32) {
    let (m, e) = quantize_multiplier(real);
    if e < -31 {
        (0, 0)
    } else {
        (m, e)
    }
}

/// TFLite's `MultiplyByQuantizedMultiplier`: a left shift (wrapping as int32 arithmetic
/// does), the rounding doubling high multiply, then a rounding right shift.
#[inline]
fn apply_multiplier(x: i32, m: i32, shift: i32) -> i32 {
    let left = shift.max(0);
    let right = (-shift).max(0);
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x.wrapping_mul(1i32.wrapping_shl(left as u32)), m),
        right.min(31),
    )
}

/// PRELU on uint8 (and the signed image): non-negative centred inputs scale by
/// `input scale / output scale`, negative ones are multiplied by the centred alpha and scaled
/// by `input scale · alpha scale / output scale`, each multiplier quantized as the platform's
/// reference does; the result is offset and saturated.
#[derive(Clone, Copy, Debug)]
pub struct PreluU8 {
    input_zp: i32,
    alpha_zp: i32,
    output_zp: i32,
    pos: (i32, i32),
    neg: (i32, i32),
}

impl PreluU8 {
    pub fn new(input: QuantParams, alpha: QuantParams, output: QuantParams) -> Self {
        let product = f64::from(input.scale) * f64::from(alpha.scale);
        Self {
            input_zp: input.zero_point,
            alpha_zp: alpha.zero_point,
            output_zp: output.zero_point,
            pos: multiplier(f64::from(input.scale) / f64::from(output.scale)),
            neg: multiplier(product / f64::from(output.scale)),
        }
    }

    #[inline]
    pub fn apply(&self, x: u8, alpha: u8) -> u8 {
        let input = i32::from(x) - self.input_zp;
        let v = if input >= 0 {
            apply_multiplier(input, self.pos.0, self.pos.1)
        } else {
            let a = i32::from(alpha) - self.alpha_zp;
            apply_multiplier(input * a, self.neg.0, self.neg.1)
        };
        (self.output_zp.saturating_add(v)).clamp(0, 255) as u8
    }
}

/// The 16-bit fixed-point HARD_SWISH of TFLite's reference (which the platform's reference
/// calls): the input on a "high resolution" scale (×2⁷), a "relu-ish" factor in [0, 1]
/// (`(x + 3) / 6` saturated, on a scale where 3.0 is 2¹⁵) and their product rescaled to the
/// output. Both multipliers are Q31 values rounded to Q15.
#[derive(Clone, Copy, Debug)]
pub struct HardSwishU8 {
    input_zp: i32,
    output_zp: i32,
    output_multiplier: i16,
    output_exponent: i32,
    reluish_multiplier: i16,
    reluish_exponent: i32,
}

/// Q31 to Q15 with rounding, saturating near the top (TFLite's
/// `DownScaleInt32ToInt16Multiplier`).
fn q15(m: i32) -> i16 {
    const ROUND: i32 = 1 << 15;
    if m >= i32::MAX - ROUND {
        i16::MAX
    } else {
        ((m + ROUND) >> 16) as i16
    }
}

/// gemmlowp's 16-bit `SaturatingRoundingDoublingHighMul`.
#[inline]
fn srdhm16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    let ab = i32::from(a) * i32::from(b);
    let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
    ((ab + nudge) / (1 << 15)) as i16
}

/// TFLite's 16-bit `SaturatingDoublingHighMul`: truncating instead of rounding.
#[inline]
fn sdhm16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
}

/// gemmlowp's `RoundingDivideByPOT` (ties away from zero) of a 16-bit value, taken in int32
/// so that exponents past 15 (tiny scales) still divide.
#[inline]
fn rdbp16(x: i16, exponent: i32) -> i16 {
    rounding_divide_by_pot(i32::from(x), exponent.clamp(0, 31)) as i16
}

/// Saturating 16-bit left shift (a shift past 62 saturates every nonzero value already).
#[inline]
fn sls16(x: i16, amount: i32) -> i16 {
    (i64::from(x) * (1i64 << amount.clamp(0, 62))).clamp(i64::from(i16::MIN), i64::from(i16::MAX))
        as i16
}

impl HardSwishU8 {
    /// `None` when the output multiplier (input scale / 128 / output scale, as float32) is 1 or
    /// more once quantized, which the platform's reference refuses.
    pub fn new(input: QuantParams, output: QuantParams) -> Option<Self> {
        let hires = (1.0f32 / 128.0) * input.scale;
        let reluish_scale = 3.0f32 / 32768.0;
        let (om, oe) = multiplier(f64::from(hires / output.scale));
        let (rm, re) = multiplier(f64::from(hires / reluish_scale));
        if oe > 0 {
            return None;
        }
        Some(Self {
            input_zp: input.zero_point,
            output_zp: output.zero_point,
            output_multiplier: q15(om),
            output_exponent: oe,
            reluish_multiplier: q15(rm),
            reluish_exponent: re,
        })
    }

    #[inline]
    pub fn apply(&self, x: u8) -> u8 {
        let input = (i32::from(x) - self.input_zp) as i16;
        let hires = input.wrapping_mul(1 << 7);
        let preshift_out = srdhm16(hires, self.output_multiplier);
        let mut reluish = hires;
        if self.reluish_exponent > 0 {
            reluish = sls16(reluish, self.reluish_exponent - 1);
        }
        reluish = srdhm16(reluish, self.reluish_multiplier);
        if self.reluish_exponent > 0 {
            reluish = sls16(reluish, 1);
        }
        if self.reluish_exponent < 0 {
            reluish = rdbp16(reluish, -self.reluish_exponent);
        }
        // [-1, 1] on Q15 to [0, 1].
        let reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
        let preshift = sdhm16(reluish, preshift_out);
        let out = i32::from(rdbp16(preshift, -self.output_exponent)) + self.output_zp;
        out.clamp(0, 255) as u8
    }
}
