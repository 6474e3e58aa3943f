//! Signatures and shape rules of the recurrent family (types.hal 1.0 `OperationType`):
//! LSTM (16), with NNAPI 1.2's layer-normalised form, RNN (24) and SVDF (27), one time step
//! each; and NNAPI 1.2's sequence forms (NeuralNetworks.h `ANEURALNETWORKS_*`):
//! BIDIRECTIONAL_SEQUENCE_LSTM (42), BIDIRECTIONAL_SEQUENCE_RNN (43),
//! UNIDIRECTIONAL_SEQUENCE_LSTM (92) and UNIDIRECTIONAL_SEQUENCE_RNN (93), with NNAPI 1.3's
//! final-state outputs; QUANTIZED_16BIT_LSTM (73, NNAPI 1.2) and QUANTIZED_LSTM (95, NNAPI
//! 1.3), one quantized step each.

use super::{
    mul, AuxLinking, InferError, Inferred, Ins, LstmParams, Params, QLstmParams, Res,
    SeqLstmParams, SeqParams, SeqRnnParams,
};
use crate::ops::{sig, Arity, Signature};
use crate::types::{OperandType, OperationType};

use crate::types::OperandType::{
    Bool as B, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant16Symm as Q16S, TensorQuant8Asymm as Q, TensorQuant8AsymmSigned as QS,
    TensorQuant8Symm as Q8S,
};

// QUANTIZED_16BIT_LSTM: input, 8 weight matrices, 4 biases, previous cell state and output.
const QLSTM16: &[OperandType] = &[Q, Q, Q, Q, Q, Q, Q, Q, Q, I, I, I, I, Q16S, Q];

// QUANTIZED_LSTM, signed quant8 run as its uint8 image: input, 8 weight matrices, 3 peephole
// weights, 4 biases, projection weights and bias, previous output and cell state, 4
// layer-norm weights, clips, intermediate scales, hidden zero point and scale.
const QLSTM: &[OperandType] = &[
    Q, Q8S, Q8S, Q8S, Q8S, Q8S, Q8S, Q8S, Q8S, Q16S, Q16S, Q16S, I, I, I, I, Q8S, I, Q, Q16S, Q16S,
    Q16S, Q16S, Q16S, SF, SF, SF, SF, SF, SF, SI, SF,
];

// The same as the model gives it (signed quant8): listed too so that the shape and
// quantization rules check the model as given, before it runs as its uint8 image.
const QLSTM_SIGNED: &[OperandType] = &[
    QS, Q8S, Q8S, Q8S, Q8S, Q8S, Q8S, Q8S, Q8S, Q16S, Q16S, Q16S, I, I, I, I, Q8S, I, QS, Q16S,
    Q16S, Q16S, Q16S, Q16S, SF, SF, SF, SF, SF, SF, SI, SF,
];

const LSTM_INPUTS: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF,
];
// NNAPI 1.2: the four layer-norm weight vectors follow the clips.
const LSTM_LAYER_NORM_INPUTS: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF, F, F, F, F,
];

// NNAPI 1.2 UNIDIRECTIONAL_SEQUENCE_RNN: input, weights, recurrent weights, bias, hidden
// state, activation, time_major (INT32).
const SEQ_RNN: &[OperandType] = &[F, F, F, F, F, SI, SI];
// BIDIRECTIONAL_SEQUENCE_RNN: input, 4 forward and 4 backward tensors, auxiliary input and
// weights, activation, time_major, merge_outputs.
const BI_RNN: &[OperandType] = &[F, F, F, F, F, F, F, F, F, F, F, F, SI, B, B];
// UNIDIRECTIONAL_SEQUENCE_LSTM: LSTM's 20 tensors, activation, clips, time_major, layer norm.
const SEQ_LSTM: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF, B, F, F, F, F,
];
// BIDIRECTIONAL_SEQUENCE_LSTM: 48 tensors, activation, clips, merge_outputs, time_major and
// both directions' layer norm.
const BI_LSTM: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F,
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF, B, B, F, F, F, F, F, F, F, F,
];

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Lstm => {
            const S: &[Signature] = &[
                sig(LSTM_INPUTS, &[F, F, F, F]),
                sig(LSTM_LAYER_NORM_INPUTS, &[F, F, F, F]),
            ];
            S
        }
        Rnn => {
            const S: &[Signature] = &[sig(&[F, F, F, F, F, SI], &[F, F])];
            S
        }
        Svdf => {
            const S: &[Signature] = &[sig(&[F, F, F, F, F, SI, SI], &[F, F])];
            S
        }
        UnidirectionalSequenceRnn => {
            const S: &[Signature] = &[sig(SEQ_RNN, &[F]), sig(SEQ_RNN, &[F, F])];
            S
        }
        BidirectionalSequenceRnn => {
            const S: &[Signature] = &[
                sig(BI_RNN, &[F]),
                sig(BI_RNN, &[F, F]),
                sig(BI_RNN, &[F, F, F]),
                sig(BI_RNN, &[F, F, F, F]),
            ];
            S
        }
        UnidirectionalSequenceLstm => {
            const S: &[Signature] = &[sig(SEQ_LSTM, &[F]), sig(SEQ_LSTM, &[F, F, F])];
            S
        }
        BidirectionalSequenceLstm => {
            const S: &[Signature] = &[
                sig(BI_LSTM, &[F]),
                sig(BI_LSTM, &[F, F]),
                sig(BI_LSTM, &[F, F, F, F, F]),
                sig(BI_LSTM, &[F, F, F, F, F, F]),
            ];
            S
        }
        Quantized16bitLstm => {
            const S: &[Signature] = &[sig(QLSTM16, &[Q16S, Q])];
            S
        }
        QuantizedLstm => {
            const S: &[Signature] = &[
                sig(QLSTM, &[Q, Q16S, Q]),
                sig(QLSTM_SIGNED, &[QS, Q16S, QS]),
            ];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        Lstm => lstm(ins),
        Rnn => rnn(ins),
        Svdf => svdf(ins),
        UnidirectionalSequenceRnn => unidirectional_sequence_rnn(ins),
        BidirectionalSequenceRnn => bidirectional_sequence_rnn(ins),
        UnidirectionalSequenceLstm => unidirectional_sequence_lstm(ins),
        BidirectionalSequenceLstm => bidirectional_sequence_lstm(ins),
        Quantized16bitLstm => quantized_16bit_lstm(ins),
        QuantizedLstm => quantized_lstm(ins),
        _ => return None,
    })
}

/// Where one LSTM cell's operands sit among an operation's inputs: LSTM's inputs 1–17
/// (`input_to_input_weights` … `projection_bias`) from `weights` on, in that order, the two
/// states, and the four layer-norm weight vectors from `layer_norm` on.
struct LstmSlots {
    weights: usize,
    output_state: usize,
    cell_state: usize,
    layer_norm: usize,
}

/// LSTM (NNAPI 1.0 and 1.2) and UNIDIRECTIONAL_SEQUENCE_LSTM but for its layer-norm weights.
const LSTM_SLOTS: LstmSlots = LstmSlots {
    weights: 1,
    output_state: 18,
    cell_state: 19,
    layer_norm: 23,
};

/// The scalar inputs every LSTM form shares: activation and the two clips.
#[derive(Clone, Copy)]
struct LstmScalars {
    activation: i32,
    cell_clip: f32,
    proj_clip: f32,
}

fn lstm_scalars(ins: &Ins, at: usize) -> Res<LstmScalars> {
    let activation = ins.i32(at)?;
    check!(
        matches!(activation, 0 | 1 | 3 | 4 | 6),
        "LSTM activation must be 0, 1, 3, 4 or 6, is {activation}"
    );
    let cell_clip = ins.f32(at + 1)?;
    let proj_clip = ins.f32(at + 2)?;
    check!(
        cell_clip >= 0.0 && proj_clip >= 0.0,
        "clips must not be negative"
    );
    Ok(LstmScalars {
        activation,
        cell_clip,
        proj_clip,
    })
}

/// Checks one LSTM cell's weights, biases, states and optional groups against a `[batch,
/// input_size]` input, and resolves its configuration.
fn lstm_cell(
    ins: &Ins,
    s: &LstmSlots,
    batch: u32,
    input_size: u32,
    scalars: LstmScalars,
) -> Res<LstmParams> {
    // LSTM's input `k` (1..=17).
    let at = |k: usize| s.weights + k - 1;
    let units = ins.dims_rank(at(4), 2, "input_to_output_weights")?[0];
    let output_size = ins.dims_rank(at(8), 2, "recurrent_to_output_weights")?[1];
    let expect = |i: usize, want: &[u32], what: &str| -> Res<()> {
        let d = ins.dims(i)?;
        check!(d == want, "{what} (input {i}) is {d:?}, expected {want:?}");
        Ok(())
    };
    let cifg = !ins.present(at(1));
    check!(
        ins.present(at(5)) != cifg && ins.present(at(12)) != cifg,
        "input_to_input weights, recurrent_to_input weights and input gate bias must be all present or all omitted"
    );
    for k in 1..=4 {
        if ins.present(at(k)) {
            expect(at(k), &[units, input_size], "input weights")?;
        }
    }
    for k in 5..=8 {
        if ins.present(at(k)) {
            expect(at(k), &[units, output_size], "recurrent weights")?;
        }
    }
    let peephole = ins.present(at(10));
    check!(
        ins.present(at(11)) == peephole
            && (!ins.present(at(9)) || peephole)
            && (cifg || ins.present(at(9)) == peephole),
        "peephole weights must be all present or all omitted (cell_to_input may be omitted with CIFG)"
    );
    for k in 9..=15 {
        if ins.present(at(k)) {
            expect(at(k), &[units], "gate vector")?;
        }
    }
    let projection = ins.present(at(16));
    let projection_bias = ins.present(at(17));
    check!(
        !projection_bias || projection,
        "projection bias given without projection weights"
    );
    if projection {
        expect(at(16), &[output_size, units], "projection weights")?;
    } else {
        check!(
            output_size == units,
            "without projection the output size {output_size} must equal units {units}"
        );
    }
    if projection_bias {
        expect(at(17), &[output_size], "projection bias")?;
    }
    expect(s.output_state, &[batch, output_size], "output_state_in")?;
    expect(s.cell_state, &[batch, units], "cell_state_in")?;
    // The layer-norm weights (input, forget, cell, output): all omitted, or all given but the
    // input gate's, which CIFG omits.
    let ln = |k: usize| s.layer_norm + k;
    let layer_norm = ins.present(ln(3));
    check!(
        ins.present(ln(1)) == layer_norm && ins.present(ln(2)) == layer_norm,
        "forget, cell and output layer-norm weights must be all present or all omitted"
    );
    check!(
        ins.present(ln(0)) == (layer_norm && !cifg),
        "input layer-norm weights must be given exactly when layer normalisation is used without CIFG"
    );
    for k in 0..4 {
        if ins.present(ln(k)) {
            expect(ln(k), &[units], "layer-norm weights")?;
        }
    }
    Ok(LstmParams {
        batch,
        input_size,
        units,
        output_size,
        activation: scalars.activation,
        cell_clip: scalars.cell_clip,
        proj_clip: scalars.proj_clip,
        cifg,
        peephole,
        projection,
        projection_bias,
        layer_norm,
    })
}

fn lstm(ins: &Ins) -> Res<Inferred> {
    let x = ins.dims_rank(0, 2, "input")?;
    let scalars = lstm_scalars(ins, 20)?;
    let p = lstm_cell(ins, &LSTM_SLOTS, x[0], x[1], scalars)?;
    let gates = if p.cifg { 3 } else { 4 };
    Ok(Inferred {
        outputs: vec![
            vec![p.batch, mul(p.units, gates)?],
            vec![p.batch, p.output_size],
            vec![p.batch, p.units],
            vec![p.batch, p.output_size],
        ],
        params: Params::Lstm(p),
    })
}

/// The time axis of a sequence input `[max_time, batch, size]` (time-major) or `[batch,
/// max_time, size]`.
fn seq_input(ins: &Ins, time_major: bool, merge_outputs: bool) -> Res<(SeqParams, u32)> {
    let x = ins.dims_rank(0, 3, "input")?;
    let (max_time, batch) = if time_major {
        (x[0], x[1])
    } else {
        (x[1], x[0])
    };
    let seq = SeqParams {
        max_time,
        batch,
        time_major,
        merge_outputs,
    };
    Ok((seq, x[2]))
}

/// A sequence output of `width` per step, in the input's layout.
fn seq_output(seq: &SeqParams, width: u32) -> Vec<u32> {
    if seq.time_major {
        vec![seq.max_time, seq.batch, width]
    } else {
        vec![seq.batch, seq.max_time, width]
    }
}

/// The auxiliary input (`aux`, with the per-direction weights present or not) of a
/// bidirectional operation: its linking mode and width.
fn aux_linking(
    ins: &Ins,
    aux: usize,
    weights: bool,
    bw_weights: bool,
    seq: &SeqParams,
) -> Res<(AuxLinking, u32)> {
    check!(
        weights == bw_weights,
        "auxiliary weights must be given for both directions or neither"
    );
    let linking = match (ins.present(aux), weights) {
        (false, false) => return Ok((AuxLinking::None, 0)),
        (true, false) => AuxLinking::Parallel,
        (true, true) => AuxLinking::Cross,
        (false, true) => bad!("auxiliary weights given without an auxiliary input"),
    };
    let a = ins.dims_rank(aux, 3, "auxiliary input")?;
    let want = if seq.time_major {
        [seq.max_time, seq.batch]
    } else {
        [seq.batch, seq.max_time]
    };
    check!(
        a[..2] == want,
        "auxiliary input {a:?} does not match the input's time and batch {want:?}"
    );
    Ok((linking, a[2]))
}

fn unidirectional_sequence_rnn(ins: &Ins) -> Res<Inferred> {
    let time_major = ins.i32(6)?;
    check!(
        matches!(time_major, 0 | 1),
        "time_major (input 6) must be 0 or 1, is {time_major}"
    );
    let (seq, input_size) = seq_input(ins, time_major == 1, false)?;
    let units = rnn_cell(ins, [1, 2, 3, 4], seq.batch, input_size)?;
    let act = ins.act(5)?;
    Ok(Inferred {
        outputs: vec![seq_output(&seq, units), vec![seq.batch, units]],
        params: Params::SeqRnn(SeqRnnParams {
            seq,
            input_size,
            aux_size: 0,
            linking: AuxLinking::None,
            fw_units: units,
            bw_units: 0,
            act,
        }),
    })
}

/// Checks one RNN cell (weights, recurrent weights, bias, hidden state at `at`) against a
/// `[batch, input_size]` input; returns its number of units.
fn rnn_cell(ins: &Ins, at: [usize; 4], batch: u32, input_size: u32) -> Res<u32> {
    let w = ins.dims_rank(at[0], 2, "weights")?;
    let r = ins.dims_rank(at[1], 2, "recurrent weights")?;
    let b = ins.dims_rank(at[2], 1, "bias")?;
    let h = ins.dims_rank(at[3], 2, "hidden state")?;
    let units = w[0];
    check!(
        w[1] == input_size,
        "weights {w:?} (input {}) do not match input size {input_size}",
        at[0]
    );
    check!(
        r == [units, units],
        "recurrent weights {r:?} must be [{units}, {units}]"
    );
    check!(b[0] == units, "bias {b:?} must have {units} entries");
    check!(
        h == [batch, units],
        "hidden state {h:?} must be [{batch}, {units}]"
    );
    Ok(units)
}

fn bidirectional_sequence_rnn(ins: &Ins) -> Res<Inferred> {
    let merge_outputs = ins.bool(14)?;
    let (seq, input_size) = seq_input(ins, ins.bool(13)?, merge_outputs)?;
    let (linking, aux_size) = aux_linking(ins, 9, ins.present(10), ins.present(11), &seq)?;
    let fw_units = rnn_cell(ins, [1, 2, 3, 4], seq.batch, input_size)?;
    let bw_input = if linking == AuxLinking::Parallel {
        aux_size
    } else {
        input_size
    };
    let bw_units = rnn_cell(ins, [5, 6, 7, 8], seq.batch, bw_input)?;
    if linking == AuxLinking::Cross {
        for (i, units) in [(10, fw_units), (11, bw_units)] {
            let w = ins.dims(i)?;
            check!(
                w == [units, aux_size],
                "auxiliary weights {w:?} (input {i}) must be [{units}, {aux_size}]"
            );
        }
    }
    let act = ins.act(12)?;
    let mut outputs = if merge_outputs {
        vec![seq_output(
            &seq,
            fw_units
                .checked_add(bw_units)
                .ok_or_else(|| InferError::Invalid("merged output width overflows".into()))?,
        )]
    } else {
        vec![seq_output(&seq, fw_units), seq_output(&seq, bw_units)]
    };
    outputs.push(vec![seq.batch, fw_units]);
    outputs.push(vec![seq.batch, bw_units]);
    Ok(Inferred {
        outputs,
        params: Params::SeqRnn(SeqRnnParams {
            seq,
            input_size,
            aux_size,
            linking,
            fw_units,
            bw_units,
            act,
        }),
    })
}

fn unidirectional_sequence_lstm(ins: &Ins) -> Res<Inferred> {
    let (seq, input_size) = seq_input(ins, ins.bool(23)?, false)?;
    let scalars = lstm_scalars(ins, 20)?;
    let slots = LstmSlots {
        layer_norm: 24,
        ..LSTM_SLOTS
    };
    let fw = lstm_cell(ins, &slots, seq.batch, input_size, scalars)?;
    Ok(Inferred {
        outputs: vec![
            seq_output(&seq, fw.output_size),
            vec![seq.batch, fw.output_size],
            vec![seq.batch, fw.units],
        ],
        params: Params::SeqLstm(SeqLstmParams {
            seq,
            aux_size: 0,
            linking: AuxLinking::None,
            fw,
            bw: None,
        }),
    })
}

fn bidirectional_sequence_lstm(ins: &Ins) -> Res<Inferred> {
    let merge_outputs = ins.bool(51)?;
    let (seq, input_size) = seq_input(ins, ins.bool(52)?, merge_outputs)?;
    let scalars = lstm_scalars(ins, 48)?;
    // Auxiliary weights per direction: input (optional with CIFG), forget, cell, output.
    let aux_group = |first: usize| -> Res<bool> {
        let given = ins.present(first + 1);
        check!(
            ins.present(first + 2) == given && ins.present(first + 3) == given,
            "auxiliary forget, cell and output weights (inputs {}..={}) must be all present or all omitted",
            first + 1,
            first + 3
        );
        check!(
            given || !ins.present(first),
            "auxiliary input weights (input {first}) given without the other auxiliary weights"
        );
        Ok(given)
    };
    let (fw_aux, bw_aux) = (aux_group(40)?, aux_group(44)?);
    let (linking, aux_size) = aux_linking(ins, 39, fw_aux, bw_aux, &seq)?;
    let fw_slots = LstmSlots {
        weights: 1,
        output_state: 35,
        cell_state: 36,
        layer_norm: 53,
    };
    let bw_slots = LstmSlots {
        weights: 18,
        output_state: 37,
        cell_state: 38,
        layer_norm: 57,
    };
    let fw = lstm_cell(ins, &fw_slots, seq.batch, input_size, scalars)?;
    let bw_input = if linking == AuxLinking::Parallel {
        aux_size
    } else {
        input_size
    };
    let bw = lstm_cell(ins, &bw_slots, seq.batch, bw_input, scalars)?;
    if linking == AuxLinking::Cross {
        for (first, p) in [(40, &fw), (44, &bw)] {
            check!(
                ins.present(first) != p.cifg,
                "auxiliary input weights (input {first}) must be given exactly when the direction has an input gate"
            );
            for i in first..first + 4 {
                if ins.present(i) {
                    let w = ins.dims(i)?;
                    check!(
                        w == [p.units, aux_size],
                        "auxiliary weights {w:?} (input {i}) must be [{}, {aux_size}]",
                        p.units
                    );
                }
            }
        }
    }
    let mut outputs = if merge_outputs {
        let width = fw
            .output_size
            .checked_add(bw.output_size)
            .ok_or_else(|| InferError::Invalid("merged output width overflows".into()))?;
        vec![seq_output(&seq, width)]
    } else {
        vec![
            seq_output(&seq, fw.output_size),
            seq_output(&seq, bw.output_size),
        ]
    };
    outputs.extend([
        vec![seq.batch, fw.output_size],
        vec![seq.batch, fw.units],
        vec![seq.batch, bw.output_size],
        vec![seq.batch, bw.units],
    ]);
    Ok(Inferred {
        outputs,
        params: Params::SeqLstm(SeqLstmParams {
            seq,
            aux_size,
            linking,
            fw,
            bw: Some(bw),
        }),
    })
}

/// See [`Params::output_counts`]: the sequence operations' output 0 (and the backward
/// output unless merged), optionally followed by the final states (NNAPI 1.3).
pub(super) fn output_counts(params: &Params) -> Option<&'static [usize]> {
    match params {
        // A direction's units come from specified extents, so only UNIDIRECTIONAL has none
        // backward.
        Params::SeqRnn(p) => Some(match (p.bw_units > 0, p.seq.merge_outputs) {
            (false, _) => &[1, 2],
            (true, true) => &[1, 3],
            (true, false) => &[2, 4],
        }),
        Params::SeqLstm(p) => Some(match (p.bw.is_some(), p.seq.merge_outputs) {
            (false, _) => &[1, 3],
            (true, true) => &[1, 5],
            (true, false) => &[2, 6],
        }),
        _ => None,
    }
}

fn rnn(ins: &Ins) -> Res<Inferred> {
    let x = ins.dims_rank(0, 2, "input")?;
    let w = ins.dims_rank(1, 2, "weights")?;
    let r = ins.dims_rank(2, 2, "recurrent weights")?;
    let b = ins.dims_rank(3, 1, "bias")?;
    let h = ins.dims_rank(4, 2, "hidden state")?;
    let (batch, input_size, units) = (x[0], x[1], w[0]);
    check!(
        w[1] == input_size,
        "weights {w:?} do not match input size {input_size}"
    );
    check!(
        r == [units, units],
        "recurrent weights {r:?} must be [{units}, {units}]"
    );
    check!(b[0] == units, "bias {b:?} must have {units} entries");
    check!(
        h == [batch, units],
        "hidden state {h:?} must be [{batch}, {units}]"
    );
    let act = ins.act(5)?;
    Ok(Inferred {
        outputs: vec![vec![batch, units], vec![batch, units]],
        params: Params::Rnn {
            batch,
            input_size,
            units,
            act,
        },
    })
}

fn svdf(ins: &Ins) -> Res<Inferred> {
    let x = ins.dims_rank(0, 2, "input")?;
    let wf = ins.dims_rank(1, 2, "weights_feature")?;
    let wt = ins.dims_rank(2, 2, "weights_time")?;
    let (batch, input_size, num_filters, memory_size) = (x[0], x[1], wf[0], wt[1]);
    check!(
        wf[1] == input_size,
        "weights_feature {wf:?} do not match input size {input_size}"
    );
    check!(
        wt[0] == num_filters,
        "weights_time {wt:?} must have {num_filters} rows"
    );
    let rank = ins.positive(5, "rank")?;
    check!(
        num_filters % rank == 0,
        "rank {rank} does not divide {num_filters} filters"
    );
    let units = num_filters / rank;
    if ins.present(3) {
        let b = ins.dims_rank(3, 1, "bias")?;
        check!(b[0] == units, "bias {b:?} must have {units} entries");
    }
    let state_len = mul(memory_size, num_filters)?;
    let s = ins.dims_rank(4, 2, "state")?;
    check!(
        s == [batch, state_len],
        "state {s:?} must be [{batch}, {state_len}]"
    );
    let act = ins.act(6)?;
    Ok(Inferred {
        outputs: vec![vec![batch, state_len], vec![batch, units]],
        params: Params::Svdf {
            batch,
            input_size,
            num_filters,
            memory_size,
            rank,
            units,
            act,
        },
    })
}

/// QUANTIZED_16BIT_LSTM's shapes and its fixed quantization (NeuralNetworks.h): input and
/// previous output at scale 1/128 and zero point 128, one scale and zero point for the eight
/// weight matrices, biases at the weights' scale / 128 with zero point 0, and a cell state of
/// scale 2^-11 (4 integer bits, the only state format the cell computes in).
fn quantized_16bit_lstm(ins: &Ins) -> Res<Inferred> {
    let x = ins.dims_rank(0, 2, "input")?;
    let h = ins.dims_rank(14, 2, "previous output")?;
    let (batch, input_size, units) = (x[0], x[1], h[1]);
    check!(
        h[0] == batch,
        "previous output {h:?} must have {batch} rows"
    );
    let state_q = |i: usize, what: &str| -> Res<()> {
        let a = ins.get(i)?;
        check!(
            a.scale == 1.0 / 128.0 && a.zero_point == 128,
            "{what} must have scale 1/128 and zero point 128"
        );
        Ok(())
    };
    state_q(0, "input")?;
    state_q(14, "previous output")?;
    let w0 = ins.get(1)?;
    let (w_scale, w_zero) = (w0.scale, w0.zero_point);
    check!(w_scale != 0.0, "weights scale must be nonzero");
    for (i, cols) in (1..=8).map(|i| (i, if i <= 4 { input_size } else { units })) {
        let w = ins.dims_rank(i, 2, "weights")?;
        check!(
            w == [units, cols],
            "weights {i} {w:?} must be [{units}, {cols}]"
        );
        let a = ins.get(i)?;
        check!(
            a.scale == w_scale && a.zero_point == w_zero,
            "weights {i} must share the first weights' scale and zero point"
        );
    }
    let bias_scale = w_scale / 128.0;
    for i in 9..=12 {
        let b = ins.dims_rank(i, 1, "bias")?;
        check!(b[0] == units, "bias {i} {b:?} must have {units} entries");
        let a = ins.get(i)?;
        check!(
            a.scale == bias_scale && a.zero_point == 0,
            "bias {i} must have scale weights scale / 128 and zero point 0"
        );
    }
    let c = ins.dims_rank(13, 2, "previous cell state")?;
    check!(
        c == [batch, units],
        "previous cell state {c:?} must be [{batch}, {units}]"
    );
    let a = ins.get(13)?;
    check!(
        a.scale == 1.0 / 2048.0 && a.zero_point == 0,
        "cell state must have scale 2^-11 and zero point 0"
    );
    Ok(Inferred {
        outputs: vec![vec![batch, units], vec![batch, units]],
        params: Params::QuantizedLstm16 {
            batch,
            input_size,
            units,
            weights_zero_point: w_zero,
            bias_scale,
        },
    })
}

/// QUANTIZED_LSTM's shapes, optional groups and scales (NeuralNetworks.h, and the platform
/// reference's checks): the input-gate group (weights, recurrent weights, bias) is all
/// present or all omitted (CIFG); the peephole weights all or none (the input gate's not
/// needed under CIFG); the layer-norm weights all or none (the input gate's exactly when
/// there is an input gate); a projection bias needs projection weights, and without a
/// projection the output size is the number of units. The cell state's scale must be a power
/// of two 2^k with k in −15..=−9 (the cell's tanh reads it with k + 15 integer bits); the
/// intermediate scales of the gates that run and the hidden state's scale must be positive,
/// the hidden zero point an int8.
fn quantized_lstm(ins: &Ins) -> Res<Inferred> {
    let x = ins.dims_rank(0, 2, "input")?;
    let (batch, input_size) = (x[0], x[1]);
    let units = ins.dims_rank(4, 2, "input_to_output_weights")?[0];
    let output_size = ins.dims_rank(8, 2, "recurrent_to_output_weights")?[1];
    let expect = |i: usize, want: &[u32], what: &str| -> Res<()> {
        let d = ins.dims(i)?;
        check!(d == want, "{what} (input {i}) is {d:?}, expected {want:?}");
        Ok(())
    };
    let cifg = !ins.present(1);
    check!(
        ins.present(5) != cifg && ins.present(12) != cifg,
        "input_to_input weights, recurrent_to_input weights and input gate bias must be all present or all omitted"
    );
    for i in 1..=4 {
        if ins.present(i) {
            expect(i, &[units, input_size], "input weights")?;
        }
    }
    for i in 5..=8 {
        if ins.present(i) {
            expect(i, &[units, output_size], "recurrent weights")?;
        }
    }
    let peephole = ins.present(10);
    check!(
        ins.present(11) == peephole && (cifg || ins.present(9) == peephole),
        "peephole weights must be all present or all omitted (cell_to_input may be omitted with CIFG)"
    );
    check!(
        peephole || !ins.present(9),
        "cell_to_input weights given without the other peephole weights"
    );
    for i in 9..=15 {
        if ins.present(i) {
            expect(i, &[units], "gate vector")?;
        }
    }
    let projection = ins.present(16);
    check!(
        !ins.present(17) || projection,
        "projection bias given without projection weights"
    );
    if projection {
        expect(16, &[output_size, units], "projection weights")?;
        if ins.present(17) {
            expect(17, &[output_size], "projection bias")?;
        }
    } else {
        check!(
            output_size == units,
            "without projection the output size {output_size} must equal units {units}"
        );
    }
    expect(18, &[batch, output_size], "output_state_in")?;
    expect(19, &[batch, units], "cell_state_in")?;
    let layer_norm = ins.present(21);
    check!(
        ins.present(22) == layer_norm && ins.present(23) == layer_norm,
        "forget, cell and output layer-norm weights must be all present or all omitted"
    );
    check!(
        ins.present(20) == (layer_norm && !cifg),
        "input layer-norm weights must be given exactly when layer normalisation is used without CIFG"
    );
    for i in 20..=23 {
        if ins.present(i) {
            expect(i, &[units], "layer-norm weights")?;
        }
    }
    let cell_clip = ins.f32(24)?;
    let projection_clip = ins.f32(25)?;
    check!(
        cell_clip >= 0.0 && projection_clip >= 0.0,
        "clips must not be negative"
    );
    let mut intermediate_scales = [0.0; 4];
    for (g, scale) in intermediate_scales.iter_mut().enumerate() {
        *scale = ins.f32(26 + g)?;
        check!(
            (g == 0 && cifg) || *scale > 0.0,
            "intermediate scale (input {}) must be positive, is {scale}",
            26 + g
        );
    }
    let hidden_zero_point = ins.i32(30)?;
    check!(
        (-128..=127).contains(&hidden_zero_point),
        "hidden state zero point (input 30) must be an int8, is {hidden_zero_point}"
    );
    let hidden_scale = ins.f32(31)?;
    check!(
        hidden_scale > 0.0,
        "hidden state scale (input 31) must be positive, is {hidden_scale}"
    );
    let cell_scale = ins.get(19)?.scale;
    let log2 = cell_scale.ln() * (1.0 / 2f32.ln());
    let cell_shift = log2.round();
    check!(
        cell_scale > 0.0
            && (log2 - cell_shift).abs() < 1e-3
            && (-15.0..=-9.0).contains(&cell_shift),
        "cell state scale {cell_scale} must be a power of two 2^k with k in -15..=-9"
    );
    Ok(Inferred {
        outputs: vec![
            vec![batch, output_size],
            vec![batch, units],
            vec![batch, output_size],
        ],
        params: Params::QuantizedLstm(QLstmParams {
            batch,
            input_size,
            units,
            output_size,
            cell_shift: cell_shift as i32,
            cell_clip,
            projection_clip,
            intermediate_scales,
            hidden_zero_point,
            hidden_scale,
        }),
    })
}
