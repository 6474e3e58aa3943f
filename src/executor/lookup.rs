//! Registrations of the lookup family (types.hal 1.0 `OperationType`): EMBEDDING_LOOKUP (7),
//! HASHTABLE_LOOKUP (10) and LSH_PROJECTION (15).

use super::{elementwise_work, kernel_error, mismatch, out0, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::{LshKind, Params};
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::lookup::reference as lk;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorInt32 as I};
    use OperationType::*;
    Some(match (op, ty) {
        (EmbeddingLookup, I) => &EMBEDDING_LOOKUP,
        (HashtableLookup, I) => &HASHTABLE_LOOKUP,
        (LshProjection, F) => &LSH_PROJECTION,
        _ => return None,
    })
}

registration!(
    EMBEDDING_LOOKUP,
    embedding_lookup,
    elementwise_work,
    partial
);
registration!(
    HASHTABLE_LOOKUP,
    hashtable_lookup,
    elementwise_work,
    partial
);
registration!(LSH_PROJECTION, lsh_projection, elementwise_work, partial);

fn embedding_lookup(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lookup { rows, row_len } = c.params else {
        return Err(mismatch(c));
    };
    let (rows, row_len) = (*rows as usize, *row_len as usize);
    let lookups = c.i(0)?;
    match (c.t(1)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(v), DataMut::F32(o)) => lk::embedding_lookup(lookups, v, rows, row_len, o),
        (DataRef::I32(v), DataMut::I32(o)) => lk::embedding_lookup(lookups, v, rows, row_len, o),
        (DataRef::U8(v), DataMut::U8(o)) => lk::embedding_lookup(lookups, v, rows, row_len, o),
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}

fn hashtable_lookup(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lookup { row_len, .. } = c.params else {
        return Err(mismatch(c));
    };
    let row_len = *row_len as usize;
    let (lookups, keys) = (c.i(0)?, c.i(1)?);
    let [first, hits] = outs else {
        return Err(mismatch(c));
    };
    let hits = hits.u8_mut()?;
    match (c.t(2)?.data, &mut first.data) {
        (DataRef::F32(v), DataMut::F32(o)) => {
            lk::hashtable_lookup(lookups, keys, v, row_len, o, hits)
        }
        (DataRef::I32(v), DataMut::I32(o)) => {
            lk::hashtable_lookup(lookups, keys, v, row_len, o, hits)
        }
        (DataRef::U8(v), DataMut::U8(o)) => {
            lk::hashtable_lookup(lookups, keys, v, row_len, o, hits)
        }
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn lsh_projection(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lsh {
        kind,
        num_hash,
        num_bits,
        input_rows,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let kind = match kind {
        LshKind::Sparse => lk::LshProjectionType::Sparse,
        LshKind::Dense => lk::LshProjectionType::Dense,
        LshKind::SparseBucketed => lk::LshProjectionType::SparseBucketed,
    };
    let input = c.t(1)?.data.to_le_bytes();
    lk::lsh_projection(
        c.f(0)?,
        *num_hash as usize,
        *num_bits as usize,
        &input,
        *input_rows as usize,
        c.opt_f(2)?,
        kind,
        out0(outs)?.i32_mut()?,
    );
    Ok(())
}
