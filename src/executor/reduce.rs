//! Registrations of the reduction family (NeuralNetworks.h `OperationCode`): MEAN (31, NNAPI
//! 1.1) on float32 and uint8 (signed quant8 through its unsigned image, whose truncation the
//! kernel is told of), on the loops of `nnhal_kernels::reduce::mean`; REDUCE_ALL (75) and
//! REDUCE_ANY (76, NNAPI 1.2) of TENSOR_BOOL8 tensors on the reference loops.

use super::{elementwise_work, mismatch, out0, shape, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::Params;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::reduce::{mean, reference as r};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorBool8 as B8, TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (Mean, F | Q) => &MEAN,
        (ReduceAll | ReduceAny, B8) => &REDUCE_BOOL,
        _ => return None,
    })
}

registration!(MEAN, run_mean, elementwise_work);

fn run_mean(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Reduce { axes } = c.params else {
        return Err(mismatch(c));
    };
    let axes: smallvec::SmallVec<[usize; 4]> = axes.iter().map(|&a| a as usize).collect();
    let dims = shape(c.dims(0)?);
    let signed = c.model.signed.get(c.op.inputs[0]).copied().unwrap_or(false);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => mean::mean_f32(x, &dims, &axes, y),
        (DataRef::U8(x), DataMut::U8(y)) => mean::mean_u8(x, &dims, &axes, signed, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

registration!(REDUCE_BOOL, reduce_bool, elementwise_work);

fn reduce_bool(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Reduce { axes } = c.params else {
        return Err(mismatch(c));
    };
    let axes: smallvec::SmallVec<[usize; 4]> = axes.iter().map(|&a| a as usize).collect();
    let (x, d) = (c.u(0)?, shape(c.dims(0)?));
    let o = out0(outs)?.u8_mut()?;
    match c.op.ty {
        OperationType::ReduceAll => r::all(x, &d, &axes, o),
        OperationType::ReduceAny => r::any(x, &d, &axes, o),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
