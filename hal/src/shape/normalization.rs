//! Signatures and shape rules of the normalization family (types.hal 1.0 `OperationType`):
//! L2_NORMALIZATION (11), LOCAL_RESPONSE_NORMALIZATION (13) and SOFTMAX (25), along the last
//! axis or NNAPI 1.2's optional `axis`; NNAPI 1.2's INSTANCE_NORMALIZATION (57).

use super::{one, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as B, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorQuant8Asymm as Q,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        // The optional trailing `axis` came with NNAPI 1.2; these kernels take it.
        L2Normalization => {
            // quant8 came with NNAPI 1.2 too (output scale 1/128, zero point 128).
            const S: &[Signature] = &[
                sig(&[F], &[F]),
                sig(&[F, SI], &[F]),
                sig(&[Q], &[Q]),
                sig(&[Q, SI], &[Q]),
            ];
            S
        }
        LocalResponseNormalization => {
            const S: &[Signature] = &[
                sig(&[F, SI, SF, SF, SF], &[F]),
                sig(&[F, SI, SF, SF, SF, SI], &[F]),
            ];
            S
        }
        Softmax => {
            const S: &[Signature] = &[
                sig(&[F, SF], &[F]),
                sig(&[Q, SF], &[Q]),
                sig(&[F, SF, SI], &[F]),
                sig(&[Q, SF, SI], &[Q]),
            ];
            S
        }
        // gamma, beta, epsilon, layout.
        InstanceNormalization => {
            const S: &[Signature] = &[sig(&[F, SF, SF, SF, B], &[F])];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        L2Normalization => l2_normalization(ins),
        LocalResponseNormalization => local_response_normalization(ins),
        Softmax => softmax(ins),
        InstanceNormalization => instance_normalization(ins),
        _ => return None,
    })
}

/// These operations work along one axis of a rank 1–4 input: the last one (NNAPI 1.0, where
/// only rank 4, or 2 and 4 for SOFTMAX, was allowed), or the optional `axis` input at position
/// `at` (NNAPI 1.2), negative values counting from the end. Returns the axis length and the
/// stride between its elements.
fn axis_split(ins: &Ins, d: &[u32], at: usize) -> Res<(u32, u32)> {
    let rank = d.len();
    check!(
        (1..=4).contains(&rank),
        "input must have rank 1 to 4, has {rank}"
    );
    let axis = if ins.args.len() > at {
        let a = ins.i32(at)?;
        check!(
            a >= -(rank as i32) && a < rank as i32,
            "axis {a} is outside [-{rank}, {rank})"
        );
        a.rem_euclid(rank as i32) as usize
    } else {
        rank - 1
    };
    let inner: u64 = d[axis + 1..].iter().map(|&x| u64::from(x)).product();
    Ok((d[axis], inner as u32))
}

fn l2_normalization(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let (depth, inner) = axis_split(ins, d, 1)?;
    one(d.to_vec(), Params::Depth { depth, inner })
}

fn local_response_normalization(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let (depth, inner) = axis_split(ins, d, 5)?;
    let radius = ins.non_negative(1, "radius")?;
    let (bias, alpha, beta) = (ins.f32(2)?, ins.f32(3)?, ins.f32(4)?);
    one(
        d.to_vec(),
        Params::Lrn {
            radius,
            bias,
            alpha,
            beta,
            depth,
            inner,
        },
    )
}

fn softmax(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let (depth, inner) = axis_split(ins, d, 2)?;
    let beta = ins.f32(1)?;
    check!(beta > 0.0, "beta must be positive, is {beta}");
    one(d.to_vec(), Params::Softmax { beta, depth, inner })
}

/// INSTANCE_NORMALIZATION: a rank-4 image, the output of its shape.
fn instance_normalization(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    one(
        d.to_vec(),
        Params::InstanceNorm {
            gamma: ins.f32(1)?,
            beta: ins.f32(2)?,
            epsilon: ins.f32(3)?,
        },
    )
}
