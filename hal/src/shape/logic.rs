//! Signatures and shape rules of the logic family (NNAPI 1.2 `OperationType`, the
//! NeuralNetworks.h text of each): the comparisons EQUAL (48), GREATER (53),
//! GREATER_EQUAL (54), LESS (58), LESS_EQUAL (59) and NOT_EQUAL (68) of two broadcasting
//! tensors into TENSOR_BOOL8; LOGICAL_AND (61) and LOGICAL_OR (63) of two broadcasting
//! TENSOR_BOOL8 tensors, LOGICAL_NOT (62); and SELECT (84), which picks per element from two
//! tensors of the condition's shape.

use super::{math::broadcasting, one, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Equal | NotEqual | Greater | GreaterEqual | Less | LessEqual => {
            const S: &[Signature] = &[
                sig(&[B8, B8], &[B8]),
                sig(&[F, F], &[B8]),
                sig(&[I, I], &[B8]),
                sig(&[Q, Q], &[B8]),
            ];
            S
        }
        LogicalAnd | LogicalOr => {
            const S: &[Signature] = &[sig(&[B8, B8], &[B8])];
            S
        }
        LogicalNot => {
            const S: &[Signature] = &[sig(&[B8], &[B8])];
            S
        }
        Select => {
            const S: &[Signature] = &[
                sig(&[B8, F, F], &[F]),
                sig(&[B8, I, I], &[I]),
                sig(&[B8, Q, Q], &[Q]),
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
        Equal | NotEqual | Greater | GreaterEqual | Less | LessEqual | LogicalAnd | LogicalOr => {
            broadcasting(ins)
        }
        LogicalNot => ins.dims(0).and_then(|d| one(d.to_vec(), Params::Plain)),
        Select => select(ins),
        _ => return None,
    })
}

/// The condition and both value tensors have one shape, the output's (no broadcasting).
fn select(ins: &Ins) -> Res<Inferred> {
    let (c, a, b) = (ins.dims(0)?, ins.dims(1)?, ins.dims(2)?);
    check!(
        c == a && a == b,
        "condition {c:?} and values {a:?}, {b:?} must have one shape"
    );
    one(c.to_vec(), Params::Plain)
}
