//! Signatures and shape rules of the reduction family (NeuralNetworks.h `OperationCode`):
//! MEAN (31, NNAPI 1.1) on float32 and quant8: the mean over a list of axes, negative axes
//! counting from the end and repeated ones counting once, the reduced axes kept as extent 1
//! or dropped (`keep_dims`); dropping every axis leaves shape [1]. The REDUCE_* operations of
//! NNAPI 1.2 share these rules.

use super::{i32_list, one, rank_at_most, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Int32 as SI, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    Some(Arity::Fixed(match op {
        OperationType::Mean => {
            const S: &[Signature] = &[sig(&[F, I, SI], &[F]), sig(&[Q, I, SI], &[Q])];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    Some(match op {
        OperationType::Mean => mean(ins),
        _ => return None,
    })
}

fn mean(ins: &Ins) -> Res<Inferred> {
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
    // The reference reads keep_dims as "greater than zero".
    let keep = ins.i32(2)? > 0;
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
