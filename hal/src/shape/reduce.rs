//! Signatures and shape rules of the reduce family (NNAPI 1.2 `OperationType`, the
//! NeuralNetworks.h text of each): REDUCE_ALL (75) and REDUCE_ANY (76) of a TENSOR_BOOL8 tensor
//! of rank 1–4 over the axes of a TENSOR_INT32 list (negative ones counting from the end,
//! repeats allowed), keeping the reduced axes as extent 1 when `keep_dims` is true.

use super::{one, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{Bool as B, TensorBool8 as B8, TensorInt32 as I};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        ReduceAll | ReduceAny => {
            const S: &[Signature] = &[sig(&[B8, I, B], &[B8])];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        ReduceAll | ReduceAny => reduce(ins),
        _ => return None,
    })
}

fn reduce(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let rank = d.len();
    check!(
        (1..=4).contains(&rank),
        "input must have rank 1 to 4, has {rank}"
    );
    let axes_dims = ins.dims(1)?;
    check!(
        axes_dims.len() == 1,
        "axes (input 1) must have rank 1, has {}",
        axes_dims.len()
    );
    let bytes = ins.bytes(1)?;
    check!(
        bytes.len() == 4 * axes_dims[0] as usize,
        "axes (input 1) hold {} bytes for {} values",
        bytes.len(),
        axes_dims[0]
    );
    let mut reduced = vec![false; rank];
    for c in bytes.chunks_exact(4) {
        let a = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        check!(
            a >= -(rank as i32) && a < rank as i32,
            "axis {a} is outside [-{rank}, {rank})"
        );
        reduced[a.rem_euclid(rank as i32) as usize] = true;
    }
    let keep = ins.bytes(2)?;
    check!(
        keep.len() == 1,
        "keep_dims (input 2) has {} bytes",
        keep.len()
    );
    let mut out: Vec<u32> = d
        .iter()
        .zip(&reduced)
        .filter_map(|(&x, &r)| match (r, keep[0] != 0) {
            (false, _) => Some(x),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    // Every axis reduced away leaves one element, of shape [1].
    if out.is_empty() {
        out.push(1);
    }
    one(out, Params::Reduced { axes: reduced })
}
