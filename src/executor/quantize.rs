//! Registrations of the quantization family: QUANTIZE (NNAPI 1.2, `OperationType` 72) from
//! float32 to uint8 (a signed quant8 output is the unsigned image's) and DEQUANTIZE
//! (types.hal 1.0, 6) to float32 from uint8, TENSOR_QUANT8_SYMM and
//! TENSOR_QUANT8_SYMM_PER_CHANNEL, on `nnhal_kernels::quantize`.

use super::{elementwise_work, out0, shape, Call, OpImpl};
use crate::tensor::TensorMut;
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::quantize::{fast, reference as qz};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{
        TensorFloat32 as F, TensorQuant8Asymm as Q, TensorQuant8Symm as QS,
        TensorQuant8SymmPerChannel as QC,
    };
    use OperationType::*;
    Some(match (op, ty) {
        (Quantize, F) => &QUANTIZE,
        (Dequantize, Q) => &DEQUANTIZE_U8,
        (Dequantize, QS) => &DEQUANTIZE_SYMM,
        (Dequantize, QC) => &DEQUANTIZE_PER_CHANNEL,
        _ => return None,
    })
}

registration!(QUANTIZE, quantize, elementwise_work);
registration!(DEQUANTIZE_U8, dequantize_u8, elementwise_work);
registration!(DEQUANTIZE_SYMM, dequantize_symm, elementwise_work);
registration!(
    DEQUANTIZE_PER_CHANNEL,
    dequantize_per_channel,
    elementwise_work
);

fn quantize(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    fast::quantize_u8(c.kernels, c.f(0)?, c.out_q(0), out0(outs)?.u8_mut()?);
    Ok(())
}

fn dequantize_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    fast::dequantize_u8(c.kernels, c.u(0)?, c.q(0), out0(outs)?.f32_mut()?);
    Ok(())
}

fn dequantize_symm(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    fast::dequantize_i8(c.kernels, c.u(0)?, c.q(0).scale, out0(outs)?.f32_mut()?);
    Ok(())
}

fn dequantize_per_channel(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let info = &c.model.operands[c.op.inputs[0]];
    let cq = info.channel_quant.as_ref().ok_or_else(|| {
        HalError::InvalidArgument("a per-channel operand without channel scales".into())
    })?;
    let dims = shape(c.dims(0)?);
    let dim = cq.channel_dim as usize;
    if dims.get(dim) != Some(&cq.scales.len()) {
        return Err(HalError::InvalidArgument(format!(
            "{} channel scales for dimension {dim} of {dims:?}",
            cq.scales.len()
        )));
    }
    qz::dequantize_per_channel(c.u(0)?, &dims, dim, &cq.scales, out0(outs)?.f32_mut()?);
    Ok(())
}
