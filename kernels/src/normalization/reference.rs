//! Normalizations along the last (depth) axis, types.hal 1.0 `OperationType`: SOFTMAX (25) for
//! TENSOR_FLOAT32 and TENSOR_QUANT8_ASYMM, L2_NORMALIZATION (11) and
//! LOCAL_RESPONSE_NORMALIZATION (13) for TENSOR_FLOAT32.
//!
//! Each kernel views its tensor as `[len / depth, depth]` and normalizes every row on its own,
//! so one code path serves the 2-D and 4-D shapes 1.0 allows. Quant8 SOFTMAX follows the
//! reference's gemmlowp fixed-point algorithm exactly (see [`softmax_u8`]).

use crate::elementwise::reference::fixed_point::{
    exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1, rescale, rounding_divide_by_pot_wide,
    InputRescale,
};
use crate::parallel::MIN_ELEMENTS;
use crate::quant::{rounding_divide_by_pot, saturating_rounding_doubling_high_mul};
use crate::{KernelError, QuantParams};

/// Target elements per parallel task (whole rows are never split).
const PARALLEL_CHUNK: usize = 1 << 14;

/// Calls `f(input_row, output_row)` for every `depth`-long row, in parallel for long tensors.
fn for_rows<T, U, F>(input: &[T], depth: usize, output: &mut [U], f: F)
where
    T: Sync,
    U: Send,
    F: Fn(&[T], &mut [U]) + Sync,
{
    debug_assert_eq!(input.len(), output.len());
    if depth == 0 || input.is_empty() {
        return;
    }
    debug_assert_eq!(input.len() % depth, 0);
    let rows = |src: &[T], dst: &mut [U]| {
        for (row_in, row_out) in src.chunks(depth).zip(dst.chunks_mut(depth)) {
            f(row_in, row_out);
        }
    };
    if input.len() >= MIN_ELEMENTS && input.len() > depth {
        let task = (PARALLEL_CHUNK / depth).max(1) * depth;
        crate::parallel::for_chunks(output, task, |i, dst| {
            rows(&input[i * task..][..dst.len()], dst)
        });
    } else {
        rows(input, output);
    }
}

/// SOFTMAX, float32: `exp(β·(x − max)) / Σ exp(β·(x − max))` per row. Subtracting the row
/// maximum keeps every exponent ≤ 0, so nothing overflows.
pub fn softmax_f32(input: &[f32], depth: usize, beta: f32, output: &mut [f32]) {
    for_rows(input, depth, output, |src, dst| {
        let max = src.iter().copied().fold(src[0], f32::max);
        let mut sum = 0.0f32;
        for (d, &x) in dst.iter_mut().zip(src) {
            let e = ((x - max) * beta).exp();
            *d = e;
            sum += e;
        }
        for d in dst.iter_mut() {
            *d /= sum;
        }
    });
}

/// A tabulated SOFTMAX exponential of this thread's last quant8 SOFTMAX: the rescaling and
/// cut-off it was computed for, and `exp` of every difference 0..=255.
type ExpTable = ((InputRescale, i32), [i32; 256]);

thread_local! {
    static EXP_TABLE: std::cell::Cell<Option<ExpTable>> = const { std::cell::Cell::new(None) };
}

/// SOFTMAX, uint8 with fixed output parameters (scale 1/256, zero point 0).
///
/// Per row: the differences `q − max` (≤ 0) are rescaled by `β · input_scale` into Q5.26 and
/// exponentiated in Q0.31; differences below `diff_min` (where Q5.26 would saturate, and the
/// exponential is negligible) are dropped. The exponentials are summed in Q12.19, which holds
/// up to 4096 full-weight entries. The reciprocal of the sum is taken on its mantissa
/// normalised into [1, 2) — `1 / (1 + x)` for x in [0, 1) — and the exponent
/// (`num_bits_over_unit`) is folded into the final rounding shift that turns Q0.31 into
/// units of 1/256.
///
/// Fails with [`KernelError::InvalidData`] when `β · input_scale` is not positive and finite.
pub fn softmax_u8(
    input: &[u8],
    input_q: QuantParams,
    depth: usize,
    beta: f32,
    output: &mut [u8],
) -> Result<(), KernelError> {
    const SCALED_DIFF_INTEGER_BITS: i32 = 5;
    const ACCUMULATION_INTEGER_BITS: i32 = 12;
    // In double, capped at the largest Q31 value, as the reference computes it.
    let real = f64::from(beta)
        * f64::from(input_q.scale)
        * f64::from(1u32 << (31 - SCALED_DIFF_INTEGER_BITS));
    let cap = f64::from(i32::MAX);
    let real = if real > cap { cap } else { real };
    let rescale_diff = InputRescale::new(real).ok_or_else(|| {
        KernelError::InvalidData(format!(
            "SOFTMAX: beta {beta} times input scale {} is not positive",
            input_q.scale
        ))
    })?;
    // The reference passes the radius through a float32 before storing it as an int.
    let diff_min = -(rescale_diff.input_radius(SCALED_DIFF_INTEGER_BITS) as f32) as i32;

    // exp of the rescaled difference −k, k = max − q in 0..=255; 0 for dropped differences,
    // which then add nothing to the sum and produce 0, exactly like skipping them.
    let exp_of = |k: u8| -> i32 {
        let diff = -i32::from(k);
        if diff >= diff_min {
            exp_on_negative_values(rescale_diff.apply(diff), SCALED_DIFF_INTEGER_BITS)
        } else {
            0
        }
    };
    // Only 256 distinct differences exist; tabulate them once when that is cheaper, and keep
    // the table of the last parameters (a model runs the same layer on every execution, and
    // the 256 fixed-point exponentials cost more than the rest of a 1000-class row).
    let table: Option<[i32; 256]> = (input.len() >= 256).then(|| {
        let key = (rescale_diff, diff_min);
        if let Some((k, t)) = EXP_TABLE.get() {
            if k == key {
                return t;
            }
        }
        let mut t = [0; 256];
        for (k, e) in t.iter_mut().enumerate() {
            *e = exp_of(k as u8);
        }
        EXP_TABLE.set(Some((key, t)));
        t
    });
    let exp_at = |k: u8| match &table {
        Some(t) => t[usize::from(k)],
        None => exp_of(k),
    };

    for_rows(input, depth, output, |src, dst| {
        let max = src.iter().copied().max().unwrap_or(0);
        let mut sum_of_exps: i32 = 0;
        for &q in src {
            // Saturating rather than wrapping: only rows of more than 4096 near-maximal
            // entries reach the limit, and their outputs round to 0 either way.
            sum_of_exps =
                sum_of_exps.saturating_add(rescale(exp_at(max - q), 0, ACCUMULATION_INTEGER_BITS));
        }
        // sum ≥ 1.0 (the maximum contributes exp(0)), so it has at most 12 bits above the
        // binary point; shift its leading one to bit 31 and drop it to get x in [0, 1).
        let sum = sum_of_exps as u32;
        let headroom_plus_one = sum.leading_zeros();
        let num_bits_over_unit = ACCUMULATION_INTEGER_BITS - headroom_plus_one as i32;
        let shifted_sum_minus_one = sum
            .checked_shl(headroom_plus_one)
            .unwrap_or(0)
            .wrapping_sub(1 << 31) as i32;
        let shifted_scale = one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one);
        let exponent = num_bits_over_unit + 31 - 8;
        for (d, &q) in dst.iter_mut().zip(src) {
            let product = saturating_rounding_doubling_high_mul(shifted_scale, exp_at(max - q));
            *d = rounding_divide_by_pot_wide(product, exponent).clamp(0, 255) as u8;
        }
    });
    Ok(())
}

/// L2_NORMALIZATION, float32: `x / sqrt(Σ x²)` per row. The norm is floored at 1e−6 (as later
/// reference versions do) so an all-zero row yields zeros instead of NaN.
pub fn l2_normalization_f32(input: &[f32], depth: usize, output: &mut [f32]) {
    const EPSILON: f32 = 1e-6;
    for_rows(input, depth, output, |src, dst| {
        let squared = src.iter().fold(0.0f32, |acc, &x| acc + x * x);
        let norm = squared.sqrt().max(EPSILON);
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = x / norm;
        }
    });
}

/// `x · 2^exponent` with saturation at the int32 range (exponent in 0..31).
fn saturating_shl(x: i32, exponent: u32) -> i32 {
    (i64::from(x) << exponent).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// `1/sqrt(sum)` as a Q0.31 multiplier and a right shift, computed in fixed point (five
/// Newton–Raphson steps on a Q3.28 value) exactly as the quant8 reference does; sums of 0
/// and 1 give the largest multiplier and no shift.
pub fn inv_sqrt_multiplier(sum: i32) -> (i32, i32) {
    if sum <= 1 {
        return (i32::MAX, 0);
    }
    let mut input = sum;
    let mut shift: i32 = 11;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    let pairs = ((input as u32).leading_zeros() as i32 - 1) / 2 - 1;
    shift -= pairs;
    input <<= 2 * pairs;
    // Q3.28 fixed point: `mul` of two Q3 values is Q6, rescaled back by a saturating shift.
    let mul = saturating_rounding_doubling_high_mul;
    let fixed_input = input >> 1;
    let half_input = rounding_divide_by_pot(fixed_input, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x: i32 = 1 << 28;
    for _ in 0..5 {
        let x3 = saturating_shl(mul(mul(x, x), x), 6);
        // Fixed-point subtraction wraps, as the reference's does.
        let diff = mul(half_three, x).wrapping_sub(mul(half_input, x3));
        x = saturating_shl(diff, 3);
    }
    // √2/2 in Q0.31.
    let mut multiplier = mul(x, 1_518_500_250);
    if shift < 0 {
        multiplier = multiplier.wrapping_shl((-shift) as u32);
        shift = 0;
    }
    (multiplier, shift)
}

/// L2_NORMALIZATION, uint8 (NNAPI 1.2): output scale 1/128 and zero point 128, so the result
/// is `128 + 128·(x − zp)/‖x − zp‖`, in the reference's fixed point, clamped to a byte.
pub fn l2_normalization_u8(input: &[u8], depth: usize, zero_point: i32, output: &mut [u8]) {
    for_rows(input, depth, output, |src, dst| {
        let sum = src.iter().fold(0i32, |acc, &v| {
            let d = i32::from(v) - zero_point;
            acc.wrapping_add(d * d)
        });
        let (multiplier, shift) = inv_sqrt_multiplier(sum);
        for (o, &v) in dst.iter_mut().zip(src) {
            let d = i32::from(v) - zero_point;
            let scaled = rounding_divide_by_pot(
                saturating_rounding_doubling_high_mul(d * 128, multiplier),
                shift,
            );
            *o = (scaled + 128).clamp(0, 255) as u8;
        }
    });
}

/// LOCAL_RESPONSE_NORMALIZATION, float32:
/// `x_c · (bias + α · Σ_{j = c−r}^{c+r} x_j²)^−β`, the window clipped to the row. The
/// reference multiplies by the negative power rather than dividing by the positive one.
pub fn local_response_normalization_f32(
    input: &[f32],
    depth: usize,
    radius: usize,
    bias: f32,
    alpha: f32,
    beta: f32,
    output: &mut [f32],
) {
    for_rows(input, depth, output, |src, dst| {
        for (c, d) in dst.iter_mut().enumerate() {
            let begin = c.saturating_sub(radius);
            let end = c.saturating_add(radius).saturating_add(1).min(src.len());
            let sum = src[begin..end].iter().fold(0.0f32, |acc, &x| acc + x * x);
            *d = src[c] * (bias + alpha * sum).powf(-beta);
        }
    });
}

/// INSTANCE_NORMALIZATION (NNAPI 1.2), float32 NHWC: every (batch, channel) plane is
/// normalised by its own mean and variance, `(x − mean) · gamma / sqrt(var + epsilon) + beta`,
/// with the reference's order: the mean first, then the mean of the squared deviations.
pub fn instance_normalization_f32(
    input: &[f32],
    shape: crate::Nhwc,
    gamma: f32,
    beta: f32,
    epsilon: f32,
    output: &mut [f32],
) {
    let (plane, c) = (shape.h * shape.w, shape.c);
    if plane == 0 || c == 0 {
        return;
    }
    let count = plane as f32;
    for (x, y) in input
        .chunks_exact(plane * c)
        .zip(output.chunks_exact_mut(plane * c))
    {
        for ch in 0..c {
            let mean = x.iter().skip(ch).step_by(c).sum::<f32>() / count;
            let var = x
                .iter()
                .skip(ch)
                .step_by(c)
                .map(|v| (v - mean) * (v - mean))
                .sum::<f32>()
                / count;
            let sigma = (var + epsilon).sqrt();
            for (o, v) in y
                .iter_mut()
                .skip(ch)
                .step_by(c)
                .zip(x.iter().skip(ch).step_by(c))
            {
                *o = (v - mean) * gamma / sigma + beta;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float_softmax(row: &[f64], beta: f64) -> Vec<f64> {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&x| ((x - max) * beta).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    #[test]
    fn softmax_f32_rows_are_independent() {
        let x = [1.0f32, 2.0, 3.0, 4.0, -1.0, -1.0, -1.0, -1.0];
        let mut out = [0.0; 8];
        softmax_f32(&x, 4, 1.0, &mut out);
        let want = float_softmax(&[1.0, 2.0, 3.0, 4.0], 1.0);
        for (o, w) in out[..4].iter().zip(&want) {
            assert!((f64::from(*o) - w).abs() < 1e-6);
        }
        assert_eq!(out[4..], [0.25; 4]);
        // Large inputs do not overflow thanks to the max subtraction.
        softmax_f32(&[1000.0, 1000.0], 2, 1.0, &mut out[..2]);
        assert_eq!(out[..2], [0.5, 0.5]);
    }

    #[test]
    fn softmax_u8_matches_float_within_one() {
        let x: Vec<u8> = vec![0, 10, 20, 30, 200, 201, 202, 203, 7, 7, 7, 7];
        let qp = QuantParams::new(0.1, 0);
        let mut out = vec![0u8; x.len()];
        softmax_u8(&x, qp, 4, 1.0, &mut out).unwrap();
        for (row_in, row_out) in x.chunks(4).zip(out.chunks(4)) {
            let real: Vec<f64> = row_in.iter().map(|&q| 0.1 * f64::from(q)).collect();
            for (o, w) in row_out.iter().zip(float_softmax(&real, 1.0)) {
                let want = (w * 256.0).round().min(255.0);
                assert!(
                    (f64::from(*o) - want).abs() <= 1.0,
                    "{row_in:?}: {row_out:?}"
                );
            }
        }
        // A uniform row splits evenly: 256/4.
        assert_eq!(out[8..], [64, 64, 64, 64]);
    }

    #[test]
    fn softmax_u8_single_winner_and_far_losers() {
        // Scale 1, β 1: differences of −100 are beyond the Q5.26 radius and dropped.
        let mut out = [0u8; 3];
        softmax_u8(&[100, 0, 0], QuantParams::new(1.0, 0), 3, 1.0, &mut out).unwrap();
        assert_eq!(out, [255, 0, 0]);
        // Huge β·scale caps the multiplier; only the maxima survive.
        softmax_u8(&[5, 5, 4], QuantParams::new(1.0, 0), 3, 1e12, &mut out).unwrap();
        assert_eq!(out, [128, 128, 0]);
    }

    #[test]
    fn softmax_u8_tiny_beta_is_uniform() {
        // β·scale·2^26 < 1: the reference would refuse; the result is the uniform split.
        let mut out = [0u8; 4];
        softmax_u8(
            &[0, 80, 160, 255],
            QuantParams::new(1e-9, 0),
            4,
            1e-3,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [64, 64, 64, 64]);
        assert!(softmax_u8(&[1], QuantParams::new(0.5, 0), 1, 0.0, &mut out[..1]).is_err());
        assert!(softmax_u8(&[1], QuantParams::new(0.5, 0), 1, f32::NAN, &mut out[..1]).is_err());
    }

    #[test]
    fn softmax_u8_table_path_matches_direct_path() {
        let x: Vec<u8> = (0..1024u32).map(|i| (i * 73 % 256) as u8).collect();
        let qp = QuantParams::new(0.05, 3);
        let mut long = vec![0u8; x.len()];
        softmax_u8(&x, qp, 16, 0.7, &mut long).unwrap();
        for (src, want) in x.chunks(16).zip(long.chunks(16)) {
            let mut short = [0u8; 16];
            softmax_u8(src, qp, 16, 0.7, &mut short).unwrap();
            assert_eq!(&short, want);
        }
    }

    #[test]
    fn softmax_u8_kept_table_follows_the_parameters() {
        // The same thread alternates parameters: each table-path result must still be the
        // direct path's for its own parameters, never a table kept from the previous call.
        let x: Vec<u8> = (0..512u32).map(|i| (i * 151 % 256) as u8).collect();
        let params = [
            (0.05, 0.7),
            (0.05, 1.0),
            (0.2, 0.7),
            (0.05, 0.7),
            (0.2, 0.7),
            (0.3, 2.0),
        ];
        for (scale, beta) in params {
            let qp = QuantParams::new(scale, 7);
            let mut long = vec![0u8; x.len()];
            softmax_u8(&x, qp, 16, beta, &mut long).unwrap();
            for (src, want) in x.chunks(16).zip(long.chunks(16)) {
                let mut short = [0u8; 16];
                softmax_u8(src, qp, 16, beta, &mut short).unwrap();
                assert_eq!(&short, want, "scale {scale} beta {beta}");
            }
        }
    }

    #[test]
    fn softmax_u8_long_uniform_row_does_not_panic() {
        let x = vec![9u8; 10_000];
        let mut out = vec![1u8; x.len()];
        softmax_u8(&x, QuantParams::new(0.5, 0), x.len(), 1.0, &mut out).unwrap();
        assert!(out.iter().all(|&v| v == 0));
    }

    #[test]
    fn l2_normalization_rows_and_zero_guard() {
        let x = [3.0f32, 4.0, 0.0, 0.0, 0.0, 0.0];
        let mut out = [9.0; 6];
        l2_normalization_f32(&x, 3, &mut out);
        assert_eq!(out, [0.6, 0.8, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn lrn_window_is_clipped_to_the_row() {
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut out = [0.0; 4];
        local_response_normalization_f32(&x, 4, 1, 1.0, 0.5, 1.0, &mut out);
        // Window sums of squares: c0 {1,4}=5, c1 {1,4,9}=14, c2 {4,9,16}=29, c3 {9,16}=25.
        let want = [1.0 / 3.5, 2.0 / 8.0, 3.0 / 15.5, 4.0 / 13.5];
        for (o, w) in out.iter().zip(want) {
            assert!((o - w).abs() < 1e-6, "{out:?}");
        }
        // A radius beyond the depth covers the whole row; beta 0.5 is a square root.
        local_response_normalization_f32(&x, 2, usize::MAX, 0.0, 1.0, 0.5, &mut out);
        let (n0, n1) = (5f32.sqrt(), 25f32.sqrt());
        let want = [1.0 / n0, 2.0 / n0, 3.0 / n1, 4.0 / n1];
        for (o, w) in out.iter().zip(want) {
            assert!((o - w).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn parallel_rows_match_sequential() {
        let x: Vec<f32> = (0..(1 << 17))
            .map(|i| ((i % 251) as f32 - 125.0) * 0.03)
            .collect();
        let mut par = vec![0.0; x.len()];
        // Kernels split work only on a pool worker.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| softmax_f32(&x, 8, 0.5, &mut par));
        for (src, got) in x.chunks(8).zip(par.chunks(8)).step_by(997) {
            let mut seq = [0.0; 8];
            softmax_f32(src, 8, 0.5, &mut seq);
            assert_eq!(&seq, got);
        }
    }

    proptest::proptest! {
        #[test]
        fn softmax_u8_never_panics_and_sums_near_one(
            scale in proptest::num::f32::POSITIVE,
            beta in proptest::num::f32::POSITIVE,
            depth in 1usize..50,
            rows in 1usize..4,
            seed in proptest::num::u64::ANY,
        ) {
            let input: Vec<u8> = (0..depth * rows)
                .map(|i| (seed.wrapping_mul(6364136223846793005).wrapping_add((i as u64).wrapping_mul(1442695040888963407)) >> 56) as u8)
                .collect();
            let mut out = vec![0u8; input.len()];
            if softmax_u8(&input, QuantParams::new(scale, 0), depth, beta, &mut out).is_ok() {
                for row in out.chunks(depth) {
                    let total: u32 = row.iter().map(|&v| u32::from(v)).sum();
                    // Each output rounds to within half a unit and 256 may clip to 255.
                    proptest::prop_assert!(total.abs_diff(256) as usize <= depth / 2 + 1, "{row:?}");
                }
            }
        }
    }

    #[test]
    fn zero_depth_or_empty_is_a_no_op() {
        let mut out: [f32; 0] = [];
        softmax_f32(&[], 0, 1.0, &mut out);
        l2_normalization_f32(&[], 4, &mut out);
        let mut out8: [u8; 0] = [];
        softmax_u8(&[], QuantParams::new(0.5, 0), 4, 1.0, &mut out8).unwrap();
    }

    #[test]
    fn l2_normalization_u8_follows_the_real_norm() {
        // Rows of 5 around zero point 100; each output within one step of 128 + 128·d/‖d‖.
        let input: Vec<u8> = (0..200u32).map(|i| (i * 73 % 256) as u8).collect();
        let mut out = vec![0u8; input.len()];
        l2_normalization_u8(&input, 5, 100, &mut out);
        for (row, got) in input.chunks(5).zip(out.chunks(5)) {
            let d: Vec<f64> = row.iter().map(|&v| f64::from(v) - 100.0).collect();
            let norm = d.iter().map(|x| x * x).sum::<f64>().sqrt();
            for (x, &g) in d.iter().zip(got) {
                let want = (128.0 + 128.0 * x / norm).clamp(0.0, 255.0);
                assert!((f64::from(g) - want).abs() <= 1.0, "{row:?} → {got:?}");
            }
        }
        // A zero row stays at the zero point; a lone positive value saturates at 255.
        let mut z = [0u8; 3];
        l2_normalization_u8(&[7, 7, 7], 3, 7, &mut z);
        assert_eq!(z, [128; 3]);
        l2_normalization_u8(&[7, 9, 7], 3, 7, &mut z);
        assert_eq!(z, [128, 255, 128]);
    }

    #[test]
    fn inv_sqrt_multiplier_matches_the_real_value() {
        for sum in [2, 3, 25, 1000, 65_025, 1 << 20, 1 << 29, i32::MAX] {
            let (m, shift) = inv_sqrt_multiplier(sum);
            let got = f64::from(m) / 2f64.powi(31) / 2f64.powi(shift);
            let want = 1.0 / f64::from(sum).sqrt();
            assert!((got / want - 1.0).abs() < 1e-5, "{sum}: {got} vs {want}");
        }
    }
}
