//! The sequence forms of RNN and LSTM (NNAPI 1.2, NeuralNetworks.h
//! `ANEURALNETWORKS_UNIDIRECTIONAL_SEQUENCE_RNN`, `_LSTM`, `BIDIRECTIONAL_SEQUENCE_RNN`,
//! `_LSTM`): one direction of a sequence is the single-step cell of [`super::reference`] run
//! once per time step, forwards or backwards, the state of each step feeding the next.
//!
//! A sequence is `[max_time, batch, size]` (time-major) or `[batch, max_time, size]`. Each
//! step gathers its `[batch, size]` rows into scratch, runs the cell there and scatters the
//! step's output rows into the sequence output, where a direction may own only a column range
//! of each row (the bidirectional operations' `merge_outputs`). So neither layout costs a
//! transpose, and the cell's arithmetic, hence its rounding, is the single-step reference's.
//!
//! Scratch comes from the caller ([`rnn_scratch_len`], [`lstm_scratch_len`] say how much), so
//! a steady-state execution allocates nothing.

use super::reference::{
    lstm_f32, rnn_step_f32, LstmAux, LstmDims, LstmInputs, LstmOutputs, LstmParams, RnnAux,
    RnnDims, RnnInputs,
};
use crate::Activation;

/// The time axis of a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqDims {
    pub max_time: usize,
    pub batch: usize,
    pub time_major: bool,
}

impl SeqDims {
    /// The row of a `[.., .., size]` sequence holding time step `t` of batch entry `b`.
    #[inline]
    pub fn row(&self, t: usize, b: usize) -> usize {
        if self.time_major {
            t * self.batch + b
        } else {
            b * self.max_time + t
        }
    }
}

/// Where one direction writes its per-step outputs: rows of `width` values in the
/// sequence's layout, this direction's values starting at column `offset`.
#[derive(Debug)]
pub struct SeqOutput<'a> {
    pub data: &'a mut [f32],
    pub width: usize,
    pub offset: usize,
}

/// Copies step `t` of `seq` (rows of `size`) into `dst`, `[batch, size]`.
fn gather(dims: SeqDims, t: usize, seq: &[f32], size: usize, dst: &mut [f32]) {
    if size == 0 {
        return;
    }
    for (b, d) in dst.chunks_exact_mut(size).enumerate().take(dims.batch) {
        let at = dims.row(t, b) * size;
        d.copy_from_slice(&seq[at..at + size]);
    }
}

/// Copies `src`, `[batch, len]`, into step `t` of `out`.
pub(crate) fn scatter(dims: SeqDims, t: usize, src: &[f32], len: usize, out: &mut SeqOutput<'_>) {
    if len == 0 {
        return;
    }
    for (b, s) in src.chunks_exact(len).enumerate().take(dims.batch) {
        let at = dims.row(t, b) * out.width + out.offset;
        out.data[at..at + len].copy_from_slice(s);
    }
}

/// The steps of a direction in the order it visits them.
pub(crate) fn steps(max_time: usize, reverse: bool) -> impl Iterator<Item = usize> {
    (0..max_time).map(move |t| if reverse { max_time - 1 - t } else { t })
}

/// A whole auxiliary input sequence (`[.., .., size]` in the input's layout).
#[derive(Clone, Copy, Debug)]
pub struct SeqAux<'a> {
    pub input: &'a [f32],
    pub size: usize,
}

/// Scratch `f32`s [`rnn_sequence_f32`] needs.
pub fn rnn_scratch_len(dims: RnnDims, aux_size: usize) -> usize {
    dims.batch * (dims.input_size + aux_size + 2 * dims.num_units)
}

/// One direction of an RNN over a sequence. `cell.input` is the whole input sequence,
/// `cell.hidden_state_in` the initial state; with `aux` (and its weights) each step adds the
/// auxiliary input's contribution. Writes every step's output into `out` and the final
/// hidden state into `hidden_out` (`[batch, num_units]`).
#[allow(clippy::too_many_arguments)]
pub fn rnn_sequence_f32(
    seq: SeqDims,
    dims: RnnDims,
    cell: &RnnInputs<'_>,
    aux: Option<(SeqAux<'_>, &[f32])>,
    activation: Activation,
    reverse: bool,
    mut out: SeqOutput<'_>,
    hidden_out: &mut [f32],
    scratch: &mut [f32],
) {
    let (b, units) = (seq.batch, dims.num_units);
    let aux_size = aux.map_or(0, |(a, _)| a.size);
    let (x, rest) = scratch.split_at_mut(b * dims.input_size);
    let (xa, rest) = rest.split_at_mut(b * aux_size);
    let (mut h_prev, rest) = rest.split_at_mut(b * units);
    let mut h_next = &mut rest[..b * units];
    h_prev.copy_from_slice(cell.hidden_state_in);
    for t in steps(seq.max_time, reverse) {
        gather(seq, t, cell.input, dims.input_size, x);
        let step_aux = aux.map(|(a, weights)| {
            gather(seq, t, a.input, a.size, xa);
            RnnAux {
                input: &*xa,
                weights,
                aux_size: a.size,
            }
        });
        let step = RnnInputs {
            input: x,
            hidden_state_in: h_prev,
            ..*cell
        };
        rnn_step_f32(dims, &step, step_aux, activation, h_next);
        scatter(seq, t, h_next, units, &mut out);
        std::mem::swap(&mut h_prev, &mut h_next);
    }
    hidden_out.copy_from_slice(h_prev);
}

/// Scratch `f32`s [`lstm_sequence_f32`] needs.
pub fn lstm_scratch_len(dims: LstmDims, aux_size: usize) -> usize {
    let LstmDims {
        batch,
        input_size,
        num_units,
        output_size,
    } = dims;
    batch * (input_size + aux_size + 3 * output_size + 6 * num_units)
}

/// One direction of an LSTM over a sequence. `inputs.input` is the whole input sequence,
/// `output_state_in` / `cell_state_in` the initial states and `inputs.aux`, if any, holds
/// the whole auxiliary sequence. Writes every step's output into `out` and the final states
/// into `output_state_out` (`[batch, output_size]`) and `cell_state_out` (`[batch,
/// num_units]`).
#[allow(clippy::too_many_arguments)]
pub fn lstm_sequence_f32(
    seq: SeqDims,
    dims: LstmDims,
    inputs: &LstmInputs<'_>,
    params: LstmParams,
    reverse: bool,
    mut out: SeqOutput<'_>,
    output_state_out: &mut [f32],
    cell_state_out: &mut [f32],
    scratch: &mut [f32],
) {
    let LstmDims {
        batch,
        input_size,
        num_units,
        output_size,
    } = dims;
    let aux_size = inputs.aux.map_or(0, |a| a.aux_size);
    let gates = if inputs.input_to_input_weights.is_none() {
        3
    } else {
        4
    };
    let (x, rest) = scratch.split_at_mut(batch * input_size);
    let (xa, rest) = rest.split_at_mut(batch * aux_size);
    let (mut h_prev, rest) = rest.split_at_mut(batch * output_size);
    let (mut h_next, rest) = rest.split_at_mut(batch * output_size);
    let (y, rest) = rest.split_at_mut(batch * output_size);
    let (mut c_prev, rest) = rest.split_at_mut(batch * num_units);
    let (mut c_next, rest) = rest.split_at_mut(batch * num_units);
    let gate_scratch = &mut rest[..batch * num_units * gates];
    h_prev.copy_from_slice(inputs.output_state_in);
    c_prev.copy_from_slice(inputs.cell_state_in);
    for t in steps(seq.max_time, reverse) {
        gather(seq, t, inputs.input, input_size, x);
        let aux = inputs.aux.map(|a| {
            gather(seq, t, a.input, a.aux_size, xa);
            LstmAux { input: &*xa, ..a }
        });
        let step = LstmInputs {
            input: x,
            output_state_in: h_prev,
            cell_state_in: c_prev,
            aux,
            ..*inputs
        };
        let outputs = LstmOutputs {
            scratch: gate_scratch,
            output_state_out: h_next,
            cell_state_out: c_next,
            output: y,
        };
        lstm_f32(dims, &step, params, outputs);
        scatter(seq, t, y, output_size, &mut out);
        std::mem::swap(&mut h_prev, &mut h_next);
        std::mem::swap(&mut c_prev, &mut c_next);
    }
    output_state_out.copy_from_slice(h_prev);
    cell_state_out.copy_from_slice(c_prev);
}
