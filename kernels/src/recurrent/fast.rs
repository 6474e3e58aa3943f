//! The float32 recurrent cells (types.hal 1.0 `OperationType` LSTM (16) and RNN (24), and
//! NNAPI 1.2's UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_LSTM and _RNN) on the packed GEMM
//! micro-kernels FULLY_CONNECTED runs on ([`crate::conv::f32`]).
//!
//! The gate weights are packed once, when they are constants: the input-to-gate matrices of
//! every gate stacked into one `[gates · units, input_size]` filter whose bias is the gate
//! biases (zero under layer normalisation, which adds them after normalising), the
//! recurrent-to-gate matrices into one `[gates · units, output_size]` filter, the auxiliary
//! input's weights and the projection likewise. A sequence then costs one GEMM over all its
//! input rows (`M = batch · max_time`) for the input contribution before the recurrence, and
//! per time step one GEMM of the `batch` state rows for the recurrent contribution (and one for
//! the projection). Between them runs the reference's element-wise arithmetic in the
//! reference's order (peepholes, layer normalisation, gate activations, cell update,
//! clipping; see [`super::reference::lstm_f32`]).
//!
//! Sums: each gate's pre-activation is `((bias + W_x·x) + W_aux·aux) + W_h·h` as in the
//! reference, but each product is summed in the micro-kernel's order, so a result may differ
//! from the reference's by a few ULP of its sums per step; the conformance tolerance (and
//! `kernels/tests/recurrent_fast.rs`) bounds it.
//!
//! Scratch comes from the caller, sized by [`PackedLstm::scratch_len`] and
//! [`PackedRnn::scratch_len`], so a steady-state execution allocates nothing.

use super::reference::{clip, layer_norm_rows, sigmoid, LstmDims, LstmInputs, LstmParams, RnnDims};
use super::sequence::{scatter, steps, SeqDims, SeqOutput};
use crate::conv::f32::{fully_connected_f32, PackedConvF32};
use crate::conv::FilterShape;
use crate::ukernels::Ukernels;
use crate::Activation;

/// `filter` (`[out_c, in_c]`, row-major) and `bias` packed for the GEMM of `uk`; `None` when
/// the lengths do not fit the extents (validation makes them fit).
fn pack_fc(
    uk: &Ukernels,
    out_c: usize,
    in_c: usize,
    filter: &[f32],
    bias: &[f32],
) -> Option<PackedConvF32> {
    let shape = FilterShape {
        out_c,
        kh: 1,
        kw: 1,
        in_c,
    };
    (filter.len() == out_c.checked_mul(in_c)? && bias.len() == out_c)
        .then(|| PackedConvF32::pack(uk, shape, filter, bias))
}

/// `rows × in_c` rows through a packed filter into `rows × out_c`, no activation.
fn gemm(packed: &PackedConvF32, rows: usize, input: &[f32], output: &mut [f32]) {
    fully_connected_f32(packed, rows, input, Activation::None, output);
}

// ---------------------------------------------------------------------------------------------
// LSTM
// ---------------------------------------------------------------------------------------------

/// The constants of one LSTM direction, packed: gate weights for the GEMM, the element-wise
/// vectors copied. Gates are laid out `[input,] forget, cell, output`, `units` columns each
/// (the input gate absent with CIFG).
#[derive(Clone, Debug)]
pub struct PackedLstm {
    input_size: usize,
    aux_size: usize,
    units: usize,
    output_size: usize,
    cifg: bool,
    /// `[gates · units, input_size]`, bias the gate biases (zeros with layer normalisation).
    input: PackedConvF32,
    /// `[gates · units, aux_size]`, zero bias.
    aux: Option<PackedConvF32>,
    /// `[gates · units, output_size]`, zero bias.
    recurrent: PackedConvF32,
    /// `[output_size, units]`, bias the projection bias or zeros.
    projection: Option<PackedConvF32>,
    /// Peephole weights to the input (not with CIFG), forget and output gates.
    cell_to_input: Option<Vec<f32>>,
    cell_to_forget: Option<Vec<f32>>,
    cell_to_output: Option<Vec<f32>>,
    /// With layer normalisation: per gate (in the packed order) its layer-norm weights and
    /// bias, `gates · units` each.
    layer_norm: Option<(Vec<f32>, Vec<f32>)>,
    params: LstmParams,
}

impl PackedLstm {
    /// Packs the weights of `weights` (its `input`, `output_state_in` and `cell_state_in` are
    /// not read, nor `dims.batch`; the auxiliary input's weights are packed when
    /// `weights.aux` is given). `None` when a length does not fit `dims`, or a size is 0.
    pub fn pack(
        uk: &Ukernels,
        dims: LstmDims,
        weights: &LstmInputs<'_>,
        params: LstmParams,
    ) -> Option<PackedLstm> {
        let LstmDims {
            input_size,
            num_units: units,
            output_size,
            ..
        } = dims;
        if input_size == 0 || units == 0 || output_size == 0 {
            return None;
        }
        let cifg = weights.input_to_input_weights.is_none();
        if weights.projection_weights.is_none() && output_size != units {
            return None;
        }
        // Gate k (0 input, 1 forget, 2 cell, 3 output) of those present.
        let present = |g: [Option<&[f32]>; 4]| -> Option<Vec<f32>> {
            let parts: Vec<&[f32]> = g
                .into_iter()
                .skip(usize::from(cifg))
                .collect::<Option<_>>()?;
            Some(parts.concat())
        };
        let gates = if cifg { 3 } else { 4 };
        let rows = gates * units;
        let w_x = present([
            weights.input_to_input_weights,
            Some(weights.input_to_forget_weights),
            Some(weights.input_to_cell_weights),
            Some(weights.input_to_output_weights),
        ])?;
        let w_h = present([
            weights.recurrent_to_input_weights,
            Some(weights.recurrent_to_forget_weights),
            Some(weights.recurrent_to_cell_weights),
            Some(weights.recurrent_to_output_weights),
        ])?;
        let zero_input_bias = vec![0.0; units];
        let biases = present([
            Some(weights.input_gate_bias.unwrap_or(&zero_input_bias)),
            Some(weights.forget_gate_bias),
            Some(weights.cell_bias),
            Some(weights.output_gate_bias),
        ])?;
        let zeros = vec![0.0; rows];
        let (gemm_bias, layer_norm) = match weights.layer_norm {
            Some(ln) => {
                let w = present([ln.input, Some(ln.forget), Some(ln.cell), Some(ln.output)])?;
                (&zeros, Some((w, biases.clone())))
            }
            None => (&biases, None),
        };
        if biases.len() != rows || layer_norm.as_ref().is_some_and(|(w, _)| w.len() != rows) {
            return None;
        }
        let input = pack_fc(uk, rows, input_size, &w_x, gemm_bias)?;
        let recurrent = pack_fc(uk, rows, output_size, &w_h, &zeros)?;
        let (aux, aux_size) = match weights.aux {
            Some(a) if a.aux_size > 0 => {
                let w = present([
                    a.to_input,
                    Some(a.to_forget),
                    Some(a.to_cell),
                    Some(a.to_output),
                ])?;
                (Some(pack_fc(uk, rows, a.aux_size, &w, &zeros)?), a.aux_size)
            }
            _ => (None, 0),
        };
        let projection = match weights.projection_weights {
            Some(w) => {
                let zero = vec![0.0; output_size];
                let bias = weights.projection_bias.unwrap_or(&zero);
                Some(pack_fc(uk, output_size, units, w, bias)?)
            }
            None => None,
        };
        let vector = |v: Option<&[f32]>| -> Option<Option<Vec<f32>>> {
            match v {
                Some(v) if v.len() != units => None,
                v => Some(v.map(<[f32]>::to_vec)),
            }
        };
        Some(PackedLstm {
            input_size,
            aux_size,
            units,
            output_size,
            cifg,
            input,
            aux,
            recurrent,
            projection,
            cell_to_input: vector(weights.cell_to_input_weights.filter(|_| !cifg))?,
            cell_to_forget: vector(weights.cell_to_forget_weights)?,
            cell_to_output: vector(weights.cell_to_output_weights)?,
            layer_norm,
            params,
        })
    }

    /// Width of the cell's input rows.
    pub fn input_size(&self) -> usize {
        self.input_size
    }

    /// Width of the auxiliary input rows (0 without auxiliary weights).
    pub fn aux_size(&self) -> usize {
        self.aux_size
    }

    pub fn units(&self) -> usize {
        self.units
    }

    pub fn output_size(&self) -> usize {
        self.output_size
    }

    fn gate_width(&self) -> usize {
        self.units * if self.cifg { 3 } else { 4 }
    }

    /// Scratch `f32`s [`lstm_sequence_packed`] needs for a sequence of `seq`.
    pub fn scratch_len(&self, seq: SeqDims) -> usize {
        let (rows, g) = (seq.max_time * seq.batch, self.gate_width());
        let products = rows * g * if self.aux.is_some() { 2 } else { 1 };
        products + seq.batch * (g + 2 * self.output_size + 3 * self.units)
    }

    /// Bytes of packed weights and copied vectors.
    pub fn packed_bytes(&self) -> usize {
        let packs = [Some(&self.input), self.aux.as_ref(), Some(&self.recurrent)]
            .into_iter()
            .chain([self.projection.as_ref()])
            .flatten()
            .map(PackedConvF32::packed_bytes)
            .sum::<usize>();
        let vectors = [
            &self.cell_to_input,
            &self.cell_to_forget,
            &self.cell_to_output,
        ]
        .into_iter()
        .flatten()
        .map(Vec::len)
        .sum::<usize>()
            + self
                .layer_norm
                .as_ref()
                .map_or(0, |(w, b)| w.len() + b.len());
        packs + vectors * std::mem::size_of::<f32>()
    }

    /// Name of the GEMM micro-kernel the weights were packed for.
    pub fn kernel_name(&self) -> &'static str {
        self.input.kernel_name()
    }

    /// One batch row of a step from its gate pre-activations `g` (bias and the three products
    /// summed): the new cell state into `c_next` and `o ⊙ act(c_next)` into `m`, with the
    /// reference's operations in the reference's order.
    fn cell_row(&self, g: &mut [f32], c_prev: &[f32], c_next: &mut [f32], m: &mut [f32]) {
        let u = self.units;
        let (input_gate, rest) = g.split_at_mut(if self.cifg { 0 } else { u });
        let (forget_gate, rest) = rest.split_at_mut(u);
        let (cell_gate, output_gate) = rest.split_at_mut(u);
        let first = usize::from(self.cifg);
        let ln = |k: usize| {
            self.layer_norm.as_ref().map(|(w, b)| {
                let at = (k - first) * u;
                (&w[at..at + u], &b[at..at + u])
            })
        };
        let peephole = self.cell_to_output.is_some();
        if !self.cifg {
            if let (true, Some(w)) = (peephole, &self.cell_to_input) {
                accumulate_product(input_gate, w, c_prev);
            }
            if let Some((w, b)) = ln(0) {
                layer_norm_rows(input_gate, w, Some(b));
            }
            input_gate.iter_mut().for_each(|v| *v = sigmoid(*v));
        }
        if let (true, Some(w)) = (peephole, &self.cell_to_forget) {
            accumulate_product(forget_gate, w, c_prev);
        }
        if let Some((w, b)) = ln(1) {
            layer_norm_rows(forget_gate, w, Some(b));
        }
        forget_gate.iter_mut().for_each(|v| *v = sigmoid(*v));
        if let Some((w, b)) = ln(2) {
            layer_norm_rows(cell_gate, w, Some(b));
        }
        let act = self.params.activation;
        for ((c, &f), &cp) in c_next.iter_mut().zip(&*forget_gate).zip(c_prev) {
            *c = f * cp;
        }
        cell_gate.iter_mut().for_each(|v| *v = act.apply(*v));
        if self.cifg {
            // 1 − f stands for the input gate, rounded as the reference rounds it.
            for ((c, &a), &f) in c_next.iter_mut().zip(&*cell_gate).zip(&*forget_gate) {
                *c += a * (1.0 - f);
            }
        } else {
            for ((c, &a), &i) in c_next.iter_mut().zip(&*cell_gate).zip(&*input_gate) {
                *c += a * i;
            }
        }
        if self.params.cell_clip > 0.0 {
            let limit = self.params.cell_clip;
            c_next.iter_mut().for_each(|v| *v = clip(*v, limit));
        }
        if let Some(w) = &self.cell_to_output {
            accumulate_product(output_gate, w, c_next);
        }
        if let Some((w, b)) = ln(3) {
            layer_norm_rows(output_gate, w, Some(b));
        }
        for ((m, &o), &c) in m.iter_mut().zip(&*output_gate).zip(&*c_next) {
            *m = sigmoid(o) * act.apply(c);
        }
    }
}

/// `dst[i] += w[i] · x[i]` (a peephole connection).
fn accumulate_product(dst: &mut [f32], w: &[f32], x: &[f32]) {
    for ((d, &w), &x) in dst.iter_mut().zip(w).zip(x) {
        *d += w * x;
    }
}

/// The initial and final states of one LSTM direction.
#[derive(Debug)]
pub struct LstmStates<'a> {
    /// `[batch, output_size]` and `[batch, units]`: the states before the first step.
    pub output_state_in: &'a [f32],
    pub cell_state_in: &'a [f32],
    /// The same shapes: the states after the last step.
    pub output_state_out: &'a mut [f32],
    pub cell_state_out: &'a mut [f32],
}

/// One direction of an LSTM over a sequence, on packed weights: `input` is the whole input
/// sequence (`[.., .., input_size]` in `seq`'s layout), `aux_input` the whole auxiliary one
/// when the cell has auxiliary weights. Writes every step's output into `out` and the final
/// states into `states`; `scratch` holds [`PackedLstm::scratch_len`] values. Equal to
/// [`super::sequence::lstm_sequence_f32`] on the same weights up to the order of the sums.
#[allow(clippy::too_many_arguments)]
pub fn lstm_sequence_packed(
    p: &PackedLstm,
    seq: SeqDims,
    input: &[f32],
    aux_input: Option<&[f32]>,
    reverse: bool,
    mut out: SeqOutput<'_>,
    states: LstmStates<'_>,
    scratch: &mut [f32],
) {
    let (batch, rows) = (seq.batch, seq.max_time * seq.batch);
    let (g, u, o) = (p.gate_width(), p.units, p.output_size);
    assert_eq!(input.len(), rows * p.input_size, "input length");
    assert!(scratch.len() >= p.scratch_len(seq), "scratch length");
    let (gx, rest) = scratch.split_at_mut(rows * g);
    let aux = match (&p.aux, aux_input) {
        (Some(w), Some(x)) => Some((w, x)),
        _ => None,
    };
    let (ga, rest) = rest.split_at_mut(if p.aux.is_some() { rows * g } else { 0 });
    let (gates, rest) = rest.split_at_mut(batch * g);
    let (mut h_prev, rest) = rest.split_at_mut(batch * o);
    let (mut h_next, rest) = rest.split_at_mut(batch * o);
    let (mut c_prev, rest) = rest.split_at_mut(batch * u);
    let (mut c_next, rest) = rest.split_at_mut(batch * u);
    let m = &mut rest[..batch * u];

    gemm(&p.input, rows, input, gx);
    if let Some((w, x)) = aux {
        assert_eq!(x.len(), rows * p.aux_size, "auxiliary input length");
        gemm(w, rows, x, ga);
    }
    h_prev.copy_from_slice(states.output_state_in);
    c_prev.copy_from_slice(states.cell_state_in);
    for t in steps(seq.max_time, reverse) {
        gemm(&p.recurrent, batch, h_prev, gates);
        for b in 0..batch {
            let row = seq.row(t, b);
            let gate = &mut gates[b * g..(b + 1) * g];
            let x = &gx[row * g..(row + 1) * g];
            if aux.is_some() {
                let a = &ga[row * g..(row + 1) * g];
                for ((v, &x), &a) in gate.iter_mut().zip(x).zip(a) {
                    *v += x + a;
                }
            } else {
                for (v, &x) in gate.iter_mut().zip(x) {
                    *v += x;
                }
            }
            p.cell_row(
                gate,
                &c_prev[b * u..(b + 1) * u],
                &mut c_next[b * u..(b + 1) * u],
                &mut m[b * u..(b + 1) * u],
            );
        }
        match &p.projection {
            Some(w) => {
                gemm(w, batch, m, h_next);
                if p.params.proj_clip > 0.0 {
                    let limit = p.params.proj_clip;
                    h_next.iter_mut().for_each(|v| *v = clip(*v, limit));
                }
            }
            None => h_next.copy_from_slice(m),
        }
        scatter(seq, t, h_next, o, &mut out);
        std::mem::swap(&mut h_prev, &mut h_next);
        std::mem::swap(&mut c_prev, &mut c_next);
    }
    states.output_state_out.copy_from_slice(h_prev);
    states.cell_state_out.copy_from_slice(c_prev);
}

// ---------------------------------------------------------------------------------------------
// RNN
// ---------------------------------------------------------------------------------------------

/// The constants of one RNN direction, packed.
#[derive(Clone, Debug)]
pub struct PackedRnn {
    input_size: usize,
    aux_size: usize,
    units: usize,
    /// `[units, input_size]` with the bias.
    input: PackedConvF32,
    /// `[units, aux_size]`, zero bias.
    aux: Option<PackedConvF32>,
    /// `[units, units]`, zero bias.
    recurrent: PackedConvF32,
}

impl PackedRnn {
    /// Packs RNN weights `[units, input_size]`, recurrent weights `[units, units]`, bias
    /// `[units]` and, for a cross-linked auxiliary input, its weights `[units, aux_size]`
    /// (`dims.batch` is not read). `None` when a length does not fit, or a size is 0.
    pub fn pack(
        uk: &Ukernels,
        dims: RnnDims,
        weights: &[f32],
        recurrent_weights: &[f32],
        bias: &[f32],
        aux: Option<(&[f32], usize)>,
    ) -> Option<PackedRnn> {
        let (input_size, units) = (dims.input_size, dims.num_units);
        if input_size == 0 || units == 0 {
            return None;
        }
        let zeros = vec![0.0; units];
        let (aux, aux_size) = match aux {
            Some((w, size)) if size > 0 => (Some(pack_fc(uk, units, size, w, &zeros)?), size),
            _ => (None, 0),
        };
        Some(PackedRnn {
            input_size,
            aux_size,
            units,
            input: pack_fc(uk, units, input_size, weights, bias)?,
            aux,
            recurrent: pack_fc(uk, units, units, recurrent_weights, &zeros)?,
        })
    }

    pub fn input_size(&self) -> usize {
        self.input_size
    }

    /// Width of the auxiliary input rows (0 without auxiliary weights).
    pub fn aux_size(&self) -> usize {
        self.aux_size
    }

    pub fn units(&self) -> usize {
        self.units
    }

    /// Scratch `f32`s [`rnn_sequence_packed`] needs for a sequence of `seq`.
    pub fn scratch_len(&self, seq: SeqDims) -> usize {
        let rows = seq.max_time * seq.batch;
        rows * self.units * if self.aux.is_some() { 2 } else { 1 } + 2 * seq.batch * self.units
    }

    /// Bytes of packed weights.
    pub fn packed_bytes(&self) -> usize {
        [Some(&self.input), self.aux.as_ref(), Some(&self.recurrent)]
            .into_iter()
            .flatten()
            .map(PackedConvF32::packed_bytes)
            .sum()
    }
}

/// One direction of an RNN over a sequence, on packed weights: `input` is the whole input
/// sequence, `aux_input` the whole auxiliary one when the cell has auxiliary weights,
/// `hidden_in` the initial state. Writes every step's output into `out` and the final state
/// into `hidden_out`; `scratch` holds [`PackedRnn::scratch_len`] values. Equal to
/// [`super::sequence::rnn_sequence_f32`] on the same weights up to the order of the sums.
#[allow(clippy::too_many_arguments)]
pub fn rnn_sequence_packed(
    p: &PackedRnn,
    seq: SeqDims,
    input: &[f32],
    aux_input: Option<&[f32]>,
    hidden_in: &[f32],
    activation: Activation,
    reverse: bool,
    mut out: SeqOutput<'_>,
    hidden_out: &mut [f32],
    scratch: &mut [f32],
) {
    let (batch, rows, u) = (seq.batch, seq.max_time * seq.batch, p.units);
    assert_eq!(input.len(), rows * p.input_size, "input length");
    assert!(scratch.len() >= p.scratch_len(seq), "scratch length");
    let (gx, rest) = scratch.split_at_mut(rows * u);
    let aux = match (&p.aux, aux_input) {
        (Some(w), Some(x)) => Some((w, x)),
        _ => None,
    };
    let (ga, rest) = rest.split_at_mut(if p.aux.is_some() { rows * u } else { 0 });
    let (mut h_prev, rest) = rest.split_at_mut(batch * u);
    let mut h_next = &mut rest[..batch * u];
    gemm(&p.input, rows, input, gx);
    if let Some((w, x)) = aux {
        assert_eq!(x.len(), rows * p.aux_size, "auxiliary input length");
        gemm(w, rows, x, ga);
    }
    h_prev.copy_from_slice(hidden_in);
    for t in steps(seq.max_time, reverse) {
        gemm(&p.recurrent, batch, h_prev, h_next);
        for (b, h) in h_next.chunks_exact_mut(u).enumerate() {
            let row = seq.row(t, b);
            let x = &gx[row * u..(row + 1) * u];
            if aux.is_some() {
                let a = &ga[row * u..(row + 1) * u];
                for ((v, &x), &a) in h.iter_mut().zip(x).zip(a) {
                    *v = activation.apply_f32((x + a) + *v);
                }
            } else {
                for (v, &x) in h.iter_mut().zip(x) {
                    *v = activation.apply_f32(x + *v);
                }
            }
        }
        scatter(seq, t, h_next, u, &mut out);
        std::mem::swap(&mut h_prev, &mut h_next);
    }
    hidden_out.copy_from_slice(h_prev);
}
