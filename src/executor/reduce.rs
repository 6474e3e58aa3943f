//! Registrations of the reduction family (NeuralNetworks.h `OperationCode`): MEAN (31, NNAPI
//! 1.1) on float32 and uint8 (signed quant8 through its unsigned image, whose truncation the
//! kernel is told of), on the loops of `nnhal_kernels::reduce::mean`.

use super::{elementwise_work, mismatch, out0, shape, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::Params;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::reduce::mean;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    Some(match (op, ty) {
        (OperationType::Mean, F | Q) => &MEAN,
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
