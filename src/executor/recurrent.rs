//! Registrations of the recurrent family (types.hal 1.0 `OperationType`): LSTM (16), with
//! NNAPI 1.2's layer normalisation, RNN (24) and SVDF (27), float32, one time step each; and
//! NNAPI 1.2's UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN and _LSTM (float32, with NNAPI
//! 1.3's final-state outputs); QUANTIZED_16BIT_LSTM (NNAPI 1.2) and QUANTIZED_LSTM (NNAPI 1.3,
//! signed quant8 run as its uint8 image), one quantized step each with a TENSOR_QUANT16_SYMM
//! cell state.
//!
//! The float32 LSTM and RNN forms pack their gate weights at prepare when they are constants
//! ([`PackedRecurrent`]): every direction runs on the GEMM micro-kernels FULLY_CONNECTED runs
//! on (`nnhal_kernels::recurrent::fast`), the input contribution of a whole sequence as one
//! GEMM before the recurrence, and the step scratch comes from a small pool the plan owns,
//! sized at prepare. Weights given at execution run the reference loops on a per-thread
//! scratch that grows to the largest operation once.

use super::{act, elementwise_work, mismatch, Call, OpImpl, PackArgs, Packed, WorkArgs};
use crate::tensor::TensorMut;
use crossbeam_queue::ArrayQueue;
use nnhal_hal::shape::{AuxLinking, LstmParams, Params, SeqParams};
use nnhal_hal::{HalError, HalResult, OperandLifeTime, OperandType, OperationType};
use nnhal_kernels::recurrent::fast::{self, LstmStates, PackedLstm, PackedRnn};
use nnhal_kernels::recurrent::qlstm::{
    qlstm_scratch_len, quantized_lstm, QLstmDims, QLstmInputs, QLstmOutputs, QLstmQuant,
};
use nnhal_kernels::recurrent::quantized::{quantized_16bit_lstm, QLstm16Dims, QLstm16Inputs};
use nnhal_kernels::recurrent::reference as recurrent;
use nnhal_kernels::recurrent::sequence::{self, SeqAux, SeqDims, SeqOutput};
use nnhal_kernels::Activation;
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
        (UnidirectionalSequenceLstm, F) => &SEQUENCE_LSTM,
        (BidirectionalSequenceLstm, F) => &BIDIRECTIONAL_SEQUENCE_LSTM,
        (Quantized16bitLstm, Q) => &QUANTIZED_LSTM_16,
        (QuantizedLstm, Q) => &QUANTIZED_LSTM,
        _ => return None,
    })
}

registration!(LSTM, pack_lstm, lstm, recurrent_work, false, LSTM_PACKS);
registration!(RNN, pack_rnn, rnn, recurrent_work, false, RNN_PACKS);
registration!(SVDF, svdf, recurrent_work, partial);
registration!(
    SEQUENCE_RNN,
    pack_sequence_rnn,
    sequence_rnn,
    recurrent_work,
    false,
    SEQUENCE_RNN_PACKS
);
registration!(
    SEQUENCE_LSTM,
    pack_sequence_lstm,
    sequence_lstm,
    recurrent_work,
    false,
    SEQUENCE_LSTM_PACKS
);
registration!(
    BIDIRECTIONAL_SEQUENCE_LSTM,
    pack_sequence_lstm,
    sequence_lstm,
    recurrent_work,
    false,
    BIDIRECTIONAL_LSTM_PACKS
);
registration!(QUANTIZED_LSTM, quantized_lstm_1_3, recurrent_work, partial);
registration!(
    QUANTIZED_LSTM_16,
    quantized_lstm_16,
    recurrent_work,
    partial
);

/// The weight inputs a packed operation no longer reads: LSTM's 1–17 and layer-norm weights
/// 23–26; UNIDIRECTIONAL_SEQUENCE_LSTM's 1–17 and 24–27; BIDIRECTIONAL_SEQUENCE_LSTM's 1–34,
/// the auxiliary weights 40–47 and the layer-norm weights 53–60; RNN's 1–3; the sequence
/// RNNs' 1–3, the backward 5–7 and the auxiliary weights 10–11.
const LSTM_PACKS: &[usize] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 24, 25, 26,
];
const SEQUENCE_LSTM_PACKS: &[usize] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 25, 26, 27,
];
const BIDIRECTIONAL_LSTM_PACKS: &[usize] = &[
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
    27, 28, 29, 30, 31, 32, 33, 34, 40, 41, 42, 43, 44, 45, 46, 47, 53, 54, 55, 56, 57, 58, 59, 60,
];
const RNN_PACKS: &[usize] = &[1, 2, 3];
const SEQUENCE_RNN_PACKS: &[usize] = &[1, 2, 3, 5, 6, 7, 10, 11];

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

// ---- packed cells and the plan's scratch ---------------------------------------------------

/// What a float32 LSTM or RNN operation packs at prepare: each direction's cell on the GEMM
/// micro-kernels, and the step scratch of the operation (the cells' scratch and the spare
/// final states it has no outputs for), in a small pool: an execution takes a buffer and gives
/// it back, so executions running at once each have one and the steady state allocates
/// nothing.
#[derive(Debug)]
pub struct PackedRecurrent {
    cells: Cells,
    scratch_len: usize,
    scratch: ArrayQueue<Vec<f32>>,
}

/// The packed directions: forward, and backward for the bidirectional operations. (One per
/// operation, behind the box of [`Packed::Recurrent`]: the variants' sizes do not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum Cells {
    Lstm(PackedLstm, Option<PackedLstm>),
    Rnn(PackedRnn, Option<PackedRnn>),
}

/// Scratch buffers kept per operation, as many as the plan keeps arenas.
const POOLED_SCRATCH: usize = 4;

/// `len` zeros, or GENERAL_FAILURE when they cannot be allocated.
fn zeroed(len: usize) -> HalResult<Vec<f32>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        HalError::GeneralFailure(format!("cannot allocate {len} floats of scratch"))
    })?;
    v.resize(len, 0.0);
    Ok(v)
}

impl PackedRecurrent {
    /// The cells with one scratch buffer of `scratch_len` values allocated now; `None` when it
    /// cannot be (the operation then runs the reference loops).
    fn packed(cells: Cells, scratch_len: usize) -> Option<Packed> {
        let scratch = ArrayQueue::new(POOLED_SCRATCH);
        scratch.push(zeroed(scratch_len).ok()?).ok()?;
        Some(Packed::Recurrent(Box::new(PackedRecurrent {
            cells,
            scratch_len,
            scratch,
        })))
    }

    /// Runs `f` on `len` values of a pooled buffer (one allocated only when every pooled
    /// buffer is in use by another execution).
    fn with_scratch<R>(&self, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> HalResult<R> {
        if len > self.scratch_len {
            return with_scratch(len, f);
        }
        let mut buf = match self.scratch.pop() {
            Some(buf) => buf,
            None => zeroed(self.scratch_len)?,
        };
        let result = f(&mut buf[..len]);
        // A full pool drops the extra buffer.
        let _ = self.scratch.push(buf);
        Ok(result)
    }

    /// Bytes of packed weights.
    pub fn packed_bytes(&self) -> usize {
        match &self.cells {
            Cells::Lstm(fw, bw) => {
                fw.packed_bytes() + bw.as_ref().map_or(0, PackedLstm::packed_bytes)
            }
            Cells::Rnn(fw, bw) => {
                fw.packed_bytes() + bw.as_ref().map_or(0, PackedRnn::packed_bytes)
            }
        }
    }
}

/// The recurrent scratch of a call: the plan's pool when the operation was packed, this
/// thread's otherwise.
fn call_scratch<R>(c: &Call, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> HalResult<R> {
    match c.packed {
        Some(Packed::Recurrent(p)) => p.with_scratch(len, f),
        _ => with_scratch(len, f),
    }
}

fn packed_lstm<'a>(c: &Call<'a>) -> Option<(&'a PackedLstm, Option<&'a PackedLstm>)> {
    match c.packed {
        Some(Packed::Recurrent(p)) => match &p.cells {
            Cells::Lstm(fw, bw) => Some((fw, bw.as_ref())),
            Cells::Rnn(..) => None,
        },
        _ => None,
    }
}

fn packed_rnn<'a>(c: &Call<'a>) -> Option<(&'a PackedRnn, Option<&'a PackedRnn>)> {
    match c.packed {
        Some(Packed::Recurrent(p)) => match &p.cells {
            Cells::Rnn(fw, bw) => Some((fw, bw.as_ref())),
            Cells::Lstm(..) => None,
        },
        _ => None,
    }
}

/// Whether every input at `positions` is a constant or omitted: what packing needs.
fn constant_or_omitted(a: &PackArgs, positions: impl IntoIterator<Item = usize>) -> bool {
    positions.into_iter().all(|pos| {
        a.op.inputs.get(pos).is_some_and(|&i| {
            a.constants.get(i).is_some_and(Option::is_some)
                || a.model.operands[i].lifetime == OperandLifeTime::NoValue
        })
    })
}

/// The float32 values of the constant at input `pos`, `None` when it is omitted.
fn constant_f32<'a>(a: &PackArgs<'a>, pos: usize) -> HalResult<Option<&'a [f32]>> {
    a.constant(pos).map(|t| t.f32()).transpose()
}

// ---- LSTM ------------------------------------------------------------------------------------

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

/// The slots of a sequence LSTM's forward and (bidirectional) backward cells.
fn sequence_slots(p: &nnhal_hal::shape::SeqLstmParams) -> (LstmSlots, Option<LstmSlots>) {
    match p.bw {
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
    }
}

/// The first auxiliary weight input of BIDIRECTIONAL_SEQUENCE_LSTM's forward and backward
/// cells, and the auxiliary input.
const AUX_WEIGHTS: (usize, usize) = (40, 44);
const AUX_INPUT: usize = 39;

/// One cell's tensors from `get` (a value by input position, `None` when omitted), reading
/// `input` and the initial states `states`.
fn lstm_cell<'a>(
    get: &dyn Fn(usize) -> HalResult<Option<&'a [f32]>>,
    s: &LstmSlots,
    p: &LstmParams,
    input: &'a [f32],
    states: (&'a [f32], &'a [f32]),
) -> HalResult<recurrent::LstmInputs<'a>> {
    let at = |k: usize| s.weights + k - 1;
    let opt = |k: usize| get(at(k));
    let w = |k: usize| {
        get(at(k))?.ok_or_else(|| HalError::InvalidArgument(format!("input {} is missing", at(k))))
    };
    let ln_w = |i: usize| {
        get(i)?.ok_or_else(|| HalError::InvalidArgument(format!("input {i} is missing")))
    };
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
        output_state_in: states.0,
        cell_state_in: states.1,
        layer_norm: if p.layer_norm {
            Some(recurrent::LstmLayerNorm {
                input: get(s.layer_norm)?,
                forget: ln_w(s.layer_norm + 1)?,
                cell: ln_w(s.layer_norm + 2)?,
                output: ln_w(s.layer_norm + 3)?,
            })
        } else {
            None
        },
        aux: None,
    })
}

/// One cell's tensors as bound to a call, reading `input` as its input.
fn lstm_inputs<'a>(
    c: &Call<'a>,
    s: &LstmSlots,
    p: &LstmParams,
    input: &'a [f32],
) -> HalResult<recurrent::LstmInputs<'a>> {
    let states = (c.f(s.output_state)?, c.f(s.cell_state)?);
    lstm_cell(&|i| c.opt_f(i), s, p, input, states)
}

/// The auxiliary weights of a cross-linked cell from `get`, from input `first` on.
fn lstm_aux<'a>(
    get: &dyn Fn(usize) -> HalResult<Option<&'a [f32]>>,
    first: usize,
    input: &'a [f32],
    aux_size: usize,
) -> HalResult<recurrent::LstmAux<'a>> {
    let w = |i: usize| {
        get(i)?.ok_or_else(|| HalError::InvalidArgument(format!("input {i} is missing")))
    };
    Ok(recurrent::LstmAux {
        input,
        aux_size,
        to_input: get(first)?,
        to_forget: w(first + 1)?,
        to_cell: w(first + 2)?,
        to_output: w(first + 3)?,
    })
}

/// The packed cell at `s` (with the auxiliary weights from `aux` on, if any), when every
/// weight of it is a constant or omitted and its parameters are valid.
fn pack_lstm_cell(
    a: &PackArgs,
    s: &LstmSlots,
    p: &LstmParams,
    aux: Option<(usize, usize)>,
) -> HalResult<Option<PackedLstm>> {
    let weights = (s.weights..s.weights + 17)
        .chain((s.layer_norm..s.layer_norm + 4).filter(|_| p.layer_norm))
        .chain(aux.into_iter().flat_map(|(first, _)| first..first + 4));
    if !constant_or_omitted(a, weights) {
        return Ok(None);
    }
    let Ok(params) = lstm_params(p) else {
        return Ok(None);
    };
    let get = |i: usize| constant_f32(a, i);
    let mut inputs = lstm_cell(&get, s, p, &[], (&[], &[]))?;
    if let Some((first, size)) = aux {
        inputs.aux = Some(lstm_aux(&get, first, &[], size)?);
    }
    Ok(PackedLstm::pack(a.kernels, lstm_dims(p), &inputs, params))
}

fn pack_lstm(a: &PackArgs) -> HalResult<Option<Packed>> {
    let Params::Lstm(p) = a.params else {
        return Ok(None);
    };
    let Some(cell) = pack_lstm_cell(a, &LSTM_SLOTS, p, None)? else {
        return Ok(None);
    };
    let len = cell.scratch_len(step_dims(p.batch));
    Ok(PackedRecurrent::packed(Cells::Lstm(cell, None), len))
}

/// One time step of `batch` rows as a sequence.
fn step_dims(batch: u32) -> SeqDims {
    SeqDims {
        max_time: 1,
        batch: batch as usize,
        time_major: true,
    }
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
    let [scratch, state, cell, output] = outs else {
        return Err(mismatch(c));
    };
    if let Some((packed, _)) = packed_lstm(c) {
        let seq = step_dims(p.batch);
        let (x, h0, c0) = (
            c.f(0)?,
            c.f(LSTM_SLOTS.output_state)?,
            c.f(LSTM_SLOTS.cell_state)?,
        );
        let out = SeqOutput {
            data: output.f32_mut()?,
            width: packed.output_size(),
            offset: 0,
        };
        let states = LstmStates {
            output_state_in: h0,
            cell_state_in: c0,
            output_state_out: state.f32_mut()?,
            cell_state_out: cell.f32_mut()?,
        };
        // The gate scratch output is not part of the result: it stays zero.
        return call_scratch(c, packed.scratch_len(seq), |s| {
            fast::lstm_sequence_packed(packed, seq, x, None, false, out, states, s)
        });
    }
    let inputs = lstm_inputs(c, &LSTM_SLOTS, p, c.f(0)?)?;
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
    /// The sequence operations' step scratch when their weights are not packed: grown to the
    /// largest need once, then reused.
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

// ---- RNN -------------------------------------------------------------------------------------

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

/// The packed RNN cell whose weights, recurrent weights and bias are inputs `at`..`at + 3`
/// (with auxiliary weights at `aux.0` of width `aux.1`), when they are all constants.
fn pack_rnn_cell(
    a: &PackArgs,
    at: usize,
    dims: recurrent::RnnDims,
    aux: Option<(usize, usize)>,
) -> HalResult<Option<PackedRnn>> {
    if !constant_or_omitted(a, (at..at + 3).chain(aux.map(|(i, _)| i))) {
        return Ok(None);
    }
    let (Some(w), Some(r), Some(b)) = (
        constant_f32(a, at)?,
        constant_f32(a, at + 1)?,
        constant_f32(a, at + 2)?,
    ) else {
        return Ok(None);
    };
    let aux = match aux {
        Some((i, size)) => match constant_f32(a, i)? {
            Some(w) => Some((w, size)),
            None => return Ok(None),
        },
        None => None,
    };
    Ok(PackedRnn::pack(a.kernels, dims, w, r, b, aux))
}

fn pack_rnn(a: &PackArgs) -> HalResult<Option<Packed>> {
    let Params::Rnn {
        batch,
        input_size,
        units,
        ..
    } = *a.params
    else {
        return Ok(None);
    };
    let dims = recurrent::RnnDims {
        batch: batch as usize,
        input_size: input_size as usize,
        num_units: units as usize,
    };
    let Some(cell) = pack_rnn_cell(a, 1, dims, None)? else {
        return Ok(None);
    };
    let len = cell.scratch_len(step_dims(batch));
    Ok(PackedRecurrent::packed(Cells::Rnn(cell, None), len))
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
    let [state, output] = outs else {
        return Err(mismatch(c));
    };
    if let Some((packed, _)) = packed_rnn(c) {
        let seq = step_dims(*batch);
        let (x, h0) = (c.f(0)?, c.f(4)?);
        let out = SeqOutput {
            data: output.f32_mut()?,
            width: packed.units(),
            offset: 0,
        };
        let h = state.f32_mut()?;
        return call_scratch(c, packed.scratch_len(seq), |s| {
            fast::rnn_sequence_packed(packed, seq, x, None, h0, act(*a), false, out, h, s)
        });
    }
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
    recurrent::rnn_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
    Ok(())
}

/// One direction of a sequence RNN: its packed cell, or its tensors for the reference loops.
enum RnnDirection<'a> {
    Packed {
        cell: &'a PackedRnn,
        input: &'a [f32],
        aux: Option<&'a [f32]>,
        hidden_in: &'a [f32],
    },
    Reference {
        cell: recurrent::RnnInputs<'a>,
        dims: recurrent::RnnDims,
        aux: Option<(SeqAux<'a>, &'a [f32])>,
    },
}

impl RnnDirection<'_> {
    fn step_len(&self, seq: SeqDims) -> usize {
        match self {
            RnnDirection::Packed { cell, .. } => cell.scratch_len(seq),
            RnnDirection::Reference { dims, aux, .. } => {
                sequence::rnn_scratch_len(*dims, aux.map_or(0, |(a, _)| a.size))
            }
        }
    }

    fn run(
        &self,
        seq: SeqDims,
        a: Activation,
        reverse: bool,
        out: SeqOutput<'_>,
        state: &mut [f32],
        step: &mut [f32],
    ) {
        match self {
            RnnDirection::Packed {
                cell,
                input,
                aux,
                hidden_in,
            } => fast::rnn_sequence_packed(
                cell, seq, input, *aux, hidden_in, a, reverse, out, state, step,
            ),
            RnnDirection::Reference { cell, dims, aux } => {
                sequence::rnn_sequence_f32(seq, *dims, cell, *aux, a, reverse, out, state, step)
            }
        }
    }
}

/// A sequence RNN direction whose cell is inputs `at`..`at + 4`, reading `input` (and `aux`:
/// the auxiliary input, its width and the position of its weights): on its packed cell when
/// there is one, else on the reference loops.
fn rnn_direction<'a>(
    c: &Call<'a>,
    at: usize,
    input: &'a [f32],
    dims: recurrent::RnnDims,
    aux: Option<(&'a [f32], usize, usize)>,
    cell: Option<&'a PackedRnn>,
) -> HalResult<RnnDirection<'a>> {
    Ok(match cell {
        Some(cell) => RnnDirection::Packed {
            cell,
            input,
            aux: aux.map(|(x, _, _)| x),
            hidden_in: c.f(at + 3)?,
        },
        None => RnnDirection::Reference {
            cell: rnn_cell(c, at, input)?,
            dims,
            aux: match aux {
                Some((input, size, weights)) => Some((SeqAux { input, size }, c.f(weights)?)),
                None => None,
            },
        },
    })
}

fn pack_sequence_rnn(a: &PackArgs) -> HalResult<Option<Packed>> {
    let Params::SeqRnn(p) = a.params else {
        return Ok(None);
    };
    let seq = seq_dims(&p.seq);
    let (input_size, aux_size) = (p.input_size as usize, p.aux_size as usize);
    let cross = p.linking == AuxLinking::Cross;
    let dims = |units: u32, input_size: usize| recurrent::RnnDims {
        batch: seq.batch,
        input_size,
        num_units: units as usize,
    };
    let Some(fw) = pack_rnn_cell(
        a,
        1,
        dims(p.fw_units, input_size),
        cross.then_some((10, aux_size)),
    )?
    else {
        return Ok(None);
    };
    let bw = if p.bw_units > 0 {
        let bw_input = match p.linking {
            AuxLinking::Parallel => aux_size,
            _ => input_size,
        };
        match pack_rnn_cell(
            a,
            5,
            dims(p.bw_units, bw_input),
            cross.then_some((11, aux_size)),
        )? {
            Some(cell) => Some(cell),
            None => return Ok(None),
        }
    } else {
        None
    };
    let step_len = fw
        .scratch_len(seq)
        .max(bw.as_ref().map_or(0, |b| b.scratch_len(seq)));
    let spare = seq.batch * (p.fw_units + p.bw_units) as usize;
    Ok(PackedRecurrent::packed(
        Cells::Rnn(fw, bw),
        step_len + spare,
    ))
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
    let merged = !bidirectional || p.seq.merge_outputs;
    let (sequences, states) = split_outputs(outs, if merged { 1 } else { 2 });
    let width = fw_units + bw_units * usize::from(bidirectional && merged);
    let cross = p.linking == AuxLinking::Cross;
    let aux_input = cross.then(|| c.f(9)).transpose()?;
    let (bw_input, bw_input_size) = match p.linking {
        AuxLinking::Parallel => (c.f(9)?, aux_size),
        _ => (x, input_size),
    };
    let packed = packed_rnn(c);
    let fw_dims = recurrent::RnnDims {
        batch,
        input_size,
        num_units: fw_units,
    };
    let fw_aux = aux_input.map(|x| (x, aux_size, 10));
    let fw = rnn_direction(c, 1, x, fw_dims, fw_aux, packed.map(|(f, _)| f))?;
    let bw = if bidirectional {
        let dims = recurrent::RnnDims {
            batch,
            input_size: bw_input_size,
            num_units: bw_units,
        };
        let aux = aux_input.map(|x| (x, aux_size, 11));
        let cell = packed.and_then(|(_, b)| b);
        Some(rnn_direction(c, 5, bw_input, dims, aux, cell)?)
    } else {
        None
    };
    let step_len = fw
        .step_len(seq)
        .max(bw.as_ref().map_or(0, |d| d.step_len(seq)));
    let spare_states = batch * (fw_units + bw_units);
    call_scratch(c, step_len + spare_states, |scratch| -> HalResult<()> {
        let (step, spare) = scratch.split_at_mut(step_len);
        let (spare_fw, spare_bw) = spare.split_at_mut(batch * fw_units);
        let (fw_state, bw_state) = match states {
            [] => (spare_fw, spare_bw),
            [h] => (h.f32_mut()?, spare_bw),
            [h_fw, h_bw, ..] => (h_fw.f32_mut()?, h_bw.f32_mut()?),
        };
        let (first, rest) = sequences.split_first_mut().ok_or_else(|| mismatch(c))?;
        let out = first.f32_mut()?;
        let fw_out = SeqOutput {
            data: out,
            width,
            offset: 0,
        };
        fw.run(seq, a, false, fw_out, fw_state, step);
        let Some(bw) = bw else {
            return Ok(());
        };
        let (data, width, offset) = match rest.first_mut() {
            Some(t) => (t.f32_mut()?, bw_units, 0),
            None => (out, width, fw_units),
        };
        let bw_out = SeqOutput {
            data,
            width,
            offset,
        };
        bw.run(seq, a, true, bw_out, bw_state, step);
        Ok(())
    })?
}

// ---- sequence LSTM ---------------------------------------------------------------------------

/// One direction of a sequence LSTM: its packed cell, or its tensors for the reference loops.
/// (Two at most per call, on the stack: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
enum LstmDirection<'a> {
    Packed {
        cell: &'a PackedLstm,
        input: &'a [f32],
        aux: Option<&'a [f32]>,
        states: (&'a [f32], &'a [f32]),
    },
    Reference {
        inputs: recurrent::LstmInputs<'a>,
        dims: recurrent::LstmDims,
        params: recurrent::LstmParams,
    },
}

impl LstmDirection<'_> {
    fn step_len(&self, seq: SeqDims) -> usize {
        match self {
            LstmDirection::Packed { cell, .. } => cell.scratch_len(seq),
            LstmDirection::Reference { inputs, dims, .. } => {
                sequence::lstm_scratch_len(*dims, inputs.aux.map_or(0, |a| a.aux_size))
            }
        }
    }

    fn run(
        &self,
        seq: SeqDims,
        reverse: bool,
        out: SeqOutput<'_>,
        h: &mut [f32],
        cs: &mut [f32],
        step: &mut [f32],
    ) {
        match self {
            LstmDirection::Packed {
                cell,
                input,
                aux,
                states,
            } => {
                let states = LstmStates {
                    output_state_in: states.0,
                    cell_state_in: states.1,
                    output_state_out: h,
                    cell_state_out: cs,
                };
                fast::lstm_sequence_packed(cell, seq, input, *aux, reverse, out, states, step)
            }
            LstmDirection::Reference {
                inputs,
                dims,
                params,
            } => {
                sequence::lstm_sequence_f32(seq, *dims, inputs, *params, reverse, out, h, cs, step)
            }
        }
    }
}

/// A sequence LSTM direction whose cell sits at `s`, reading `input` (and `aux`: the
/// auxiliary input, its width and the position of its first weight): on its packed cell when
/// there is one, else on the reference loops.
fn lstm_direction<'a>(
    c: &Call<'a>,
    s: &LstmSlots,
    q: &LstmParams,
    input: &'a [f32],
    aux: Option<(&'a [f32], usize, usize)>,
    cell: Option<&'a PackedLstm>,
) -> HalResult<LstmDirection<'a>> {
    Ok(match cell {
        Some(cell) => LstmDirection::Packed {
            cell,
            input,
            aux: aux.map(|(x, _, _)| x),
            states: (c.f(s.output_state)?, c.f(s.cell_state)?),
        },
        None => {
            let mut inputs = lstm_inputs(c, s, q, input)?;
            if let Some((x, size, first)) = aux {
                inputs.aux = Some(lstm_aux(&|i| c.opt_f(i), first, x, size)?);
            }
            LstmDirection::Reference {
                inputs,
                dims: lstm_dims(q),
                params: lstm_params(q)?,
            }
        }
    })
}

fn pack_sequence_lstm(a: &PackArgs) -> HalResult<Option<Packed>> {
    let Params::SeqLstm(p) = a.params else {
        return Ok(None);
    };
    let seq = seq_dims(&p.seq);
    let aux_size = p.aux_size as usize;
    let cross = p.linking == AuxLinking::Cross;
    let (fw_slots, bw_slots) = sequence_slots(p);
    let Some(fw) = pack_lstm_cell(
        a,
        &fw_slots,
        &p.fw,
        cross.then_some((AUX_WEIGHTS.0, aux_size)),
    )?
    else {
        return Ok(None);
    };
    let bw = match (&p.bw, &bw_slots) {
        (Some(q), Some(s)) => {
            match pack_lstm_cell(a, s, q, cross.then_some((AUX_WEIGHTS.1, aux_size)))? {
                Some(cell) => Some(cell),
                None => return Ok(None),
            }
        }
        _ => None,
    };
    let step_len = fw
        .scratch_len(seq)
        .max(bw.as_ref().map_or(0, |b| b.scratch_len(seq)));
    Ok(PackedRecurrent::packed(
        Cells::Lstm(fw, bw),
        step_len + lstm_spare_len(p),
    ))
}

/// Spare final states for a sequence LSTM without state outputs.
fn lstm_spare_len(p: &nnhal_hal::shape::SeqLstmParams) -> usize {
    let state_len = |q: &LstmParams| p.seq.batch as usize * (q.output_size + q.units) as usize;
    state_len(&p.fw) + p.bw.as_ref().map_or(0, state_len)
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
    let (fw_slots, bw_slots) = sequence_slots(p);
    let cross = p.linking == AuxLinking::Cross;
    let aux_input = cross.then(|| c.f(AUX_INPUT)).transpose()?;
    let bw_input = match p.linking {
        AuxLinking::Parallel => c.f(AUX_INPUT)?,
        _ => x,
    };
    let packed = packed_lstm(c);
    let fw_aux = aux_input.map(|x| (x, aux_size, AUX_WEIGHTS.0));
    let fw = lstm_direction(c, &fw_slots, &p.fw, x, fw_aux, packed.map(|(f, _)| f))?;
    let bw = match (&p.bw, &bw_slots) {
        (Some(q), Some(s)) => {
            let aux = aux_input.map(|x| (x, aux_size, AUX_WEIGHTS.1));
            let cell = packed.and_then(|(_, b)| b);
            Some(lstm_direction(c, s, q, bw_input, aux, cell)?)
        }
        _ => None,
    };
    let (fw_out, bw_out) = (
        p.fw.output_size as usize,
        p.bw.map_or(0, |b| b.output_size as usize),
    );
    let merged = p.bw.is_none() || p.seq.merge_outputs;
    let width = fw_out + if merged { bw_out } else { 0 };
    let step_len = fw
        .step_len(seq)
        .max(bw.as_ref().map_or(0, |d| d.step_len(seq)));
    let (sequences, states) = split_outputs(outs, if merged { 1 } else { 2 });
    call_scratch(
        c,
        step_len + lstm_spare_len(p),
        |scratch| -> HalResult<()> {
            let (step, spare) = scratch.split_at_mut(step_len);
            let (spare_h_fw, spare) = spare.split_at_mut(batch * fw_out);
            let (spare_c_fw, spare) = spare.split_at_mut(batch * p.fw.units as usize);
            let (spare_h_bw, spare_c_bw) = spare.split_at_mut(batch * bw_out);
            let mut states = states.iter_mut();
            let h_fw = state_or(&mut states, spare_h_fw)?;
            let c_fw = state_or(&mut states, spare_c_fw)?;
            let (first, rest) = sequences.split_first_mut().ok_or_else(|| mismatch(c))?;
            let out = first.f32_mut()?;
            let fw_seq = SeqOutput {
                data: out,
                width,
                offset: 0,
            };
            fw.run(seq, false, fw_seq, h_fw, c_fw, step);
            let Some(bw) = bw else {
                return Ok(());
            };
            let h_bw = state_or(&mut states, spare_h_bw)?;
            let c_bw = state_or(&mut states, spare_c_bw)?;
            let (data, width, offset) = match rest.first_mut() {
                Some(t) => (t.f32_mut()?, bw_out, 0),
                None => (out, width, fw_out),
            };
            let bw_seq = SeqOutput {
                data,
                width,
                offset,
            };
            bw.run(seq, true, bw_seq, h_bw, c_bw, step);
            Ok(())
        },
    )?
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
