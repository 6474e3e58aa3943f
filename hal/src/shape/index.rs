//! Signatures and shape rules of the indexing family (NeuralNetworks.h `OperationCode`):
//! NNAPI 1.2's GATHER (51) on float32, int32 and quant8, and NNAPI 1.3's FILL (100, float32
//! and int32 values) and RANK (101, any tensor the driver stores). Signed quant8 runs as its
//! unsigned image.

use super::{element_count, one, InferError, Inferred, Ins, Params, Res, MAX_MOVE_RANK};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Float32 as SF, Int32 as SI, TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant8Asymm as Q, TensorQuant8Symm as Q8S, TensorQuant8SymmPerChannel as QC,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Gather => {
            const S: &[Signature] = &[
                sig(&[F, SI, I], &[F]),
                sig(&[I, SI, I], &[I]),
                sig(&[Q, SI, I], &[Q]),
            ];
            S
        }
        Fill => {
            const S: &[Signature] = &[sig(&[I, SF], &[F]), sig(&[I, SI], &[I])];
            S
        }
        Rank => {
            const S: &[Signature] = &[
                sig(&[F], &[SI]),
                sig(&[I], &[SI]),
                sig(&[Q], &[SI]),
                sig(&[B8], &[SI]),
                sig(&[Q8S], &[SI]),
                sig(&[QC], &[SI]),
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
        Gather => gather(ins),
        Fill => fill(ins),
        // An INT32 scalar, whatever the input.
        Rank => ins.dims(0).and_then(|_| one(vec![], Params::Plain)),
        _ => return None,
    })
}

/// GATHER: the input's axes before `axis`, then the indices' axes, then the input's after
/// `axis` (rank: input rank + indices rank − 1). Only the indices' shape is needed here;
/// their values are checked when the operation runs.
fn gather(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let rank = d.len() as i32;
    let a = ins.i32(1)?;
    check!(
        (-rank..rank).contains(&a),
        "axis {a} is outside [-{rank}, {rank})"
    );
    let axis = a.rem_euclid(rank) as usize;
    let idx = ins.dims(2)?;
    let mut out = d[..axis].to_vec();
    out.extend_from_slice(idx);
    out.extend_from_slice(&d[axis + 1..]);
    check!(
        out.len() <= MAX_MOVE_RANK,
        "the output would have rank {}, above {MAX_MOVE_RANK}",
        out.len()
    );
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Gather { axis: axis as u32 })
}

/// FILL: the output's dimensions are the values of input 0 (each at least 1).
fn fill(ins: &Ins) -> Res<Inferred> {
    let s = ins.dims_rank(0, 1, "dimensions")?;
    let b = ins.bytes(0)?;
    check!(
        b.len() == s[0] as usize * 4,
        "dimensions tensor has {} bytes for {} elements",
        b.len(),
        s[0]
    );
    let mut out = Vec::with_capacity(s[0] as usize);
    for (k, c) in b.chunks_exact(4).enumerate() {
        let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        check!(
            v > 0,
            "dimension {k} of the output is {v}, must be positive"
        );
        out.push(v as u32);
    }
    // The count is checked before any buffer of that size exists.
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Plain)
}
