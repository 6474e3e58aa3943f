//! Registrations of the random family (NeuralNetworks.h `OperationCode`): RANDOM_MULTINOMIAL
//! (74, NNAPI 1.2) on float32 logits, sampled by `nnhal_kernels::random::reference` with the
//! generator its seeds select.

use super::{elementwise_work, kernel_error, mismatch, out0, Call, OpImpl};
use crate::tensor::TensorMut;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::random::reference;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    match (op, ty) {
        (OperationType::RandomMultinomial, OperandType::TensorFloat32) => Some(&MULTINOMIAL),
        _ => None,
    }
}

registration!(MULTINOMIAL, multinomial, elementwise_work);

/// RANDOM_MULTINOMIAL: the shapes were inferred (`[batches, classes]` in, `[batches, samples]`
/// out, two seeds), so the output's last extent is the sample count.
fn multinomial(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (logits, d) = (c.f(0)?, c.dims(0)?);
    let seeds = match *c.i(2)? {
        [a, b] => [a, b],
        _ => return Err(mismatch(c)),
    };
    let out = out0(outs)?;
    let samples = *out.dims.get(1).ok_or_else(|| mismatch(c))? as usize;
    let classes = *d.get(1).ok_or_else(|| mismatch(c))? as usize;
    reference::multinomial(logits, classes, seeds, out.i32_mut()?, samples).map_err(kernel_error)
}
