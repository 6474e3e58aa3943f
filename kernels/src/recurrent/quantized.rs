//! NNAPI 1.2's QUANTIZED_16BIT_LSTM (NeuralNetworks.h `ANEURALNETWORKS_QUANTIZED_16BIT_LSTM`):
//! one LSTM step with uint8 input and weights, int32 biases, a TENSOR_QUANT16_SYMM cell state
//! of scale 2^-11 (4 integer bits) and a uint8 output of scale 1/128.
//!
//! The platform reference computes the gates in gemmlowp's 16-bit fixed point
//! (`FixedPoint<int16, N>`), whose products, constants and shifts round at 16 bits; the
//! 32-bit helpers of the element-wise family would round differently, so the cell keeps its
//! own 16-bit versions in [`fixed16`] to match the reference bit for bit.

use crate::elementwise::reference::fixed_point::rounding_divide_by_pot_wide;
use crate::quant::{quantize_multiplier, saturating_rounding_doubling_high_mul};

/// gemmlowp's fixed-point arithmetic on `i16` raw values (`FixedPoint<int16, N>`: a raw value
/// `v · 2^(15 − N)`). Sums and differences wrap, as the reference's int16 stores do; products
/// are the saturating rounding doubling high multiply, so Q`a` times Q`b` is Q`(a + b)`.
pub mod fixed16 {
    /// `(a · b · 2) >> 16`, rounded to nearest (a negative half toward zero), saturating the
    /// single overflow `i16::MIN · i16::MIN`.
    #[inline]
    pub fn mul(a: i16, b: i16) -> i16 {
        if a == i16::MIN && b == i16::MIN {
            return i16::MAX;
        }
        let ab = i32::from(a) * i32::from(b);
        let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
        ((ab + nudge) / (1 << 15)) as i16
    }

    /// `x / 2^exponent`, ties away from zero (`exponent` in 0..=15).
    #[inline]
    pub fn rounding_divide_by_pot(x: i16, exponent: u32) -> i16 {
        let mask = ((1i32 << exponent) - 1) as i16;
        let remainder = x & mask;
        let threshold = (mask >> 1) + i16::from(x < 0);
        (x >> exponent) + i16::from(remainder > threshold)
    }

    /// `x · 2^exponent`: a left shift saturating to the `i16` range, or a rounding right shift.
    #[inline]
    pub fn saturating_rounding_multiply_by_pot(x: i16, exponent: i32) -> i16 {
        if exponent > 0 {
            let threshold = (1i32 << (15 - exponent)) - 1;
            if i32::from(x) > threshold {
                i16::MAX
            } else if i32::from(x) < -threshold {
                i16::MIN
            } else {
                x << exponent
            }
        } else {
            rounding_divide_by_pot(x, exponent.unsigned_abs())
        }
    }

    /// A value with `src` integer bits re-expressed with `dst` (saturating when growing).
    #[inline]
    pub fn rescale(x: i16, src: i32, dst: i32) -> i16 {
        saturating_rounding_multiply_by_pot(x, src - dst)
    }

    #[inline]
    pub fn saturating_add(a: i16, b: i16) -> i16 {
        a.saturating_add(b)
    }

    /// A 32-bit fixed-point constant narrowed to 16 bits the way gemmlowp initialises them:
    /// a rounding shift by 16.
    const fn constant(raw32: i32) -> i16 {
        // Round half away from zero, as `RoundingDivideByPOT` does on the int32 value.
        let mask = (1i32 << 16) - 1;
        let remainder = raw32 & mask;
        let threshold = (mask >> 1) + if raw32 < 0 { 1 } else { 0 };
        ((raw32 >> 16) + if remainder > threshold { 1 } else { 0 }) as i16
    }

    /// The largest value below one in Q0.15 (gemmlowp's `One()` with no integer bits).
    const ONE_Q0: i16 = i16::MAX;

    fn rounding_half_sum(a: i16, b: i16) -> i16 {
        let sum = i32::from(a) + i32::from(b);
        let sign = if sum >= 0 { 1 } else { -1 };
        ((sum + sign) / 2) as i16
    }

    /// e^a for a in [−1/4, 0), Q0.15: the Taylor expansion around −1/8.
    fn exp_on_interval_between_negative_one_quarter_and_0_excl(a: i16) -> i16 {
        let constant_term = constant(1_895_147_668); // exp(−1/8)
        let one_third = constant(715_827_883);
        let x = a.wrapping_add(1 << 12); // a + 1/8
        let x2 = mul(x, x);
        let x3 = mul(x2, x);
        let x4 = mul(x2, x2);
        let x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2);
        let poly = saturating_rounding_multiply_by_pot(
            mul(x4_over_4.wrapping_add(x3), one_third).wrapping_add(x2),
            -1,
        );
        saturating_add(constant_term, mul(constant_term, x.wrapping_add(poly)))
    }

    /// e^a for a ≤ 0 with `integer_bits` integer bits (at most 7), Q0.15: the fractional
    /// quarter by the polynomial, the rest by a barrel of exp(−2^k) factors.
    pub fn exp_on_negative_values(a: i16, integer_bits: i32) -> i16 {
        const BARREL: [(i32, i32); 7] = [
            (-2, 1_672_461_947),
            (-1, 1_302_514_674),
            (0, 790_015_084),
            (1, 290_630_308),
            (2, 39_332_535),
            (3, 720_401),
            (4, 242),
        ];
        let fractional_bits = 15 - integer_bits;
        let quarter = 1i16 << (fractional_bits - 2);
        let mask = quarter - 1;
        let a_mod_quarter_minus_quarter = (a & mask).wrapping_sub(quarter);
        let mut result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale(
            a_mod_quarter_minus_quarter,
            integer_bits,
            0,
        ));
        let remainder = a_mod_quarter_minus_quarter.wrapping_sub(a);
        for (exponent, multiplier) in BARREL {
            if integer_bits > exponent {
                let bit = fractional_bits + exponent;
                if (i32::from(remainder) & (1 << bit)) != 0 {
                    result = mul(result, constant(multiplier));
                }
            }
        }
        // Past 5 integer bits the reference clamps inputs below −32 to zero, with a bound
        // written for 32-bit values: narrowed to 16 bits it is 0, so every negative input
        // gives zero there.
        if integer_bits > 5 && a < 0 {
            return 0;
        }
        if a == 0 {
            ONE_Q0
        } else {
            result
        }
    }

    /// Newton–Raphson for 1 / (1 + a) (`reciprocal`) or (1 − a) / (1 + a), a in (0, 1), in Q2.
    fn newton(a: i16) -> i16 {
        let one_q2: i16 = 1 << 13;
        let half_denominator = rounding_half_sum(a, ONE_Q0);
        let c48_17 = constant(1_515_870_810);
        let c_neg32_17 = constant(-1_010_580_540);
        let mut x = c48_17.wrapping_add(mul(half_denominator, c_neg32_17));
        for _ in 0..3 {
            let one_minus = one_q2.wrapping_sub(mul(half_denominator, x));
            x = x.wrapping_add(rescale(mul(x, one_minus), 4, 2));
        }
        x
    }

    /// tanh of a value with `integer_bits` integer bits, Q0.15.
    pub fn tanh(a: i16, integer_bits: i32) -> i16 {
        if a == 0 {
            return 0;
        }
        let n = if a < 0 { a } else { a.wrapping_neg() };
        // −tanh(n) = (1 − e^(2n)) / (1 + e^(2n)); 2n is the raw value with one more integer bit.
        let e = exp_on_negative_values(n, integer_bits + 1);
        let t = rescale(newton(e).wrapping_sub(1 << 13), 2, 0);
        if a < 0 {
            t.wrapping_neg()
        } else {
            t
        }
    }

    /// The logistic function of a value with `integer_bits` integer bits, Q0.15.
    pub fn logistic(a: i16, integer_bits: i32) -> i16 {
        if a == 0 {
            return constant(1 << 30);
        }
        let abs = if a > 0 { a } else { a.wrapping_neg() };
        let e = exp_on_negative_values(abs.wrapping_neg(), integer_bits);
        // x/2 read with one integer bit, rescaled to none.
        let positive = rescale(newton(e), 1, 0);
        if a > 0 {
            positive
        } else {
            ONE_Q0.wrapping_sub(positive)
        }
    }
}

/// Sizes and the fixed quantization of one QUANTIZED_16BIT_LSTM step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QLstm16Dims {
    pub batch: usize,
    pub input_size: usize,
    pub units: usize,
    /// The zero point shared by the eight weight matrices.
    pub weights_zero_point: i32,
    /// The scale shared by the four biases (weights scale / 128).
    pub bias_scale: f32,
}

/// One step's operands, gates in the operation's order: input, forget, cell, output.
pub struct QLstm16Inputs<'a> {
    /// `[batch, input_size]`, scale 1/128, zero point 128.
    pub input: &'a [u8],
    /// `[units, input_size]` each.
    pub input_weights: [&'a [u8]; 4],
    /// `[units, units]` each.
    pub recurrent_weights: [&'a [u8]; 4],
    /// `[units]` each.
    pub biases: [&'a [i32]; 4],
    /// `[batch, units]`, Q4.11.
    pub prev_cell: &'a [i16],
    /// `[batch, units]`, scale 1/128, zero point 128.
    pub prev_output: &'a [u8],
}

/// The gates' fully connected layer maps the int32 accumulator (scale `bias_scale`) to Q3.12:
/// the multiplier is `bias_scale · 2^12`, applied as the reference does (a Q31 multiplier
/// and a power-of-two shift).
fn gate_input(acc: i32, multiplier: i32, shift: i32) -> i16 {
    let left = shift.max(0);
    let right = (-shift).max(0);
    let scaled = rounding_divide_by_pot_wide(
        saturating_rounding_doubling_high_mul(
            acc.wrapping_mul(1i32.wrapping_shl(left as u32)),
            multiplier,
        ),
        right,
    );
    scaled.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}

/// Runs one step: `cell_out` and `output` are `[batch, units]`. `gates` is scratch of at
/// least `4 · units` values.
pub fn quantized_16bit_lstm(
    d: QLstm16Dims,
    x: &QLstm16Inputs,
    gates: &mut [i16],
    cell_out: &mut [i16],
    output: &mut [u8],
) {
    use fixed16::*;
    let (n, units) = (d.input_size, d.units);
    let (multiplier, shift) = quantize_multiplier(4096.0 * f64::from(d.bias_scale));
    let zw = d.weights_zero_point;
    for b in 0..d.batch {
        let xin = &x.input[b * n..(b + 1) * n];
        let h = &x.prev_output[b * units..(b + 1) * units];
        for g in 0..4 {
            for u in 0..units {
                let wi = &x.input_weights[g][u * n..(u + 1) * n];
                let wr = &x.recurrent_weights[g][u * units..(u + 1) * units];
                // Inputs are centred on 128, weights on their zero point; the sums stay in
                // int32 as the reference's accumulator does. The platform reference (and the
                // conformance goldens computed with it) multiplies the concatenated row
                // [input, previous output] by the weight row laid out [recurrent, input]:
                // column k of one meets column k of the other, whatever the two widths.
                let mut acc = x.biases[g][u];
                for (&v, &w) in xin.iter().chain(h).zip(wr.iter().chain(wi)) {
                    acc = acc.wrapping_add((i32::from(v) - 128) * (i32::from(w) - zw));
                }
                gates[g * units + u] = gate_input(acc, multiplier, shift);
            }
        }
        for u in 0..units {
            // Gate inputs are Q3.12; the activations Q0.15.
            let i = logistic(gates[u], 3);
            let f = logistic(gates[units + u], 3);
            let g = tanh(gates[2 * units + u], 3);
            let o = logistic(gates[3 * units + u], 3);
            let prev = x.prev_cell[b * units + u];
            // Q0.15 · Q0.15 → Q0.15 rescaled to the state's Q4.11; Q0.15 · Q4.11 → Q4.11.
            let state = saturating_add(rescale(mul(i, g), 0, 4), mul(f, prev));
            cell_out[b * units + u] = state;
            let activation = mul(o, tanh(rescale(state, 4, 3), 3));
            let out = rounding_divide_by_pot(activation, 8).clamp(-128, 127);
            output[b * units + u] = (out + 128) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixed16::*;
    use super::*;

    fn q(raw: i16, integer_bits: i32) -> f64 {
        f64::from(raw) / f64::from(1 << (15 - integer_bits))
    }

    #[test]
    fn fixed16_functions_follow_their_real_counterparts() {
        for raw in (i16::MIN..=i16::MAX).step_by(7) {
            let x = q(raw, 3);
            assert!((q(tanh(raw, 3), 0) - x.tanh()).abs() < 4e-4, "tanh {x}");
            let l = 1.0 / (1.0 + (-x).exp());
            assert!((q(logistic(raw, 3), 0) - l).abs() < 4e-4, "logistic {x}");
        }
        for raw in (i16::MIN..=0).step_by(5) {
            let x = q(raw, 4);
            assert!(
                (q(exp_on_negative_values(raw, 4), 0) - x.exp()).abs() < 4e-4,
                "exp {x}"
            );
        }
    }

    #[test]
    fn fixed16_products_and_shifts_round_as_specified() {
        assert_eq!(mul(i16::MIN, i16::MIN), i16::MAX);
        assert_eq!(mul(1 << 14, 1 << 14), 1 << 13); // ½ · ½
        assert_eq!(mul(-3, 1 << 14), -1); // −1.5 raw rounds to −1: a negative half goes toward zero
        assert_eq!(rounding_divide_by_pot(5, 1), 3);
        assert_eq!(rounding_divide_by_pot(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot(-6, 2), -2);
        assert_eq!(saturating_rounding_multiply_by_pot(20000, 1), i16::MAX);
        assert_eq!(saturating_rounding_multiply_by_pot(-20000, 1), i16::MIN);
        assert_eq!(saturating_rounding_multiply_by_pot(100, 2), 400);
    }

    /// A float LSTM step over the dequantized operands, gates at float precision: the fixed-point
    /// cell must stay within a few output steps of it.
    #[test]
    fn step_tracks_a_float_lstm() {
        let mut seed = 0x1234_5678_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..40 {
            let batch = 1 + (next() % 3) as usize;
            let input_size = 1 + (next() % 6) as usize;
            let units = 1 + (next() % 6) as usize;
            let wzp = (next() % 256) as i32;
            let wscale = 0.002 + (next() % 100) as f32 * 1e-4;
            let bias_scale = wscale / 128.0;
            let mut bytes = |len: usize| (0..len).map(|_| (next() % 256) as u8).collect::<Vec<_>>();
            let input = bytes(batch * input_size);
            let prev_output = bytes(batch * units);
            let iw: Vec<Vec<u8>> = (0..4).map(|_| bytes(units * input_size)).collect();
            let rw: Vec<Vec<u8>> = (0..4).map(|_| bytes(units * units)).collect();
            let bias: Vec<Vec<i32>> = (0..4)
                .map(|_| {
                    (0..units)
                        .map(|_| (next() % 20001) as i32 - 10000)
                        .collect()
                })
                .collect();
            let prev_cell: Vec<i16> = (0..batch * units)
                .map(|_| ((next() % 16001) as i32 - 8000) as i16)
                .collect();
            let d = QLstm16Dims {
                batch,
                input_size,
                units,
                weights_zero_point: wzp,
                bias_scale,
            };
            let inputs = QLstm16Inputs {
                input: &input,
                input_weights: [&iw[0], &iw[1], &iw[2], &iw[3]],
                recurrent_weights: [&rw[0], &rw[1], &rw[2], &rw[3]],
                biases: [&bias[0], &bias[1], &bias[2], &bias[3]],
                prev_cell: &prev_cell,
                prev_output: &prev_output,
            };
            let mut gates = vec![0; 4 * units];
            let mut cell = vec![0; batch * units];
            let mut out = vec![0; batch * units];
            quantized_16bit_lstm(d, &inputs, &mut gates, &mut cell, &mut out);
            let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
            for b in 0..batch {
                for u in 0..units {
                    // The reference's pairing: [input, previous output] against the weight
                    // row [recurrent, input].
                    let row: Vec<u8> = input[b * input_size..(b + 1) * input_size]
                        .iter()
                        .chain(&prev_output[b * units..(b + 1) * units])
                        .copied()
                        .collect();
                    let gate = |g: usize| {
                        let weights = rw[g][u * units..(u + 1) * units]
                            .iter()
                            .chain(&iw[g][u * input_size..(u + 1) * input_size]);
                        let mut acc = f64::from(bias[g][u]) * f64::from(bias_scale);
                        for (&v, &w) in row.iter().zip(weights) {
                            acc += (f64::from(v) - 128.0) / 128.0
                                * (f64::from(w) - f64::from(wzp))
                                * f64::from(wscale);
                        }
                        acc.clamp(-8.0, 8.0)
                    };
                    let c0 = f64::from(prev_cell[b * units + u]) / 2048.0;
                    let c = (sig(gate(0)) * gate(2).tanh() + sig(gate(1)) * c0).clamp(-16.0, 16.0);
                    let h = sig(gate(3)) * c.clamp(-8.0, 8.0).tanh();
                    let got_c = f64::from(cell[b * units + u]) / 2048.0;
                    assert!((got_c - c).abs() < 0.01, "cell {got_c} vs {c}");
                    let got_h = (f64::from(out[b * units + u]) - 128.0) / 128.0;
                    assert!(
                        (got_h - h.clamp(-1.0, 127.0 / 128.0)).abs() < 0.02,
                        "out {got_h} vs {h}"
                    );
                }
            }
        }
    }
}
