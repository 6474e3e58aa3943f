//! Signatures and shape rules of the quantization family: QUANTIZE (NNAPI 1.2,
//! `OperationType` 72: TENSOR_FLOAT32 to TENSOR_QUANT8_ASYMM; TENSOR_QUANT8_ASYMM_SIGNED runs as
//! its unsigned image) and DEQUANTIZE (types.hal 1.0, 6: from TENSOR_QUANT8_ASYMM, and NNAPI
//! 1.2's TENSOR_QUANT8_SYMM and TENSOR_QUANT8_SYMM_PER_CHANNEL, to TENSOR_FLOAT32). The output
//! has the input's shape.

use super::{elementwise::unary, Inferred, Ins, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    TensorFloat32 as F, TensorQuant8Asymm as Q, TensorQuant8Symm as QS,
    TensorQuant8SymmPerChannel as QC,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Quantize => {
            const S: &[Signature] = &[sig(&[F], &[Q])];
            S
        }
        Dequantize => {
            const S: &[Signature] = &[sig(&[Q], &[F]), sig(&[QS], &[F]), sig(&[QC], &[F])];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        Quantize | Dequantize => unary(ins),
        _ => return None,
    })
}
