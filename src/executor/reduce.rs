//! Registrations of the reduction family (NeuralNetworks.h `OperationCode`): MEAN (31, NNAPI
//! 1.1) on float32 and uint8 (signed quant8 through its unsigned image, whose truncation the
//! kernel is told of), on the loops of `nnhal_kernels::reduce::mean`; REDUCE_ALL (75) and
//! REDUCE_ANY (76, NNAPI 1.2) of TENSOR_BOOL8 tensors on the reference loops; REDUCE_MAX
//! (77) and REDUCE_MIN (78) on float32 and uint8, REDUCE_PROD (79) and REDUCE_SUM (80) on
//! float32, on the row loops of `nnhal_kernels::reduce::fold`; ARGMAX (39), ARGMIN (40) and
//! TOPK_V2 (90) on float32, int32 and uint8, on those of `nnhal_kernels::reduce::index`.
//! Signed quant8 runs as its unsigned image throughout: adding 128 keeps every comparison,
//! so maxima, minima, indices and orders are the signed operation's.

use super::{elementwise_work, mismatch, out0, shape, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::Params;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::reduce::{fold, index, mean, reference as r, FoldKind};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{
        TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
    };
    use OperationType::*;
    Some(match (op, ty) {
        (Mean, F | Q) => &MEAN,
        (ReduceAll | ReduceAny, B8) => &REDUCE_BOOL,
        (ReduceMax | ReduceMin, F | Q) | (ReduceProd | ReduceSum, F) => &REDUCE_FOLD,
        (Argmax | Argmin, F | I | Q) => &ARG_MIN_MAX,
        (TopkV2, F | I | Q) => &TOP_K,
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

registration!(REDUCE_FOLD, reduce_fold, elementwise_work);

fn reduce_fold(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Reduce { axes } = c.params else {
        return Err(mismatch(c));
    };
    let kind = match c.op.ty {
        OperationType::ReduceMax => FoldKind::Max,
        OperationType::ReduceMin => FoldKind::Min,
        OperationType::ReduceProd => FoldKind::Prod,
        OperationType::ReduceSum => FoldKind::Sum,
        _ => return Err(mismatch(c)),
    };
    let axes: smallvec::SmallVec<[usize; 4]> = axes.iter().map(|&a| a as usize).collect();
    let dims = shape(c.dims(0)?);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => fold::fold(kind, x, &dims, &axes, y),
        (DataRef::U8(x), DataMut::U8(y)) if matches!(kind, FoldKind::Max | FoldKind::Min) => {
            fold::fold(kind, x, &dims, &axes, y)
        }
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

registration!(ARG_MIN_MAX, arg_min_max, elementwise_work);

fn arg_min_max(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Reduce { axes } = c.params else {
        return Err(mismatch(c));
    };
    let (&[axis], dims) = (axes.as_slice(), shape(c.dims(0)?)) else {
        return Err(mismatch(c));
    };
    let min = c.op.ty == OperationType::Argmin;
    let axis = axis as usize;
    let y = out0(outs)?.i32_mut()?;
    match c.t(0)?.data {
        DataRef::F32(x) => index::arg_min_max(x, &dims, axis, min, y),
        DataRef::I32(x) => index::arg_min_max(x, &dims, axis, min, y),
        DataRef::U8(x) => index::arg_min_max(x, &dims, axis, min, y),
        DataRef::I16(_) => return Err(mismatch(c)),
    }
    Ok(())
}

registration!(TOP_K, top_k, elementwise_work);

fn top_k(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let [values, indices] = outs else {
        return Err(mismatch(c));
    };
    let row = c.dims(0)?.last().copied().unwrap_or(0) as usize;
    let k = values.dims.last().copied().unwrap_or(0) as usize;
    let ix = indices.i32_mut()?;
    match (c.t(0)?.data, &mut values.data) {
        (DataRef::F32(x), DataMut::F32(v)) => index::top_k(x, row, k, v, ix),
        (DataRef::I32(x), DataMut::I32(v)) => index::top_k(x, row, k, v, ix),
        (DataRef::U8(x), DataMut::U8(v)) => index::top_k(x, row, k, v, ix),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
