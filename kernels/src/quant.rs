//! Fixed-point requantization primitives with the NNAPI 1.0 reference rounding.
//!
//! The reference CPU path scales int32 accumulators back to uint8 with a Q31 multiplier and a
//! power-of-two shift instead of a float multiply. Reproducing its exact rounding (a saturating
//! rounding doubling high multiply, then a round-half-away-from-zero arithmetic shift) is what
//! makes quant8 outputs match the conformance goldens bit for bit rather than within ±1.

/// Splits a real multiplier into a Q31 mantissa `m` and exponent `e` with
/// `real ≈ m · 2^(e − 31)` and `m` in [2^30, 2^31), as `frexp` followed by rounding does.
/// Zero maps to `(0, 0)`.
pub fn quantize_multiplier(real: f64) -> (i32, i32) {
    if real == 0.0 || !real.is_finite() {
        return (0, 0);
    }
    let (fraction, mut exponent) = frexp(real);
    let mut q = (fraction * (1i64 << 31) as f64).round() as i64;
    // Rounding can carry the mantissa up to exactly 2^31; renormalise.
    if q == 1i64 << 31 {
        q /= 2;
        exponent += 1;
    }
    (q as i32, exponent)
}

/// Quantizes a multiplier in [0, 1) to `(m, right_shift)` with `right_shift ≥ 0`.
/// Returns `None` outside that range (validation rejects such scales up front).
pub fn quantize_multiplier_smaller_than_one(real: f64) -> Option<(i32, i32)> {
    if !(0.0..1.0).contains(&real) {
        return None;
    }
    let (m, e) = quantize_multiplier(real);
    // Below 2^-32 every int32 accumulator scales to less than one half, which rounds to zero;
    // a shift past 31 would be out of `rounding_divide_by_pot`'s range (the scales are the
    // model's, so such a multiplier is reachable).
    if e < -31 {
        return Some((0, 0));
    }
    (e <= 0).then_some((m, -e))
}

/// Quantizes a multiplier greater than one to `(m, left_shift)` with `left_shift ≥ 0`.
pub fn quantize_multiplier_greater_than_one(real: f64) -> Option<(i32, i32)> {
    if !(real > 1.0 && real.is_finite()) {
        return None;
    }
    let (m, e) = quantize_multiplier(real);
    (e >= 0).then_some((m, e))
}

/// The real multiplier of a quantized convolution-like operation, computed as the reference
/// does: the product of the input and filter scales in float32, divided by the output scale in
/// float32. Computing it in f64 instead changes the last bit of some multipliers.
pub fn conv_output_multiplier(input_scale: f32, filter_scale: f32, output_scale: f32) -> f64 {
    let product = input_scale * filter_scale;
    f64::from(product / output_scale)
}

/// `frexp`: `x = fraction · 2^exponent` with |fraction| in [0.5, 1).
fn frexp(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let raw_exp = ((bits >> 52) & 0x7ff) as i32;
    if raw_exp == 0 {
        // Subnormal: scale into the normal range first.
        let (f, e) = frexp(x * f64::from_bits(0x4350_0000_0000_0000)); // 2^54
        return (f, e - 54);
    }
    let exponent = raw_exp - 1022;
    let fraction = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (fraction, exponent)
}

/// `(a · b · 2) >> 32` rounded to nearest (an exact negative half rounds toward zero, as in the
/// reference), saturating the single overflow case (`i32::MIN · i32::MIN`).
#[inline]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = i64::from(a) * i64::from(b);
    let nudge = if ab >= 0 {
        1i64 << 30
    } else {
        1 - (1i64 << 30)
    };
    // Integer division truncates toward zero; the sign-dependent nudge turns that into
    // rounding to nearest.
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// `x / 2^exponent`, rounded to nearest with ties away from zero (`exponent` in 0..=31).
#[inline]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    debug_assert!((0..=31).contains(&exponent));
    let mask = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> exponent) + i32::from(remainder > threshold)
}

/// Applies a multiplier produced by [`quantize_multiplier_smaller_than_one`].
#[inline]
pub fn multiply_by_quantized_multiplier_smaller_than_one(
    x: i32,
    multiplier: i32,
    right_shift: i32,
) -> i32 {
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(x, multiplier),
        right_shift,
    )
}

/// Applies a multiplier produced by [`quantize_multiplier_greater_than_one`]. The left shift
/// wraps like the reference's int32 arithmetic instead of trapping.
#[inline]
pub fn multiply_by_quantized_multiplier_greater_than_one(
    x: i32,
    multiplier: i32,
    left_shift: i32,
) -> i32 {
    saturating_rounding_doubling_high_mul(
        x.wrapping_mul(1i32.wrapping_shl(left_shift as u32)),
        multiplier,
    )
}

/// The largest input magnitude (in the rescaled int32 domain) that a fixed-point transcendental
/// with `input_integer_bits` integer bits can take after a left shift of `input_left_shift`;
/// inputs beyond it saturate the function.
pub fn calculate_input_radius(input_integer_bits: i32, input_left_shift: i32) -> i32 {
    let max_input_rescaled = f64::from((1i32 << input_integer_bits) - 1)
        * (1i64 << (31 - input_integer_bits)) as f64
        / (1i64 << input_left_shift) as f64;
    max_input_rescaled.floor() as i32
}

/// A requantizer from an int32 accumulator to uint8: multiplier, right shift, output zero point
/// and the activation clamp, all precomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requantize {
    pub multiplier: i32,
    pub right_shift: i32,
    pub zero_point: i32,
    pub min: i32,
    pub max: i32,
}

impl Requantize {
    /// Builds the requantizer of a convolution-like op. `None` when the multiplier is not in
    /// [0, 1) (NNAPI 1.0 requires `output_scale > input_scale · filter_scale`).
    pub fn for_conv(
        input: crate::QuantParams,
        filter: crate::QuantParams,
        output: crate::QuantParams,
        activation: crate::Activation,
    ) -> Option<Self> {
        let real = conv_output_multiplier(input.scale, filter.scale, output.scale);
        let (multiplier, right_shift) = quantize_multiplier_smaller_than_one(real)?;
        let (min, max) = activation.range_u8(output);
        Some(Self {
            multiplier,
            right_shift,
            zero_point: output.zero_point,
            min,
            max,
        })
    }

    #[inline]
    pub fn apply(&self, acc: i32) -> u8 {
        let scaled = multiply_by_quantized_multiplier_smaller_than_one(
            acc,
            self.multiplier,
            self.right_shift,
        );
        scaled
            .saturating_add(self.zero_point)
            .clamp(self.min, self.max) as u8
    }
}

/// The requantizer of a convolution-like op under the NNAPI 1.2 rules, where the output
/// multiplier `input_scale · filter_scale / output_scale` may be 1 or more: the multiplier is
/// split as `m · 2^exponent` and applied as a left shift, the rounding doubling high multiply
/// and a rounding right shift (the reference's `MultiplyByQuantizedMultiplier`). Below 1 it is
/// exactly [`Requantize`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequantizeAny {
    pub multiplier: i32,
    pub left_shift: i32,
    pub right_shift: i32,
    pub zero_point: i32,
    pub min: i32,
    pub max: i32,
}

impl RequantizeAny {
    /// `None` for a negative or non-finite multiplier, or one too large for a shift of 30.
    pub fn for_conv(
        input: crate::QuantParams,
        filter: crate::QuantParams,
        output: crate::QuantParams,
        activation: crate::Activation,
    ) -> Option<Self> {
        let real = conv_output_multiplier(input.scale, filter.scale, output.scale);
        if !(real >= 0.0 && real.is_finite()) {
            return None;
        }
        let (multiplier, exponent) = quantize_multiplier(real);
        // Below 2^-32 every accumulator rounds to 0 (see quantize_multiplier_smaller_than_one).
        let (multiplier, exponent) = if exponent < -31 {
            (0, 0)
        } else {
            (multiplier, exponent)
        };
        if exponent > 30 {
            return None;
        }
        let (min, max) = activation.range_u8(output);
        Some(Self {
            multiplier,
            left_shift: exponent.max(0),
            right_shift: (-exponent).max(0),
            zero_point: output.zero_point,
            min,
            max,
        })
    }

    #[inline]
    pub fn apply(&self, acc: i32) -> u8 {
        let high = saturating_rounding_doubling_high_mul(
            acc.wrapping_mul(1i32 << self.left_shift),
            self.multiplier,
        );
        rounding_divide_by_pot(high, self.right_shift)
            .saturating_add(self.zero_point)
            .clamp(self.min, self.max) as u8
    }
}

/// One requantizer per output channel of a convolution-like operation: what
/// TENSOR_QUANT8_SYMM_PER_CHANNEL filters (NNAPI 1.2) need, and the per-tensor case as the
/// special case of one shared requantizer.
///
/// Channel `c` scales its int32 accumulator (bias included) by
/// `input_scale · filter_scale[c] / output_scale`, quantized to a Q31 mantissa and a power of two
/// exactly like [`RequantizeAny::for_conv`] except that the division is taken in f64: the
/// reference's per-channel path multiplies the two scales in float32 and divides the widened
/// product by the widened output scale (`GetQuantizedConvolutionMultiplier`), then splits it
/// with `QuantizeMultiplier` and applies it with `MultiplyByQuantizedMultiplier` (left shift,
/// rounding doubling high multiply, rounding right shift with ties away from zero).
///
/// ```
/// use nnhal_kernels::quant::ChannelRequant;
/// use nnhal_kernels::{Activation, QuantParams};
/// let (input, output) = (QuantParams::new(0.5, 128), QuantParams::new(1.0, 100));
/// let rq = ChannelRequant::per_channel(input, &[0.5, 2.0], output, Activation::None).unwrap();
/// assert_eq!(rq.apply(0, 40), 110); // 40 · 0.25 + 100
/// assert_eq!(rq.apply(1, 40), 140); // 40 · 1.0 + 100
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRequant {
    channels: Vec<RequantizeAny>,
}

impl ChannelRequant {
    /// Every channel with the per-tensor requantizer of `input · filter / output` (the NNAPI
    /// 1.0–1.2 TENSOR_QUANT8_ASYMM filters, [`RequantizeAny::for_conv`]).
    pub fn per_tensor(
        input: crate::QuantParams,
        filter: crate::QuantParams,
        output: crate::QuantParams,
        activation: crate::Activation,
        channels: usize,
    ) -> Result<Self, crate::KernelError> {
        let rq = RequantizeAny::for_conv(input, filter, output, activation).ok_or_else(|| {
            crate::KernelError::InvalidData(format!(
                "quantized multiplier {} · {} / {} is out of range",
                input.scale, filter.scale, output.scale
            ))
        })?;
        Self::checked(vec![rq; channels], output)
    }

    /// Channel `c` with the filter scale `filter_scales[c]` (a per-channel filter has zero
    /// point 0). Fails like the reference: a multiplier that is negative, not finite or too
    /// large for a shift of 30, or an empty activation range.
    pub fn per_channel(
        input: crate::QuantParams,
        filter_scales: &[f32],
        output: crate::QuantParams,
        activation: crate::Activation,
    ) -> Result<Self, crate::KernelError> {
        let (min, max) = activation.range_u8(output);
        let channels = filter_scales
            .iter()
            .map(|&fs| {
                // The product rounds to float32 first, the quotient is taken in f64.
                let real = f64::from(input.scale * fs) / f64::from(output.scale);
                if !(real >= 0.0 && real.is_finite()) {
                    return None;
                }
                let (multiplier, exponent) = match quantize_multiplier(real) {
                    (_, e) if e < -31 => (0, 0),
                    me => me,
                };
                (exponent <= 30).then_some(RequantizeAny {
                    multiplier,
                    left_shift: exponent.max(0),
                    right_shift: (-exponent).max(0),
                    zero_point: output.zero_point,
                    min,
                    max,
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                crate::KernelError::InvalidData(format!(
                    "a per-channel multiplier {} · filter scale / {} is out of range",
                    input.scale, output.scale
                ))
            })?;
        Self::checked(channels, output)
    }

    fn checked(
        channels: Vec<RequantizeAny>,
        output: crate::QuantParams,
    ) -> Result<Self, crate::KernelError> {
        if let Some(rq) = channels.first().filter(|rq| rq.min > rq.max) {
            return Err(crate::KernelError::InvalidData(format!(
                "empty activation range {}..={} for output zero point {}",
                rq.min, rq.max, output.zero_point
            )));
        }
        Ok(Self { channels })
    }

    /// Output channels covered.
    pub fn channels(&self) -> usize {
        self.channels.len()
    }

    /// Every channel's requantizer, in channel order.
    pub fn as_slice(&self) -> &[RequantizeAny] {
        &self.channels
    }

    /// The requantizer of channel `c`.
    pub fn channel(&self, c: usize) -> &RequantizeAny {
        &self.channels[c]
    }

    /// The output byte of accumulator `acc` (bias included) in channel `c`.
    #[inline]
    pub fn apply(&self, c: usize, acc: i32) -> u8 {
        self.channels[c].apply(acc)
    }
}

/// The image: the channel count, then each channel's requantizer (checked as
/// [`RequantizeAny::apply`] needs it).
impl crate::persist::Persist for ChannelRequant {
    fn persist(&self, out: &mut Vec<u8>) {
        crate::persist::put_usize(out, self.channels.len());
        for r in &self.channels {
            crate::persist::put_requantize_any(out, r);
        }
    }

    fn restore(
        _: &crate::ukernels::Ukernels,
        src: &mut crate::persist::Source<'_>,
    ) -> Result<Self, crate::persist::PersistError> {
        let n = src.usize()?;
        // Each channel takes 24 bytes of the image: a count past the bytes left fails on
        // its first missing channel, never allocating for it.
        let mut channels = Vec::new();
        for _ in 0..n {
            channels.push(src.requantize_any()?);
        }
        Ok(ChannelRequant { channels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing: a multiplier below 2^-32 (tiny input × filter scales against a large
    /// output scale) asked `rounding_divide_by_pot` for a shift past 31.
    #[test]
    fn tiny_multiplier_requantizes_to_zero() {
        assert_eq!(quantize_multiplier_smaller_than_one(1e-12), Some((0, 0)));
        let (m, shift) = quantize_multiplier_smaller_than_one(1e-12).unwrap();
        for acc in [i32::MIN, -1, 0, 1, i32::MAX] {
            assert_eq!(
                multiply_by_quantized_multiplier_smaller_than_one(acc, m, shift),
                0
            );
        }
        let (_, shift) = quantize_multiplier_smaller_than_one(2f64.powi(-31)).unwrap();
        assert!(shift <= 31);
    }

    /// Below 1 the general requantizer is the 1.0 one; at 1 and above it shifts left first.
    #[test]
    fn requantize_any_matches_below_one_and_scales_above() {
        use crate::{Activation, QuantParams};
        let (i, o) = (QuantParams::new(0.5, 0), QuantParams::new(1.0, 10));
        for fs in [0.01f32, 0.3, 1.5, 4.0, 7.25] {
            let f = QuantParams::new(fs, 0);
            let any = RequantizeAny::for_conv(i, f, o, Activation::None).unwrap();
            let old = Requantize::for_conv(i, f, o, Activation::None);
            for acc in [-1000, -37, -1, 0, 1, 5, 99, 1000] {
                if let Some(old) = old {
                    assert_eq!(any.apply(acc), old.apply(acc), "{fs} {acc}");
                }
                let want = (f64::from(acc) * f64::from(0.5 * fs)).round() + 10.0;
                let got = f64::from(any.apply(acc));
                assert!(
                    (got - want.clamp(0.0, 255.0)).abs() <= 1.0,
                    "{fs} {acc}: {got} vs {want}"
                );
            }
        }
        assert!(Requantize::for_conv(i, QuantParams::new(4.0, 0), o, Activation::None).is_none());
    }

    #[test]
    fn frexp_matches_definition() {
        for &x in &[1.0f64, 0.5, 0.75, 3.0, 1e-300, 123456.789, 1e-310] {
            let (f, e) = frexp(x);
            assert!((0.5..1.0).contains(&f), "{x}: {f}");
            assert_eq!(f * 2f64.powi(e / 2) * 2f64.powi(e - e / 2), x);
        }
    }

    #[test]
    fn quantize_multiplier_round_trips() {
        for &real in &[0.5f64, 0.25, 0.1, 0.999_999_99, 1e-6, 0.003_921_568_6] {
            let (m, shift) = quantize_multiplier_smaller_than_one(real).unwrap();
            assert!(m >= 1 << 30, "{real}: mantissa {m}");
            let back = f64::from(m) / (1i64 << 31) as f64 / 2f64.powi(shift);
            assert!((back - real).abs() <= real * 1e-9, "{real} vs {back}");
        }
        assert_eq!(quantize_multiplier_smaller_than_one(0.0), Some((0, 0)));
        assert_eq!(quantize_multiplier_smaller_than_one(1.0), None);
        assert_eq!(quantize_multiplier_smaller_than_one(f64::NAN), None);
        let (m, shift) = quantize_multiplier_greater_than_one(3.0).unwrap();
        assert_eq!((m, shift), (3 << 29, 2));
    }

    #[test]
    fn mantissa_carry_is_renormalised() {
        // Just below 1.0: the mantissa rounds up to 2^31 and must be halved.
        let (m, e) = quantize_multiplier(1.0 - 1e-12);
        assert_eq!((m, e), (1 << 30, 1));
    }

    #[test]
    fn srdhm_rounds_and_saturates() {
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MIN, i32::MIN),
            i32::MAX
        );
        assert_eq!(
            saturating_rounding_doubling_high_mul(1 << 30, 1 << 30),
            1 << 29
        );
        // 3 · 2^30 · 2 / 2^32 = 1.5 rounds up to 2; the negative nudge is one short of a
        // half, so −1.5 rounds toward zero to −1 (the reference's asymmetry, kept on purpose).
        assert_eq!(saturating_rounding_doubling_high_mul(3, 1 << 30), 2);
        assert_eq!(saturating_rounding_doubling_high_mul(-3, 1 << 30), -1);
        assert_eq!(saturating_rounding_doubling_high_mul(-5, 1 << 30), -2);
    }

    #[test]
    fn rounding_divide_rounds_half_away_from_zero() {
        assert_eq!(rounding_divide_by_pot(5, 1), 3);
        assert_eq!(rounding_divide_by_pot(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot(4, 1), 2);
        assert_eq!(rounding_divide_by_pot(-4, 1), -2);
        assert_eq!(rounding_divide_by_pot(7, 2), 2);
        assert_eq!(rounding_divide_by_pot(-7, 2), -2);
        assert_eq!(rounding_divide_by_pot(i32::MIN, 31), -1);
        assert_eq!(rounding_divide_by_pot(i32::MAX, 0), i32::MAX);
    }

    #[test]
    fn input_radius_matches_reference_formula() {
        // Softmax uses 5 integer bits; with no left shift the radius is 31·2^26.
        assert_eq!(calculate_input_radius(5, 0), 31 << 26);
        assert_eq!(
            calculate_input_radius(4, 31 - 4 - 4),
            ((15i64 << 27) >> 23) as i32
        );
    }

    #[test]
    fn activation_ranges_in_quantized_domain() {
        use crate::{Activation, QuantParams};
        let q = QuantParams::new(0.5, 100);
        assert_eq!(Activation::None.range_u8(q), (0, 255));
        assert_eq!(Activation::Relu.range_u8(q), (100, 255));
        assert_eq!(Activation::Relu1.range_u8(q), (98, 102));
        assert_eq!(Activation::Relu6.range_u8(q), (100, 112));
        // Bounds outside the representable range are clipped to 0..=255.
        assert_eq!(
            Activation::Relu6.range_u8(QuantParams::new(0.01, 250)),
            (250, 255)
        );
    }
}
