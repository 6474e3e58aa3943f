//! Signatures and shape rules of the lookup family (types.hal 1.0 `OperationType`):
//! EMBEDDING_LOOKUP (7), HASHTABLE_LOOKUP (10) and LSH_PROJECTION (15), with NNAPI 1.2's
//! corrected sparse projection (type 3).

use super::{element_count, mul, one, InferError, Inferred, Ins, LshKind, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Int32 as SI, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        EmbeddingLookup => {
            const S: &[Signature] = &[sig(&[I, F], &[F]), sig(&[I, I], &[I]), sig(&[I, Q], &[Q])];
            S
        }
        HashtableLookup => {
            const S: &[Signature] = &[
                sig(&[I, I, F], &[F, Q]),
                sig(&[I, I, I], &[I, Q]),
                sig(&[I, I, Q], &[Q, Q]),
            ];
            S
        }
        LshProjection => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI], &[I]),
                sig(&[F, I, F, SI], &[I]),
                sig(&[F, Q, F, SI], &[I]),
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
        EmbeddingLookup => embedding_lookup(ins),
        HashtableLookup => hashtable_lookup(ins),
        LshProjection => lsh_projection(ins),
        _ => return None,
    })
}

fn embedding_lookup(ins: &Ins) -> Res<Inferred> {
    let l = ins.dims_rank(0, 1, "lookups")?;
    let v = ins.dims(1)?;
    check!(v.len() >= 2, "values must have rank ≥ 2, has {}", v.len());
    let row_len = element_count(&v[1..]).map_err(InferError::Invalid)? as u32;
    let mut out = vec![l[0]];
    out.extend_from_slice(&v[1..]);
    element_count(&out).map_err(InferError::Invalid)?;
    one(
        out,
        Params::Lookup {
            rows: v[0],
            row_len,
        },
    )
}

fn hashtable_lookup(ins: &Ins) -> Res<Inferred> {
    let l = ins.dims_rank(0, 1, "lookups")?;
    let k = ins.dims_rank(1, 1, "keys")?;
    let v = ins.dims(2)?;
    check!(
        !v.is_empty() && v[0] == k[0],
        "values {v:?} must have one row per key ({})",
        k[0]
    );
    let row_len = element_count(&v[1..]).map_err(InferError::Invalid)? as u32;
    let mut out = vec![l[0]];
    out.extend_from_slice(&v[1..]);
    element_count(&out).map_err(InferError::Invalid)?;
    Ok(Inferred {
        outputs: vec![out, vec![l[0]]],
        params: Params::Lookup {
            rows: v[0],
            row_len,
        },
    })
}

fn lsh_projection(ins: &Ins) -> Res<Inferred> {
    let h = ins.dims_rank(0, 2, "hash")?;
    let (num_hash, num_bits) = (h[0], h[1]);
    check!(
        num_bits <= 32,
        "hash has {num_bits} bits per function, at most 32 allowed"
    );
    let input = ins.dims(1)?;
    let kind = match ins.i32(3)? {
        1 => LshKind::Sparse,
        2 => LshKind::Dense,
        3 => LshKind::SparseBucketed,
        t => bad!(
            "LSH projection type must be 1 (SPARSE_DEPRECATED), 2 (DENSE) or 3 (SPARSE), is {t}"
        ),
    };
    if ins.present(2) {
        let w = ins.dims_rank(2, 1, "weight")?;
        check!(
            w[0] == input[0],
            "weight has {} entries for {} input rows",
            w[0],
            input[0]
        );
    } else {
        check!(
            kind != LshKind::Dense,
            "DENSE projection needs the weight input"
        );
    }
    let out = match kind {
        LshKind::Sparse | LshKind::SparseBucketed => num_hash,
        LshKind::Dense => mul(num_hash, num_bits)?,
    };
    one(
        vec![out],
        Params::Lsh {
            kind,
            num_hash,
            num_bits,
            input_rows: input[0],
        },
    )
}
