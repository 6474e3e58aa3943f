//! Signatures and shape rules of the random family (NeuralNetworks.h `OperationCode`):
//! NNAPI 1.2's RANDOM_MULTINOMIAL (74) on float32 logits.

use super::{element_count, one, InferError, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperandType::{Int32 as SI, TensorFloat32 as F, TensorInt32 as I};
use crate::types::OperationType;

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    match op {
        OperationType::RandomMultinomial => {
            const S: &[Signature] = &[sig(&[F, SI, I], &[I])];
            Some(Arity::Fixed(S))
        }
        _ => None,
    }
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    match op {
        OperationType::RandomMultinomial => Some(multinomial(ins)),
        _ => None,
    }
}

/// RANDOM_MULTINOMIAL: logits `[batches, classes]`, a positive sample count and two seeds
/// (TENSOR_INT32 `[2]`) give `[batches, samples]` class indices.
fn multinomial(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 2, "logits")?;
    check!(d[1] > 0, "the logits have no classes");
    let seeds = ins.dims_rank(2, 1, "seeds")?;
    check!(
        seeds[0] == 2,
        "seeds has {} elements, 2 are required",
        seeds[0]
    );
    let samples = ins.i32(1)?;
    check!(samples > 0, "sample count {samples} must be positive");
    let out = vec![d[0], samples as u32];
    element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Plain)
}
