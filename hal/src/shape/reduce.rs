//! Signatures and shape rules of the reduction family (NeuralNetworks.h `OperationCode`):
//! MEAN (31, NNAPI 1.1) on float32 and quant8: the mean over a list of axes, negative axes
//! counting from the end and repeated ones counting once, the reduced axes kept as extent 1
//! or dropped (`keep_dims`); dropping every axis leaves shape [1]. REDUCE_ALL (75) and
//! REDUCE_ANY (76) of NNAPI 1.2 share these rules on TENSOR_BOOL8 of rank 1–4, with a BOOL
//! `keep_dims`.

use super::{i32_list, one, rank_at_most, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as B, Int32 as SI, TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant8Asymm as Q,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    Some(Arity::Fixed(match op {
        OperationType::Mean => {
            const S: &[Signature] = &[sig(&[F, I, SI], &[F]), sig(&[Q, I, SI], &[Q])];
            S
        }
        OperationType::ReduceAll | OperationType::ReduceAny => {
            const S: &[Signature] = &[sig(&[B8, I, B], &[B8])];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    Some(match op {
        // The reference reads MEAN's INT32 keep_dims as "greater than zero".
        OperationType::Mean => ins.i32(2).and_then(|keep| reduce(ins, keep > 0)),
        OperationType::ReduceAll | OperationType::ReduceAny => reduce_bool(ins),
        _ => return None,
    })
}

fn reduce(ins: &Ins, keep: bool) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    let rank = d.len() as i32;
    let list = i32_list(ins, 1, None, "axes")?;
    let mut reduced = vec![false; d.len()];
    for (k, &a) in list.iter().enumerate() {
        check!(
            (-rank..rank).contains(&a),
            "axis {a} (entry {k}) is outside -{rank}..{rank}"
        );
        reduced[a.rem_euclid(rank) as usize] = true;
    }
    let mut out: Vec<u32> = d
        .iter()
        .zip(&reduced)
        .filter_map(|(&x, &r)| match (r, keep) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(x),
        })
        .collect();
    if out.is_empty() {
        out.push(1);
    }
    let axes = (0..d.len() as u32)
        .filter(|&a| reduced[a as usize])
        .collect();
    one(out, Params::Reduce { axes })
}

/// REDUCE_ALL / REDUCE_ANY: a rank of at least 1 and a BOOL `keep_dims`.
fn reduce_bool(ins: &Ins) -> Res<Inferred> {
    check!(
        !ins.dims(0)?.is_empty(),
        "input must have rank 1 to 4, has 0"
    );
    reduce(ins, ins.bool(2)?)
}
