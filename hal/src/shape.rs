//! Shape inference and parameter resolution for every NNAPI 1.0 operation (types.hal 1.0,
//! each operation's "Inputs"/"Outputs" text; `docs/hal-contract.md` for what is refused
//! before running that the reference only enforced while running).
//!
//! [`infer`] takes the operation's inputs (type, dimensions, quantization and, for scalar and
//! shape parameters, their bytes) and returns the output dimensions plus the resolved parameters
//! ([`Params`]) the executor needs. The same function runs at prepare time, when everything is
//! static, and again at execution time, when model-input dimensions or runtime scalar
//! parameters become known; "not known yet" is [`InferError::Unknown`], never an error.
//! All arithmetic is checked: no overflow, no zero or negative extents.

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
    ($($arg:tt)*) => { return Err(InferError::Invalid(format!($($arg)*))) };
}
macro_rules! check {
    ($cond:expr, $($arg:tt)*) => { if !$cond { bad!($($arg)*); } };
}

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
    /// SOFTMAX along an axis: `depth` elements `inner` apart (`inner` = 1: the last axis).
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
/// SOFTMAX, L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION work along one axis of a
/// rank 1–4 input: the last one (NNAPI 1.0, where only rank 4, or 2 and 4 for SOFTMAX, was
/// allowed), or the optional `axis` input at position `at` (NNAPI 1.2), negative values
/// counting from the end. Returns the axis length and the stride between its elements.
fn axis_split(ins: &Ins, d: &[u32], at: usize) -> Res<(u32, u32)> {
    let rank = d.len();
    check!(
        (1..=4).contains(&rank),
        "input must have rank 1 to 4, has {rank}"
    );
    let axis = if ins.args.len() > at {
        let a = ins.i32(at)?;
        check!(
            a >= -(rank as i32) && a < rank as i32,
            "axis {a} is outside [-{rank}, {rank})"
        );
        a.rem_euclid(rank as i32) as usize
    } else {
        rank - 1
    };
    let inner: u64 = d[axis + 1..].iter().map(|&x| u64::from(x)).product();
    Ok((d[axis], inner as u32))
}

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
    use OperationType::*;
    let ins = Ins { args: inputs };
    let one = |d: Vec<u32>, params: Params| {
        Ok(Inferred {
            outputs: vec![d],
            params,
        })
    };
    match op {
        Add | Mul => {
            let (a, b) = (ins.dims(0)?, ins.dims(1)?);
            rank_at_most(a, 4, "input 0")?;
            rank_at_most(b, 4, "input 1")?;
            let out = broadcast(a, b).map_err(InferError::Invalid)?;
            one(out, Params::Binary { act: ins.act(2)? })
        }
        AveragePool2d | MaxPool2d | L2Pool2d => {
            let d = ins.dims_rank(0, 4, "input")?;
            let explicit = inputs.len() == 10;
            let w = window(&ins, explicit, 1, d[1], d[2], None)?;
            let act = ins.act(if explicit { 9 } else { 6 })?;
            let (oh, ow) = spatial_out(&w, d[1], d[2])?;
            one(vec![d[0], oh, ow, d[3]], Params::Pool { window: w, act })
        }
        Concatenation => {
            let n = inputs.len() - 1;
            check!(n >= 1, "CONCATENATION needs at least one tensor");
            let first = ins.dims(0)?;
            rank_at_most(first, 4, "input 0")?;
            let axis = ins.i32(n)?;
            check!(
                axis >= 0 && (axis as usize) < first.len(),
                "axis {axis} is outside 0..{}",
                first.len()
            );
            let axis = axis as usize;
            let mut out = first.to_vec();
            for i in 1..n {
                let d = ins.dims(i)?;
                check!(
                    d.len() == first.len(),
                    "input {i} has rank {}, input 0 has {}",
                    d.len(),
                    first.len()
                );
                for (k, (&x, &y)) in d.iter().zip(first).enumerate() {
                    check!(
                        k == axis || x == y,
                        "input {i} differs from input 0 at dimension {k}: {x} vs {y}"
                    );
                }
                out[axis] = out[axis]
                    .checked_add(d[axis])
                    .filter(|&v| u64::from(v) <= MAX_ELEMENTS)
                    .ok_or_else(|| InferError::Invalid("concatenated extent overflows".into()))?;
            }
            one(out, Params::Concat { axis })
        }
        Conv2d | DepthwiseConv2d => {
            let depthwise = op == DepthwiseConv2d;
            let d = ins.dims_rank(0, 4, "input")?;
            let f = ins.dims_rank(1, 4, "filter")?;
            let b = ins.dims_rank(2, 1, "bias")?;
            let explicit = inputs.len() == if depthwise { 11 } else { 10 };
            let span = |k: u32, d: u32| -> Res<u32> {
                let s = u64::from(k.max(1) - 1) * u64::from(d) + 1;
                u32::try_from(s).map_err(|_| InferError::Invalid("dilated window overflows".into()))
            };
            let (dw, dh) = dilation;
            let mut w = window(
                &ins,
                explicit,
                3,
                d[1],
                d[2],
                Some((span(f[2], dw)?, span(f[1], dh)?)),
            )?;
            // Padding and extents used the dilated span; the kernels want the real taps.
            (w.filter_w, w.filter_h, w.dilation_w, w.dilation_h) = (f[2], f[1], dw, dh);
            let after = if explicit { 9 } else { 6 };
            let (oh, ow) = spatial_out(&w, d[1], d[2])?;
            let out_c = if depthwise { f[3] } else { f[0] };
            check!(
                b[0] == out_c,
                "bias has {} elements for {out_c} output channels",
                b[0]
            );
            if depthwise {
                let multiplier = ins.positive(after, "depth multiplier")?;
                check!(
                    f[0] == 1,
                    "depthwise filter must be [1, h, w, channels], is {f:?}"
                );
                check!(
                    mul(d[3], multiplier)? == out_c,
                    "input channels {} × multiplier {multiplier} ≠ output channels {out_c}",
                    d[3]
                );
                let act = ins.act(after + 1)?;
                one(
                    vec![d[0], oh, ow, out_c],
                    Params::Depthwise {
                        window: w,
                        multiplier,
                        act,
                    },
                )
            } else {
                check!(f[3] == d[3], "filter depth {} ≠ input depth {}", f[3], d[3]);
                let act = ins.act(after)?;
                one(vec![d[0], oh, ow, out_c], Params::Conv { window: w, act })
            }
        }
        DepthToSpace | SpaceToDepth => {
            let d = ins.dims_rank(0, 4, "input")?;
            let block = ins.positive(1, "block size")?;
            let bb = mul(block, block)?;
            let out = if op == DepthToSpace {
                check!(
                    d[3] % bb == 0,
                    "depth {} is not divisible by block² {bb}",
                    d[3]
                );
                vec![d[0], mul(d[1], block)?, mul(d[2], block)?, d[3] / bb]
            } else {
                check!(
                    d[1] % block == 0 && d[2] % block == 0,
                    "height {} and width {} must be divisible by the block size {block}",
                    d[1],
                    d[2]
                );
                vec![d[0], d[1] / block, d[2] / block, mul(d[3], bb)?]
            };
            one(out, Params::Block { block })
        }
        Dequantize | Floor | Logistic | Relu | Relu1 | Relu6 | Tanh => {
            let d = ins.dims(0)?;
            rank_at_most(d, 4, "input")?;
            one(d.to_vec(), Params::Plain)
        }
        EmbeddingLookup => {
            let l = ins.dims_rank(0, 1, "lookups")?;
            let v = ins.dims(1)?;
            check!(v.len() >= 2, "values must have rank ≥ 2, has {}", v.len());
            let row_len = element_count(&v[1..]).map_err(InferError::Invalid)? as u32;
            let mut out = vec![l[0]];
            out.extend_from_slice(&v[1..]);
            element_count(&out).map_err(InferError::Invalid)?;
            one(
                out,
                Params::Lookup {
                    rows: v[0],
                    row_len,
                },
            )
        }
        FullyConnected => {
            let d = ins.dims(0)?;
            check!(
                (2..=4).contains(&d.len()),
                "input must have rank 2..4, has {}",
                d.len()
            );
            let wt = ins.dims_rank(1, 2, "weights")?;
            let b = ins.dims_rank(2, 1, "bias")?;
            let (units, input_size) = (wt[0], wt[1]);
            let total = element_count(d).map_err(InferError::Invalid)?;
            check!(
                total % u64::from(input_size) == 0,
                "input holds {total} elements, not a multiple of the weights' input size {input_size}"
            );
            check!(
                b[0] == units,
                "bias has {} elements for {units} units",
                b[0]
            );
            let batch = (total / u64::from(input_size)) as u32;
            one(
                vec![batch, units],
                Params::FullyConnected {
                    batch,
                    input_size,
                    units,
                    act: ins.act(3)?,
                },
            )
        }
        HashtableLookup => {
            let l = ins.dims_rank(0, 1, "lookups")?;
            let k = ins.dims_rank(1, 1, "keys")?;
            let v = ins.dims(2)?;
            check!(
                !v.is_empty() && v[0] == k[0],
                "values {v:?} must have one row per key ({})",
                k[0]
            );
            let row_len = element_count(&v[1..]).map_err(InferError::Invalid)? as u32;
            let mut out = vec![l[0]];
            out.extend_from_slice(&v[1..]);
            element_count(&out).map_err(InferError::Invalid)?;
            Ok(Inferred {
                outputs: vec![out, vec![l[0]]],
                params: Params::Lookup {
                    rows: v[0],
                    row_len,
                },
            })
        }
        L2Normalization => {
            let d = ins.dims(0)?;
            let (depth, inner) = axis_split(&ins, d, 1)?;
            one(d.to_vec(), Params::Depth { depth, inner })
        }
        LocalResponseNormalization => {
            let d = ins.dims(0)?;
            let (depth, inner) = axis_split(&ins, d, 5)?;
            let radius = ins.non_negative(1, "radius")?;
            let (bias, alpha, beta) = (ins.f32(2)?, ins.f32(3)?, ins.f32(4)?);
            one(
                d.to_vec(),
                Params::Lrn {
                    radius,
                    bias,
                    alpha,
                    beta,
                    depth,
                    inner,
                },
            )
        }
        LshProjection => {
            let h = ins.dims_rank(0, 2, "hash")?;
            let (num_hash, num_bits) = (h[0], h[1]);
            check!(
                num_bits <= 32,
                "hash has {num_bits} bits per function, at most 32 allowed"
            );
            let input = ins.dims(1)?;
            let kind = match ins.i32(3)? {
                1 => LshKind::Sparse,
                2 => LshKind::Dense,
                3 => LshKind::SparseBucketed,
                t => bad!(
                    "LSH projection type must be 1 (SPARSE_DEPRECATED), 2 (DENSE) or 3 (SPARSE), is {t}"
                ),
            };
            if ins.present(2) {
                let w = ins.dims_rank(2, 1, "weight")?;
                check!(
                    w[0] == input[0],
                    "weight has {} entries for {} input rows",
                    w[0],
                    input[0]
                );
            } else {
                check!(
                    kind != LshKind::Dense,
                    "DENSE projection needs the weight input"
                );
            }
            let out = match kind {
                LshKind::Sparse | LshKind::SparseBucketed => num_hash,
                LshKind::Dense => mul(num_hash, num_bits)?,
            };
            one(
                vec![out],
                Params::Lsh {
                    kind,
                    num_hash,
                    num_bits,
                    input_rows: input[0],
                },
            )
        }
        Lstm => infer_lstm(&ins),
        Reshape => {
            let d = ins.dims(0)?;
            rank_at_most(d, 4, "input")?;
            let s = ins.dims_rank(1, 1, "shape")?;
            let bytes = ins.bytes(1)?;
            check!(
                bytes.len() == s[0] as usize * 4,
                "shape tensor has {} bytes",
                bytes.len()
            );
            let total = element_count(d).map_err(InferError::Invalid)?;
            let mut out = Vec::with_capacity(s[0] as usize);
            let mut unknown = None;
            let mut known: u64 = 1;
            for (i, c) in bytes.chunks_exact(4).enumerate() {
                let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                if v == -1 {
                    check!(unknown.is_none(), "shape has more than one -1");
                    unknown = Some(i);
                    out.push(1);
                } else {
                    check!(v > 0, "shape entry {i} is {v}");
                    known = known.saturating_mul(v as u64);
                    out.push(v as u32);
                }
            }
            if let Some(i) = unknown {
                check!(total % known == 0, "cannot reshape {d:?} to {out:?}");
                out[i] = (total / known) as u32;
            } else {
                check!(known == total, "cannot reshape {total} elements to {out:?}");
            }
            one(out, Params::Plain)
        }
        ResizeBilinear => {
            let d = ins.dims_rank(0, 4, "input")?;
            let (width, height) = if ins.get(1)?.ty == OperandType::Float32 {
                // NNAPI 1.2: scales; the output extent is the input's times the scale, floored.
                let scaled = |i: usize, extent: u32, what: &str| -> Res<u32> {
                    let s = ins.f32(i)?;
                    let v = (extent as f32 * s).floor();
                    check!(
                        s > 0.0 && v >= 1.0 && v <= MAX_ELEMENTS as f32,
                        "{what} scale {s} (input {i}) gives no valid output extent"
                    );
                    Ok(v as u32)
                };
                (scaled(1, d[2], "width")?, scaled(2, d[1], "height")?)
            } else {
                (
                    ins.positive(1, "output width")?,
                    ins.positive(2, "output height")?,
                )
            };
            let flag = |i: usize| -> Res<bool> {
                if !ins.present(i) {
                    return Ok(false);
                }
                let b = ins.bytes(i)?;
                check!(b.len() == 1, "BOOL input {i} has {} bytes", b.len());
                Ok(b[0] != 0)
            };
            let (align_corners, half_pixel_centers) = (flag(3)?, flag(4)?);
            check!(
                !(align_corners && half_pixel_centers),
                "align_corners and half_pixel_centers cannot both be true"
            );
            let out = vec![d[0], height, width, d[3]];
            element_count(&out).map_err(InferError::Invalid)?;
            one(
                out,
                Params::Resize {
                    height,
                    width,
                    align_corners,
                    half_pixel_centers,
                },
            )
        }
        Rnn => {
            let x = ins.dims_rank(0, 2, "input")?;
            let w = ins.dims_rank(1, 2, "weights")?;
            let r = ins.dims_rank(2, 2, "recurrent weights")?;
            let b = ins.dims_rank(3, 1, "bias")?;
            let h = ins.dims_rank(4, 2, "hidden state")?;
            let (batch, input_size, units) = (x[0], x[1], w[0]);
            check!(
                w[1] == input_size,
                "weights {w:?} do not match input size {input_size}"
            );
            check!(
                r == [units, units],
                "recurrent weights {r:?} must be [{units}, {units}]"
            );
            check!(b[0] == units, "bias {b:?} must have {units} entries");
            check!(
                h == [batch, units],
                "hidden state {h:?} must be [{batch}, {units}]"
            );
            let act = ins.act(5)?;
            Ok(Inferred {
                outputs: vec![vec![batch, units], vec![batch, units]],
                params: Params::Rnn {
                    batch,
                    input_size,
                    units,
                    act,
                },
            })
        }
        Softmax => {
            let d = ins.dims(0)?;
            let (depth, inner) = axis_split(&ins, d, 2)?;
            let beta = ins.f32(1)?;
            check!(beta > 0.0, "beta must be positive, is {beta}");
            one(d.to_vec(), Params::Softmax { beta, depth, inner })
        }
        Svdf => {
            let x = ins.dims_rank(0, 2, "input")?;
            let wf = ins.dims_rank(1, 2, "weights_feature")?;
            let wt = ins.dims_rank(2, 2, "weights_time")?;
            let (batch, input_size, num_filters, memory_size) = (x[0], x[1], wf[0], wt[1]);
            check!(
                wf[1] == input_size,
                "weights_feature {wf:?} do not match input size {input_size}"
            );
            check!(
                wt[0] == num_filters,
                "weights_time {wt:?} must have {num_filters} rows"
            );
            let rank = ins.positive(5, "rank")?;
            check!(
                num_filters % rank == 0,
                "rank {rank} does not divide {num_filters} filters"
            );
            let units = num_filters / rank;
            if ins.present(3) {
                let b = ins.dims_rank(3, 1, "bias")?;
                check!(b[0] == units, "bias {b:?} must have {units} entries");
            }
            let state_len = mul(memory_size, num_filters)?;
            let s = ins.dims_rank(4, 2, "state")?;
            check!(
                s == [batch, state_len],
                "state {s:?} must be [{batch}, {state_len}]"
            );
            let act = ins.act(6)?;
            Ok(Inferred {
                outputs: vec![vec![batch, state_len], vec![batch, units]],
                params: Params::Svdf {
                    batch,
                    input_size,
                    num_filters,
                    memory_size,
                    rank,
                    units,
                    act,
                },
            })
        }
        _ => bad!("{op} is not run by this driver"),
    }
}

/// NNAPI 1.2's BOOL `layout` at input `at` (types.hal V1_2, "NCHW" data layout): the
/// operation is inferred on the NHWC transpose of input 0 and its output transposed back.
fn infer_layout(op: OperationType, inputs: &[Option<Arg>], at: usize) -> Res<Inferred> {
    let ins = Ins { args: inputs };
    let b = ins.bytes(at)?;
    check!(b.len() == 1, "BOOL input {at} has {} bytes", b.len());
    // What follows the flag moves up one place: RESIZE_BILINEAR's coordinate modes. The
    // convolutions' dilation factors go into their window.
    let tail = if op == OperationType::ResizeBilinear {
        &inputs[at + 1..]
    } else {
        &[]
    };
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
    let mut r = infer_nhwc_dilated(op, &args, dilation)?;
    let o = &r.outputs[0];
    r.outputs[0] = vec![o[0], o[3], o[1], o[2]];
    r.params = Params::Nchw(Box::new(r.params));
    Ok(r)
}

fn infer_lstm(ins: &Ins) -> Res<Inferred> {
    let x = ins.dims_rank(0, 2, "input")?;
    let (batch, input_size) = (x[0], x[1]);
    let units = ins.dims_rank(4, 2, "input_to_output_weights")?[0];
    let output_size = ins.dims_rank(8, 2, "recurrent_to_output_weights")?[1];
    let expect = |i: usize, want: &[u32], what: &str| -> Res<()> {
        let d = ins.dims(i)?;
        check!(d == want, "{what} (input {i}) is {d:?}, expected {want:?}");
        Ok(())
    };
    let cifg = !ins.present(1);
    check!(
        ins.present(5) != cifg && ins.present(12) != cifg,
        "input_to_input weights, recurrent_to_input weights and input gate bias must be all present or all omitted"
    );
    for i in 1..=4 {
        if ins.present(i) {
            expect(i, &[units, input_size], "input weights")?;
        }
    }
    for i in 5..=8 {
        if ins.present(i) {
            expect(i, &[units, output_size], "recurrent weights")?;
        }
    }
    let peephole = ins.present(10);
    check!(
        ins.present(11) == peephole && (!ins.present(9) || peephole) && (cifg || ins.present(9) == peephole),
        "peephole weights must be all present or all omitted (cell_to_input may be omitted with CIFG)"
    );
    for i in (9..=11).chain(12..=15) {
        if ins.present(i) {
            expect(i, &[units], "gate vector")?;
        }
    }
    let projection = ins.present(16);
    let projection_bias = ins.present(17);
    check!(
        !projection_bias || projection,
        "projection bias given without projection weights"
    );
    if projection {
        expect(16, &[output_size, units], "projection weights")?;
    } else {
        check!(
            output_size == units,
            "without projection the output size {output_size} must equal units {units}"
        );
    }
    if projection_bias {
        expect(17, &[output_size], "projection bias")?;
    }
    expect(18, &[batch, output_size], "output_state_in")?;
    expect(19, &[batch, units], "cell_state_in")?;
    let activation = ins.i32(20)?;
    check!(
        matches!(activation, 0 | 1 | 3 | 4 | 6),
        "LSTM activation must be 0, 1, 3, 4 or 6, is {activation}"
    );
    let cell_clip = ins.f32(21)?;
    let proj_clip = ins.f32(22)?;
    check!(
        cell_clip >= 0.0 && proj_clip >= 0.0,
        "clips must not be negative"
    );
    // The NNAPI 1.2 form appends four layer-norm weight vectors (23 input, 24 forget, 25
    // cell, 26 output): all omitted, or all given but the input gate's, which CIFG omits.
    let layer_norm = ins.present(26);
    check!(
        ins.present(24) == layer_norm && ins.present(25) == layer_norm,
        "forget, cell and output layer-norm weights must be all present or all omitted"
    );
    check!(
        ins.present(23) == (layer_norm && !cifg),
        "input layer-norm weights must be given exactly when layer normalisation is used without CIFG"
    );
    for i in 23..=26 {
        if ins.present(i) {
            expect(i, &[units], "layer-norm weights")?;
        }
    }
    let gates = if cifg { 3 } else { 4 };
    Ok(Inferred {
        outputs: vec![
            vec![batch, mul(units, gates)?],
            vec![batch, output_size],
            vec![batch, units],
            vec![batch, output_size],
        ],
        params: Params::Lstm(LstmParams {
            batch,
            input_size,
            units,
            output_size,
            activation,
            cell_clip,
            proj_clip,
            cifg,
            peephole,
            projection,
            projection_bias,
            layer_norm,
        }),
    })
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
