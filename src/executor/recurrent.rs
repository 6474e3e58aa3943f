//! Registrations of the recurrent family (types.hal 1.0 `OperationType`): LSTM (16), with
//! NNAPI 1.2's layer normalisation, RNN (24) and SVDF (27), float32, one time step each.

use super::{act, elementwise_work, mismatch, Call, OpImpl, WorkArgs};
use crate::tensor::TensorMut;
use nnhal_hal::shape::Params;
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::recurrent::reference as recurrent;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::TensorFloat32 as F;
    use OperationType::*;
    Some(match (op, ty) {
        (Lstm, F) => &LSTM,
        (Rnn, F) => &RNN,
        (Svdf, F) => &SVDF,
        _ => return None,
    })
}

registration!(LSTM, lstm, recurrent_work, partial);
registration!(RNN, rnn, recurrent_work, partial);
registration!(SVDF, svdf, recurrent_work, partial);

/// Recurrent cells multiply every weight once per batch row.
fn recurrent_work(w: &WorkArgs) -> u64 {
    let batch = match w.params {
        Params::Lstm(p) => p.batch,
        Params::Rnn { batch, .. } | Params::Svdf { batch, .. } => *batch,
        _ => 1,
    };
    elementwise_work(w).saturating_add(w.read.saturating_mul(u64::from(batch)))
}

fn lstm(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lstm(p) = c.params else {
        return Err(mismatch(c));
    };
    let activation = recurrent::LstmActivation::from_code(p.activation)
        .ok_or_else(|| HalError::InvalidArgument(format!("LSTM activation {}", p.activation)))?;
    let inputs = recurrent::LstmInputs {
        input: c.f(0)?,
        input_to_input_weights: c.opt_f(1)?,
        input_to_forget_weights: c.f(2)?,
        input_to_cell_weights: c.f(3)?,
        input_to_output_weights: c.f(4)?,
        recurrent_to_input_weights: c.opt_f(5)?,
        recurrent_to_forget_weights: c.f(6)?,
        recurrent_to_cell_weights: c.f(7)?,
        recurrent_to_output_weights: c.f(8)?,
        cell_to_input_weights: c.opt_f(9)?,
        cell_to_forget_weights: c.opt_f(10)?,
        cell_to_output_weights: c.opt_f(11)?,
        input_gate_bias: c.opt_f(12)?,
        forget_gate_bias: c.f(13)?,
        cell_bias: c.f(14)?,
        output_gate_bias: c.f(15)?,
        projection_weights: c.opt_f(16)?,
        projection_bias: c.opt_f(17)?,
        output_state_in: c.f(18)?,
        cell_state_in: c.f(19)?,
        layer_norm: if p.layer_norm {
            Some(recurrent::LstmLayerNorm {
                input: c.opt_f(23)?,
                forget: c.f(24)?,
                cell: c.f(25)?,
                output: c.f(26)?,
            })
        } else {
            None
        },
    };
    let dims = recurrent::LstmDims {
        batch: p.batch as usize,
        input_size: p.input_size as usize,
        num_units: p.units as usize,
        output_size: p.output_size as usize,
    };
    let params = recurrent::LstmParams {
        activation,
        cell_clip: p.cell_clip,
        proj_clip: p.proj_clip,
    };
    let [scratch, state, cell, output] = outs else {
        return Err(mismatch(c));
    };
    let outputs = recurrent::LstmOutputs {
        scratch: scratch.f32_mut()?,
        output_state_out: state.f32_mut()?,
        cell_state_out: cell.f32_mut()?,
        output: output.f32_mut()?,
    };
    recurrent::lstm_f32(dims, &inputs, params, outputs);
    Ok(())
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
