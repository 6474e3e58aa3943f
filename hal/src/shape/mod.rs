//! Shape inference and parameter resolution for every operation the driver runs (types.hal 1.0,
//! each operation's "Inputs"/"Outputs" text; `docs/hal-contract.md` for what is refused
//! before running that the reference only enforced while running).
//!
//! [`infer`] takes the operation's inputs (type, dimensions, quantization and, for scalar and
//! shape parameters, their bytes) and returns the output dimensions plus the resolved parameters
//! ([`Params`]) the executor needs. The same function runs at prepare time, when everything is
//! static, and again at execution time, when model-input dimensions or runtime scalar
//! parameters become known; "not known yet" is [`InferError::Unknown`], never an error.
//! All arithmetic is checked: no overflow, no zero or negative extents.
//!
//! The rules of each operation sit in the module of its family (`conv`, `elementwise`,
//! `index`, `lookup`, `normalization`, `pool`, `recurrent`, `reduce`, `transform`; the same names as the
//! kernels' and the executor's), beside the signatures the driver runs for it. This module
//! holds what they share: the input accessors, window and broadcast arithmetic, the
//! [`Params`] they resolve, the NCHW `layout` handling, and the dispatch.

use crate::ops::Arity;
use crate::types::{FusedActivationFunc, OperandType, OperationType};

/// One input of an operation as inference sees it.
#[derive(Clone, Copy, Debug)]
pub struct Arg<'a> {
    pub ty: OperandType,
    /// 0 = not specified.
    pub dims: &'a [u32],
    pub scale: f32,
    pub zero_point: i32,
    /// The value bytes, when known (constants; runtime inputs at execution time).
    pub value: Option<&'a [u8]>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InferError {
    /// The operation is malformed; the message says why.
    Invalid(String),
    /// Some dimension or parameter value is not known yet.
    Unknown,
}

type Res<T> = Result<T, InferError>;

macro_rules! bad {
    ($($arg:tt)*) => { return Err($crate::shape::InferError::Invalid(format!($($arg)*))) };
}
macro_rules! check {
    ($cond:expr, $($arg:tt)*) => { if !$cond { bad!($($arg)*); } };
}

// One module per operation family, named as in the kernels (`nnhal_kernels`) and the driver's
// executor: each holds the signatures the driver runs and the shape rules of its operations.
pub(crate) mod conv;
pub(crate) mod detection;
pub(crate) mod elementwise;
pub(crate) mod index;
pub(crate) mod logic;
pub(crate) mod lookup;
pub(crate) mod math;
pub(crate) mod normalization;
pub(crate) mod pool;
pub(crate) mod quantize;
pub(crate) mod random;
pub(crate) mod recurrent;
pub(crate) mod reduce;
pub(crate) mod transform;

/// Explicit padding in elements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pad {
    pub left: u32,
    pub right: u32,
    pub top: u32,
    pub bottom: u32,
}

/// Sliding-window geometry (convolutions and pooling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowParams {
    pub pad: Pad,
    pub stride_w: u32,
    pub stride_h: u32,
    pub filter_w: u32,
    pub filter_h: u32,
    /// Convolution dilation factors (NNAPI 1.2; 1 otherwise): taps are this far apart, so the
    /// window spans `(filter − 1)·dilation + 1` inputs (what padding and output extents use).
    pub dilation_w: u32,
    pub dilation_h: u32,
}

/// LSH_PROJECTION type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LshKind {
    /// Type 1 (NNAPI 1.2 renamed it `SPARSE_DEPRECATED`).
    Sparse,
    /// Type 2.
    Dense,
    /// Type 3 (NNAPI 1.2's `SPARSE`): type 1 with each hash function offset into its own
    /// range of `2^num_bits` values.
    SparseBucketed,
}

/// LSTM configuration resolved from which optional inputs are present.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LstmParams {
    pub batch: u32,
    pub input_size: u32,
    pub units: u32,
    pub output_size: u32,
    /// 0 none, 1 relu, 3 relu6, 4 tanh, 6 sigmoid.
    pub activation: i32,
    pub cell_clip: f32,
    pub proj_clip: f32,
    pub cifg: bool,
    pub peephole: bool,
    pub projection: bool,
    pub projection_bias: bool,
    /// NNAPI 1.2 layer normalisation: the 27-input form with its forget, cell and output
    /// layer-norm weights (inputs 24–26, and 23 unless CIFG) present.
    pub layer_norm: bool,
}

/// QUANTIZED_LSTM's sizes, optional groups and scalar inputs (NNAPI 1.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QLstmParams {
    pub batch: u32,
    pub input_size: u32,
    pub units: u32,
    pub output_size: u32,
    /// The cell state's scale is `2^cell_shift` (−15..=−9).
    pub cell_shift: i32,
    pub cell_clip: f32,
    pub projection_clip: f32,
    /// The intermediate scales of the input, forget, cell and output gates (inputs 26–29).
    pub intermediate_scales: [f32; 4],
    pub hidden_zero_point: i32,
    pub hidden_scale: f32,
}

/// The time axis of a sequence operation (NNAPI 1.2 UNIDIRECTIONAL_ and
/// BIDIRECTIONAL_SEQUENCE_RNN / _LSTM): input 0 is `[max_time, batch, input_size]` when
/// `time_major`, else `[batch, max_time, input_size]`; the outputs follow the same layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqParams {
    pub max_time: u32,
    pub batch: u32,
    pub time_major: bool,
    /// BIDIRECTIONAL_*: the backward output is concatenated to the forward one along the last
    /// axis in output 0 instead of having an output of its own.
    pub merge_outputs: bool,
}

/// How the auxiliary input of a BIDIRECTIONAL_SEQUENCE_* operation is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuxLinking {
    /// No auxiliary input and no auxiliary weights.
    None,
    /// An auxiliary input without weights: the backward direction reads it instead of input 0.
    Parallel,
    /// An auxiliary input with weights for both directions: each direction adds the
    /// auxiliary weights times the auxiliary input to its gates.
    Cross,
}

/// UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqRnnParams {
    pub seq: SeqParams,
    pub input_size: u32,
    /// Width of the auxiliary input (0 without one).
    pub aux_size: u32,
    pub linking: AuxLinking,
    pub fw_units: u32,
    /// 0 for UNIDIRECTIONAL_SEQUENCE_RNN.
    pub bw_units: u32,
    pub act: FusedActivationFunc,
}

/// UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_LSTM: one [`LstmParams`] per direction (their
/// `batch` is the sequence's, their `input_size` what that direction reads).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SeqLstmParams {
    pub seq: SeqParams,
    pub aux_size: u32,
    pub linking: AuxLinking,
    pub fw: LstmParams,
    /// `None` for UNIDIRECTIONAL_SEQUENCE_LSTM.
    pub bw: Option<LstmParams>,
}

/// Parameters resolved from scalar inputs and shapes.
#[derive(Clone, Debug, PartialEq)]
pub enum Params {
    /// Operations with no parameters beyond their tensors.
    Plain,
    /// ADD, MUL: fused activation.
    Binary {
        act: FusedActivationFunc,
    },
    /// Pooling: window and activation.
    Pool {
        window: WindowParams,
        act: FusedActivationFunc,
    },
    Concat {
        axis: usize,
    },
    Conv {
        window: WindowParams,
        act: FusedActivationFunc,
    },
    Depthwise {
        window: WindowParams,
        multiplier: u32,
        act: FusedActivationFunc,
    },
    /// GROUPED_CONV_2D (NNAPI 1.2): a convolution of `groups` channel slices.
    GroupedConv {
        window: WindowParams,
        groups: u32,
        act: FusedActivationFunc,
    },
    /// TRANSPOSE_CONV_2D (NNAPI 1.2): strides and the leading paddings (the trailing ones,
    /// which may be negative, only shape the output).
    TransposeConv {
        pad_left: u32,
        pad_top: u32,
        stride_w: u32,
        stride_h: u32,
        act: FusedActivationFunc,
    },
    /// INSTANCE_NORMALIZATION (NNAPI 1.2).
    InstanceNorm {
        gamma: f32,
        beta: f32,
        epsilon: f32,
    },
    /// DEPTH_TO_SPACE, SPACE_TO_DEPTH.
    Block {
        block: u32,
    },
    FullyConnected {
        batch: u32,
        input_size: u32,
        units: u32,
        act: FusedActivationFunc,
    },
    /// ELU (NNAPI 1.3): the scale of the negative part.
    Elu {
        alpha: f32,
    },
    /// EMBEDDING_LOOKUP, HASHTABLE_LOOKUP: rows of the value table and the length of each row.
    Lookup {
        rows: u32,
        row_len: u32,
    },
    /// LOCAL_RESPONSE_NORMALIZATION along an axis: `depth` elements `inner` apart.
    Lrn {
        radius: u32,
        bias: f32,
        alpha: f32,
        beta: f32,
        depth: u32,
        inner: u32,
    },
    Lsh {
        kind: LshKind,
        num_hash: u32,
        num_bits: u32,
        input_rows: u32,
    },
    Lstm(LstmParams),
    /// RESIZE_BILINEAR: output size and the NNAPI 1.3 coordinate modes (inputs 4 and 5).
    Resize {
        height: u32,
        width: u32,
        align_corners: bool,
        half_pixel_centers: bool,
    },
    Rnn {
        batch: u32,
        input_size: u32,
        units: u32,
        act: FusedActivationFunc,
    },
    /// UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_RNN (NNAPI 1.2).
    SeqRnn(SeqRnnParams),
    /// QUANTIZED_16BIT_LSTM (NNAPI 1.2): sizes, the weights' shared zero point and the
    /// biases' scale.
    QuantizedLstm16 {
        batch: u32,
        input_size: u32,
        units: u32,
        weights_zero_point: i32,
        bias_scale: f32,
    },
    /// QUANTIZED_LSTM (NNAPI 1.3).
    QuantizedLstm(QLstmParams),
    /// UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_LSTM (NNAPI 1.2).
    SeqLstm(SeqLstmParams),
    /// SOFTMAX (and NNAPI 1.2's LOG_SOFTMAX) along an axis: `depth` elements `inner` apart
    /// (`inner` = 1: the last axis).
    Softmax {
        beta: f32,
        depth: u32,
        inner: u32,
    },
    /// L2_NORMALIZATION along an axis, as for SOFTMAX.
    Depth {
        depth: u32,
        inner: u32,
    },
    /// PAD: elements added before and after each axis.
    Pad {
        before: Vec<u32>,
        after: Vec<u32>,
    },
    /// TRANSPOSE: output axis `k` is input axis `perm[k]`.
    Transpose {
        perm: Vec<u32>,
    },
    /// STRIDED_SLICE: per input axis the first index, the step and the number of elements
    /// taken (shrunk axes take one). `fault` is a slice the reference refuses only when it runs
    /// (a shrunk axis with a negative stride or other than one element): execution fails.
    StridedSlice {
        begin: Vec<u32>,
        step: Vec<i32>,
        count: Vec<u32>,
        fault: Option<String>,
    },
    /// TILE (NNAPI 1.2): how many times each axis repeats.
    Tile {
        multiples: Vec<u32>,
    },
    /// CHANNEL_SHUFFLE (NNAPI 1.2): the number of groups and the (non-negative) axis.
    ChannelShuffle {
        groups: u32,
        axis: u32,
    },
    /// SPLIT (NNAPI 1.2): the (non-negative) axis cut into as many equal parts as outputs.
    Split {
        axis: u32,
    },
    /// GATHER (NNAPI 1.2): the (non-negative) axis the indices select along.
    Gather {
        axis: u32,
    },
    /// MEAN, REDUCE_ALL, REDUCE_ANY: the reduced axes, ascending, each once.
    Reduce {
        axes: Vec<u32>,
    },
    /// SPACE_TO_BATCH_ND (NHWC): block height and width, padding top, bottom, left, right.
    SpaceToBatch {
        block: [u32; 2],
        pad: [u32; 4],
    },
    /// BATCH_TO_SPACE_ND (NHWC): block height and width.
    BatchToSpace {
        block: [u32; 2],
    },
    /// An image operation given NCHW (its BOOL `layout` true, NNAPI 1.2): the parameters of
    /// the same operation on the NHWC transpose of input 0, whose output is transposed back.
    Nchw(Box<Params>),
    Svdf {
        batch: u32,
        input_size: u32,
        num_filters: u32,
        memory_size: u32,
        rank: u32,
        units: u32,
        act: FusedActivationFunc,
    },
}

impl Params {
    /// The output counts the operation allows with these parameters, where that depends on
    /// more than the operand types (the sequence operations' `merge_outputs` and optional
    /// state outputs); `None` when the signature alone decides.
    pub fn output_counts(&self) -> Option<&'static [usize]> {
        recurrent::output_counts(self)
    }

    /// The parameters of the NHWC operation (the same, unless [`Params::Nchw`]).
    pub fn nhwc(&self) -> &Params {
        match self {
            Params::Nchw(inner) => inner,
            other => other,
        }
    }
}

/// Output dimensions and resolved parameters of one operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    pub outputs: Vec<Vec<u32>>,
    pub params: Params,
}

/// Largest element count of any tensor this driver accepts (2^31 − 1): beyond it byte sizes
/// and offsets stop fitting the 32-bit fields of `DataLocation`.
pub const MAX_ELEMENTS: u64 = i32::MAX as u64;

/// Largest rank of the tensors the data-movement loops walk row by row (TILE, SLICE, GATHER's
/// output): the rank-4 tensors of the specification's examples and views of higher rank.
pub const MAX_MOVE_RANK: usize = 6;

/// The element count of fully-specified `dims` (1 for scalars), or an error on overflow.
pub fn element_count(dims: &[u32]) -> Result<u64, String> {
    let mut n: u64 = 1;
    for &d in dims {
        n = n
            .checked_mul(u64::from(d))
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| format!("dimensions {dims:?} hold more than {MAX_ELEMENTS} elements"))?;
    }
    Ok(n)
}

struct Ins<'a, 'b> {
    args: &'b [Option<Arg<'a>>],
}

impl<'a> Ins<'a, '_> {
    fn get(&self, i: usize) -> Res<&Arg<'a>> {
        match self.args.get(i) {
            Some(Some(a)) => Ok(a),
            _ => bad!("input {i} is required but omitted"),
        }
    }

    fn present(&self, i: usize) -> bool {
        matches!(self.args.get(i), Some(Some(_)))
    }

    /// Fully-specified dimensions of tensor input `i`.
    fn dims(&self, i: usize) -> Res<&'a [u32]> {
        let a = self.get(i)?;
        // A 0 extent, or a tensor of unknown rank (allowed inside IF/WHILE bodies).
        if a.dims.contains(&0) || (a.ty.is_tensor() && a.dims.is_empty()) {
            return Err(InferError::Unknown);
        }
        Ok(a.dims)
    }

    fn dims_rank(&self, i: usize, rank: usize, what: &str) -> Res<&'a [u32]> {
        let d = self.dims(i)?;
        check!(
            d.len() == rank,
            "{what} (input {i}) must have rank {rank}, has {}",
            d.len()
        );
        Ok(d)
    }

    fn bytes(&self, i: usize) -> Res<&'a [u8]> {
        self.get(i)?.value.ok_or(InferError::Unknown)
    }

    fn i32(&self, i: usize) -> Res<i32> {
        let b = self.bytes(i)?;
        check!(b.len() == 4, "scalar input {i} has {} bytes", b.len());
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A BOOL scalar: one byte, nonzero is true.
    fn bool(&self, i: usize) -> Res<bool> {
        let b = self.bytes(i)?;
        check!(b.len() == 1, "scalar input {i} has {} bytes", b.len());
        Ok(b[0] != 0)
    }

    fn f32(&self, i: usize) -> Res<f32> {
        let v = f32::from_bits(self.i32(i)? as u32);
        check!(v.is_finite(), "scalar input {i} is not finite ({v})");
        Ok(v)
    }

    fn positive(&self, i: usize, what: &str) -> Res<u32> {
        let v = self.i32(i)?;
        check!(v > 0, "{what} (input {i}) must be positive, is {v}");
        Ok(v as u32)
    }

    fn non_negative(&self, i: usize, what: &str) -> Res<u32> {
        let v = self.i32(i)?;
        check!(v >= 0, "{what} (input {i}) must not be negative, is {v}");
        Ok(v as u32)
    }

    fn act(&self, i: usize) -> Res<FusedActivationFunc> {
        let v = self.i32(i)?;
        FusedActivationFunc::from_raw(v).ok_or_else(|| {
            InferError::Invalid(format!("fused activation (input {i}) must be 0..3, is {v}"))
        })
    }
}

fn mul(a: u32, b: u32) -> Res<u32> {
    a.checked_mul(b)
        .filter(|&v| u64::from(v) <= MAX_ELEMENTS)
        .ok_or_else(|| InferError::Invalid(format!("extent {a}·{b} overflows")))
}

fn rank_at_most(d: &[u32], max: usize, what: &str) -> Res<()> {
    check!(
        !d.is_empty() && d.len() <= max,
        "{what} must have rank 1..={max}, has {}",
        d.len()
    );
    Ok(())
}

/// Output extent of one spatial axis with explicit padding; must be at least 1.
fn out_extent(input: u32, filter: u32, stride: u32, head: u32, tail: u32, axis: &str) -> Res<u32> {
    let padded = i64::from(input) + i64::from(head) + i64::from(tail);
    let span = padded - i64::from(filter);
    check!(
        span >= 0,
        "{axis}: window {filter} is larger than the padded input {padded}"
    );
    Ok((span / i64::from(stride) + 1) as u32)
}

/// Resolves the implicit SAME (1) or VALID (2) padding of one axis into (head, tail).
/// The reference treats every code other than SAME as no padding; 0 is tolerated that way,
/// anything else is rejected.
fn implicit_pad(scheme: i32, input: u32, filter: u32, stride: u32) -> Res<(u32, u32)> {
    match scheme {
        1 => {
            let out = input.div_ceil(stride);
            let needed =
                (i64::from(out) - 1) * i64::from(stride) + i64::from(filter) - i64::from(input);
            let total = needed.max(0) as u32;
            Ok((total / 2, total - total / 2))
        }
        0 | 2 => Ok((0, 0)),
        _ => bad!("padding scheme must be 1 (SAME) or 2 (VALID), is {scheme}"),
    }
}

/// Reads a window: explicit form has 4 paddings then strides (and filter for pooling);
/// implicit form has the scheme code then strides (and filter).
fn window(
    ins: &Ins,
    explicit: bool,
    first: usize,
    in_h: u32,
    in_w: u32,
    filter: Option<(u32, u32)>,
) -> Res<WindowParams> {
    let (pad_inputs, scheme) = if explicit {
        (4, None)
    } else {
        (1, Some(ins.i32(first)?))
    };
    let s = first + pad_inputs;
    let stride_w = ins.positive(s, "stride width")?;
    let stride_h = ins.positive(s + 1, "stride height")?;
    let (filter_w, filter_h) = match filter {
        Some(f) => f,
        None => (
            ins.positive(s + 2, "filter width")?,
            ins.positive(s + 3, "filter height")?,
        ),
    };
    let pad = match scheme {
        None => {
            let pad = Pad {
                left: ins.non_negative(first, "padding left")?,
                right: ins.non_negative(first + 1, "padding right")?,
                top: ins.non_negative(first + 2, "padding top")?,
                bottom: ins.non_negative(first + 3, "padding bottom")?,
            };
            check!(
                pad.left < filter_w
                    && pad.right < filter_w
                    && pad.top < filter_h
                    && pad.bottom < filter_h,
                "each padding must be smaller than the window ({filter_w}x{filter_h}), got {pad:?}"
            );
            pad
        }
        Some(code) => {
            let (left, right) = implicit_pad(code, in_w, filter_w, stride_w)?;
            let (top, bottom) = implicit_pad(code, in_h, filter_h, stride_h)?;
            Pad {
                left,
                right,
                top,
                bottom,
            }
        }
    };
    Ok(WindowParams {
        pad,
        stride_w,
        stride_h,
        filter_w,
        filter_h,
        dilation_w: 1,
        dilation_h: 1,
    })
}

fn spatial_out(w: &WindowParams, in_h: u32, in_w: u32) -> Res<(u32, u32)> {
    // The dilated span; it fitted in u32 when the window was read.
    let span = |k: u32, d: u32| (k.max(1) - 1).saturating_mul(d).saturating_add(1);
    Ok((
        out_extent(
            in_h,
            span(w.filter_h, w.dilation_h),
            w.stride_h,
            w.pad.top,
            w.pad.bottom,
            "height",
        )?,
        out_extent(
            in_w,
            span(w.filter_w, w.dilation_w),
            w.stride_w,
            w.pad.left,
            w.pad.right,
            "width",
        )?,
    ))
}

/// NumPy-style broadcast of two shapes aligned at the trailing dimension.
pub fn broadcast(a: &[u32], b: &[u32]) -> Result<Vec<u32>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() {
            1
        } else {
            a[i - (rank - a.len())]
        };
        let db = if i < rank - b.len() {
            1
        } else {
            b[i - (rank - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(format!("shapes {a:?} and {b:?} do not broadcast")),
        };
    }
    Ok(out)
}

/// Infers outputs and parameters of `op` from its inputs (`None` = omitted optional input).
pub fn infer(op: OperationType, inputs: &[Option<Arg>]) -> Res<Inferred> {
    use OperationType::*;
    if matches!(
        op,
        AveragePool2d
            | MaxPool2d
            | L2Pool2d
            | Conv2d
            | DepthwiseConv2d
            | DepthToSpace
            | SpaceToDepth
            | ResizeBilinear
            | ResizeNearestNeighbor
            | SpaceToBatchNd
            | BatchToSpaceNd
            | GroupedConv2d
            | TransposeConv2d
            | InstanceNormalization
            | RoiAlign
            | RoiPooling
    ) {
        let flag = inputs
            .iter()
            .position(|a| matches!(a, Some(a) if a.ty == OperandType::Bool));
        if let Some(at) = flag {
            return infer_layout(op, inputs, at);
        }
    }
    infer_nhwc(op, inputs)
}

/// [`infer`] for an operation whose images, if any, are NHWC (no `layout` input).
fn infer_nhwc(op: OperationType, inputs: &[Option<Arg>]) -> Res<Inferred> {
    infer_nhwc_dilated(op, inputs, (1, 1))
}

/// [`infer_nhwc`] with the convolutions' (width, height) dilation factors.
fn infer_nhwc_dilated(
    op: OperationType,
    inputs: &[Option<Arg>],
    dilation: (u32, u32),
) -> Res<Inferred> {
    let ins = Ins { args: inputs };
    elementwise::infer(op, &ins)
        .or_else(|| conv::infer(op, &ins, dilation))
        .or_else(|| pool::infer(op, &ins))
        .or_else(|| normalization::infer(op, &ins))
        .or_else(|| transform::infer(op, &ins))
        .or_else(|| lookup::infer(op, &ins))
        .or_else(|| recurrent::infer(op, &ins))
        .or_else(|| math::infer(op, &ins))
        .or_else(|| logic::infer(op, &ins))
        .or_else(|| reduce::infer(op, &ins))
        .or_else(|| quantize::infer(op, &ins))
        .or_else(|| index::infer(op, &ins))
        .or_else(|| random::infer(op, &ins))
        .or_else(|| detection::infer(op, &ins))
        .unwrap_or_else(|| {
            Err(InferError::Invalid(format!(
                "{op} is not run by this driver"
            )))
        })
}

/// The signatures this driver runs for `op`, from the family that holds it (`None`: no family
/// runs it).
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    elementwise::signatures(op)
        .or_else(|| conv::signatures(op))
        .or_else(|| pool::signatures(op))
        .or_else(|| normalization::signatures(op))
        .or_else(|| transform::signatures(op))
        .or_else(|| lookup::signatures(op))
        .or_else(|| recurrent::signatures(op))
        .or_else(|| math::signatures(op))
        .or_else(|| logic::signatures(op))
        .or_else(|| reduce::signatures(op))
        .or_else(|| quantize::signatures(op))
        .or_else(|| index::signatures(op))
        .or_else(|| random::signatures(op))
        .or_else(|| detection::signatures(op))
}

/// The values of TENSOR_INT32 input `i`, which must have rank 1 and `len` elements (`None`:
/// any length).
fn i32_list(ins: &Ins, i: usize, len: Option<usize>, what: &str) -> Res<Vec<i32>> {
    let d = ins.dims_rank(i, 1, what)?;
    if let Some(len) = len {
        check!(
            d[0] as usize == len,
            "{what} (input {i}) must have {len} elements, has {}",
            d[0]
        );
    }
    let b = ins.bytes(i)?;
    check!(
        b.len() == d[0] as usize * 4,
        "{what} (input {i}) has {} bytes for {} elements",
        b.len(),
        d[0]
    );
    Ok(b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// One output of dimensions `d`.
fn one(d: Vec<u32>, params: Params) -> Res<Inferred> {
    Ok(Inferred {
        outputs: vec![d],
        params,
    })
}

/// NNAPI 1.2's BOOL `layout` at input `at` (types.hal V1_2, "NCHW" data layout): the
/// operation is inferred on the NHWC transpose of input 0 and its output transposed back.
fn infer_layout(op: OperationType, inputs: &[Option<Arg>], at: usize) -> Res<Inferred> {
    let ins = Ins { args: inputs };
    let b = ins.bytes(at)?;
    check!(b.len() == 1, "BOOL input {at} has {} bytes", b.len());
    // What follows the flag moves up one place: RESIZE_BILINEAR's coordinate modes. The
    // convolutions' dilation factors go into their window.
    let resize = matches!(
        op,
        OperationType::ResizeBilinear | OperationType::ResizeNearestNeighbor
    );
    let tail = if resize { &inputs[at + 1..] } else { &[] };
    let convolution = matches!(op, OperationType::Conv2d | OperationType::DepthwiseConv2d);
    let dilation = if convolution && inputs.len() > at + 1 {
        (
            ins.positive(at + 1, "dilation width")?,
            ins.positive(at + 2, "dilation height")?,
        )
    } else {
        (1, 1)
    };
    let mut args: Vec<Option<Arg>> = inputs[..at].iter().chain(tail).copied().collect();
    if b[0] == 0 {
        return infer_nhwc_dilated(op, &args, dilation);
    }
    let d = ins.dims_rank(0, 4, "input")?;
    let nhwc = [d[0], d[2], d[3], d[1]];
    if let Some(Some(a)) = args.first_mut() {
        a.dims = &nhwc;
    }
    // TRANSPOSE_CONV_2D's output-shape tensor (implicit padding) is in the layout of the
    // images: [n, c, h, w] becomes the [n, h, w, c] the NHWC rule reads.
    let mut shape_nhwc = [0u8; 16];
    if op == OperationType::TransposeConv2d && args.len() == 8 {
        if let Some(Some(a)) = args.get_mut(3) {
            if let Some(v) = a.value.filter(|v| v.len() == 16) {
                for (to, from) in [0, 2, 3, 1].into_iter().enumerate() {
                    shape_nhwc[4 * to..4 * to + 4].copy_from_slice(&v[4 * from..4 * from + 4]);
                }
                a.value = Some(&shape_nhwc);
            }
        }
    }
    let mut r = infer_nhwc_dilated(op, &args, dilation)?;
    let o = &r.outputs[0];
    r.outputs[0] = vec![o[0], o[3], o[1], o[2]];
    r.params = Params::Nchw(Box::new(r.params));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg<'a>(ty: OperandType, dims: &'a [u32], value: Option<&'a [u8]>) -> Option<Arg<'a>> {
        Some(Arg {
            ty,
            dims,
            scale: 0.0,
            zero_point: 0,
            value,
        })
    }

    #[test]
    fn broadcast_follows_numpy() {
        assert_eq!(broadcast(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
        assert_eq!(broadcast(&[1], &[2, 2]).unwrap(), vec![2, 2]);
        assert!(broadcast(&[2, 3], &[3, 2]).is_err());
    }

    #[test]
    fn same_padding_matches_formula() {
        // in 5, filter 3, stride 2 → out 3, total pad (3−1)·2 + 3 − 5 = 2 → (1, 1).
        assert_eq!(implicit_pad(1, 5, 3, 2).unwrap(), (1, 1));
        assert_eq!(implicit_pad(1, 4, 3, 2).unwrap(), (0, 1));
        assert_eq!(implicit_pad(2, 4, 3, 2).unwrap(), (0, 0));
        assert!(implicit_pad(3, 4, 3, 2).is_err());
    }

    #[test]
    fn window_larger_than_input_is_invalid() {
        let i32b = |v: i32| v.to_le_bytes();
        let (two, four, zero) = (i32b(2), i32b(4), i32b(0));
        let d = [1u32, 2, 2, 1];
        let ins = vec![
            arg(OperandType::TensorFloat32, &d, None),
            arg(OperandType::Int32, &[], Some(&two)), // VALID
            arg(OperandType::Int32, &[], Some(&two)),
            arg(OperandType::Int32, &[], Some(&two)),
            arg(OperandType::Int32, &[], Some(&four)),
            arg(OperandType::Int32, &[], Some(&four)),
            arg(OperandType::Int32, &[], Some(&zero)),
        ];
        assert!(matches!(
            infer(OperationType::MaxPool2d, &ins),
            Err(InferError::Invalid(_))
        ));
    }

    #[test]
    fn unknown_dims_defer() {
        let z = 0i32.to_le_bytes();
        let ins = vec![
            arg(OperandType::TensorFloat32, &[0, 2], None),
            arg(OperandType::TensorFloat32, &[1, 2], None),
            arg(OperandType::Int32, &[], Some(&z)),
        ];
        assert_eq!(infer(OperationType::Add, &ins), Err(InferError::Unknown));
    }

    #[test]
    fn element_count_overflow_is_reported() {
        assert!(element_count(&[65536, 65536, 2]).is_err());
        assert_eq!(element_count(&[]).unwrap(), 1);
    }
}
