//! Registrations of the reduce family (NNAPI 1.2 `OperationType`): REDUCE_ALL (75) and
//! REDUCE_ANY (76) of TENSOR_BOOL8 tensors over the axes shape inference resolved.

use super::{elementwise_work, mismatch, out0, shape, Call, OpImpl};
use crate::tensor::TensorMut;
use nnhal_hal::shape::Params;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::reduce::reference as r;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperationType::*;
    Some(match (op, ty) {
        (ReduceAll | ReduceAny, OperandType::TensorBool8) => &REDUCE_BOOL,
        _ => return None,
    })
}

registration!(REDUCE_BOOL, reduce_bool, elementwise_work);

fn reduce_bool(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Reduced { axes } = c.params else {
        return Err(mismatch(c));
    };
    let (x, d) = (c.u(0)?, shape(c.dims(0)?));
    let o = out0(outs)?.u8_mut()?;
    match c.op.ty {
        OperationType::ReduceAll => r::all(x, &d, axes, o),
        OperationType::ReduceAny => r::any(x, &d, axes, o),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
