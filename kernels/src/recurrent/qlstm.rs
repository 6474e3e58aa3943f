//! NNAPI 1.3's QUANTIZED_LSTM (NeuralNetworks.h `ANEURALNETWORKS_QUANTIZED_LSTM`): one LSTM
//! step with a signed quant8 input and output, TENSOR_QUANT8_SYMM weights, int32 biases, a
//! TENSOR_QUANT16_SYMM cell state of scale 2^k (k in −15..=−9) and optional CIFG, peephole,
//! projection and layer-normalisation groups.
//!
//! The arithmetic is the platform reference's integer pipeline: each gate's two matrix
//! products are rescaled to the gate's intermediate scale and accumulated in int16
//! (saturating after each addition), optionally layer-normalised in fixed point, then fed to
//! gemmlowp's 16-bit logistic (Q3.12 in) or tanh; the cell update and the hidden state are
//! products of Q0.15 values shifted back by powers of two.
//!
//! Three points where the reference's code departs from the operation's definition are
//! resolved in favour of the definition (TensorFlow Lite's integer LSTM, which the operation
//! mirrors): without layer normalisation the gate biases are added to the matrix products
//! (the reference drops them); the input and forget gates' peephole reads the previous cell
//! state (the reference reads the not yet written output buffer) over `units` entries; and a
//! projection without a bias uses a zero bias (the reference dereferences a missing one).
//! The conformance examples use layer normalisation, no peephole and a projection bias, where
//! both agree bit for bit.
//!
//! Activations (input, previous output, output) arrive as the driver runs signed quant8: the
//! uint8 image `value + 128`. The weights are int8 bytes.

use super::quantized::fixed16;
use crate::elementwise::reference::fixed_point::rounding_divide_by_pot_wide;
use crate::normalization::reference::inv_sqrt_multiplier;
use crate::quant::{quantize_multiplier, saturating_rounding_doubling_high_mul};

/// Sizes of one QUANTIZED_LSTM step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QLstmDims {
    pub batch: usize,
    pub input_size: usize,
    pub units: usize,
    pub output_size: usize,
}

/// The gates, in the operation's order.
pub const INPUT: usize = 0;
pub const FORGET: usize = 1;
pub const CELL: usize = 2;
pub const OUTPUT: usize = 3;

/// Scales and zero points of one step (zero points of the signed values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QLstmQuant {
    pub input_scale: f32,
    pub input_zero_point: i32,
    /// Per gate (input, forget, cell, output); the input gate's is unused under CIFG.
    pub input_weights_scale: [f32; 4],
    pub recurrent_weights_scale: [f32; 4],
    /// The peephole weights' scales, per gate (the cell gate's is unused).
    pub cell_weights_scale: [f32; 4],
    pub layer_norm_scale: [f32; 4],
    pub intermediate_scale: [f32; 4],
    pub projection_scale: f32,
    /// The previous output's (and the outputs') quantization.
    pub output_scale: f32,
    pub output_zero_point: i32,
    /// The cell state's scale is `2^cell_shift`.
    pub cell_shift: i32,
    pub cell_scale: f32,
    pub hidden_scale: f32,
    /// The hidden state's zero point as the operation gives it: subtracted from the
    /// requantized hidden values (and so added back through the projection's bias).
    pub hidden_zero_point: i32,
    pub cell_clip: f32,
    pub projection_clip: f32,
}

/// One step's operands; a `None` is an omitted optional operand.
pub struct QLstmInputs<'a> {
    /// `[batch, input_size]`, uint8 image of the signed values.
    pub input: &'a [u8],
    /// `[units, input_size]` each, per gate; the input gate's is `None` under CIFG.
    pub input_weights: [Option<&'a [u8]>; 4],
    /// `[units, output_size]` each, per gate.
    pub recurrent_weights: [Option<&'a [u8]>; 4],
    /// `[units]` peephole weights per gate (the cell gate's is always `None`).
    pub cell_weights: [Option<&'a [i16]>; 4],
    /// `[units]` per gate.
    pub biases: [Option<&'a [i32]>; 4],
    /// `[output_size, units]` and `[output_size]`.
    pub projection_weights: Option<&'a [u8]>,
    pub projection_bias: Option<&'a [i32]>,
    /// `[batch, output_size]`, uint8 image of the signed values.
    pub prev_output: &'a [u8],
    /// `[batch, units]`.
    pub prev_cell: &'a [i16],
    /// `[units]` per gate.
    pub layer_norm: [Option<&'a [i16]>; 4],
}

/// One step's outputs: `[batch, output_size]`, `[batch, units]`, `[batch, output_size]`.
pub struct QLstmOutputs<'a> {
    pub output_state: &'a mut [u8],
    pub cell_state: &'a mut [i16],
    pub output: &'a mut [u8],
}

/// `x · real`, real as a Q31 multiplier and a power-of-two exponent (the reference's
/// `MultiplyByQuantizedMultiplier`): a wrapping left shift, the rounding doubling high
/// multiply, a rounding right shift.
#[inline]
fn scale_by(x: i32, (multiplier, shift): (i32, i32)) -> i32 {
    let left = shift.clamp(0, 31) as u32;
    let right = (-shift).max(0);
    rounding_divide_by_pot_wide(
        saturating_rounding_doubling_high_mul(x.wrapping_mul(1i32.wrapping_shl(left)), multiplier),
        right,
    )
}

/// The reference's multiplier of a real scale: multipliers below 2^-32 flush to zero.
fn multiplier(real: f64) -> (i32, i32) {
    let (m, e) = quantize_multiplier(real);
    if e < -31 {
        (0, 0)
    } else {
        (m, e)
    }
}

fn clamp16(v: i32) -> i16 {
    v.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}

/// The fixed-point parameters derived from [`QLstmQuant`] once per step.
struct Derived {
    from_input: [(i32, i32); 4],
    from_recurrent: [(i32, i32); 4],
    from_cell: [(i32, i32); 4],
    layer_norm: [(i32, i32); 4],
    variance_limit: [i32; 4],
    hidden: (i32, i32),
    projection: (i32, i32),
    cell_clip: i16,
    projection_clip: i8,
}

impl Derived {
    fn new(q: &QLstmQuant) -> Self {
        let mut d = Derived {
            from_input: [(0, 0); 4],
            from_recurrent: [(0, 0); 4],
            from_cell: [(0, 0); 4],
            layer_norm: [(0, 0); 4],
            variance_limit: [0; 4],
            hidden: (0, 0),
            projection: (0, 0),
            cell_clip: 0,
            projection_clip: 0,
        };
        let cell_pot = 2f64.powi(q.cell_shift);
        for g in 0..4 {
            let inter = q.intermediate_scale[g];
            // The products of float32 scales are formed in float32, as the reference does;
            // the peephole's power of two makes its scale a double.
            d.from_input[g] =
                multiplier(f64::from(q.input_weights_scale[g] * q.input_scale / inter));
            d.from_recurrent[g] = multiplier(f64::from(
                q.recurrent_weights_scale[g] * q.output_scale / inter,
            ));
            d.from_cell[g] =
                multiplier(cell_pot * f64::from(q.cell_weights_scale[g]) / f64::from(inter));
            d.layer_norm[g] = multiplier(f64::from(q.layer_norm_scale[g]));
            // A variance that rounds below one is replaced by this floor (0 or 1).
            d.variance_limit[g] = ((10000.0 * q.layer_norm_scale[g]) as i32).min(1);
        }
        d.hidden = multiplier(2f64.powi(-15) / f64::from(q.hidden_scale) * 2f64.powi(-15));
        d.projection = multiplier(f64::from(
            q.projection_scale * q.hidden_scale / q.output_scale,
        ));
        if q.cell_clip > 0.0 {
            d.cell_clip = (q.cell_clip / q.cell_scale).clamp(-32768.0, 32767.0) as i32 as i16;
        }
        if q.projection_clip > 0.0 {
            // The reference measures the projection clip in the projection weights' scale.
            d.projection_clip =
                (q.projection_clip / q.projection_scale).clamp(-128.0, 127.0) as i32 as i8;
        }
        d
    }
}

/// `Σ (x − zero_point) · w` over one weight row, in wrapping int32 like the reference's
/// accumulator (which folds the zero point into a precomputed row sum: the same value
/// modulo 2^32). `x` is the uint8 image of signed values.
#[inline]
fn dot(x: &[u8], zero_point: i32, w: &[u8]) -> i32 {
    x.iter().zip(w).fold(0i32, |acc, (&v, &w)| {
        acc.wrapping_add((i32::from(v) - 128 - zero_point) * i32::from(w as i8))
    })
}

/// Layer normalisation of one gate row in place (the reference's `ApplyLayerNorm`): the
/// mean and variance in units of 2^-10, an inverse square root in fixed point, the weights
/// (Q0.15 at `scale`) and bias applied, rescaled to Q3.12.
fn layer_norm(row: &mut [i16], weights: &[i16], bias: &[i32], scale: (i32, i32), limit: i32) {
    const OVERFLOW_GUARD: i64 = 1 << 20;
    let n = row.len() as i64;
    let (sum, sum_sq) = row.iter().fold((0i64, 0i64), |(s, s2), &v| {
        let v = i64::from(v);
        (s + v, s2 + v * v)
    });
    let mean = (sum * 1024 / n) as i32;
    let temp = OVERFLOW_GUARD / n;
    let variance = sum_sq
        .wrapping_mul(temp)
        .wrapping_sub(i64::from(mean) * i64::from(mean));
    let mut variance = (variance / OVERFLOW_GUARD) as i32;
    if variance < 1 {
        variance = limit;
    }
    let (inv_multiplier, inv_shift) = inv_sqrt_multiplier(variance);
    for (j, v) in row.iter_mut().enumerate() {
        let shifted = 1024i32.wrapping_mul(i32::from(*v)).wrapping_sub(mean);
        let rescaled = scale_by(shifted, (inv_multiplier, -inv_shift));
        // The product and the bias are int32 sums in the reference, widened afterwards.
        let weighted = i64::from(
            rescaled
                .wrapping_mul(i32::from(weights[j]))
                .wrapping_add(bias[j]),
        );
        let rounded = (if weighted > 0 {
            weighted + 512
        } else {
            weighted - 512
        } / 1024) as i32;
        *v = clamp16(scale_by(rounded, (scale.0, scale.1 + 12)));
    }
}

/// The scratch one step needs: `5 · units` int16 values.
pub fn qlstm_scratch_len(d: QLstmDims) -> usize {
    5 * d.units
}

/// Runs one step. `scratch` holds at least [`qlstm_scratch_len`] values. The operand sizes
/// must match `d` (the shape rules check them).
pub fn quantized_lstm(
    d: QLstmDims,
    q: &QLstmQuant,
    x: &QLstmInputs,
    scratch: &mut [i16],
    out: QLstmOutputs,
) {
    let k = Derived::new(q);
    let (n, units, outs) = (d.input_size, d.units, d.output_size);
    let cifg = x.input_weights[INPUT].is_none();
    let layer_normed = x.layer_norm[FORGET].is_some();
    let (gates, hidden) = scratch[..5 * units].split_at_mut(4 * units);
    for b in 0..d.batch {
        let xin = &x.input[b * n..(b + 1) * n];
        let h = &x.prev_output[b * outs..(b + 1) * outs];
        let prev_cell = &x.prev_cell[b * units..(b + 1) * units];
        let cell = &mut out.cell_state[b * units..(b + 1) * units];
        // A gate's pre-activation at its intermediate scale, saturated to int16 after each
        // term as the reference's accumulate-into-int16 does.
        let pre_activation = |g: usize, row: &mut [i16], peephole_cell: &[i16]| {
            let (Some(wx), Some(wh)) = (x.input_weights[g], x.recurrent_weights[g]) else {
                return;
            };
            let bias = if layer_normed { None } else { x.biases[g] };
            for (u, r) in row.iter_mut().enumerate() {
                let acc = dot(xin, q.input_zero_point, &wx[u * n..(u + 1) * n])
                    .wrapping_add(bias.map_or(0, |bias| bias[u]));
                let mut v = clamp16(scale_by(acc, k.from_input[g]));
                let acc = dot(h, q.output_zero_point, &wh[u * outs..(u + 1) * outs]);
                v = clamp16(i32::from(v) + scale_by(acc, k.from_recurrent[g]));
                if let Some(p) = x.cell_weights[g] {
                    let prod = i32::from(p[u]) * i32::from(peephole_cell[u]);
                    v = clamp16(i32::from(v) + scale_by(prod, k.from_cell[g]));
                }
                *r = v;
            }
            if let (Some(w), Some(bias)) = (x.layer_norm[g], x.biases[g]) {
                layer_norm(row, w, bias, k.layer_norm[g], k.variance_limit[g]);
            }
        };
        let (input_gate, rest) = gates.split_at_mut(units);
        let (forget_gate, rest) = rest.split_at_mut(units);
        let (cell_gate, output_gate) = rest.split_at_mut(units);
        pre_activation(FORGET, forget_gate, prev_cell);
        for v in forget_gate.iter_mut() {
            *v = fixed16::logistic(*v, 3);
        }
        pre_activation(CELL, cell_gate, prev_cell);
        for v in cell_gate.iter_mut() {
            *v = fixed16::tanh(*v, 3);
        }
        if cifg {
            for (i, &f) in input_gate.iter_mut().zip(forget_gate.iter()) {
                *i = i16::MAX.wrapping_sub(f);
            }
        } else {
            pre_activation(INPUT, input_gate, prev_cell);
            for v in input_gate.iter_mut() {
                *v = fixed16::logistic(*v, 3);
            }
        }
        // c = f·c_prev (Q0.15 · state → state) + i·g (Q0.15 · Q0.15 → state), saturated.
        for u in 0..units {
            let kept = rounding_divide_by_pot_wide(
                i32::from(forget_gate[u]) * i32::from(prev_cell[u]),
                15,
            ) as i16;
            let added = rounding_divide_by_pot_wide(
                i32::from(input_gate[u]) * i32::from(cell_gate[u]),
                30 + q.cell_shift,
            ) as i16;
            let mut c = clamp16(i32::from(kept) + i32::from(added));
            if k.cell_clip > 0 {
                c = c.clamp(-k.cell_clip, k.cell_clip);
            }
            cell[u] = c;
        }
        // The output gate's peephole sees the new cell state.
        pre_activation(OUTPUT, output_gate, cell);
        for (u, h) in hidden.iter_mut().enumerate() {
            let o = fixed16::logistic(output_gate[u], 3);
            let t = fixed16::tanh(cell[u], q.cell_shift + 15);
            let v = scale_by(i32::from(o) * i32::from(t), k.hidden) - q.hidden_zero_point;
            *h = v.clamp(-128, 127) as i16;
        }
        let output = &mut out.output[b * outs..(b + 1) * outs];
        match x.projection_weights {
            Some(w) => {
                for (j, o) in output.iter_mut().enumerate() {
                    let row = &w[j * units..(j + 1) * units];
                    let mut acc = x.projection_bias.map_or(0, |bias| bias[j]);
                    for (&hv, &wv) in hidden.iter().zip(row) {
                        let wv = i32::from(wv as i8);
                        // The hidden zero point is folded back in (hv + zp).
                        acc = acc
                            .wrapping_add((i32::from(hv) + q.hidden_zero_point).wrapping_mul(wv));
                    }
                    let mut v =
                        (scale_by(acc, k.projection) + q.output_zero_point).clamp(-128, 127);
                    if k.projection_clip > 0 {
                        let clip = i32::from(k.projection_clip);
                        v = v.clamp(-clip, clip);
                    }
                    *o = (v + 128) as u8;
                }
            }
            None => {
                for (o, &hv) in output.iter_mut().zip(hidden.iter()) {
                    *o = (i32::from(hv) + 128) as u8;
                }
            }
        }
    }
    out.output_state[..d.batch * outs].copy_from_slice(&out.output[..d.batch * outs]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small xorshift generator: reproducible operands without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn range(&mut self, lo: i32, hi: i32) -> i32 {
            lo + (self.next() % (hi - lo + 1) as u64) as i32
        }
        fn bytes(&mut self, len: usize, lo: i32, hi: i32) -> Vec<u8> {
            (0..len).map(|_| self.range(lo, hi) as i8 as u8).collect()
        }
    }

    /// Which optional groups a case has.
    #[derive(Clone, Copy, Debug)]
    struct Groups {
        cifg: bool,
        peephole: bool,
        projection: bool,
        layer_norm: bool,
        clips: bool,
    }

    struct Case {
        d: QLstmDims,
        q: QLstmQuant,
        input: Vec<u8>,
        iw: Vec<Option<Vec<u8>>>,
        rw: Vec<Vec<u8>>,
        cw: Vec<Option<Vec<i16>>>,
        bias: Vec<Option<Vec<i32>>>,
        pw: Option<Vec<u8>>,
        pb: Option<Vec<i32>>,
        prev_output: Vec<u8>,
        prev_cell: Vec<i16>,
        ln: Vec<Option<Vec<i16>>>,
    }

    fn case(r: &mut Rng, g: Groups) -> Case {
        let batch = r.range(1, 3) as usize;
        let input_size = r.range(1, 7) as usize;
        let units = r.range(2, 8) as usize;
        let output_size = if g.projection {
            r.range(1, 6) as usize
        } else {
            units
        };
        let d = QLstmDims {
            batch,
            input_size,
            units,
            output_size,
        };
        let cell_shift = r.range(-15, -11);
        // Without layer normalisation the gates feed the activations as Q3.12, so the
        // intermediate scale is 2^-12 as a converter sets it; with it, any scale works.
        let inter = |r: &mut Rng| {
            if g.layer_norm {
                0.002 + r.range(0, 100) as f32 * 1e-4
            } else {
                1.0 / 4096.0
            }
        };
        let q = QLstmQuant {
            input_scale: 1.0 / 128.0,
            input_zero_point: r.range(-20, 20),
            input_weights_scale: [0.01, 0.012, 0.009, 0.011],
            recurrent_weights_scale: [0.008, 0.01, 0.011, 0.007],
            cell_weights_scale: [0.005, 0.006, 0.0, 0.004],
            layer_norm_scale: [1.0 / 16384.0, 1.0 / 8192.0, 1.0 / 16384.0, 1.0 / 8192.0],
            intermediate_scale: [inter(r), inter(r), inter(r), inter(r)],
            projection_scale: 0.01,
            output_scale: 1.0 / 64.0,
            output_zero_point: r.range(-10, 10),
            cell_shift,
            cell_scale: 2f32.powi(cell_shift),
            hidden_scale: 1.0 / 128.0,
            hidden_zero_point: r.range(-5, 5),
            cell_clip: if g.clips { 0.9 } else { 0.0 },
            projection_clip: if g.clips { 0.6 } else { 0.0 },
        };
        let gates = |f: &mut dyn FnMut(usize) -> bool| (0..4).map(f).collect::<Vec<bool>>();
        let has_gate = gates(&mut |k| !(g.cifg && k == INPUT));
        let iw = has_gate
            .iter()
            .map(|&h| h.then(|| r.bytes(units * input_size, -100, 100)))
            .collect();
        let rw = (0..4)
            .map(|_| r.bytes(units * output_size, -100, 100))
            .collect();
        let cw = (0..4)
            .map(|k| {
                (g.peephole && k != CELL && has_gate[k])
                    .then(|| (0..units).map(|_| r.range(-200, 200) as i16).collect())
            })
            .collect();
        let bias_range = if g.layer_norm { 400_000 } else { 300 };
        let bias = has_gate
            .iter()
            .map(|&h| {
                h.then(|| {
                    (0..units)
                        .map(|_| r.range(-bias_range, bias_range))
                        .collect()
                })
            })
            .collect();
        let ln = has_gate
            .iter()
            .map(|&h| {
                (g.layer_norm && h)
                    .then(|| (0..units).map(|_| r.range(2000, 20000) as i16).collect())
            })
            .collect();
        Case {
            d,
            q,
            input: r.bytes(batch * input_size, 0, 255),
            iw,
            rw,
            cw,
            bias,
            pw: g
                .projection
                .then(|| r.bytes(output_size * units, -100, 100)),
            pb: g
                .projection
                .then(|| (0..output_size).map(|_| r.range(-2000, 2000)).collect()),
            prev_output: r.bytes(batch * output_size, 0, 255),
            prev_cell: (0..batch * units)
                .map(|_| r.range(-(1 << (-cell_shift - 1)), 1 << (-cell_shift - 1)) as i16)
                .collect(),
            ln,
        }
    }

    fn run(c: &Case) -> (Vec<u8>, Vec<i16>, Vec<u8>) {
        let inputs = QLstmInputs {
            input: &c.input,
            input_weights: [
                c.iw[0].as_deref(),
                c.iw[1].as_deref(),
                c.iw[2].as_deref(),
                c.iw[3].as_deref(),
            ],
            recurrent_weights: [
                Some(&c.rw[0]),
                Some(&c.rw[1]),
                Some(&c.rw[2]),
                Some(&c.rw[3]),
            ],
            cell_weights: [
                c.cw[0].as_deref(),
                c.cw[1].as_deref(),
                c.cw[2].as_deref(),
                c.cw[3].as_deref(),
            ],
            biases: [
                c.bias[0].as_deref(),
                c.bias[1].as_deref(),
                c.bias[2].as_deref(),
                c.bias[3].as_deref(),
            ],
            projection_weights: c.pw.as_deref(),
            projection_bias: c.pb.as_deref(),
            prev_output: &c.prev_output,
            prev_cell: &c.prev_cell,
            layer_norm: [
                c.ln[0].as_deref(),
                c.ln[1].as_deref(),
                c.ln[2].as_deref(),
                c.ln[3].as_deref(),
            ],
        };
        let d = c.d;
        let mut state = vec![0; d.batch * d.output_size];
        let mut cell = vec![0; d.batch * d.units];
        let mut output = vec![0; d.batch * d.output_size];
        let mut scratch = vec![0; qlstm_scratch_len(d)];
        quantized_lstm(
            d,
            &c.q,
            &inputs,
            &mut scratch,
            QLstmOutputs {
                output_state: &mut state,
                cell_state: &mut cell,
                output: &mut output,
            },
        );
        (state, cell, output)
    }

    /// The step in real numbers, from the operation's definition: dequantized operands, each
    /// gate's pre-activation held at its intermediate scale (saturating at int16) and read as
    /// Q3.12 by the activation, layer normalisation over the units with its bias at
    /// `layer_norm_scale / 1024`, a hidden state at `hidden_scale` and `hidden_zero_point`
    /// (subtracted), the projection back to the output's quantization. Returns the cell state
    /// (real) and the output (signed quantized, unrounded).
    fn reference(c: &Case, b: usize) -> (Vec<f64>, Vec<f64>) {
        let (d, q) = (c.d, c.q);
        let (n, units, outs) = (d.input_size, d.units, d.output_size);
        let signed = |v: u8| f64::from(v) - 128.0;
        let x: Vec<f64> = c.input[b * n..(b + 1) * n]
            .iter()
            .map(|&v| (signed(v) - f64::from(q.input_zero_point)) * f64::from(q.input_scale))
            .collect();
        let h: Vec<f64> = c.prev_output[b * outs..(b + 1) * outs]
            .iter()
            .map(|&v| (signed(v) - f64::from(q.output_zero_point)) * f64::from(q.output_scale))
            .collect();
        let cell_scale = 2f64.powi(q.cell_shift);
        let c_prev: Vec<f64> = c.prev_cell[b * units..(b + 1) * units]
            .iter()
            .map(|&v| f64::from(v) * cell_scale)
            .collect();
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let layer_normed = c.ln[FORGET].is_some();
        let gate = |g: usize, cell: &[f64]| -> Vec<f64> {
            let inter = f64::from(q.intermediate_scale[g]);
            let wx = c.iw[g].as_ref().unwrap();
            let mut z: Vec<f64> = (0..units)
                .map(|u| {
                    let mut acc = 0.0;
                    for (xv, &w) in x.iter().zip(&wx[u * n..(u + 1) * n]) {
                        acc += xv * f64::from(w as i8) * f64::from(q.input_weights_scale[g]);
                    }
                    for (hv, &w) in h.iter().zip(&c.rw[g][u * outs..(u + 1) * outs]) {
                        acc += hv * f64::from(w as i8) * f64::from(q.recurrent_weights_scale[g]);
                    }
                    if let Some(p) = &c.cw[g] {
                        acc += f64::from(p[u]) * f64::from(q.cell_weights_scale[g]) * cell[u];
                    }
                    if !layer_normed {
                        acc += f64::from(c.bias[g].as_ref().unwrap()[u])
                            * f64::from(q.input_weights_scale[g])
                            * f64::from(q.input_scale);
                    }
                    (acc / inter).clamp(-32768.0, 32767.0)
                })
                .collect();
            if let Some(w) = &c.ln[g] {
                let mean = z.iter().sum::<f64>() / units as f64;
                let var = z.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / units as f64;
                let std = var.max(1.0).sqrt();
                let bias = c.bias[g].as_ref().unwrap();
                let scale = f64::from(q.layer_norm_scale[g]);
                for (u, v) in z.iter_mut().enumerate() {
                    let normed = (*v - mean) / std;
                    let real = (normed * f64::from(w[u]) + f64::from(bias[u]) / 1024.0) * scale;
                    *v = (real * 4096.0).clamp(-32768.0, 32767.0);
                }
            }
            z.iter().map(|v| v / 4096.0).collect()
        };
        let f: Vec<f64> = gate(FORGET, &c_prev).into_iter().map(sig).collect();
        let g: Vec<f64> = gate(CELL, &c_prev).into_iter().map(f64::tanh).collect();
        let i: Vec<f64> = if c.iw[INPUT].is_none() {
            f.iter().map(|f| 1.0 - f).collect()
        } else {
            gate(INPUT, &c_prev).into_iter().map(sig).collect()
        };
        let limit = 32767.0 * cell_scale;
        let clip = if q.cell_clip > 0.0 {
            f64::from(q.cell_clip)
        } else {
            limit
        };
        let cell: Vec<f64> = (0..units)
            .map(|u| {
                (f[u] * c_prev[u] + i[u] * g[u])
                    .clamp(-limit, limit)
                    .clamp(-clip, clip)
            })
            .collect();
        let o: Vec<f64> = gate(OUTPUT, &cell).into_iter().map(sig).collect();
        let hs = f64::from(q.hidden_scale);
        let hidden: Vec<f64> = (0..units)
            .map(|u| {
                (o[u] * cell[u].tanh() / hs - f64::from(q.hidden_zero_point)).clamp(-128.0, 127.0)
            })
            .collect();
        let out = match &c.pw {
            None => hidden,
            Some(w) => {
                let ps = f64::from(q.projection_scale);
                let clip = if q.projection_clip > 0.0 {
                    (f64::from(q.projection_clip) / ps).min(127.0)
                } else {
                    128.0
                };
                (0..outs)
                    .map(|j| {
                        let mut acc = f64::from(c.pb.as_ref().unwrap()[j]);
                        for u in 0..units {
                            acc += f64::from(w[j * units + u] as i8)
                                * (hidden[u] + f64::from(q.hidden_zero_point));
                        }
                        (acc * ps * hs / f64::from(q.output_scale) + f64::from(q.output_zero_point))
                            .clamp(-128.0, 127.0)
                            .clamp(-clip, clip)
                    })
                    .collect()
            }
        };
        (cell, out)
    }

    /// Every combination of the optional groups, clips on and off, random sizes: the
    /// fixed-point step stays within a few steps of the real-number step.
    #[test]
    fn every_group_combination_tracks_the_real_step() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut compared = 0;
        for bits in 0..32u32 {
            let g = Groups {
                cifg: bits & 1 != 0,
                peephole: bits & 2 != 0,
                projection: bits & 4 != 0,
                layer_norm: bits & 8 != 0,
                clips: bits & 16 != 0,
            };
            for _ in 0..12 {
                let c = case(&mut r, g);
                let (state, cell, output) = run(&c);
                assert_eq!(state, output, "{g:?}: output state and output");
                let cell_scale = 2f64.powi(c.q.cell_shift);
                for b in 0..c.d.batch {
                    let (want_cell, want_out) = reference(&c, b);
                    for (u, want) in want_cell.iter().enumerate() {
                        let got = f64::from(cell[b * c.d.units + u]) * cell_scale;
                        assert!(
                            (got - want).abs() < 0.02,
                            "{g:?}: cell {u}: {got} vs {want}"
                        );
                    }
                    for (j, want) in want_out.iter().enumerate() {
                        let got = f64::from(output[b * c.d.output_size + j]) - 128.0;
                        assert!(
                            (got - want).abs() <= 3.0,
                            "{g:?}: output {j}: {got} vs {want}"
                        );
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 1000);
    }

    /// Layer normalisation in fixed point: a constant row has no variance and normalises to
    /// the bias alone; the mean of the output is the mean of the biases.
    #[test]
    fn layer_norm_of_a_constant_row_is_its_bias() {
        let mut row = [300i16; 4];
        let weights = [16384i16; 4];
        let bias = [0, 1024 * 100, -1024 * 100, 1024 * 50];
        // Layer-norm scale 2^-12: the bias over 1024, times 2^-12, read as Q3.12.
        let scale = multiplier(1.0 / 4096.0);
        layer_norm(&mut row, &weights, &bias, scale, 0);
        assert_eq!(row, [0, 100, -100, 50]);
    }
}
