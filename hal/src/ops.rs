//! The per-operation signature table of NNAPI 1.0 (types.hal 1.0, `OperationType`): for every
//! operation, the operand types it accepts at each input and output position, and which inputs
//! may be omitted. Validation, "is this supported" and the executor all read this one table.

use crate::types::{OperandType, OperationType};

use OperandType::{
    Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
};

/// One accepted combination of operand types.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    pub inputs: &'static [OperandType],
    pub outputs: &'static [OperandType],
}

/// How an operation's input list is shaped.
#[derive(Debug, Clone, Copy)]
pub enum Arity {
    /// One of these exact signatures.
    Fixed(&'static [Signature]),
    /// CONCATENATION: n ≥ 1 tensors of one type `T`, then an INT32 axis; output `T`.
    Concatenation(&'static [OperandType]),
    /// OEM_OPERATION: anything goes structurally; never supported by this driver.
    Any,
}

const fn sig(inputs: &'static [OperandType], outputs: &'static [OperandType]) -> Signature {
    Signature { inputs, outputs }
}

const POOL_F: &[Signature] = &[
    sig(&[F, SI, SI, SI, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI], &[F]),
];
const POOL_FQ: &[Signature] = &[
    sig(&[F, SI, SI, SI, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[F, SI, SI, SI, SI, SI, SI], &[F]),
    sig(&[Q, SI, SI, SI, SI, SI, SI, SI, SI, SI], &[Q]),
    sig(&[Q, SI, SI, SI, SI, SI, SI], &[Q]),
];
const UNARY_F: &[Signature] = &[sig(&[F], &[F])];
const UNARY_FQ: &[Signature] = &[sig(&[F], &[F]), sig(&[Q], &[Q])];
const BINARY_ACT: &[Signature] = &[sig(&[F, F, SI], &[F]), sig(&[Q, Q, SI], &[Q])];
const BLOCK: &[Signature] = &[sig(&[F, SI], &[F]), sig(&[Q, SI], &[Q])];

const LSTM_INPUTS: &[OperandType] = &[
    F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, F, SI, SF, SF,
];

/// The signature rule of `op`.
pub fn arity(op: OperationType) -> Arity {
    use OperationType::*;
    Arity::Fixed(match op {
        Add | Mul => BINARY_ACT,
        AveragePool2d | MaxPool2d => POOL_FQ,
        L2Pool2d => POOL_F,
        Concatenation => return Arity::Concatenation(&[F, Q]),
        Conv2d => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI], &[Q]),
            ];
            S
        }
        DepthwiseConv2d => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, SI], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, SI], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI], &[Q]),
            ];
            S
        }
        DepthToSpace | SpaceToDepth => BLOCK,
        Dequantize => {
            const S: &[Signature] = &[sig(&[Q], &[F])];
            S
        }
        EmbeddingLookup => {
            const S: &[Signature] = &[sig(&[I, F], &[F]), sig(&[I, I], &[I]), sig(&[I, Q], &[Q])];
            S
        }
        Floor | L2Normalization | Tanh => UNARY_F,
        FullyConnected => {
            const S: &[Signature] = &[sig(&[F, F, F, SI], &[F]), sig(&[Q, Q, I, SI], &[Q])];
            S
        }
        HashtableLookup => {
            const S: &[Signature] = &[
                sig(&[I, I, F], &[F, Q]),
                sig(&[I, I, I], &[I, Q]),
                sig(&[I, I, Q], &[Q, Q]),
            ];
            S
        }
        LocalResponseNormalization => {
            const S: &[Signature] = &[sig(&[F, SI, SF, SF, SF], &[F])];
            S
        }
        Logistic | Relu | Relu1 | Relu6 => UNARY_FQ,
        LshProjection => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI], &[I]),
                sig(&[F, I, F, SI], &[I]),
                sig(&[F, Q, F, SI], &[I]),
            ];
            S
        }
        Lstm => {
            const S: &[Signature] = &[sig(LSTM_INPUTS, &[F, F, F, F])];
            S
        }
        Reshape => {
            const S: &[Signature] = &[sig(&[F, I], &[F]), sig(&[Q, I], &[Q])];
            S
        }
        ResizeBilinear => {
            const S: &[Signature] = &[sig(&[F, SI, SI], &[F])];
            S
        }
        Rnn => {
            const S: &[Signature] = &[sig(&[F, F, F, F, F, SI], &[F, F])];
            S
        }
        Softmax => {
            const S: &[Signature] = &[sig(&[F, SF], &[F]), sig(&[Q, SF], &[Q])];
            S
        }
        Svdf => {
            const S: &[Signature] = &[sig(&[F, F, F, F, F, SI, SI], &[F, F])];
            S
        }
        // OEM_OPERATION and the operations of later NNAPI versions: this table holds only
        // NNAPI 1.0 signatures, so they are checked for structure alone (and never run).
        _ => return Arity::Any,
    })
}

/// Whether input `position` of `op` may be omitted (a NO_VALUE operand, or a model input the
/// request marks `hasNoValue`).
pub fn is_optional_input(op: OperationType, position: usize) -> bool {
    match op {
        // CIFG group (1, 5, 12), peephole (9, 10, 11), projection (16, 17).
        OperationType::Lstm => matches!(position, 1 | 5 | 9 | 10 | 11 | 12 | 16 | 17),
        OperationType::Svdf => position == 3,
        OperationType::LshProjection => position == 2,
        _ => false,
    }
}

/// Whether this driver executes `op` (every NNAPI 1.0 operation but OEM_OPERATION).
pub fn is_supported(op: OperationType) -> bool {
    op.in_nnapi_1_0() && op != OperationType::OemOperation
}
