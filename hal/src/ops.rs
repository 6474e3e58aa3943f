//! The per-operation signature rules (types.hal 1.0, `OperationType`, and the AIDL V1 operation
//! set of NNAPI 1.1–1.3): for every operation, the operand types it accepts at each input and
//! output position, its rank rules and which inputs may be omitted. Validation, "is this
//! supported" and the executor all read these rules.
//!
//! What the driver runs ([`arity`]) is listed per operation family, beside the family's shape
//! rules (`shape/<family>.rs`), so an operation that starts to run changes its family's file
//! alone. What the specification allows ([`later_signatures`], [`rank_rule`],
//! [`is_optional_input`]) stays here as one table over every operation of the interface, run
//! or not: validation needs all of it whatever runs, and it follows the specification's
//! operation list rather than the families.

use crate::types::{OperandType, OperationType};

use OperandType::{
    Bool as B, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant8Asymm as Q,
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
    /// One of these signatures, whose single output type every output repeats (SPLIT: as
    /// many outputs as parts, at least one).
    RepeatOutputs(&'static [Signature]),
    /// CONCATENATION: n ≥ 1 tensors of one type `T`, then an INT32 axis; output `T`.
    Concatenation(&'static [OperandType]),
    /// OEM_OPERATION: anything goes structurally; never supported by this driver.
    Any,
}

pub(crate) const fn sig(
    inputs: &'static [OperandType],
    outputs: &'static [OperandType],
) -> Signature {
    Signature { inputs, outputs }
}

/// The signature rule of `op`: the signatures this driver runs, from the operation's family
/// in [`crate::shape`] (its shape rules sit beside them), or [`Arity::Any`] for the rest.
pub fn arity(op: OperationType) -> Arity {
    // OEM_OPERATION (anything goes, never run) and the operations no family runs yet, whose
    // signatures are in `later_signatures` (valid, reported unsupported).
    crate::shape::signatures(op).unwrap_or(Arity::Any)
}

/// The rank rules of the platform's validator that do not depend on values: which inputs of
/// `op` may have at most 4 dimensions (when their rank is known), whether the rule holds only
/// once every listed input's rank is known (the broadcasting arithmetic), and which inputs
/// must have exactly 4 (CONV_2D's input and filter). CONCATENATION's tensors are all but the
/// last input.
pub struct RankRule {
    pub at_most_4: &'static [usize],
    pub all_known_first: bool,
    pub exactly_4: &'static [usize],
}

/// The [`RankRule`] of `op`, if it has one.
pub fn rank_rule(op: OperationType) -> Option<RankRule> {
    use OperationType::*;
    const FIRST: &[usize] = &[0];
    let rule = |at_most_4: &'static [usize]| RankRule {
        at_most_4,
        all_known_first: false,
        exactly_4: &[],
    };
    Some(match op {
        Add | Mul | Sub | Div => RankRule {
            at_most_4: &[0, 1],
            all_known_first: true,
            exactly_4: &[],
        },
        Conv2d => RankRule {
            at_most_4: &[],
            all_known_first: false,
            exactly_4: &[0, 1],
        },
        Mean
        | Pad
        | PadV2
        | Squeeze
        | Transpose
        | StridedSlice
        | ReduceAll
        | ReduceAny
        | ReduceMax
        | ReduceMin
        | ReduceProd
        | ReduceSum
        | ChannelShuffle
        | Dequantize
        | Floor
        | Relu
        | Relu1
        | Relu6
        | Logistic
        | Tanh
        | Softmax
        | L2Normalization
        | LocalResponseNormalization
        | Reshape => rule(FIRST),
        _ => return None,
    })
}

/// Whether input `position` of `op` may be omitted (a NO_VALUE operand, or a model input the
/// request marks `hasNoValue`).
pub fn is_optional_input(op: OperationType, position: usize) -> bool {
    match op {
        // CIFG group (1, 5, 12), peephole (9, 10, 11), projection (16, 17), layer norm (23–26).
        OperationType::Lstm => matches!(position, 1 | 5 | 9 | 10 | 11 | 12 | 16 | 17 | 23..=26),
        OperationType::Svdf => position == 3,
        // UNIDIRECTIONAL_SEQUENCE_LSTM: LSTM's groups, layer norm at 24–27.
        OperationType::UnidirectionalSequenceLstm => {
            matches!(position, 1 | 5 | 9 | 10 | 11 | 12 | 16 | 17 | 24..=27)
        }
        // BIDIRECTIONAL_SEQUENCE_LSTM: both directions' LSTM groups (forward from 1, backward
        // from 18), the auxiliary input and weights (39–47), layer norm (53–60).
        OperationType::BidirectionalSequenceLstm => matches!(
            position,
            1 | 5 | 9..=12 | 16..=18 | 22 | 26..=29 | 33 | 34 | 39..=47 | 53..=60
        ),
        // QUANTIZED_LSTM: CIFG (1, 5, 12), peephole (9–11), projection (16, 17), layer norm
        // (20–23).
        OperationType::QuantizedLstm => {
            matches!(position, 1 | 5 | 9 | 10 | 11 | 12 | 16 | 17 | 20..=23)
        }
        // BIDIRECTIONAL_SEQUENCE_RNN: the auxiliary input and weights.
        OperationType::BidirectionalSequenceRnn => matches!(position, 9..=11),
        OperationType::LshProjection => position == 2,
        // SQUEEZE's dimensions (all of extent 1) and TRANSPOSE's permutation (reversed).
        OperationType::Squeeze | OperationType::Transpose => position == 1,
        _ => false,
    }
}

/// Whether `op` takes an omitted optional input as absent on both execution paths, so an
/// operand it alone reads may stay without extents in a statically placed plan (the recurrent
/// cells and their sequence forms).
pub fn omitted_input_is_absent(op: OperationType) -> bool {
    matches!(
        op,
        OperationType::Lstm
            | OperationType::Rnn
            | OperationType::UnidirectionalSequenceLstm
            | OperationType::BidirectionalSequenceLstm
            | OperationType::UnidirectionalSequenceRnn
            | OperationType::BidirectionalSequenceRnn
    )
}

/// Whether `op`'s constant BOOL scalar inputs are resolved at prepare: the recurrent sequence
/// operations, whose `time_major` and `merge_outputs` decide output shapes. (The image
/// operations' layout flags stay for execution.)
pub fn bool_params_at_prepare(op: OperationType) -> bool {
    matches!(
        op,
        OperationType::UnidirectionalSequenceLstm
            | OperationType::BidirectionalSequenceLstm
            | OperationType::UnidirectionalSequenceRnn
            | OperationType::BidirectionalSequenceRnn
    )
}

/// Whether `op`'s constant BOOL scalar input (NNAPI 1.2's layout flag) is resolved at prepare
/// for the plan: the convolutions whose weights pack, which a model stating the flag (always,
/// for GROUPED_CONV_2D and TRANSPOSE_CONV_2D) would otherwise run unpacked. What shape inference finds wrong with
/// the flag known is still left to execution, as when the flag is not resolved: the
/// conformance suite expects such models to be accepted by `getSupportedOperations`.
pub fn bool_params_for_packing(op: OperationType) -> bool {
    matches!(
        op,
        OperationType::Conv2d
            | OperationType::DepthwiseConv2d
            | OperationType::GroupedConv2d
            | OperationType::TransposeConv2d
    )
}

/// Whether this driver executes `op`: an operation some family lists signatures for (every
/// NNAPI 1.0 operation but OEM_OPERATION, and the later ones the families add).
pub fn is_supported(op: OperationType) -> bool {
    !matches!(arity(op), Arity::Any)
}

/// A signature held by value: the later-version tables are built once at first use.
#[derive(Debug, Clone)]
pub struct LaterSignature {
    pub inputs: Vec<OperandType>,
    pub outputs: Vec<OperandType>,
    /// SPLIT: any number (≥ 1) of outputs, each of the one type in `outputs`.
    pub repeat_outputs: bool,
}

/// The signatures NNAPI 1.1–1.3 (the AIDL V1 operation set, feature level 5) added to the
/// NNAPI 1.0 operations: float16 and signed-quantized variants, the optional NCHW `layout`,
/// dilation, `axis`, `align_corners` / `half_pixel_centers` inputs, per-channel filters,
/// int32 arithmetic, layer-normalised LSTM. A model using one is valid; unless [`arity`] lists
/// it too (the layout and resize forms the kernels run), it is reported unsupported.
pub fn later_signatures(op: OperationType) -> &'static [LaterSignature] {
    use std::collections::HashMap;
    use std::sync::LazyLock;
    static TABLE: LazyLock<HashMap<OperationType, Vec<LaterSignature>>> =
        LazyLock::new(build_later_table);
    TABLE.get(&op).map_or(&[], Vec::as_slice)
}

/// The element types later versions accept for CONCATENATION beyond float32 and uint8.
pub const LATER_CONCATENATION_TYPES: &[OperandType] = &[
    OperandType::TensorFloat16,
    OperandType::TensorQuant8AsymmSigned,
];

fn build_later_table() -> std::collections::HashMap<OperationType, Vec<LaterSignature>> {
    use OperandType::{
        Bool as B, Float16 as SH, TensorFloat16 as H, TensorQuant8AsymmSigned as QS,
        TensorQuant8Symm as Q8S, TensorQuant8SymmPerChannel as QC,
    };
    use OperationType::*;
    let mut t: std::collections::HashMap<OperationType, Vec<LaterSignature>> = Default::default();
    let mut add = |op: OperationType, inputs: Vec<OperandType>, outputs: Vec<OperandType>| {
        // SPLIT's table entry names one output type, which every output repeats.
        let repeat_outputs = op == Split;
        t.entry(op).or_default().push(LaterSignature {
            inputs,
            outputs,
            repeat_outputs,
        });
    };
    let rep = |ty: OperandType, n: usize| vec![ty; n];
    let cat = |parts: &[&[OperandType]]| parts.concat();

    for op in [Add, Mul] {
        for ty in [H, QS] {
            add(op, vec![ty, ty, SI], vec![ty]);
        }
    }
    // Pools: explicit padding (9 scalars) or implicit (6), then an optional BOOL layout.
    for op in [AveragePool2d, MaxPool2d, L2Pool2d] {
        let types: &[OperandType] = if op == L2Pool2d {
            &[F, H]
        } else {
            &[F, H, Q, QS]
        };
        for &ty in types {
            for scalars in [9, 6] {
                let base = cat(&[&[ty], &rep(SI, scalars)]);
                if matches!(ty, H | QS) {
                    add(op, base.clone(), vec![ty]);
                }
                add(op, cat(&[&base, &[B]]), vec![ty]);
            }
        }
    }
    // Convolutions: (input, filter, bias) type triples; explicit or implicit padding scalars,
    // then optional layout, then optional dilation factors.
    let conv_types: &[(OperandType, OperandType, OperandType)] = &[
        (F, F, F),
        (H, H, H),
        (Q, Q, I),
        (Q, QC, I),
        (QS, QS, I),
        (QS, QC, I),
    ];
    for (op, explicit, implicit) in [(Conv2d, 7, 4), (DepthwiseConv2d, 8, 5)] {
        for &(x, w, b) in conv_types {
            for scalars in [explicit, implicit] {
                let base = cat(&[&[x, w, b], &rep(SI, scalars)]);
                let old = matches!((x, w), (F, F) | (Q, Q));
                if !old {
                    add(op, base.clone(), vec![x]);
                }
                add(op, cat(&[&base, &[B]]), vec![x]);
                add(op, cat(&[&base, &[B, SI, SI]]), vec![x]);
            }
        }
    }
    for op in [DepthToSpace, SpaceToDepth] {
        for ty in [F, H, Q, QS] {
            if matches!(ty, H | QS) {
                add(op, vec![ty, SI], vec![ty]);
            }
            add(op, vec![ty, SI, B], vec![ty]);
        }
    }
    for input in [Q, QS, Q8S, QC] {
        for output in [F, H] {
            if (input, output) != (Q, F) {
                add(Dequantize, vec![input], vec![output]);
            }
        }
    }
    for ty in [H, QS] {
        add(EmbeddingLookup, vec![I, ty], vec![ty]);
        add(Reshape, vec![ty, I], vec![ty]);
    }
    add(Floor, vec![H], vec![H]);
    add(FullyConnected, vec![H, H, H, SI], vec![H]);
    add(FullyConnected, vec![QS, QS, I, SI], vec![QS]);
    for ty in [F, H, Q, QS] {
        if ty != F {
            add(L2Normalization, vec![ty], vec![ty]);
        }
        add(L2Normalization, vec![ty, SI], vec![ty]);
    }
    add(
        LocalResponseNormalization,
        vec![F, SI, SF, SF, SF, SI],
        vec![F],
    );
    add(LocalResponseNormalization, vec![H, SI, SH, SH, SH], vec![H]);
    add(
        LocalResponseNormalization,
        vec![H, SI, SH, SH, SH, SI],
        vec![H],
    );
    for op in [Logistic, Relu, Relu1, Relu6, Tanh] {
        for ty in [H, QS] {
            add(op, vec![ty], vec![ty]);
        }
    }
    // LSH_PROJECTION: the weights take the hash's type; the input any of four.
    for hash in [F, H] {
        for lookup in [F, H, I, Q] {
            if hash == F && lookup != H {
                continue; // NNAPI 1.0
            }
            add(LshProjection, vec![hash, lookup, hash, SI], vec![I]);
        }
    }
    // LSTM: float16 (clips in FLOAT16), and the layer-normalised form with 4 more weights.
    for (ty, clip) in [(F, SF), (H, SH)] {
        let base = cat(&[&rep(ty, 20), &[SI, clip, clip]]);
        if ty == H {
            add(Lstm, base.clone(), rep(ty, 4));
        }
        add(Lstm, cat(&[&base, &rep(ty, 4)]), rep(ty, 4));
    }
    for (ty, scale) in [(F, SF), (H, SH), (Q, SF), (QS, SF)] {
        for size in [SI, scale] {
            // After the layout, align_corners and then half_pixel_centers may each be given.
            for tail in [&[][..], &[B], &[B, B], &[B, B, B]] {
                let inputs = cat(&[&[ty, size, size], tail]);
                if ty == F && size == SI && tail.is_empty() {
                    continue; // NNAPI 1.0
                }
                add(ResizeBilinear, inputs, vec![ty]);
            }
        }
    }
    add(Rnn, rep(H, 5).into_iter().chain([SI]).collect(), vec![H, H]);
    add(Svdf, cat(&[&rep(H, 5), &[SI, SI]]), vec![H, H]);
    for (ty, beta) in [(F, SF), (Q, SF), (QS, SF), (H, SH)] {
        if matches!(ty, QS | H) {
            add(Softmax, vec![ty, beta], vec![ty]);
        }
        add(Softmax, vec![ty, beta, SI], vec![ty]);
    }
    later_operations(&mut add);
    t
}

/// Operations NNAPI 1.1–1.2 introduced, with every signature up to NNAPI 1.3 (the
/// NeuralNetworks.h operation docs, checked against the platform's validator): such an
/// operation matching none of them is malformed. The rest follow in [`later_operations_2`].
fn later_operations(add: &mut impl FnMut(OperationType, Vec<OperandType>, Vec<OperandType>)) {
    use OperandType::{
        Float16 as SH, TensorBool8, TensorFloat16 as H, TensorQuant16Asymm as Q16,
        TensorQuant8AsymmSigned as QS, TensorQuant8SymmPerChannel as QC,
    };
    use OperationType::*;
    // SUB (1.1 float32; 1.2 float16, quant8; 1.3 signed quant8, int32), DIV (1.1 float32;
    // 1.2 float16; 1.3 int32): two tensors of one type and the fused activation.
    for ty in [F, H, Q, QS, I] {
        add(Sub, vec![ty, ty, SI], vec![ty]);
    }
    for ty in [F, H, I] {
        add(Div, vec![ty, ty, SI], vec![ty]);
    }
    // CHANNEL_SHUFFLE (1.2): tensor, number of groups, axis.
    for ty in [F, H, Q, QS] {
        add(ChannelShuffle, vec![ty, SI, SI], vec![ty]);
    }
    // RESIZE_NEAREST_NEIGHBOR (1.2): output sizes (INT32) or scales (FLOAT16 for float16,
    // else FLOAT32), the layout, then (1.3) align_corners and half_pixel_centers.
    for (ty, scale) in [(F, SF), (H, SH), (Q, SF), (QS, SF)] {
        for size in [SI, scale] {
            add(ResizeNearestNeighbor, vec![ty, size, size, B], vec![ty]);
            add(ResizeNearestNeighbor, vec![ty, size, size, B, B], vec![ty]);
            add(
                ResizeNearestNeighbor,
                vec![ty, size, size, B, B, B],
                vec![ty],
            );
        }
    }
    // TRANSPOSE_CONV_2D and GROUPED_CONV_2D (1.2): input, filter, bias, then explicit
    // padding or (TRANSPOSE_CONV_2D) an output shape and a padding scheme / (GROUPED_CONV_2D)
    // a padding scheme, strides, (GROUPED_CONV_2D) the group count, activation and layout.
    let conv_types = [
        (F, F, F),
        (H, H, H),
        (Q, Q, I),
        (Q, QC, I),
        (QS, QS, I),
        (QS, QC, I),
    ];
    for (x, w, b) in conv_types {
        let head = [x, w, b];
        add(
            TransposeConv2d,
            [&head[..], &[SI; 7], &[B]].concat(),
            vec![x],
        );
        add(
            TransposeConv2d,
            [&head[..], &[I], &[SI; 4], &[B]].concat(),
            vec![x],
        );
        add(GroupedConv2d, [&head[..], &[SI; 8], &[B]].concat(), vec![x]);
        add(GroupedConv2d, [&head[..], &[SI; 5], &[B]].concat(), vec![x]);
    }
    let all = [F, H, I, Q, QS];
    let float = [F, H];
    let floats_quant = [F, H, Q, QS];
    // BATCH_TO_SPACE_ND / SPACE_TO_BATCH_ND (1.1; the layout 1.2): block shape, (paddings).
    for ty in floats_quant {
        add(BatchToSpaceNd, vec![ty, I], vec![ty]);
        add(BatchToSpaceNd, vec![ty, I, B], vec![ty]);
        add(SpaceToBatchNd, vec![ty, I, I], vec![ty]);
        add(SpaceToBatchNd, vec![ty, I, I, B], vec![ty]);
        // STRIDED_SLICE (1.1): begin, end, strides, then three masks.
        add(StridedSlice, vec![ty, I, I, I, SI, SI, SI], vec![ty]);
        // MEAN (1.1): axes and keep_dims (INT32); REDUCE_MIN / MAX (1.2): axes, keep_dims BOOL.
        add(Mean, vec![ty, I, SI], vec![ty]);
        add(ReduceMin, vec![ty, I, B], vec![ty]);
        add(ReduceMax, vec![ty, I, B], vec![ty]);
        // PAD (1.1): paddings; PRELU (1.2): alpha of the input's type; HARD_SWISH (1.3).
        add(Pad, vec![ty, I], vec![ty]);
        add(Prelu, vec![ty, ty], vec![ty]);
        add(HardSwish, vec![ty], vec![ty]);
    }
    for (ty, pad) in [(F, SF), (H, SH), (Q, SI), (QS, SI)] {
        add(PadV2, vec![ty, I, pad], vec![ty]);
    }
    for ty in all {
        // SLICE, GATHER, EXPAND_DIMS, SELECT, TOPK_V2, MAXIMUM / MINIMUM, ARGMAX / ARGMIN (1.2).
        add(Slice, vec![ty, I, I], vec![ty]);
        add(Gather, vec![ty, SI, I], vec![ty]);
        add(ExpandDims, vec![ty, SI], vec![ty]);
        add(Select, vec![TensorBool8, ty, ty], vec![ty]);
        add(TopkV2, vec![ty, SI], vec![ty, I]);
        add(Maximum, vec![ty, ty], vec![ty]);
        add(Minimum, vec![ty, ty], vec![ty]);
        add(Argmax, vec![ty, SI], vec![I]);
        add(Argmin, vec![ty, SI], vec![I]);
    }
    // The comparisons (1.2): two tensors of one type to TENSOR_BOOL8.
    for ty in [TensorBool8, F, H, I, Q, QS] {
        for op in [Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual] {
            add(op, vec![ty, ty], vec![TensorBool8]);
        }
    }
    for op in [LogicalAnd, LogicalOr] {
        add(op, vec![TensorBool8, TensorBool8], vec![TensorBool8]);
    }
    add(LogicalNot, vec![TensorBool8], vec![TensorBool8]);
    for op in [ReduceAny, ReduceAll] {
        add(op, vec![TensorBool8, I, B], vec![TensorBool8]);
    }
    for ty in float {
        // The float-only element-wise operations and reductions (1.2).
        for op in [Exp, Log, Sin, Sqrt] {
            add(op, vec![ty], vec![ty]);
        }
        add(Pow, vec![ty, ty], vec![ty]);
        add(ReduceSum, vec![ty, I, B], vec![ty]);
        add(ReduceProd, vec![ty, I, B], vec![ty]);
    }
    // ABS and NEG: float (1.2), int32 (NEG 1.2, ABS 1.3).
    for ty in [F, H, I] {
        add(Abs, vec![ty], vec![ty]);
        add(Neg, vec![ty], vec![ty]);
    }
    for (ty, scalar) in [(F, SF), (H, SH)] {
        // LOG_SOFTMAX (1.2): beta, axis; INSTANCE_NORMALIZATION (1.2): gamma, beta, epsilon,
        // layout; ELU (1.3): alpha.
        add(LogSoftmax, vec![ty, scalar, SI], vec![ty]);
        add(
            InstanceNormalization,
            vec![ty, scalar, scalar, scalar, B],
            vec![ty],
        );
        add(Elu, vec![ty, scalar], vec![ty]);
    }
    // FILL (1.3): the output shape and a value of the element type.
    for (ty, value) in [(F, SF), (H, SH), (I, SI)] {
        add(Fill, vec![I, value], vec![ty]);
    }
    // QUANTIZE (1.2; signed output 1.3).
    for input in float {
        for output in [Q, QS] {
            add(Quantize, vec![input], vec![output]);
        }
    }
    // HEATMAP_MAX_KEYPOINT (1.2): heatmaps, boxes, layout → scores, keypoints.
    for (ty, roi) in [(F, F), (H, H), (Q, Q16), (QS, Q16)] {
        add(HeatmapMaxKeypoint, vec![ty, roi, B], vec![ty, roi]);
    }
    // BOX_WITH_NMS_LIMIT and ROI_ALIGN (1.2): quantized scores and feature maps take
    // TENSOR_QUANT16_ASYMM boxes and FLOAT32 scalars.
    for (ty, roi, scalar) in [(F, F, SF), (H, H, SH), (Q, Q16, SF), (QS, Q16, SF)] {
        add(
            BoxWithNmsLimit,
            vec![ty, roi, I, scalar, SI, SI, scalar, scalar, scalar],
            vec![ty, roi, I, I],
        );
        add(
            RoiAlign,
            vec![ty, roi, I, SI, SI, scalar, scalar, SI, SI, B],
            vec![ty],
        );
        // ROI_POOLING (1.2): output size, ratios, layout.
        add(
            RoiPooling,
            vec![ty, roi, I, SI, SI, scalar, scalar, B],
            vec![ty],
        );
    }
    // AXIS_ALIGNED_BBOX_TRANSFORM (1.2): boxes, deltas, batch splits, image info; quantized
    // boxes are TENSOR_QUANT16_ASYMM with either 8-bit asymmetric deltas.
    for (roi, deltas) in [(F, F), (H, H), (Q16, Q), (Q16, QS)] {
        add(
            AxisAlignedBboxTransform,
            vec![roi, deltas, I, roi],
            vec![roi],
        );
    }
    // TILE (1.2): multiples.
    for ty in [F, H, I, Q, QS] {
        add(Tile, vec![ty, I], vec![ty]);
    }
    later_operations_2(add);
}

/// The rest of the NNAPI 1.1–1.3 operations, from the platform's validator of each (the
/// recurrent sequence operations, the detection operations, SPLIT, CAST, RANK, ...). IF and
/// WHILE are checked against their referenced subgraphs instead (`validate`).
fn later_operations_2(add: &mut impl FnMut(OperationType, Vec<OperandType>, Vec<OperandType>)) {
    use OperandType::{
        Float16 as SH, TensorBool8, TensorFloat16 as H, TensorQuant16Asymm as Q16,
        TensorQuant16Symm as Q16S, TensorQuant8AsymmSigned as QS, TensorQuant8Symm as Q8S,
        TensorQuant8SymmPerChannel as QC,
    };
    use OperationType::*;
    let rep = |ty: OperandType, n: usize| vec![ty; n];
    // SQUEEZE and TRANSPOSE (1.1; float16 1.2, signed 1.3): the tensor and its (optional)
    // squeeze dimensions / permutation.
    for ty in [F, H, Q, QS] {
        add(Squeeze, vec![ty, I], vec![ty]);
        add(Transpose, vec![ty, I], vec![ty]);
    }
    // SPLIT (1.2; signed 1.3): tensor, axis, number of splits; every output of the input type.
    for ty in [F, H, I, Q, QS] {
        add(Split, vec![ty, SI, SI], vec![ty]);
    }
    // CAST (1.2): between float16, float32, int32 and uint8 in any direction; (1.3) the
    // identity on the other tensor types.
    for from in [F, H, I, Q] {
        for to in [F, H, I, Q] {
            add(Cast, vec![from], vec![to]);
        }
    }
    for ty in [TensorBool8, Q16, Q16S, QS, Q8S] {
        add(Cast, vec![ty], vec![ty]);
    }
    // RANK (1.3): any tensor to an INT32 scalar.
    for ty in [H, F, I, Q, Q16S, TensorBool8, QC, Q16, Q8S, QS] {
        add(Rank, vec![ty], vec![SI]);
    }
    // RSQRT (1.2) and RANDOM_MULTINOMIAL (1.2): float only.
    for ty in [F, H] {
        add(Rsqrt, vec![ty], vec![ty]);
        add(RandomMultinomial, vec![ty, SI, I], vec![I]);
    }
    for (ty, scalar) in [(F, SF), (H, SH)] {
        // UNIDIRECTIONAL_SEQUENCE_RNN (1.2): input, weights, recurrent weights, bias, hidden
        // state, activation, time_major; (1.3) the final hidden state as a second output.
        let rnn = [rep(ty, 5), vec![SI, SI]].concat();
        add(UnidirectionalSequenceRnn, rnn.clone(), vec![ty]);
        add(UnidirectionalSequenceRnn, rnn, vec![ty, ty]);
        // BIDIRECTIONAL_SEQUENCE_RNN (1.2): both directions' weights and states, auxiliary
        // input and weights, activation, time_major, merge_outputs; 1 or 2 outputs, (1.3) with
        // the final states 3 or 4.
        let birnn = [rep(ty, 12), vec![SI, B, B]].concat();
        for n in 1..=4 {
            add(BidirectionalSequenceRnn, birnn.clone(), rep(ty, n));
        }
        // UNIDIRECTIONAL_SEQUENCE_LSTM (1.2): the LSTM tensors, activation, the two clips,
        // time_major, the layer-normalisation weights; (1.3) the final states as outputs.
        let lstm = [rep(ty, 20), vec![SI, scalar, scalar, B], rep(ty, 4)].concat();
        add(UnidirectionalSequenceLstm, lstm.clone(), vec![ty]);
        add(UnidirectionalSequenceLstm, lstm, rep(ty, 3));
        // BIDIRECTIONAL_SEQUENCE_LSTM (1.2): 48 tensors of both directions, activation, clips,
        // merge_outputs, time_major, 8 layer-normalisation weights; 1, 2, (1.3) 5 or 6 outputs.
        let bilstm = [rep(ty, 48), vec![SI, scalar, scalar, B, B], rep(ty, 8)].concat();
        for n in [1, 2, 5, 6] {
            add(BidirectionalSequenceLstm, bilstm.clone(), rep(ty, n));
        }
        // DETECTION_POSTPROCESSING (1.2): scores, deltas, anchors, the box scales, the
        // regular-NMS flag, the limits, the thresholds and whether to include the background.
        add(
            DetectionPostprocessing,
            [
                rep(ty, 3),
                rep(scalar, 4),
                vec![B, SI, SI, SI, scalar, scalar, B],
            ]
            .concat(),
            vec![ty, ty, I, I],
        );
    }
    // GENERATE_PROPOSALS (1.2; signed 1.3): scores, deltas, anchors, image info, the
    // height/width ratios, the pre/post-NMS limits, IoU and minimum size, layout.
    for (ty, deltas_anchors, info, scalar) in [
        (F, [F, F], F, SF),
        (H, [H, H], H, SH),
        (Q, [Q, Q16S], Q16, SF),
        (QS, [QS, Q16S], Q16, SF),
    ] {
        add(
            GenerateProposals,
            vec![
                ty,
                deltas_anchors[0],
                deltas_anchors[1],
                info,
                scalar,
                scalar,
                SI,
                SI,
                scalar,
                scalar,
                B,
            ],
            vec![ty, info, I],
        );
    }
    // QUANTIZED_16BIT_LSTM (1.2): uint8 input, 8 weights and previous output, int32 biases,
    // the 16-bit cell state; outputs the new cell state and output.
    add(
        Quantized16bitLstm,
        [rep(Q, 9), rep(I, 4), vec![Q16S, Q]].concat(),
        vec![Q16S, Q],
    );
    // QUANTIZED_LSTM (1.3): signed input, 8 symmetric weights, 3 peephole weights, 4 gate
    // biases, projection weights and bias, previous output and cell state, 4 layer-norm
    // weights, the clips and gate scales, the hidden state's zero point and scale.
    add(
        QuantizedLstm,
        [
            vec![QS],
            rep(Q8S, 8),
            rep(Q16S, 3),
            rep(I, 4),
            vec![Q8S, I, QS, Q16S],
            rep(Q16S, 4),
            rep(SF, 6),
            vec![SI, SF],
        ]
        .concat(),
        vec![QS, Q16S, QS],
    );
}
