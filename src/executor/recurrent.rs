//! Registrations of the recurrent family (types.hal 1.0 `OperationType`): LSTM (16), with
//! NNAPI 1.2's layer normalisation, RNN (24) and SVDF (27), float32, one time step each; and
//! NNAPI 1.2's UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN and _LSTM (float32, with NNAPI
//! 1.3's final-state outputs), whose step scratch is a per-thread buffer that grows to the
//! largest operation once and is reused after; QUANTIZED_16BIT_LSTM (NNAPI 1.2) and
//! QUANTIZED_LSTM (NNAPI 1.3, signed quant8 run as its uint8 image), one quantized step each
//! with a TENSOR_QUANT16_SYMM cell state.

use super::{act, elementwise_work, mismatch, Call, OpImpl, WorkArgs};
use crate::tensor::TensorMut;
use nnhal_hal::shape::{AuxLinking, LstmParams, Params, SeqParams};
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::recurrent::qlstm::{
    qlstm_scratch_len, quantized_lstm, QLstmDims, QLstmInputs, QLstmOutputs, QLstmQuant,
};
use nnhal_kernels::recurrent::quantized::{quantized_16bit_lstm, QLstm16Dims, QLstm16Inputs};
use nnhal_kernels::recurrent::reference as recurrent;
use nnhal_kernels::recurrent::sequence::{self, SeqAux, SeqDims, SeqOutput};
use std::cell::RefCell;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (Lstm, F) => &LSTM,
        (Rnn, F) => &RNN,
        (Svdf, F) => &SVDF,
        (UnidirectionalSequenceRnn | BidirectionalSequenceRnn, F) => &SEQUENCE_RNN,
        (UnidirectionalSequenceLstm | BidirectionalSequenceLstm, F) => &SEQUENCE_LSTM,
        (Quantized16bitLstm, Q) => &QUANTIZED_LSTM_16,
        (QuantizedLstm, Q) => &QUANTIZED_LSTM,
        _ => return None,
    })
}

registration!(LSTM, lstm, recurrent_work, partial);
registration!(RNN, rnn, recurrent_work, partial);
registration!(SVDF, svdf, recurrent_work, partial);
registration!(SEQUENCE_RNN, sequence_rnn, recurrent_work, partial);
registration!(SEQUENCE_LSTM, sequence_lstm, recurrent_work, partial);
registration!(QUANTIZED_LSTM, quantized_lstm_1_3, recurrent_work, partial);
registration!(
    QUANTIZED_LSTM_16,
    quantized_lstm_16,
    recurrent_work,
    partial
);

/// Recurrent cells multiply every weight once per batch row.
fn recurrent_work(w: &WorkArgs) -> u64 {
    let batch = match w.params {
        Params::Lstm(p) => p.batch,
        Params::Rnn { batch, .. }
        | Params::Svdf { batch, .. }
        | Params::QuantizedLstm16 { batch, .. } => *batch,
        Params::QuantizedLstm(p) => p.batch,
        Params::SeqRnn(p) => p.seq.batch.saturating_mul(p.seq.max_time),
        Params::SeqLstm(p) => p.seq.batch.saturating_mul(p.seq.max_time),
        _ => 1,
    };
    elementwise_work(w).saturating_add(w.read.saturating_mul(u64::from(batch)))
}

/// Where one LSTM cell's operands sit among an operation's inputs (as in `nnhal_hal`'s
/// shape rules): LSTM's inputs 1–17 from `weights` on, the two states, the four layer-norm
/// weight vectors from `layer_norm` on.
struct LstmSlots {
    weights: usize,
    output_state: usize,
    cell_state: usize,
    layer_norm: usize,
}

const LSTM_SLOTS: LstmSlots = LstmSlots {
    weights: 1,
    output_state: 18,
    cell_state: 19,
    layer_norm: 23,
};

/// One cell's tensors, reading `input` as its input.
fn lstm_inputs<'a>(
    c: &Call<'a>,
    s: &LstmSlots,
    p: &LstmParams,
    input: &'a [f32],
) -> HalResult<recurrent::LstmInputs<'a>> {
    let w = |k: usize| c.f(s.weights + k - 1);
    let opt = |k: usize| c.opt_f(s.weights + k - 1);
    Ok(recurrent::LstmInputs {
        input,
        input_to_input_weights: opt(1)?,
        input_to_forget_weights: w(2)?,
        input_to_cell_weights: w(3)?,
        input_to_output_weights: w(4)?,
        recurrent_to_input_weights: opt(5)?,
        recurrent_to_forget_weights: w(6)?,
        recurrent_to_cell_weights: w(7)?,
        recurrent_to_output_weights: w(8)?,
        cell_to_input_weights: opt(9)?,
        cell_to_forget_weights: opt(10)?,
        cell_to_output_weights: opt(11)?,
        input_gate_bias: opt(12)?,
        forget_gate_bias: w(13)?,
        cell_bias: w(14)?,
        output_gate_bias: w(15)?,
        projection_weights: opt(16)?,
        projection_bias: opt(17)?,
        output_state_in: c.f(s.output_state)?,
        cell_state_in: c.f(s.cell_state)?,
        layer_norm: if p.layer_norm {
            Some(recurrent::LstmLayerNorm {
                input: c.opt_f(s.layer_norm)?,
                forget: c.f(s.layer_norm + 1)?,
                cell: c.f(s.layer_norm + 2)?,
                output: c.f(s.layer_norm + 3)?,
            })
        } else {
            None
        },
        aux: None,
    })
}

fn lstm_dims(p: &LstmParams) -> recurrent::LstmDims {
    recurrent::LstmDims {
        batch: p.batch as usize,
        input_size: p.input_size as usize,
        num_units: p.units as usize,
        output_size: p.output_size as usize,
    }
}

fn lstm_params(p: &LstmParams) -> HalResult<recurrent::LstmParams> {
    let activation = recurrent::LstmActivation::from_code(p.activation)
        .ok_or_else(|| HalError::InvalidArgument(format!("LSTM activation {}", p.activation)))?;
    Ok(recurrent::LstmParams {
        activation,
        cell_clip: p.cell_clip,
        proj_clip: p.proj_clip,
    })
}

fn lstm(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lstm(p) = c.params else {
        return Err(mismatch(c));
    };
    let inputs = lstm_inputs(c, &LSTM_SLOTS, p, c.f(0)?)?;
    let [scratch, state, cell, output] = outs else {
        return Err(mismatch(c));
    };
    let outputs = recurrent::LstmOutputs {
        scratch: scratch.f32_mut()?,
        output_state_out: state.f32_mut()?,
        cell_state_out: cell.f32_mut()?,
        output: output.f32_mut()?,
    };
    recurrent::lstm_f32(lstm_dims(p), &inputs, lstm_params(p)?, outputs);
    Ok(())
}

thread_local! {
    /// The sequence operations' step scratch: grown to the largest need once, then reused.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` floats of this thread's scratch.
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> HalResult<R> {
    SCRATCH.with(|cell| {
        let mut v = cell
            .try_borrow_mut()
            .map_err(|_| HalError::GeneralFailure("recurrent scratch is in use".into()))?;
        if v.len() < len {
            let extra = len - v.len();
            v.try_reserve(extra).map_err(|_| {
                HalError::GeneralFailure(format!("cannot allocate {len} floats of scratch"))
            })?;
            v.resize(len, 0.0);
        }
        Ok(f(&mut v[..len]))
    })
}

fn seq_dims(s: &SeqParams) -> SeqDims {
    SeqDims {
        max_time: s.max_time as usize,
        batch: s.batch as usize,
        time_major: s.time_major,
    }
}

/// The output count must fit `merge_outputs` and the optional state outputs (validation
/// checks it when shapes are static; a deferred operation is checked here).
fn check_outputs(c: &Call) -> HalResult<()> {
    let n = c.op.outputs.len();
    match c.params.output_counts() {
        Some(counts) if !counts.contains(&n) => Err(HalError::InvalidArgument(format!(
            "{}: {n} outputs, expected one of {counts:?} with these inputs",
            c.op.ty
        ))),
        _ => Ok(()),
    }
}

/// Splits the outputs of a sequence operation into its sequence outputs (1, or 2 for an
/// unmerged bidirectional operation) and its final states.
fn split_outputs<'o, 'a>(
    outs: &'o mut [TensorMut<'a>],
    sequences: usize,
) -> (&'o mut [TensorMut<'a>], &'o mut [TensorMut<'a>]) {
    let at = sequences.min(outs.len());
    outs.split_at_mut(at)
}

/// An RNN cell's weights, recurrent weights, bias and hidden state from input `at` on,
/// reading `input`.
fn rnn_cell<'a>(c: &Call<'a>, at: usize, input: &'a [f32]) -> HalResult<recurrent::RnnInputs<'a>> {
    Ok(recurrent::RnnInputs {
        input,
        weights: c.f(at)?,
        recurrent_weights: c.f(at + 1)?,
        bias: c.f(at + 2)?,
        hidden_state_in: c.f(at + 3)?,
    })
}

/// The next final-state output, or `spare` scratch where the operation has none.
fn state_or<'s, 'a: 's>(
    states: &mut std::slice::IterMut<'s, TensorMut<'a>>,
    spare: &'s mut [f32],
) -> HalResult<&'s mut [f32]> {
    match states.next() {
        Some(t) => t.f32_mut(),
        None => Ok(spare),
    }
}

fn sequence_rnn(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::SeqRnn(p) = c.params else {
        return Err(mismatch(c));
    };
    check_outputs(c)?;
    let seq = seq_dims(&p.seq);
    let batch = seq.batch;
    let bidirectional = p.bw_units > 0;
    let (fw_units, bw_units) = (p.fw_units as usize, p.bw_units as usize);
    let input_size = p.input_size as usize;
    let aux_size = p.aux_size as usize;
    let a = act(p.act);
    let x = c.f(0)?;
    let fw = rnn_cell(c, 1, x)?;
    let fw_dims = recurrent::RnnDims {
        batch,
        input_size,
        num_units: fw_units,
    };
    let merged = !bidirectional || p.seq.merge_outputs;
    let (sequences, states) = split_outputs(outs, if merged { 1 } else { 2 });
    let width = fw_units + bw_units * usize::from(bidirectional && merged);
    let aux = match p.linking {
        AuxLinking::Cross => Some(SeqAux {
            input: c.f(9)?,
            size: aux_size,
        }),
        _ => None,
    };
    let (bw_input, bw_input_size) = match p.linking {
        AuxLinking::Parallel => (c.f(9)?, aux_size),
        _ => (x, input_size),
    };
    let bw_dims = recurrent::RnnDims {
        batch,
        input_size: bw_input_size,
        num_units: bw_units,
    };
    let step_len = sequence::rnn_scratch_len(fw_dims, aux_size)
        .max(sequence::rnn_scratch_len(bw_dims, aux_size));
    let spare_states = batch * (fw_units + bw_units);
    with_scratch(step_len + spare_states, |scratch| -> HalResult<()> {
        let (step, spare) = scratch.split_at_mut(step_len);
        let (spare_fw, spare_bw) = spare.split_at_mut(batch * fw_units);
        let (fw_state, bw_state) = match states {
            [] => (spare_fw, spare_bw),
            [h] => (h.f32_mut()?, spare_bw),
            [h_fw, h_bw, ..] => (h_fw.f32_mut()?, h_bw.f32_mut()?),
        };
        let (first, rest) = sequences.split_first_mut().ok_or_else(|| mismatch(c))?;
        let out = first.f32_mut()?;
        sequence::rnn_sequence_f32(
            seq,
            fw_dims,
            &fw,
            aux.map(|s| c.f(10).map(|w| (s, w))).transpose()?,
            a,
            false,
            SeqOutput {
                data: out,
                width,
                offset: 0,
            },
            fw_state,
            step,
        );
        if !bidirectional {
            return Ok(());
        }
        let bw = rnn_cell(c, 5, bw_input)?;
        let (data, width, offset) = match rest.first_mut() {
            Some(t) => (t.f32_mut()?, bw_units, 0),
            None => (out, width, fw_units),
        };
        sequence::rnn_sequence_f32(
            seq,
            bw_dims,
            &bw,
            aux.map(|s| c.f(11).map(|w| (s, w))).transpose()?,
            a,
            true,
            SeqOutput {
                data,
                width,
                offset,
            },
            bw_state,
            step,
        );
        Ok(())
    })?
}

fn sequence_lstm(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::SeqLstm(p) = c.params else {
        return Err(mismatch(c));
    };
    check_outputs(c)?;
    let seq = seq_dims(&p.seq);
    let batch = seq.batch;
    let aux_size = p.aux_size as usize;
    let x = c.f(0)?;
    let (fw_slots, bw_slots) = match p.bw {
        None => (
            LstmSlots {
                layer_norm: 24,
                ..LSTM_SLOTS
            },
            None,
        ),
        Some(_) => (
            LstmSlots {
                weights: 1,
                output_state: 35,
                cell_state: 36,
                layer_norm: 53,
            },
            Some(LstmSlots {
                weights: 18,
                output_state: 37,
                cell_state: 38,
                layer_norm: 57,
            }),
        ),
    };
    let aux = |first: usize| -> HalResult<Option<recurrent::LstmAux>> {
        if p.linking != AuxLinking::Cross {
            return Ok(None);
        }
        Ok(Some(recurrent::LstmAux {
            input: c.f(39)?,
            aux_size,
            to_input: c.opt_f(first)?,
            to_forget: c.f(first + 1)?,
            to_cell: c.f(first + 2)?,
            to_output: c.f(first + 3)?,
        }))
    };
    let mut fw = lstm_inputs(c, &fw_slots, &p.fw, x)?;
    fw.aux = aux(40)?;
    let fw_dims = lstm_dims(&p.fw);
    let (fw_out, bw_out) = (
        p.fw.output_size as usize,
        p.bw.map_or(0, |b| b.output_size as usize),
    );
    let merged = p.bw.is_none() || p.seq.merge_outputs;
    let width = fw_out + if merged { bw_out } else { 0 };
    let step_len = sequence::lstm_scratch_len(fw_dims, aux_size)
        .max(p.bw.map_or(0, |b| sequence::lstm_scratch_len(lstm_dims(&b), aux_size)));
    let state_len = |q: &LstmParams| batch * (q.output_size + q.units) as usize;
    let spare_len = state_len(&p.fw) + p.bw.as_ref().map_or(0, state_len);
    let (sequences, states) = split_outputs(outs, if merged { 1 } else { 2 });
    with_scratch(step_len + spare_len, |scratch| -> HalResult<()> {
        let (step, spare) = scratch.split_at_mut(step_len);
        let (spare_h_fw, spare) = spare.split_at_mut(batch * fw_out);
        let (spare_c_fw, spare) = spare.split_at_mut(batch * p.fw.units as usize);
        let (spare_h_bw, spare_c_bw) = spare.split_at_mut(batch * bw_out);
        let mut states = states.iter_mut();
        let h_fw = state_or(&mut states, spare_h_fw)?;
        let c_fw = state_or(&mut states, spare_c_fw)?;
        let (first, rest) = sequences.split_first_mut().ok_or_else(|| mismatch(c))?;
        let out = first.f32_mut()?;
        sequence::lstm_sequence_f32(
            seq,
            fw_dims,
            &fw,
            lstm_params(&p.fw)?,
            false,
            SeqOutput {
                data: out,
                width,
                offset: 0,
            },
            h_fw,
            c_fw,
            step,
        );
        let (Some(bw_p), Some(bw_slots)) = (p.bw, bw_slots) else {
            return Ok(());
        };
        let h_bw = state_or(&mut states, spare_h_bw)?;
        let c_bw = state_or(&mut states, spare_c_bw)?;
        let bw_input = match p.linking {
            AuxLinking::Parallel => c.f(39)?,
            _ => x,
        };
        let mut bw = lstm_inputs(c, &bw_slots, &bw_p, bw_input)?;
        bw.aux = aux(44)?;
        let (data, width, offset) = match rest.first_mut() {
            Some(t) => (t.f32_mut()?, bw_out, 0),
            None => (out, width, fw_out),
        };
        sequence::lstm_sequence_f32(
            seq,
            lstm_dims(&bw_p),
            &bw,
            lstm_params(&bw_p)?,
            true,
            SeqOutput {
                data,
                width,
                offset,
            },
            h_bw,
            c_bw,
            step,
        );
        Ok(())
    })?
}

fn rnn(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Rnn {
        batch,
        input_size,
        units,
        act: a,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let dims = recurrent::RnnDims {
        batch: *batch as usize,
        input_size: *input_size as usize,
        num_units: *units as usize,
    };
    let inputs = recurrent::RnnInputs {
        input: c.f(0)?,
        weights: c.f(1)?,
        recurrent_weights: c.f(2)?,
        bias: c.f(3)?,
        hidden_state_in: c.f(4)?,
    };
    let [state, output] = outs else {
        return Err(mismatch(c));
    };
    recurrent::rnn_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
    Ok(())
}

fn svdf(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Svdf {
        batch,
        input_size,
        num_filters,
        memory_size,
        rank,
        act: a,
        ..
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let dims = recurrent::SvdfDims {
        batch: *batch as usize,
        input_size: *input_size as usize,
        num_filters: *num_filters as usize,
        memory_size: *memory_size as usize,
        rank: *rank as usize,
    };
    let inputs = recurrent::SvdfInputs {
        input: c.f(0)?,
        weights_feature: c.f(1)?,
        weights_time: c.f(2)?,
        bias: c.opt_f(3)?,
        state_in: c.f(4)?,
    };
    let [state, output] = outs else {
        return Err(mismatch(c));
    };
    recurrent::svdf_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
    Ok(())
}

fn quantized_lstm_16(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::QuantizedLstm16 {
        batch,
        input_size,
        units,
        weights_zero_point,
        bias_scale,
    } = *c.params
    else {
        return Err(mismatch(c));
    };
    let d = QLstm16Dims {
        batch: batch as usize,
        input_size: input_size as usize,
        units: units as usize,
        weights_zero_point,
        bias_scale,
    };
    let inputs = QLstm16Inputs {
        input: c.u(0)?,
        input_weights: [c.u(1)?, c.u(2)?, c.u(3)?, c.u(4)?],
        recurrent_weights: [c.u(5)?, c.u(6)?, c.u(7)?, c.u(8)?],
        biases: [c.i(9)?, c.i(10)?, c.i(11)?, c.i(12)?],
        prev_cell: c.t(13)?.i16()?,
        prev_output: c.u(14)?,
    };
    let [cell, output] = outs else {
        return Err(mismatch(c));
    };
    QLSTM_GATES.with(|gates| {
        let mut gates = gates.borrow_mut();
        if gates.len() < 4 * d.units {
            gates.resize(4 * d.units, 0);
        }
        quantized_16bit_lstm(d, &inputs, &mut gates, cell.i16_mut()?, output.u8_mut()?);
        Ok(())
    })
}

thread_local! {
    /// The gate pre-activations of one batch row (grows to the widest cell once).
    static QLSTM_GATES: RefCell<Vec<i16>> = const { RefCell::new(Vec::new()) };
}

/// QUANTIZED_LSTM (NNAPI 1.3). The signed activations arrive as their uint8 image, so their
/// zero points are the image's less 128; the hidden zero point is a scalar of the signed
/// domain and stays as given.
fn quantized_lstm_1_3(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::QuantizedLstm(p) = c.params else {
        return Err(mismatch(c));
    };
    let d = QLstmDims {
        batch: p.batch as usize,
        input_size: p.input_size as usize,
        units: p.units as usize,
        output_size: p.output_size as usize,
    };
    let present = |i: usize| matches!(c.values.get(i), Some(Some(_)));
    let opt_u = |i: usize| present(i).then(|| c.u(i)).transpose();
    let opt_i = |i: usize| present(i).then(|| c.i(i)).transpose();
    let opt_h = |i: usize| present(i).then(|| c.t(i)?.i16()).transpose();
    let scale = |i: usize| if present(i) { c.q(i).scale } else { 0.0 };
    let quant = QLstmQuant {
        input_scale: c.q(0).scale,
        input_zero_point: c.q(0).zero_point - 128,
        input_weights_scale: [scale(1), scale(2), scale(3), scale(4)],
        recurrent_weights_scale: [scale(5), scale(6), scale(7), scale(8)],
        cell_weights_scale: [scale(9), scale(10), 0.0, scale(11)],
        layer_norm_scale: [scale(20), scale(21), scale(22), scale(23)],
        intermediate_scale: p.intermediate_scales,
        projection_scale: scale(16),
        output_scale: c.q(18).scale,
        output_zero_point: c.q(18).zero_point - 128,
        cell_shift: p.cell_shift,
        cell_scale: c.q(19).scale,
        hidden_scale: p.hidden_scale,
        hidden_zero_point: p.hidden_zero_point,
        cell_clip: p.cell_clip,
        projection_clip: p.projection_clip,
    };
    let inputs = QLstmInputs {
        input: c.u(0)?,
        input_weights: [opt_u(1)?, opt_u(2)?, opt_u(3)?, opt_u(4)?],
        recurrent_weights: [opt_u(5)?, opt_u(6)?, opt_u(7)?, opt_u(8)?],
        cell_weights: [opt_h(9)?, opt_h(10)?, None, opt_h(11)?],
        biases: [opt_i(12)?, opt_i(13)?, opt_i(14)?, opt_i(15)?],
        projection_weights: opt_u(16)?,
        projection_bias: opt_i(17)?,
        prev_output: c.u(18)?,
        prev_cell: c.t(19)?.i16()?,
        layer_norm: [opt_h(20)?, opt_h(21)?, opt_h(22)?, opt_h(23)?],
    };
    let [state, cell, output] = outs else {
        return Err(mismatch(c));
    };
    QLSTM_GATES.with(|gates| {
        let mut gates = gates
            .try_borrow_mut()
            .map_err(|_| HalError::GeneralFailure("recurrent scratch is in use".into()))?;
        let len = qlstm_scratch_len(d);
        if gates.len() < len {
            gates.resize(len, 0);
        }
        quantized_lstm(
            d,
            &quant,
            &inputs,
            &mut gates,
            QLstmOutputs {
                output_state: state.u8_mut()?,
                cell_state: cell.i16_mut()?,
                output: output.u8_mut()?,
            },
        );
        Ok(())
    })
}
