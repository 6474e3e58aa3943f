//! Signatures and shape rules of the pooling family (types.hal 1.0 `OperationType`):
//! AVERAGE_POOL_2D (1), L2_POOL_2D (12) and MAX_POOL_2D (17), with explicit or implicit
//! padding and NNAPI 1.2's optional NCHW `layout`.

use super::{one, spatial_out, window, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as B, Int32 as SI, TensorFloat32 as F, TensorQuant8Asymm as Q,
};

// Each form also takes NNAPI 1.2's trailing BOOL `layout` (NCHW when true): those run here
// too, transposed around the NHWC kernels.
const POOL_F: &[Signature] = &[
    sig(&[F, SI, SI, SI, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI, SI, SI, SI, B], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI, B], &[F]),
];
const POOL_FQ: &[Signature] = &[
    sig(&[F, SI, SI, SI, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[Q, SI, SI, SI, SI, SI, SI, SI, SI, SI], &[Q]),
    sig(&[Q, SI, SI, SI, SI, SI, SI], &[Q]),
    sig(&[F, SI, SI, SI, SI, SI, SI, SI, SI, SI, B], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI, B], &[F]),
    sig(&[Q, SI, SI, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
    sig(&[Q, SI, SI, SI, SI, SI, SI, B], &[Q]),
];

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        AveragePool2d | MaxPool2d => POOL_FQ,
        L2Pool2d => POOL_F,
        _ => return None,
    }))
}

/// Output shapes and parameters (of the NHWC form), for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        AveragePool2d | MaxPool2d | L2Pool2d => pool(ins),
        _ => return None,
    })
}

fn pool(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let explicit = ins.args.len() == 10;
    let w = window(ins, explicit, 1, d[1], d[2], None)?;
    let act = ins.act(if explicit { 9 } else { 6 })?;
    let (oh, ow) = spatial_out(&w, d[1], d[2])?;
    one(vec![d[0], oh, ow, d[3]], Params::Pool { window: w, act })
}
