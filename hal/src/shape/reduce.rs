//! Signatures and shape rules of the reduction family (NeuralNetworks.h `OperationCode`):
//! MEAN (31, NNAPI 1.1) on float32 and quant8: the mean over a list of axes, negative axes
//! counting from the end and repeated ones counting once, the reduced axes kept as extent 1
//! or dropped (`keep_dims`); dropping every axis leaves shape [1]. REDUCE_ALL (75) and
//! REDUCE_ANY (76) of NNAPI 1.2 share these rules on TENSOR_BOOL8 of rank 1–4, with a BOOL
//! `keep_dims`, and so do REDUCE_MAX (77) and REDUCE_MIN (78) on float32 and quant8 (the
//! output keeps the input's quantization) and REDUCE_PROD (79) and REDUCE_SUM (80) on float32.
//! ARGMAX (39) and ARGMIN (40) of NNAPI 1.2 drop one axis (a negative one counting from the
//! end; a rank-1 input leaves shape [1]) into TENSOR_INT32 indices; TOPK_V2 (90) keeps the
//! `k` largest of each last-axis row, `0 < k ≤` the row length, as values of the input's type
//! and TENSOR_INT32 indices.

use super::{i32_list, one, rank_at_most, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as B, Int32 as SI, TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant8Asymm as Q,
};

/// ARGMAX / ARGMIN: any tensor of float32, int32 or quant8 and an INT32 axis.
const ARG: &[Signature] = &[
    sig(&[F, SI], &[I]),
    sig(&[I, SI], &[I]),
    sig(&[Q, SI], &[I]),
];

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
        OperationType::ReduceMax | OperationType::ReduceMin => {
            const S: &[Signature] = &[sig(&[F, I, B], &[F]), sig(&[Q, I, B], &[Q])];
            S
        }
        OperationType::ReduceProd | OperationType::ReduceSum => {
            const S: &[Signature] = &[sig(&[F, I, B], &[F])];
            S
        }
        OperationType::Argmax | OperationType::Argmin => ARG,
        OperationType::TopkV2 => {
            const S: &[Signature] = &[
                sig(&[F, SI], &[F, I]),
                sig(&[I, SI], &[I, I]),
                sig(&[Q, SI], &[Q, I]),
            ];
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
        OperationType::ReduceAll
        | OperationType::ReduceAny
        | OperationType::ReduceMax
        | OperationType::ReduceMin
        | OperationType::ReduceProd
        | OperationType::ReduceSum => reduce_bool(ins),
        OperationType::Argmax | OperationType::Argmin => arg_min_max(ins),
        OperationType::TopkV2 => top_k(ins),
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

/// REDUCE_ALL, REDUCE_ANY, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_SUM: a rank of at
/// least 1 and a BOOL `keep_dims`.
fn reduce_bool(ins: &Ins) -> Res<Inferred> {
    check!(
        !ins.dims(0)?.is_empty(),
        "input must have rank 1 to 4, has 0"
    );
    reduce(ins, ins.bool(2)?)
}

/// ARGMAX / ARGMIN: the input's shape without the axis (input 1, in `-rank..rank`); the
/// reference gives a rank-1 input the output shape [1]. The axis is `Params::Reduce`'s one
/// entry.
fn arg_min_max(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    check!(!d.is_empty(), "input must have rank at least 1, has 0");
    let rank = d.len() as i64;
    let a = i64::from(ins.i32(1)?);
    check!(
        (-rank..rank).contains(&a),
        "axis {a} (input 1) is outside -{rank}..{rank}"
    );
    let axis = a.rem_euclid(rank) as usize;
    let mut out: Vec<u32> = d
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != axis)
        .map(|(_, &x)| x)
        .collect();
    if out.is_empty() {
        out.push(1);
    }
    one(
        out,
        Params::Reduce {
            axes: vec![axis as u32],
        },
    )
}

/// TOPK_V2: values and indices of shape `[..., k]`, `k` (input 1) in `1..=` the last extent.
fn top_k(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    check!(!d.is_empty(), "input must have rank at least 1, has 0");
    let last = d[d.len() - 1];
    let k = ins.i32(1)?;
    check!(
        k > 0 && k as u32 <= last,
        "k {k} (input 1) is outside 1..={last}, the last extent"
    );
    let mut out = d.to_vec();
    if let Some(l) = out.last_mut() {
        *l = k as u32;
    }
    Ok(Inferred {
        outputs: vec![out.clone(), out],
        params: Params::Plain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{Arg, InferError};
    use crate::types::OperandType;

    fn arg<'a>(ty: OperandType, dims: &'a [u32], value: Option<&'a [u8]>) -> Option<Arg<'a>> {
        Some(Arg {
            ty,
            dims,
            scale: 0.0,
            zero_point: 0,
            value,
        })
    }

    fn run(op: OperationType, args: &[Option<Arg>]) -> Res<Inferred> {
        infer(op, &Ins { args }).expect("an operation of this family")
    }

    #[test]
    fn reductions_take_negative_and_repeated_axes_once() {
        let d = [2u32, 3, 4];
        let axes: Vec<u8> = [-1i32, 2, 0].iter().flat_map(|a| a.to_le_bytes()).collect();
        for (keep, want) in [(1u8, vec![1, 3, 1]), (0, vec![3])] {
            let keep = [keep];
            let args = [
                arg(F, &d, None),
                arg(I, &[3], Some(&axes)),
                arg(B, &[], Some(&keep)),
            ];
            let r = run(OperationType::ReduceSum, &args).unwrap();
            assert_eq!(r.outputs, vec![want]);
            assert_eq!(r.params, Params::Reduce { axes: vec![0, 2] });
        }
    }

    #[test]
    fn arg_min_max_drops_the_axis_and_top_k_cuts_the_last() {
        let d = [2u32, 3, 4];
        let at = |v: i32| v.to_le_bytes();
        let (m1, two, four, five) = (at(-1), at(2), at(4), at(5));
        let r = run(
            OperationType::Argmax,
            &[arg(F, &d, None), arg(SI, &[], Some(&m1))],
        )
        .unwrap();
        assert_eq!(r.outputs, vec![vec![2, 3]]);
        assert_eq!(r.params, Params::Reduce { axes: vec![2] });
        let r = run(
            OperationType::Argmin,
            &[arg(F, &[5], None), arg(SI, &[], Some(&m1))],
        )
        .unwrap();
        assert_eq!(r.outputs, vec![vec![1]]);
        let r = run(
            OperationType::TopkV2,
            &[arg(Q, &d, None), arg(SI, &[], Some(&two))],
        )
        .unwrap();
        assert_eq!(r.outputs, vec![vec![2, 3, 2], vec![2, 3, 2]]);
        assert!(run(
            OperationType::TopkV2,
            &[arg(Q, &d, None), arg(SI, &[], Some(&four))]
        )
        .is_ok());
        for (op, bad) in [
            (OperationType::TopkV2, five),
            (OperationType::TopkV2, at(0)),
            (OperationType::Argmax, at(3)),
            (OperationType::Argmax, at(-4)),
        ] {
            let r = run(op, &[arg(F, &d, None), arg(SI, &[], Some(&bad))]);
            assert!(matches!(r, Err(InferError::Invalid(_))), "{op} {bad:?}");
        }
        // A value only known at execution defers.
        let r = run(
            OperationType::TopkV2,
            &[arg(F, &d, None), arg(SI, &[], None)],
        );
        assert_eq!(r, Err(InferError::Unknown));
    }
}
