//! Signatures and shape rules of the element-wise family (types.hal 1.0 `OperationType`):
//! ADD (0) and MUL (18) with NumPy-style broadcasting and a fused activation (TENSOR_INT32 from
//! NNAPI 1.3), NNAPI 1.1's SUB (quant8 from 1.2, int32 from 1.3) and DIV (int32 from 1.3) alike,
//! and the one-input operations FLOOR (8), LOGISTIC (14),
//! RELU / RELU1 / RELU6 (19–21) and TANH (28), whose output has the input's shape.

use super::{broadcast, one, rank_at_most, InferError, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Int32 as SI, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
};

const UNARY_F: &[Signature] = &[sig(&[F], &[F])];
const UNARY_FQ: &[Signature] = &[sig(&[F], &[F]), sig(&[Q], &[Q])];
// TENSOR_INT32 came with NNAPI 1.3.
const BINARY_ACT: &[Signature] = &[
    sig(&[F, F, SI], &[F]),
    sig(&[Q, Q, SI], &[Q]),
    sig(&[I, I, SI], &[I]),
];

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Add | Mul | Sub => BINARY_ACT,
        Div => {
            const S: &[Signature] = &[sig(&[F, F, SI], &[F]), sig(&[I, I, SI], &[I])];
            S
        }
        Floor => UNARY_F,
        // quant8 came with NNAPI 1.2 (output scale 1/128, zero point 128).
        Tanh => UNARY_FQ,
        Logistic | Relu | Relu1 | Relu6 => UNARY_FQ,
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        Add | Mul | Sub | Div => binary(ins),
        Floor | Logistic | Relu | Relu1 | Relu6 | Tanh => unary(ins),
        _ => return None,
    })
}

fn binary(ins: &Ins) -> Res<Inferred> {
    let (a, b) = (ins.dims(0)?, ins.dims(1)?);
    rank_at_most(a, 4, "input 0")?;
    rank_at_most(b, 4, "input 1")?;
    let out = broadcast(a, b).map_err(InferError::Invalid)?;
    one(out, Params::Binary { act: ins.act(2)? })
}

pub(super) fn unary(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    rank_at_most(d, 4, "input")?;
    one(d.to_vec(), Params::Plain)
}
