//! Signatures and shape rules of the math family (NNAPI 1.2–1.3 `OperationType`, the
//! NeuralNetworks.h text of each): the one-input operations ABS (38), EXP (49), LOG (60),
//! NEG (67), RSQRT (83), SIN (85), SQRT (88), HARD_SWISH (99) and CAST (45), whose output has the
//! input's shape; ELU (98) with its `alpha`; LOG_SOFTMAX (64) along an axis; and the
//! broadcasting two-input operations MAXIMUM (65), MINIMUM (66), POW (70) and PRELU (71).
//!
//! Signed quant8 runs as its unsigned image (`validate::signed_as_unsigned`), so only
//! TENSOR_QUANT8_ASYMM is listed; CAST's identity on the other byte types is listed for
//! TENSOR_BOOL8 (TENSOR_QUANT8_ASYMM_SIGNED becomes TENSOR_QUANT8_ASYMM → TENSOR_QUANT8_ASYMM).

use super::{broadcast, one, InferError, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Float32 as SF, Int32 as SI, TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant16Asymm as Q16, TensorQuant16Symm as Q16S, TensorQuant8Asymm as Q,
    TensorQuant8Symm as Q8S,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Exp | Log | Rsqrt | Sin | Sqrt => {
            const S: &[Signature] = &[sig(&[F], &[F])];
            S
        }
        Abs | Neg => {
            const S: &[Signature] = &[sig(&[F], &[F]), sig(&[I], &[I])];
            S
        }
        HardSwish => {
            const S: &[Signature] = &[sig(&[F], &[F]), sig(&[Q], &[Q])];
            S
        }
        Elu => {
            const S: &[Signature] = &[sig(&[F, SF], &[F])];
            S
        }
        LogSoftmax => {
            const S: &[Signature] = &[sig(&[F, SF, SI], &[F])];
            S
        }
        Pow => {
            const S: &[Signature] = &[sig(&[F, F], &[F])];
            S
        }
        Maximum | Minimum => {
            const S: &[Signature] = &[sig(&[F, F], &[F]), sig(&[I, I], &[I]), sig(&[Q, Q], &[Q])];
            S
        }
        Prelu => {
            const S: &[Signature] = &[sig(&[F, F], &[F]), sig(&[Q, Q], &[Q])];
            S
        }
        Cast => {
            const S: &[Signature] = &[
                sig(&[F], &[F]),
                sig(&[F], &[I]),
                sig(&[F], &[Q]),
                sig(&[I], &[F]),
                sig(&[I], &[I]),
                sig(&[I], &[Q]),
                sig(&[Q], &[F]),
                sig(&[Q], &[I]),
                sig(&[Q], &[Q]),
                // NNAPI 1.3's identity casts of the types stored as bytes and 16-bit words.
                sig(&[B8], &[B8]),
                sig(&[Q8S], &[Q8S]),
                sig(&[Q16S], &[Q16S]),
                sig(&[Q16], &[Q16]),
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
        Abs | Exp | Log | Neg | Rsqrt | Sin | Sqrt | HardSwish | Cast => {
            ins.dims(0).and_then(|d| one(d.to_vec(), Params::Plain))
        }
        Elu => elu(ins),
        LogSoftmax => log_softmax(ins),
        Maximum | Minimum | Pow | Prelu => broadcasting(ins),
        _ => return None,
    })
}

/// Two tensors broadcast against each other (NumPy rules, trailing axes aligned).
pub(super) fn broadcasting(ins: &Ins) -> Res<Inferred> {
    let (a, b) = (ins.dims(0)?, ins.dims(1)?);
    let out = broadcast(a, b).map_err(InferError::Invalid)?;
    one(out, Params::Plain)
}

fn elu(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let alpha = ins.f32(1)?;
    one(d.to_vec(), Params::Elu { alpha })
}

/// LOG_SOFTMAX along `axis` (input 2, negative counting from the end), scaled by `beta`.
fn log_softmax(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims(0)?;
    let beta = ins.f32(1)?;
    let rank = d.len();
    let a = ins.i32(2)?;
    check!(
        a >= -(rank as i32) && a < rank as i32,
        "axis {a} is outside [-{rank}, {rank})"
    );
    let axis = a.rem_euclid(rank as i32) as usize;
    let inner: u64 = d[axis + 1..].iter().map(|&x| u64::from(x)).product();
    one(
        d.to_vec(),
        Params::Softmax {
            beta,
            depth: d[axis],
            inner: inner as u32,
        },
    )
}
