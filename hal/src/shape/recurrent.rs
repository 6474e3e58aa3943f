//! Signatures and shape rules of the recurrent family (types.hal 1.0 `OperationType`):
//! LSTM (16), with NNAPI 1.2's layer-normalised form, RNN (24) and SVDF (27), one time step
//! each.

use super::{mul, Inferred, Ins, LstmParams, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::{OperandType, OperationType};

use crate::types::OperandType::{Float32 as SF, Int32 as SI, TensorFloat32 as F};

const LSTM_INPUTS: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF,
];
// NNAPI 1.2: the four layer-norm weight vectors follow the clips.
const LSTM_LAYER_NORM_INPUTS: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF, F, F, F, F,
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
        _ => return None,
    })
}

fn lstm(ins: &Ins) -> Res<Inferred> {
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
        ins.present(11) == peephole && (!ins.present(9) || peephole) && (cifg || ins.present(9) == peephole),
        "peephole weights must be all present or all omitted (cell_to_input may be omitted with CIFG)"
    );
    for i in (9..=11).chain(12..=15) {
        if ins.present(i) {
            expect(i, &[units], "gate vector")?;
        }
    }
    let projection = ins.present(16);
    let projection_bias = ins.present(17);
    check!(
        !projection_bias || projection,
        "projection bias given without projection weights"
    );
    if projection {
        expect(16, &[output_size, units], "projection weights")?;
    } else {
        check!(
            output_size == units,
            "without projection the output size {output_size} must equal units {units}"
        );
    }
    if projection_bias {
        expect(17, &[output_size], "projection bias")?;
    }
    expect(18, &[batch, output_size], "output_state_in")?;
    expect(19, &[batch, units], "cell_state_in")?;
    let activation = ins.i32(20)?;
    check!(
        matches!(activation, 0 | 1 | 3 | 4 | 6),
        "LSTM activation must be 0, 1, 3, 4 or 6, is {activation}"
    );
    let cell_clip = ins.f32(21)?;
    let proj_clip = ins.f32(22)?;
    check!(
        cell_clip >= 0.0 && proj_clip >= 0.0,
        "clips must not be negative"
    );
    // The NNAPI 1.2 form appends four layer-norm weight vectors (23 input, 24 forget, 25
    // cell, 26 output): all omitted, or all given but the input gate's, which CIFG omits.
    let layer_norm = ins.present(26);
    check!(
        ins.present(24) == layer_norm && ins.present(25) == layer_norm,
        "forget, cell and output layer-norm weights must be all present or all omitted"
    );
    check!(
        ins.present(23) == (layer_norm && !cifg),
        "input layer-norm weights must be given exactly when layer normalisation is used without CIFG"
    );
    for i in 23..=26 {
        if ins.present(i) {
            expect(i, &[units], "layer-norm weights")?;
        }
    }
    let gates = if cifg { 3 } else { 4 };
    Ok(Inferred {
        outputs: vec![
            vec![batch, mul(units, gates)?],
            vec![batch, output_size],
            vec![batch, units],
            vec![batch, output_size],
        ],
        params: Params::Lstm(LstmParams {
            batch,
            input_size,
            units,
            output_size,
            activation,
            cell_clip,
            proj_clip,
            cifg,
            peephole,
            projection,
            projection_bias,
            layer_norm,
        }),
    })
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
