//! Registrations of the indexing family (NeuralNetworks.h `OperationCode`): GATHER (51, NNAPI
//! 1.2) on float32, int32 and uint8; FILL (100, NNAPI 1.3) of float32 and int32 values; RANK
//! (101, NNAPI 1.3) of any stored tensor. Signed quant8 runs as its unsigned image (GATHER
//! moves the bytes; RANK reads only the shape). GATHER and FILL run the pooled block loops of
//! `nnhal_kernels::index::fast`.

use super::{elementwise_work, kernel_error, mismatch, out0, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::Params;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::index::fast;
use smallvec::SmallVec;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{
        TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
        TensorQuant8Symm as Q8S, TensorQuant8SymmPerChannel as QC,
    };
    use OperationType::*;
    Some(match (op, ty) {
        (Gather, F | I | Q) => &GATHER,
        (Fill, I) => &FILL,
        (Rank, F | I | Q | B8 | Q8S | QC) => &RANK,
        _ => return None,
    })
}

registration!(GATHER, gather, elementwise_work);
registration!(FILL, fill, elementwise_work);
registration!(RANK, rank, elementwise_work);

/// GATHER: an index outside the axis (only execution sees run-time indices) is
/// INVALID_ARGUMENT, found before the output is written.
fn gather(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Gather { axis } = *c.params else {
        return Err(mismatch(c));
    };
    let d: SmallVec<[usize; 6]> = c.dims(0)?.iter().map(|&x| x as usize).collect();
    let (axis, indices) = (axis as usize, c.i(2)?);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => fast::gather(x, &d, axis, indices, y),
        (DataRef::I32(x), DataMut::I32(y)) => fast::gather(x, &d, axis, indices, y),
        (DataRef::U8(x), DataMut::U8(y)) => fast::gather(x, &d, axis, indices, y),
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}

/// FILL: the value is the scalar input 1, of the output's element type.
fn fill(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    match (c.t(1)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(&[v]), DataMut::F32(y)) => fast::fill(v, y),
        (DataRef::I32(&[v]), DataMut::I32(y)) => fast::fill(v, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

/// RANK: the number of dimensions of input 0, as an INT32 scalar.
fn rank(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let rank = c.dims(0)?.len() as i32;
    match out0(outs)?.i32_mut()? {
        [o] => *o = rank,
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
