//! Elementwise operations of types.hal 1.0 `OperationType`: ADD (0) and MUL (18) with NumPy-style
//! broadcasting (and NNAPI 1.1's SUB and DIV alike), FLOOR (8), RELU / RELU1 / RELU6 (19–21), LOGISTIC (14), TANH (28),
//! for TENSOR_FLOAT32 and (where 1.0 allows it) TENSOR_QUANT8_ASYMM.
//!
//! The uint8 paths reproduce the NNAPI 1.0 reference (the TFLite legacy kernels the Android
//! CpuExecutor calls) bit for bit: the same multiplier derivation in the same float widths, the
//! same Q31 requantization, and for LOGISTIC the gemmlowp fixed-point logistic, which lives in the
//! crate-private `fixed_point` module together with the exp and reciprocal helpers SOFTMAX
//! shares.

use crate::parallel::MIN_ELEMENTS;
use crate::quant::{
    multiply_by_quantized_multiplier_smaller_than_one, quantize_multiplier_smaller_than_one,
    rounding_divide_by_pot,
};
use crate::{Activation, KernelError, QuantParams};

/// Elements per parallel task.
const PARALLEL_CHUNK: usize = 1 << 14;

/// Fixed-point transcendental functions in gemmlowp's formats (`FixedPoint<int32, N>`: a raw
/// `i32` holding `value · 2^(31 − N)`), reproduced operation for operation so that quant8
/// LOGISTIC and SOFTMAX round exactly as the reference does. Every product is the saturating
/// rounding doubling high multiply, so multiplying Q`a` by Q`b` yields Q`(a + b)`.
pub(crate) mod fixed_point {
    use crate::quant::{
        quantize_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul as mul,
    };

    /// `x · 2^exponent` with gemmlowp's rounding: a saturating left shift for positive
    /// exponents, a round-half-away-from-zero right shift for negative ones (0 beyond 31 bits,
    /// where every `i32` rounds to zero).
    #[inline]
    pub(crate) fn saturating_rounding_multiply_by_pot(x: i32, exponent: i32) -> i32 {
        if exponent > 0 {
            if exponent >= 31 {
                return if x > 0 {
                    i32::MAX
                } else if x < 0 {
                    i32::MIN
                } else {
                    0
                };
            }
            let threshold = (1i32 << (31 - exponent)) - 1;
            if x > threshold {
                i32::MAX
            } else if x < -threshold {
                i32::MIN
            } else {
                x << exponent
            }
        } else if exponent == 0 {
            x
        } else {
            rounding_divide_by_pot_wide(x, -exponent)
        }
    }

    /// [`rounding_divide_by_pot`] for any non-negative exponent: beyond 31 every `i32`
    /// quotient is below one half in magnitude and rounds to zero.
    #[inline]
    pub(crate) fn rounding_divide_by_pot_wide(x: i32, exponent: i32) -> i32 {
        if exponent > 31 {
            0
        } else {
            rounding_divide_by_pot(x, exponent.max(0))
        }
    }

    /// Changes the number of integer bits of a fixed-point raw value (gemmlowp `Rescale`).
    #[inline]
    pub(crate) fn rescale(x: i32, src_integer_bits: i32, dst_integer_bits: i32) -> i32 {
        saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)
    }

    /// Average of two raw values, rounded half away from zero, without overflow.
    #[inline]
    fn rounding_half_sum(a: i32, b: i32) -> i32 {
        let sum = i64::from(a) + i64::from(b);
        let sign = if sum >= 0 { 1 } else { -1 };
        ((sum + sign) / 2) as i32
    }

    /// exp(a) for a in [−1/4, 0), Q0.31 in and out: a fourth-order Taylor expansion around
    /// −1/8, the point that minimises the worst-case error on that interval.
    fn exp_on_interval_between_negative_one_quarter_and_0_excl(a: i32) -> i32 {
        const EXP_MINUS_ONE_EIGHTH: i32 = 1_895_147_668; // exp(−1/8) · 2^31
        const ONE_THIRD: i32 = 715_827_883; // 2^31 / 3
        let x = a.wrapping_add(1 << 28); // a + 1/8
        let x2 = mul(x, x);
        let x3 = mul(x2, x);
        let x4 = mul(x2, x2);
        let x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2);
        // (x⁴/4 + x³) / 3 + x², halved: x⁴/24 + x³/6 + x²/2.
        let tail = saturating_rounding_multiply_by_pot(
            mul(x4_over_4.wrapping_add(x3), ONE_THIRD).wrapping_add(x2),
            -1,
        );
        EXP_MINUS_ONE_EIGHTH.wrapping_add(mul(EXP_MINUS_ONE_EIGHTH, x.wrapping_add(tail)))
    }

    /// exp(a) for a ≤ 0 given with `integer_bits` integer bits; the result is Q0.31.
    ///
    /// The input is split into `a = r − k/4` with r in [−1/4, 0): exp(r) comes from the
    /// polynomial above, then each set bit of k multiplies in a precomputed exp(−2^i).
    pub(crate) fn exp_on_negative_values(a: i32, integer_bits: i32) -> i32 {
        // exp(−2^e) in Q0.31 for e = −2..=4 (the multiplier of the bit worth 2^e).
        const BARREL: [(i32, i32); 7] = [
            (-2, 1_672_461_947),
            (-1, 1_302_514_674),
            (0, 790_015_084),
            (1, 290_630_308),
            (2, 39_332_535),
            (3, 720_401),
            (4, 242),
        ];
        debug_assert!((1..=30).contains(&integer_bits));
        let fractional_bits = 31 - integer_bits;
        let one_quarter = 1i32 << (fractional_bits - 2);
        let a_mod_quarter_minus_one_quarter = (a & (one_quarter - 1)).wrapping_sub(one_quarter);
        let mut result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale(
            a_mod_quarter_minus_one_quarter,
            integer_bits,
            0,
        ));
        let remainder = a_mod_quarter_minus_one_quarter.wrapping_sub(a);
        for (exponent, multiplier) in BARREL {
            if integer_bits > exponent && remainder & (1 << (fractional_bits + exponent)) != 0 {
                result = mul(result, multiplier);
            }
        }
        if integer_bits > 5 {
            // Below −32 the product above underflows to garbage; exp is 0 there in Q0.31.
            let minus_32 = -(1i32 << (fractional_bits + 5));
            if a < minus_32 {
                result = 0;
            }
        }
        if a == 0 {
            result = i32::MAX; // 1.0 saturated in Q0.31
        }
        result
    }

    /// 1 / (1 + a) for a in [0, 1), Q0.31 in and out: three Newton–Raphson steps on the half
    /// denominator, started from the minimax linear estimate 48/17 − 32/17 · d (Q2.29).
    pub(crate) fn one_over_one_plus_x_for_x_in_0_1(a: i32) -> i32 {
        const FORTY_EIGHT_OVER_17: i32 = 1_515_870_810;
        const MINUS_THIRTY_TWO_OVER_17: i32 = -1_010_580_540;
        const ONE_Q2: i32 = 1 << 29;
        let half_denominator = rounding_half_sum(a, i32::MAX);
        let mut x =
            FORTY_EIGHT_OVER_17.wrapping_add(mul(half_denominator, MINUS_THIRTY_TWO_OVER_17));
        for _ in 0..3 {
            let half_denominator_times_x = mul(half_denominator, x);
            let one_minus_half_denominator_times_x = ONE_Q2.wrapping_sub(half_denominator_times_x);
            // Q2 · Q2 is Q4; bring the correction back to Q2.
            x = x.wrapping_add(rescale(mul(x, one_minus_half_denominator_times_x), 4, 2));
        }
        // x ≈ 1 / half_denominator in Q2; halving it (reinterpreting as Q1) gives 1 / (1 + a),
        // which is then moved to Q0.
        rescale(x, 1, 0)
    }

    /// (1 − a) / (1 + a) for a in [0, 1), Q0.31 in and out: the Newton–Raphson reciprocal of
    /// [`one_over_one_plus_x_for_x_in_0_1`], minus one, moved from Q2 to Q0.
    fn one_minus_x_over_one_plus_x_for_x_in_0_1(a: i32) -> i32 {
        const FORTY_EIGHT_OVER_17: i32 = 1_515_870_810;
        const MINUS_THIRTY_TWO_OVER_17: i32 = -1_010_580_540;
        const ONE_Q2: i32 = 1 << 29;
        let half_denominator = rounding_half_sum(a, i32::MAX);
        let mut x =
            FORTY_EIGHT_OVER_17.wrapping_add(mul(half_denominator, MINUS_THIRTY_TWO_OVER_17));
        for _ in 0..3 {
            let half_denominator_times_x = mul(half_denominator, x);
            let one_minus_half_denominator_times_x = ONE_Q2.wrapping_sub(half_denominator_times_x);
            x = x.wrapping_add(rescale(mul(x, one_minus_half_denominator_times_x), 4, 2));
        }
        // x ≈ 2 / (1 + a) in Q2; x − 1 = (1 − a) / (1 + a).
        rescale(x.wrapping_sub(ONE_Q2), 2, 0)
    }

    /// tanh of a value with `integer_bits` integer bits, in Q0.31: for a < 0,
    /// tanh(−a) = (1 − e^(2a)) / (1 + e^(2a)), where 2a is the same raw value read with one
    /// more integer bit; odd symmetry gives the rest.
    pub(crate) fn tanh(a: i32, integer_bits: i32) -> i32 {
        if a == 0 {
            return 0;
        }
        let negative_abs = if a < 0 { a } else { a.wrapping_neg() };
        let t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(
            negative_abs,
            integer_bits + 1,
        ));
        if a < 0 {
            t.wrapping_neg()
        } else {
            t
        }
    }

    /// The logistic function of a value with `integer_bits` integer bits, in Q0.31.
    pub(crate) fn logistic(a: i32, integer_bits: i32) -> i32 {
        if a == 0 {
            return 1 << 30; // exactly one half
        }
        let abs = if a > 0 { a } else { a.wrapping_neg() };
        let on_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(
            abs.wrapping_neg(),
            integer_bits,
        ));
        if a > 0 {
            on_positive
        } else {
            i32::MAX.wrapping_sub(on_positive)
        }
    }

    /// Maps centred uint8 inputs into a fixed-point format: `x · real` as a Q31 multiplier and
    /// a power-of-two shift. The reference quantizes `real` with
    /// `QuantizeMultiplierGreaterThanOne` and fails when `real ≤ 1` (an input scale below
    /// 2^−26 or so); such a multiplier is kept here as a right shift instead, so tiny scales
    /// still produce the mathematically expected output (every input near zero).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct InputRescale {
        multiplier: i32,
        /// Positive: left shift before the multiply; negative: right shift after it.
        shift: i32,
    }

    impl InputRescale {
        /// `None` unless `real` is positive and finite.
        pub(crate) fn new(real: f64) -> Option<Self> {
            if !(real > 0.0 && real.is_finite()) {
                return None;
            }
            let (multiplier, shift) = quantize_multiplier(real);
            Some(Self { multiplier, shift })
        }

        /// The radius (in centred input units) beyond which a function with `integer_bits`
        /// integer bits saturates, as the reference's `CalculateInputRadius` computes it.
        pub(crate) fn input_radius(&self, integer_bits: i32) -> i32 {
            let left_shift = self.shift.max(0);
            if left_shift >= 31 {
                // (2^n − 1) · 2^(31−n) / 2^31 < 1.
                0
            } else {
                crate::quant::calculate_input_radius(integer_bits, left_shift)
            }
        }

        /// Applies the rescaling; inputs within [`Self::input_radius`] never saturate.
        #[inline]
        pub(crate) fn apply(&self, x: i32) -> i32 {
            if self.shift >= 0 {
                // Shifting by 31 already saturates every nonzero i32, so capping the shift
                // keeps the i64 intermediate in range without changing the result.
                let shifted = (i64::from(x) << self.shift.min(31))
                    .clamp(i64::from(i32::MIN), i64::from(i32::MAX));
                mul(shifted as i32, self.multiplier)
            } else {
                rounding_divide_by_pot_wide(mul(x, self.multiplier), -self.shift)
            }
        }
    }
}

/// Broadcast geometry of a binary operation: the output's axes with size-1 axes dropped and
/// neighbouring axes merged whenever both operands broadcast (or not) the same way on them, so
/// that equal shapes collapse to one contiguous run and a broadcast bias to two axes.
struct Broadcast {
    /// Extents, outermost first. Never empty; the last axis is walked as contiguous runs.
    dims: Vec<usize>,
    /// Element strides of `a` and `b` per axis: 0 on broadcast axes.
    a_strides: Vec<usize>,
    b_strides: Vec<usize>,
}

impl Broadcast {
    fn new(a_shape: &[usize], b_shape: &[usize], out_shape: &[usize]) -> Self {
        let rank = out_shape.len();
        debug_assert!(a_shape.len() <= rank && b_shape.len() <= rank);
        // Shapes are aligned from their trailing dimension; missing leading dims are 1.
        let dim = |shape: &[usize], axis: usize| {
            let missing = rank - shape.len().min(rank);
            if axis < missing {
                1
            } else {
                shape[axis - missing]
            }
        };
        let mut axes: Vec<(usize, bool, bool)> = Vec::with_capacity(rank.max(1));
        for (axis, &n) in out_shape.iter().enumerate() {
            if n == 1 {
                continue;
            }
            let (da, db) = (dim(a_shape, axis), dim(b_shape, axis));
            debug_assert!(da == n || da == 1, "a {a_shape:?} vs out {out_shape:?}");
            debug_assert!(db == n || db == 1, "b {b_shape:?} vs out {out_shape:?}");
            let key = (da != n, db != n);
            match axes.last_mut() {
                Some(last) if (last.1, last.2) == key => last.0 *= n,
                _ => axes.push((n, key.0, key.1)),
            }
        }
        if axes.is_empty() {
            axes.push((1, false, false));
        }
        let mut a_strides = vec![0; axes.len()];
        let mut b_strides = vec![0; axes.len()];
        let (mut sa, mut sb) = (1, 1);
        for (j, &(n, a_bcast, b_bcast)) in axes.iter().enumerate().rev() {
            if !a_bcast {
                a_strides[j] = sa;
                sa *= n;
            }
            if !b_bcast {
                b_strides[j] = sb;
                sb *= n;
            }
        }
        Self {
            dims: axes.iter().map(|&(n, _, _)| n).collect(),
            a_strides,
            b_strides,
        }
    }

    /// Calls `f(out_offset, a_offset, b_offset, run)` for the contiguous runs covering output
    /// elements `start..start + len`, where `out_offset` is relative to `start`.
    fn for_each_run(
        &self,
        start: usize,
        len: usize,
        mut f: impl FnMut(usize, usize, usize, usize),
    ) {
        let k = self.dims.len();
        let last = self.dims[k - 1];
        let mut idx = vec![0; k];
        let mut rem = start;
        for j in (0..k).rev() {
            idx[j] = rem % self.dims[j];
            rem /= self.dims[j];
        }
        let mut a_off: usize = (0..k).map(|j| idx[j] * self.a_strides[j]).sum();
        let mut b_off: usize = (0..k).map(|j| idx[j] * self.b_strides[j]).sum();
        let mut done = 0;
        while done < len {
            let run = (last - idx[k - 1]).min(len - done);
            f(done, a_off, b_off, run);
            done += run;
            idx[k - 1] += run;
            a_off += run * self.a_strides[k - 1];
            b_off += run * self.b_strides[k - 1];
            // Carry into the outer axes.
            let mut j = k - 1;
            while idx[j] == self.dims[j] && j > 0 {
                a_off -= self.dims[j] * self.a_strides[j];
                b_off -= self.dims[j] * self.b_strides[j];
                idx[j] = 0;
                j -= 1;
                idx[j] += 1;
                a_off += self.a_strides[j];
                b_off += self.b_strides[j];
            }
        }
    }
}

/// `out[i] = f(a[ia], b[ib])` over the broadcast of `a_shape` and `b_shape`.
fn broadcast_binary<T, U, F>(
    a: &[T],
    a_shape: &[usize],
    b: &[T],
    b_shape: &[usize],
    out: &mut [U],
    out_shape: &[usize],
    f: F,
) where
    T: Copy + Sync,
    U: Send,
    F: Fn(T, T) -> U + Sync,
{
    debug_assert_eq!(a.len(), a_shape.iter().product::<usize>());
    debug_assert_eq!(b.len(), b_shape.iter().product::<usize>());
    debug_assert_eq!(out.len(), out_shape.iter().product::<usize>());
    if out.is_empty() {
        return;
    }
    let geometry = Broadcast::new(a_shape, b_shape, out_shape);
    let k = geometry.dims.len();
    let (a_step, b_step) = (geometry.a_strides[k - 1], geometry.b_strides[k - 1]);
    let fill = |start: usize, chunk: &mut [U]| {
        geometry.for_each_run(start, chunk.len(), |o, ia, ib, run| {
            let dst = &mut chunk[o..o + run];
            // Separate loops per stride pattern keep the common cases free of index
            // arithmetic so they vectorise.
            match (a_step, b_step) {
                (1, 1) => {
                    for ((d, &x), &y) in dst.iter_mut().zip(&a[ia..ia + run]).zip(&b[ib..ib + run])
                    {
                        *d = f(x, y);
                    }
                }
                (0, 1) => {
                    let x = a[ia];
                    for (d, &y) in dst.iter_mut().zip(&b[ib..ib + run]) {
                        *d = f(x, y);
                    }
                }
                (1, 0) => {
                    let y = b[ib];
                    for (d, &x) in dst.iter_mut().zip(&a[ia..ia + run]) {
                        *d = f(x, y);
                    }
                }
                _ => {
                    for d in dst.iter_mut() {
                        *d = f(a[ia], b[ib]);
                    }
                }
            }
        });
    };
    if out.len() >= MIN_ELEMENTS {
        crate::parallel::for_chunks(out, PARALLEL_CHUNK, |i, chunk| {
            fill(i * PARALLEL_CHUNK, chunk)
        });
    } else {
        fill(0, out);
    }
}

/// `output[i] = f(input[i])`, in parallel for long tensors.
fn map_unary<T, U, F>(input: &[T], output: &mut [U], f: F)
where
    T: Copy + Sync,
    U: Send,
    F: Fn(T) -> U + Sync,
{
    debug_assert_eq!(input.len(), output.len());
    let body = |src: &[T], dst: &mut [U]| {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = f(s);
        }
    };
    if output.len() >= MIN_ELEMENTS {
        crate::parallel::for_chunks(output, PARALLEL_CHUNK, |i, dst| {
            body(&input[i * PARALLEL_CHUNK..][..dst.len()], dst)
        });
    } else {
        body(input, output);
    }
}

/// `std::min(std::max(x, lo), hi)` as the reference writes it: a NaN passes through unclamped.
#[inline]
fn clamp_float(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if hi < y {
        hi
    } else {
        y
    }
}

/// ADD, TENSOR_FLOAT32: `act(a + b)` with broadcasting.
pub fn add_f32(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    act: Activation,
    out: &mut [f32],
    out_shape: &[usize],
) {
    let (lo, hi) = act.range_f32();
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, |x, y| {
        clamp_float(x + y, lo, hi)
    });
}

/// MUL, TENSOR_FLOAT32: `act(a · b)` with broadcasting.
pub fn mul_f32(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    act: Activation,
    out: &mut [f32],
    out_shape: &[usize],
) {
    let (lo, hi) = act.range_f32();
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, |x, y| {
        clamp_float(x * y, lo, hi)
    });
}

/// [`multiply_by_quantized_multiplier_smaller_than_one`] for any right shift: a multiplier
/// below 2^−32 scales every i32 to zero (the reference's shift would be undefined there).
#[inline]
fn scale_down(x: i32, multiplier: i32, right_shift: i32) -> i32 {
    if right_shift > 31 {
        0
    } else {
        multiply_by_quantized_multiplier_smaller_than_one(x, multiplier, right_shift)
    }
}

fn smaller_than_one(op: &str, what: &str, real: f64) -> Result<(i32, i32), KernelError> {
    quantize_multiplier_smaller_than_one(real).ok_or_else(|| {
        KernelError::InvalidData(format!("{op}: {what} multiplier {real} is not in [0, 1)"))
    })
}

/// ADD, TENSOR_QUANT8_ASYMM, with broadcasting.
///
/// Both inputs are brought to a common scale of twice the larger input scale and given 20
/// extra bits of headroom (`(q − zp) · 2^20`), so each one's rescale multiplier is at most ½
/// and the sum cannot overflow; the sum is then requantized to the output scale. Fails with
/// [`KernelError::InvalidData`] when a multiplier is not below one (an output scale smaller
/// than 2·max(input scale)/2^20, or non-positive scales), as the reference does.
#[allow(clippy::too_many_arguments)]
pub fn add_u8(
    a: &[u8],
    a_shape: &[usize],
    a_q: QuantParams,
    b: &[u8],
    b_shape: &[usize],
    b_q: QuantParams,
    out_q: QuantParams,
    act: Activation,
    out: &mut [u8],
    out_shape: &[usize],
) -> Result<(), KernelError> {
    add_sub_u8(
        "ADD", false, a, a_shape, a_q, b, b_shape, b_q, out_q, act, out, out_shape,
    )
}

/// SUB, TENSOR_QUANT8_ASYMM (NNAPI 1.2), with broadcasting: [`add_u8`] with the second
/// input's rescale multiplier negated, as the reference computes it. The negated multiplier
/// enters the rounding doubling high multiply itself, so a product that lands exactly half-way
/// rounds as the reference's does (towards +∞ in the high multiply), not as the negation of
/// the rescaled value would.
#[allow(clippy::too_many_arguments)]
pub fn sub_u8(
    a: &[u8],
    a_shape: &[usize],
    a_q: QuantParams,
    b: &[u8],
    b_shape: &[usize],
    b_q: QuantParams,
    out_q: QuantParams,
    act: Activation,
    out: &mut [u8],
    out_shape: &[usize],
) -> Result<(), KernelError> {
    add_sub_u8(
        "SUB", true, a, a_shape, a_q, b, b_shape, b_q, out_q, act, out, out_shape,
    )
}

/// The left shift [`add_u8`] and [`sub_u8`] give both centred inputs before rescaling them.
pub(crate) const ADD_LEFT_SHIFT: i32 = 20;

/// The quantized multipliers and right shifts of [`add_u8`] (`negate` false) or [`sub_u8`]
/// (`negate` true): input 0, input 1 (negated for SUB) and the output, each `(multiplier,
/// right shift)` with the multiplier's magnitude in [2^30, 2^31) or 0. Fails exactly when the
/// reference does.
pub(crate) fn add_sub_multipliers(
    op: &str,
    negate: bool,
    a_q: QuantParams,
    b_q: QuantParams,
    out_q: QuantParams,
) -> Result<[(i32, i32); 3], KernelError> {
    // The reference doubles the larger scale in float32 and divides in double.
    let twice_max_input_scale = f64::from(2.0 * a_q.scale.max(b_q.scale));
    let real_a = f64::from(a_q.scale) / twice_max_input_scale;
    let real_b = f64::from(b_q.scale) / twice_max_input_scale;
    let real_out = twice_max_input_scale / f64::from((1 << ADD_LEFT_SHIFT) as f32 * out_q.scale);
    let (a_mult, a_shift) = smaller_than_one(op, "input 0", real_a)?;
    let (b_mult, b_shift) = smaller_than_one(op, "input 1", real_b)?;
    // A quantized multiplier lies in [2^30, 2^31), so its negation is an i32 too.
    let b_mult = if negate { -b_mult } else { b_mult };
    let out = smaller_than_one(op, "output", real_out)?;
    Ok([(a_mult, a_shift), (b_mult, b_shift), out])
}

/// The quantized multiplier and right shift of [`mul_u8`]; fails exactly when the reference
/// does.
pub(crate) fn mul_multiplier(
    a_q: QuantParams,
    b_q: QuantParams,
    out_q: QuantParams,
) -> Result<(i32, i32), KernelError> {
    // The reference multiplies the scales in float32 and divides in double.
    let real = f64::from(a_q.scale * b_q.scale) / f64::from(out_q.scale);
    smaller_than_one("MUL", "output", real)
}

#[allow(clippy::too_many_arguments)]
fn add_sub_u8(
    op: &str,
    negate: bool,
    a: &[u8],
    a_shape: &[usize],
    a_q: QuantParams,
    b: &[u8],
    b_shape: &[usize],
    b_q: QuantParams,
    out_q: QuantParams,
    act: Activation,
    out: &mut [u8],
    out_shape: &[usize],
) -> Result<(), KernelError> {
    let [(a_mult, a_shift), (b_mult, b_shift), (out_mult, out_shift)] =
        add_sub_multipliers(op, negate, a_q, b_q, out_q)?;
    let (min, max) = act.range_u8(out_q);
    let (a_zp, b_zp, out_zp) = (a_q.zero_point, b_q.zero_point, out_q.zero_point);
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, |x, y| {
        let xa = (i32::from(x).wrapping_sub(a_zp)).wrapping_mul(1 << ADD_LEFT_SHIFT);
        let yb = (i32::from(y).wrapping_sub(b_zp)).wrapping_mul(1 << ADD_LEFT_SHIFT);
        let sum = scale_down(xa, a_mult, a_shift).wrapping_add(scale_down(yb, b_mult, b_shift));
        let raw = scale_down(sum, out_mult, out_shift).saturating_add(out_zp);
        raw.max(min).min(max).clamp(0, 255) as u8
    });
    Ok(())
}

/// SUB, TENSOR_FLOAT32 (NNAPI 1.1): `act(a − b)` with broadcasting.
pub fn sub_f32(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    act: Activation,
    out: &mut [f32],
    out_shape: &[usize],
) {
    let (lo, hi) = act.range_f32();
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, |x, y| {
        clamp_float(x - y, lo, hi)
    });
}

/// DIV, TENSOR_FLOAT32 (NNAPI 1.1): `act(a / b)` with broadcasting (IEEE division: x/0 is
/// ±∞ or NaN, as in the reference).
pub fn div_f32(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    act: Activation,
    out: &mut [f32],
    out_shape: &[usize],
) {
    let (lo, hi) = act.range_f32();
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, |x, y| {
        clamp_float(x / y, lo, hi)
    });
}

/// MUL, TENSOR_QUANT8_ASYMM, with broadcasting: the product of the centred inputs is exact in
/// int32 (|·| ≤ 255²) and is requantized once by `a_scale · b_scale / out_scale`. Fails with
/// [`KernelError::InvalidData`] when that multiplier is not below one.
#[allow(clippy::too_many_arguments)]
pub fn mul_u8(
    a: &[u8],
    a_shape: &[usize],
    a_q: QuantParams,
    b: &[u8],
    b_shape: &[usize],
    b_q: QuantParams,
    out_q: QuantParams,
    act: Activation,
    out: &mut [u8],
    out_shape: &[usize],
) -> Result<(), KernelError> {
    let (mult, shift) = mul_multiplier(a_q, b_q, out_q)?;
    let (min, max) = act.range_u8(out_q);
    let (a_zp, b_zp, out_zp) = (a_q.zero_point, b_q.zero_point, out_q.zero_point);
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, |x, y| {
        let product =
            (i32::from(x).wrapping_sub(a_zp)).wrapping_mul(i32::from(y).wrapping_sub(b_zp));
        let raw = scale_down(product, mult, shift).saturating_add(out_zp);
        raw.max(min).min(max).clamp(0, 255) as u8
    });
    Ok(())
}

/// FLOOR.
pub fn floor_f32(input: &[f32], output: &mut [f32]) {
    map_unary(input, output, f32::floor);
}

/// RELU (`Activation::Relu`), RELU1 (`Relu1`) and RELU6 (`Relu6`) on float32;
/// `Activation::None` copies.
pub fn clamp_f32(act: Activation, input: &[f32], output: &mut [f32]) {
    let (lo, hi) = act.range_f32();
    map_unary(input, output, |x| clamp_float(x, lo, hi));
}

/// RELU / RELU1 / RELU6 on uint8. The output shares the input's quantization, so the op is a
/// clamp to the activation's bounds quantized with those parameters.
pub fn clamp_u8(act: Activation, q: QuantParams, input: &[u8], output: &mut [u8]) {
    let (lo, hi) = act.range_u8(q);
    map_unary(input, output, |x| {
        i32::from(x).max(lo).min(hi).clamp(0, 255) as u8
    });
}

/// LOGISTIC, float32: `1 / (1 + exp(−x))` in float32, as the reference evaluates it.
pub fn logistic_f32(input: &[f32], output: &mut [f32]) {
    map_unary(input, output, |x| 1.0 / (1.0 + (-x).exp()));
}

/// LOGISTIC, uint8 with fixed output parameters (scale 1/256, zero point 0).
///
/// Centred inputs are rescaled to Q4.27 (inputs beyond the radius where that format
/// saturates go straight to 0 or 255), the gemmlowp fixed-point logistic yields Q0.31, and
/// dividing by 2^23 gives units of 1/256; exactly 1.0 (256) is clipped to 255. Fails with
/// [`KernelError::InvalidData`] only for a non-positive or non-finite input scale.
pub fn logistic_u8(
    input: &[u8],
    input_q: QuantParams,
    output: &mut [u8],
) -> Result<(), KernelError> {
    fixed_point_u8("LOGISTIC", input, input_q, output, |x| {
        rounding_divide_by_pot(fixed_point::logistic(x, INPUT_INTEGER_BITS), 23).clamp(0, 255)
    })
}

/// TANH, quant8 (NNAPI 1.2): output scale 1/128 and zero point 128. As in
/// [`logistic_u8`], the centred input is rescaled to a fixed-point value with 4 integer bits
/// (inputs beyond the saturation radius go straight to 0 or 255); the gemmlowp fixed-point
/// tanh yields Q0.31 and dividing by 2^24 gives units of 1/128 around 128; exactly +1.0 (256)
/// is clipped to 255.
pub fn tanh_u8(input: &[u8], input_q: QuantParams, output: &mut [u8]) -> Result<(), KernelError> {
    fixed_point_u8("TANH", input, input_q, output, |x| {
        (rounding_divide_by_pot(fixed_point::tanh(x, INPUT_INTEGER_BITS), 24) + 128).clamp(0, 255)
    })
}

/// Integer bits of the fixed-point input of the quant8 LOGISTIC and TANH.
const INPUT_INTEGER_BITS: i32 = 4;

/// The quant8 LOGISTIC/TANH skeleton: the centred input is rescaled to a fixed-point value
/// with [`INPUT_INTEGER_BITS`], inputs beyond the saturation radius go straight to 0 or 255,
/// the others through `f`. The output depends on the byte alone, so long inputs evaluate each
/// of the 256 values once. Fails only for a non-positive or non-finite input scale.
fn fixed_point_u8(
    op: &str,
    input: &[u8],
    input_q: QuantParams,
    output: &mut [u8],
    f: impl Fn(i32) -> i32 + Sync,
) -> Result<(), KernelError> {
    debug_assert_eq!(input.len(), output.len());
    let real = f64::from(input_q.scale) * f64::from(1u32 << (31 - INPUT_INTEGER_BITS));
    let rescale = fixed_point::InputRescale::new(real).ok_or_else(|| {
        KernelError::InvalidData(format!("{op}: invalid input scale {}", input_q.scale))
    })?;
    let radius = rescale.input_radius(INPUT_INTEGER_BITS);
    let zero_point = input_q.zero_point;
    let eval = |q: u8| -> u8 {
        let x = i32::from(q).wrapping_sub(zero_point);
        // Strict comparisons, as in the optimized kernel the reference executor runs: at
        // exactly ±radius the fixed-point path gives the same 0/255, and with a zero radius
        // it keeps x = 0 at one half.
        if x < -radius {
            0
        } else if x > radius {
            255
        } else {
            f(rescale.apply(x)) as u8
        }
    };
    if input.len() > 256 {
        let mut table = [0u8; 256];
        for (q, t) in table.iter_mut().enumerate() {
            *t = eval(q as u8);
        }
        map_unary(input, output, |q| table[usize::from(q)]);
    } else {
        map_unary(input, output, eval);
    }
    Ok(())
}

/// The TENSOR_INT32 arithmetic of [`binary_i32`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOp {
    Add,
    Mul,
    Sub,
    Div,
}

/// DIV on TENSOR_INT32 as the reference defines it: division rounded towards −∞ ("floor
/// division"). Division by zero is undefined in NNAPI; the reference answers 0 and so does
/// this. `i32::MIN / −1` (2^31, not an i32) wraps to `i32::MIN` instead of trapping.
pub fn floor_div_i32(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    let q = a.wrapping_div(b);
    // A non-zero remainder means |q| < |a|, so q − 1 cannot overflow.
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

/// ADD, MUL, SUB and DIV on TENSOR_INT32 (NNAPI 1.3), with broadcasting: two's-complement
/// wrapping arithmetic, DIV by [`floor_div_i32`]; the reference accepts no fused activation
/// here, so any is refused.
#[allow(clippy::too_many_arguments)]
pub fn binary_i32(
    a: &[i32],
    a_shape: &[usize],
    b: &[i32],
    b_shape: &[usize],
    op: IntOp,
    act: Activation,
    out: &mut [i32],
    out_shape: &[usize],
) -> Result<(), KernelError> {
    if act != Activation::None {
        return Err(KernelError::InvalidData(
            "TENSOR_INT32 arithmetic takes no fused activation".into(),
        ));
    }
    let f = match op {
        IntOp::Add => i32::wrapping_add,
        IntOp::Mul => i32::wrapping_mul,
        IntOp::Sub => i32::wrapping_sub,
        IntOp::Div => floor_div_i32,
    };
    broadcast_binary(a, a_shape, b, b_shape, out, out_shape, f);
    Ok(())
}

/// Requantizes uint8 values from `from` to `to` as the reference CONCATENATION does for an
/// input whose quantization differs from the output's (NNAPI 1.2): in float32,
/// `round(q · s + b) + to.zero_point` with `s = from.scale / to.scale` (through the inverse
/// output scale) and `b = −from.zero_point · s`, clamped to 0..=255.
pub fn requantize_u8(input: &[u8], from: QuantParams, to: QuantParams, output: &mut [u8]) {
    let scale = from.scale * (1.0 / to.scale);
    let bias = -(from.zero_point as f32) * scale;
    map_unary(input, output, |q| {
        // A scale ratio past i32's range saturates the cast; the zero point is then added
        // saturating too, so the clamp below sees the extreme rather than a wrapped value.
        let v = ((f32::from(q) * scale + bias).round() as i32).saturating_add(to.zero_point);
        v.clamp(0, 255) as u8
    });
}

/// TANH, float32.
pub fn tanh_f32(input: &[f32], output: &mut [f32]) {
    map_unary(input, output, f32::tanh);
}

#[cfg(test)]
mod tests {
    use super::fixed_point::*;

    #[test]
    fn requantize_u8_saturates_a_scale_ratio_past_i32() {
        let from = super::QuantParams {
            scale: 1.0e20,
            zero_point: 0,
        };
        let to = super::QuantParams {
            scale: 1.0e-10,
            zero_point: 200,
        };
        let mut out = [7u8; 3];
        super::requantize_u8(&[0, 1, 255], from, to, &mut out);
        assert_eq!(out, [200, 255, 255]);
    }
    use super::*;

    fn q(scale: f32, zero_point: i32) -> QuantParams {
        QuantParams::new(scale, zero_point)
    }

    #[test]
    fn add_f32_same_shape_and_activation() {
        let a = [1.0, -2.0, 3.0, 0.5];
        let b = [0.5, 1.0, 4.0, -3.0];
        let mut out = [0.0; 4];
        add_f32(
            &a,
            &[2, 2],
            &b,
            &[2, 2],
            Activation::None,
            &mut out,
            &[2, 2],
        );
        assert_eq!(out, [1.5, -1.0, 7.0, -2.5]);
        add_f32(
            &a,
            &[2, 2],
            &b,
            &[2, 2],
            Activation::Relu6,
            &mut out,
            &[2, 2],
        );
        assert_eq!(out, [1.5, 0.0, 6.0, 0.0]);
        add_f32(
            &a,
            &[2, 2],
            &b,
            &[2, 2],
            Activation::Relu1,
            &mut out,
            &[2, 2],
        );
        assert_eq!(out, [1.0, -1.0, 1.0, -1.0]);
    }

    #[test]
    fn add_f32_broadcasts_across_ranks() {
        // [2, 3] + [3]: the vector is added to every row.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [10.0, 20.0, 30.0];
        let mut out = [0.0; 6];
        add_f32(&a, &[2, 3], &b, &[3], Activation::None, &mut out, &[2, 3]);
        assert_eq!(out, [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
        // Operands swapped.
        add_f32(&b, &[3], &a, &[2, 3], Activation::None, &mut out, &[2, 3]);
        assert_eq!(out, [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
        // [2, 1] + [1, 3] → [2, 3]: both operands broadcast.
        let col = [1.0, 2.0];
        let row = [10.0, 20.0, 30.0];
        add_f32(
            &col,
            &[2, 1],
            &row,
            &[1, 3],
            Activation::None,
            &mut out,
            &[2, 3],
        );
        assert_eq!(out, [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        // A scalar-like [1] against a rank-4 tensor.
        let t: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let mut out8 = [0.0; 8];
        mul_f32(
            &t,
            &[1, 2, 2, 2],
            &[2.0],
            &[1],
            Activation::None,
            &mut out8,
            &[1, 2, 2, 2],
        );
        assert_eq!(out8, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]);
    }

    #[test]
    fn broadcast_middle_axis_rank4() {
        // [2, 1, 2, 1] * [3, 1, 2] → [2, 3, 2, 2].
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 10.0, 100.0, 1000.0, 1e4, 1e5];
        let mut out = [0.0f32; 24];
        mul_f32(
            &a,
            &[2, 1, 2, 1],
            &b,
            &[3, 1, 2],
            Activation::None,
            &mut out,
            &[2, 3, 2, 2],
        );
        let mut expected = [0.0f32; 24];
        for n in 0..2 {
            for h in 0..3 {
                for w in 0..2 {
                    for c in 0..2 {
                        expected[((n * 3 + h) * 2 + w) * 2 + c] = a[n * 2 + w] * b[h * 2 + c];
                    }
                }
            }
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn broadcast_matches_naive_on_large_parallel_input() {
        // Long enough to take the parallel path, with a broadcast on a middle axis.
        let (n, h, w, c) = (3, 70, 33, 11);
        let a: Vec<f32> = (0..n * h * w * c).map(|i| (i % 97) as f32).collect();
        let b: Vec<f32> = (0..h * c).map(|i| (i % 13) as f32 * 0.5).collect();
        let mut out = vec![0.0; a.len()];
        add_f32(
            &a,
            &[n, h, w, c],
            &b,
            &[h, 1, c],
            Activation::None,
            &mut out,
            &[n, h, w, c],
        );
        for ni in 0..n {
            for y in 0..h {
                for x in 0..w {
                    for ci in 0..c {
                        let i = ((ni * h + y) * w + x) * c + ci;
                        assert_eq!(out[i], a[i] + b[y * c + ci]);
                    }
                }
            }
        }
    }

    #[test]
    fn add_u8_nonzero_zero_points_and_clamps() {
        // a = 0.5·(q − 100), b = 0.25·(q − 50), out = 1.0·(q − 128).
        let a = [120u8, 80, 100, 255];
        let b = [54u8, 46, 50, 0];
        let mut out = [0u8; 4];
        add_u8(
            &a,
            &[4],
            q(0.5, 100),
            &b,
            &[4],
            q(0.25, 50),
            q(1.0, 128),
            Activation::None,
            &mut out,
            &[4],
        )
        .unwrap();
        // 10 + 1 = 11, −10 − 1 = −11, 0, 77.5 − 12.5 = 65.
        assert_eq!(out, [139, 117, 128, 193]);
        add_u8(
            &a,
            &[4],
            q(0.5, 100),
            &b,
            &[4],
            q(0.25, 50),
            q(1.0, 128),
            Activation::Relu,
            &mut out,
            &[4],
        )
        .unwrap();
        assert_eq!(out, [139, 128, 128, 193]);
        add_u8(
            &a,
            &[4],
            q(0.5, 100),
            &b,
            &[4],
            q(0.25, 50),
            q(1.0, 128),
            Activation::Relu6,
            &mut out,
            &[4],
        )
        .unwrap();
        assert_eq!(out, [134, 128, 128, 134]);
    }

    #[test]
    fn add_u8_saturates_at_both_ends() {
        let mut out = [0u8; 2];
        add_u8(
            &[255, 0],
            &[2],
            q(1.0, 0),
            &[255, 0],
            &[2],
            q(1.0, 0),
            q(1.0, 10),
            Activation::None,
            &mut out,
            &[2],
        )
        .unwrap();
        assert_eq!(out, [255, 10]);
        add_u8(
            &[0, 0],
            &[2],
            q(1.0, 200),
            &[0, 100],
            &[2],
            q(1.0, 0),
            q(1.0, 0),
            Activation::None,
            &mut out,
            &[2],
        )
        .unwrap();
        assert_eq!(out, [0, 0]);
    }

    #[test]
    fn add_u8_broadcast_and_rounding() {
        // [1, 2] + [2, 2] with scales 2 and 1 into scale 1 (the golden's geometry).
        let mut out = [0u8; 4];
        add_u8(
            &[1, 2],
            &[1, 2],
            q(2.0, 0),
            &[1, 2, 3, 4],
            &[2, 2],
            q(1.0, 0),
            q(1.0, 0),
            Activation::None,
            &mut out,
            &[2, 2],
        )
        .unwrap();
        assert_eq!(out, [3, 6, 5, 8]);
        // Half-way results round away from zero: 1.5 + 0 → 2 and 0 − 1.5 → −2.
        add_u8(
            &[3, 0],
            &[2],
            q(0.5, 0),
            &[3, 0],
            &[2],
            q(0.5, 3),
            q(1.0, 10),
            Activation::None,
            &mut out[..2],
            &[2],
        )
        .unwrap();
        assert_eq!(&out[..2], &[12, 8]);
    }

    #[test]
    fn add_u8_rejects_bad_multipliers() {
        let mut out = [0u8; 1];
        // Output scale far too small: 2·1/(2^20·1e-9) > 1.
        let e = add_u8(
            &[1],
            &[1],
            q(1.0, 0),
            &[1],
            &[1],
            q(1.0, 0),
            q(1e-9, 0),
            Activation::None,
            &mut out,
            &[1],
        );
        assert!(matches!(e, Err(KernelError::InvalidData(_))));
        let e = add_u8(
            &[1],
            &[1],
            q(0.0, 0),
            &[1],
            &[1],
            q(0.0, 0),
            q(1.0, 0),
            Activation::None,
            &mut out,
            &[1],
        );
        assert!(e.is_err());
    }

    #[test]
    fn add_u8_tiny_relative_scale_contributes_nothing() {
        // b's multiplier is below 2^−32: its term must vanish, not panic.
        let mut out = [0u8; 1];
        add_u8(
            &[7],
            &[1],
            q(1.0, 0),
            &[255],
            &[1],
            q(1e-12, 0),
            q(1.0, 0),
            Activation::None,
            &mut out,
            &[1],
        )
        .unwrap();
        assert_eq!(out, [7]);
    }

    #[test]
    fn mul_u8_zero_points_rounding_and_clamps() {
        // (0.5·(q − 10)) · (0.25·(q − 20)) into scale 0.5, zero point 5.
        let a = [14u8, 6, 10, 255];
        let b = [28u8, 28, 0, 255];
        let mut out = [0u8; 4];
        mul_u8(
            &a,
            &[4],
            q(0.5, 10),
            &b,
            &[4],
            q(0.25, 20),
            q(0.5, 5),
            Activation::None,
            &mut out,
            &[4],
        )
        .unwrap();
        // 2·2 = 4 → 8 + 5; −2·2 = −4 → −8 + 5 → 0 (saturated); 0 → 5; 122.5·58.75 → 255.
        assert_eq!(out, [13, 0, 5, 255]);
        mul_u8(
            &a,
            &[4],
            q(0.5, 10),
            &b,
            &[4],
            q(0.25, 20),
            q(0.5, 5),
            Activation::Relu1,
            &mut out,
            &[4],
        )
        .unwrap();
        assert_eq!(out, [7, 3, 5, 7]);
        // Broadcast [2, 2] · [2].
        let mut out = [0u8; 4];
        mul_u8(
            &[1, 2, 3, 4],
            &[2, 2],
            q(1.0, 0),
            &[2, 3],
            &[2],
            q(1.0, 0),
            q(2.0, 0),
            Activation::None,
            &mut out,
            &[2, 2],
        )
        .unwrap();
        // 2/2, 6/2, 6/2, 12/2.
        assert_eq!(out, [1, 3, 3, 6]);
        // Multiplier ≥ 1 is refused.
        let e = mul_u8(
            &[1],
            &[1],
            q(1.0, 0),
            &[1],
            &[1],
            q(1.0, 0),
            q(1.0, 0),
            Activation::None,
            &mut out[..1],
            &[1],
        );
        assert!(e.is_err());
    }

    #[test]
    fn unary_float_ops() {
        let x = [-2.5f32, -0.5, 0.0, 0.5, 1.5, 7.0];
        let mut out = [0.0; 6];
        floor_f32(&x, &mut out);
        assert_eq!(out, [-3.0, -1.0, 0.0, 0.0, 1.0, 7.0]);
        clamp_f32(Activation::Relu, &x, &mut out);
        assert_eq!(out, [0.0, 0.0, 0.0, 0.5, 1.5, 7.0]);
        clamp_f32(Activation::Relu1, &x, &mut out);
        assert_eq!(out, [-1.0, -0.5, 0.0, 0.5, 1.0, 1.0]);
        clamp_f32(Activation::Relu6, &x, &mut out);
        assert_eq!(out, [0.0, 0.0, 0.0, 0.5, 1.5, 6.0]);
        logistic_f32(&x, &mut out);
        for (o, &v) in out.iter().zip(&x) {
            assert!((o - 1.0 / (1.0 + (-v).exp())).abs() < 1e-7);
        }
        tanh_f32(&x, &mut out);
        assert!((out[0] - (-2.5f32).tanh()).abs() < 1e-7 && out[2] == 0.0);
    }

    #[test]
    fn clamp_u8_uses_quantized_bounds() {
        let x = [0u8, 90, 98, 100, 102, 112, 130, 255];
        let mut out = [0u8; 8];
        let qp = q(0.5, 100);
        clamp_u8(Activation::Relu, qp, &x, &mut out);
        assert_eq!(out, [100, 100, 100, 100, 102, 112, 130, 255]);
        clamp_u8(Activation::Relu1, qp, &x, &mut out);
        assert_eq!(out, [98, 98, 98, 100, 102, 102, 102, 102]);
        clamp_u8(Activation::Relu6, qp, &x, &mut out);
        assert_eq!(out, [100, 100, 100, 100, 102, 112, 112, 112]);
    }

    #[test]
    fn fixed_point_exp_tracks_float() {
        for bits in [4, 5] {
            let unit = f64::from(1u32 << (31 - bits));
            for i in 0..2000 {
                let x = -(i as f64) * 0.008; // 0 down to −16
                let raw = (x * unit).round() as i32;
                let got = f64::from(exp_on_negative_values(raw, bits)) / 2f64.powi(31);
                let want = (f64::from(raw) / unit).exp();
                assert!(
                    (got - want).abs() < 2e-8 + 1e-6 * want,
                    "bits {bits} x {x}: {got} vs {want}"
                );
            }
        }
        assert_eq!(exp_on_negative_values(0, 5), i32::MAX);
    }

    #[test]
    fn fixed_point_reciprocal_and_logistic_track_float() {
        for i in 0..1000 {
            let x = i as f64 / 1000.0;
            let raw = (x * 2f64.powi(31)) as i32;
            let got = f64::from(one_over_one_plus_x_for_x_in_0_1(raw)) / 2f64.powi(31);
            assert!((got - 1.0 / (1.0 + x)).abs() < 1e-8, "{x}: {got}");
        }
        for i in -160..=160 {
            let x = f64::from(i) / 10.0;
            let raw = (x * 2f64.powi(27)).round() as i32;
            let got = f64::from(logistic(raw, 4)) / 2f64.powi(31);
            assert!((got - 1.0 / (1.0 + (-x).exp())).abs() < 2e-7, "{x}: {got}");
        }
        assert_eq!(logistic(0, 4), 1 << 30);
    }

    #[test]
    fn saturating_pot_multiply() {
        assert_eq!(saturating_rounding_multiply_by_pot(1 << 28, 2), 1 << 30);
        assert_eq!(saturating_rounding_multiply_by_pot(1 << 29, 2), i32::MAX);
        assert_eq!(saturating_rounding_multiply_by_pot(-(1 << 29), 2), i32::MIN);
        assert_eq!(
            saturating_rounding_multiply_by_pot(-(1 << 29) + 1, 2),
            (-(1 << 29) + 1) * 4
        );
        assert_eq!(saturating_rounding_multiply_by_pot(6, -2), 2);
        assert_eq!(saturating_rounding_multiply_by_pot(-6, -2), -2);
        assert_eq!(saturating_rounding_multiply_by_pot(i32::MAX, -40), 0);
    }

    #[test]
    fn tanh_u8_follows_tanh() {
        let input: Vec<u8> = (0..=255).collect();
        for (scale, zp) in [(0.05f32, 128), (0.01, 100), (0.2, 0), (1.0 / 16.0, 255)] {
            let mut out = vec![0u8; 256];
            tanh_u8(&input, q(scale, zp), &mut out).unwrap();
            for (x, y) in input.iter().zip(&out) {
                let real = (f64::from(scale) * (f64::from(*x) - f64::from(zp))).tanh();
                let want = (real * 128.0 + 128.0).round().clamp(0.0, 255.0);
                assert!(
                    (f64::from(*y) - want).abs() <= 1.0,
                    "{scale} {zp} {x}: {y} vs {want}"
                );
            }
            assert_eq!(out[zp as usize], 128);
        }
        assert!(tanh_u8(&[0], q(0.0, 0), &mut [0]).is_err());
    }

    #[test]
    fn int32_add_mul_wrap_and_broadcast() {
        let mut out = [0i32; 4];
        binary_i32(
            &[1, 2, 3, i32::MAX],
            &[4],
            &[10],
            &[1],
            IntOp::Add,
            Activation::None,
            &mut out,
            &[4],
        )
        .unwrap();
        assert_eq!(out, [11, 12, 13, i32::MIN + 9]);
        binary_i32(
            &[1, -2],
            &[2, 1],
            &[3, 4],
            &[1, 2],
            IntOp::Mul,
            Activation::None,
            &mut out,
            &[2, 2],
        )
        .unwrap();
        assert_eq!(out, [3, 4, -6, -8]);
        assert!(binary_i32(
            &[1],
            &[1],
            &[1],
            &[1],
            IntOp::Add,
            Activation::Relu,
            &mut out[..1],
            &[1]
        )
        .is_err());
    }

    #[test]
    fn requantize_u8_maps_real_values() {
        let mut out = [0u8; 4];
        // Scale 0.5 → 1.0: halves the centred value; zero point 10 → 100.
        requantize_u8(&[10, 12, 13, 255], q(0.5, 10), q(1.0, 100), &mut out);
        assert_eq!(out, [100, 101, 102, 223]);
        requantize_u8(&[0, 255, 128, 129], q(2.0, 128), q(1.0, 128), &mut out);
        assert_eq!(out, [0, 255, 128, 130]);
    }

    #[test]
    fn logistic_u8_reference_points() {
        // Scale 0.5: inputs 0, 1, 2, 255 are 0, 0.5, 1.0, 127.5.
        let mut out = [0u8; 5];
        logistic_u8(&[0, 1, 2, 10, 255], q(0.5, 0), &mut out).unwrap();
        let expect = |x: f64| (256.0 / (1.0 + (-x).exp())).round().min(255.0) as u8;
        assert_eq!(out, [128, expect(0.5), expect(1.0), expect(5.0), 255]);
        // Negative side with a nonzero zero point saturates to 0.
        logistic_u8(&[0, 100, 127, 128, 129], q(0.25, 128), &mut out).unwrap();
        assert_eq!(out, [0, expect(-7.0), expect(-0.25), 128, expect(0.25)]);
    }

    #[test]
    fn logistic_u8_table_path_matches_direct_path() {
        let input: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 256) as u8).collect();
        let qp = q(0.0625, 100);
        let mut long = vec![0u8; input.len()];
        logistic_u8(&input, qp, &mut long).unwrap();
        for (chunk_in, chunk_out) in input.chunks(200).zip(long.chunks(200)) {
            let mut short = vec![0u8; chunk_in.len()];
            logistic_u8(chunk_in, qp, &mut short).unwrap();
            assert_eq!(short, chunk_out);
        }
    }

    #[test]
    fn logistic_u8_extreme_scales() {
        let mut out = [0u8; 3];
        // So small the reference's multiplier would be below one: everything is one half.
        logistic_u8(&[0, 128, 255], q(1e-10, 128), &mut out).unwrap();
        assert_eq!(out, [128, 128, 128]);
        // So large the radius is zero: only the zero point maps to one half.
        logistic_u8(&[127, 128, 129], q(1e6, 128), &mut out).unwrap();
        assert_eq!(out, [0, 128, 255]);
        assert!(logistic_u8(&[0], q(0.0, 0), &mut out[..1]).is_err());
        assert!(logistic_u8(&[0], q(f32::NAN, 0), &mut out[..1]).is_err());
    }

    /// Naive broadcast: map every output index back to each operand.
    fn naive_broadcast(
        a: &[f32],
        a_shape: &[usize],
        b: &[f32],
        b_shape: &[usize],
        out_shape: &[usize],
    ) -> Vec<f32> {
        let rank = out_shape.len();
        let len: usize = out_shape.iter().product();
        let source = |shape: &[usize], idx: &[usize]| {
            let skip = rank - shape.len();
            shape.iter().enumerate().fold(0, |acc, (j, &d)| {
                acc * d + if d == 1 { 0 } else { idx[skip + j] }
            })
        };
        (0..len)
            .map(|flat| {
                let mut idx = vec![0; rank];
                let mut rem = flat;
                for j in (0..rank).rev() {
                    idx[j] = rem % out_shape[j];
                    rem /= out_shape[j];
                }
                a[source(a_shape, &idx)] + b[source(b_shape, &idx)]
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn broadcast_matches_naive(
            dims in proptest::collection::vec(1usize..5, 0..=4),
            a_mask in 0u8..16,
            b_mask in 0u8..16,
            a_drop in 0usize..=4,
            b_drop in 0usize..=4,
        ) {
            let rank = dims.len();
            // Each operand: drop some leading axes, and set masked axes to 1.
            let make = |mask: u8, drop: usize| -> Vec<usize> {
                dims.iter()
                    .enumerate()
                    .skip(drop.min(rank))
                    .map(|(j, &d)| if mask & (1 << j) != 0 { 1 } else { d })
                    .collect()
            };
            let (a_shape, b_shape) = (make(a_mask, a_drop), make(b_mask, b_drop));
            let out_shape: Vec<usize> = (0..rank)
                .map(|j| {
                    let pick = |s: &[usize]| if j + s.len() >= rank { s[j + s.len() - rank] } else { 1 };
                    pick(&a_shape).max(pick(&b_shape))
                })
                .collect();
            let a: Vec<f32> = (0..a_shape.iter().product::<usize>()).map(|i| i as f32).collect();
            let b: Vec<f32> = (0..b_shape.iter().product::<usize>()).map(|i| 1000.0 * i as f32).collect();
            let mut out = vec![0.0; out_shape.iter().product()];
            add_f32(&a, &a_shape, &b, &b_shape, Activation::None, &mut out, &out_shape);
            proptest::prop_assert_eq!(out, naive_broadcast(&a, &a_shape, &b, &b_shape, &out_shape));
        }

        #[test]
        fn quant_kernels_never_panic(
            sa in proptest::num::f32::POSITIVE | proptest::num::f32::ZERO,
            sb in proptest::num::f32::POSITIVE,
            so in proptest::num::f32::POSITIVE,
            za in 0i32..=255, zb in 0i32..=255, zo in 0i32..=255,
            act in 0usize..4,
            data in proptest::collection::vec(proptest::num::u8::ANY, 1..40),
        ) {
            let act = [Activation::None, Activation::Relu, Activation::Relu1, Activation::Relu6][act];
            let n = data.len();
            let mut out = vec![0u8; n];
            let _ = add_u8(&data, &[n], q(sa, za), &data, &[n], q(sb, zb), q(so, zo), act, &mut out, &[n]);
            let _ = mul_u8(&data, &[n], q(sa, za), &data, &[1, n], q(sb, zb), q(so, zo), act, &mut out, &[1, n]);
            let _ = logistic_u8(&data, q(sa, za), &mut out);
            clamp_u8(act, q(so, zo), &data, &mut out);
        }
    }

    #[test]
    fn empty_tensors_are_fine() {
        let mut out: [f32; 0] = [];
        add_f32(
            &[],
            &[0, 3],
            &[1.0, 2.0, 3.0],
            &[3],
            Activation::None,
            &mut out,
            &[0, 3],
        );
        floor_f32(&[], &mut out);
        let mut out8: [u8; 0] = [];
        logistic_u8(&[], q(0.5, 0), &mut out8).unwrap();
    }
}

#[cfg(test)]
mod sub_div_tests {
    use super::*;

    #[test]
    fn quant8_sub_of_equal_scales_is_the_difference_of_the_stored_values() {
        let q = QuantParams::new(0.5, 100);
        let a: Vec<u8> = (0..=255).collect();
        let b: Vec<u8> = (0..=255).rev().collect();
        let mut out = vec![0; 256];
        sub_u8(
            &a,
            &[256],
            q,
            &b,
            &[256],
            q,
            q,
            Activation::None,
            &mut out,
            &[256],
        )
        .unwrap();
        for i in 0..256 {
            let want = (a[i] as i32 - b[i] as i32 + 100).clamp(0, 255);
            assert_eq!(out[i] as i32, want, "{} - {}", a[i], b[i]);
        }
    }

    #[test]
    fn quant8_sub_negates_the_multiplier_not_the_rescaled_value() {
        // Different scales, broadcasting a scalar: every result within one step of the real
        // difference, and a − a is the zero point exactly.
        let (qa, qb, qo) = (
            QuantParams::new(0.3, 7),
            QuantParams::new(0.7, 130),
            QuantParams::new(0.9, 128),
        );
        let a: Vec<u8> = (0..=255).collect();
        for y in [0u8, 77, 130, 255] {
            let mut out = vec![0; 256];
            sub_u8(
                &a,
                &[256],
                qa,
                &[y],
                &[1],
                qb,
                qo,
                Activation::None,
                &mut out,
                &[256],
            )
            .unwrap();
            for (x, &o) in a.iter().zip(&out) {
                let real = 0.3 * (f64::from(*x) - 7.0) - 0.7 * (f64::from(y) - 130.0);
                let want = (real / 0.9 + 128.0).round().clamp(0.0, 255.0);
                assert!(
                    (f64::from(o) - want).abs() <= 1.0,
                    "{x} - {y}: {o} vs {want}"
                );
            }
        }
    }

    #[test]
    fn int32_division_floors_and_never_traps() {
        assert_eq!(floor_div_i32(7, 2), 3);
        assert_eq!(floor_div_i32(-7, 2), -4);
        assert_eq!(floor_div_i32(7, -2), -4);
        assert_eq!(floor_div_i32(-7, -2), 3);
        assert_eq!(floor_div_i32(-6, 3), -2);
        assert_eq!(floor_div_i32(5, 0), 0);
        assert_eq!(floor_div_i32(i32::MIN, -1), i32::MIN);
        assert_eq!(floor_div_i32(i32::MIN, 1), i32::MIN);
    }

    #[test]
    fn int32_arithmetic_refuses_an_activation() {
        let mut out = [0];
        assert!(binary_i32(
            &[1],
            &[1],
            &[1],
            &[1],
            IntOp::Sub,
            Activation::Relu,
            &mut out,
            &[1]
        )
        .is_err());
    }

    #[test]
    fn float_sub_and_div_broadcast_and_clamp() {
        let mut out = [0.0; 4];
        sub_f32(
            &[1.0, 2.0, 3.0, 4.0],
            &[2, 2],
            &[1.0, 5.0],
            &[2],
            Activation::Relu,
            &mut out,
            &[2, 2],
        );
        assert_eq!(out, [0.0, 0.0, 2.0, 0.0]);
        div_f32(
            &[1.0, 2.0, 3.0, 4.0],
            &[2, 2],
            &[2.0],
            &[1],
            Activation::Relu1,
            &mut out,
            &[2, 2],
        );
        assert_eq!(out, [0.5, 1.0, 1.0, 1.0]);
    }
}
