//! One registration per operation and operand type (types.hal 1.0, `OperationType`): how the
//! compiled plan packs an operation's constant operands at prepare ([`OpImpl::pack`]), runs it
//! ([`OpImpl::run`]) and estimates its work ([`OpImpl::work`]). [`lookup`] is the only table;
//! later operation versions extend it, not a `match` in the executor.
//!
//! Shapes were inferred and checked before any of this is called, so slice lengths agree with
//! the dimensions handed to the kernels. A registration with packed weights runs the fast
//! operator loops of `nnhal_kernels::ops` on the micro-kernels chosen at prepare; without
//! (weights given at execution, or no fast path) it runs the reference kernels.

use crate::tensor::{Data, DataMut, DataRef, Tensor, TensorMut, TensorRef};
use nnhal_hal::shape::{LshKind, Params, WindowParams};
use nnhal_hal::validate::{OperandInfo, OperationInfo, ValidModel};
use nnhal_hal::{FusedActivationFunc, HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::ops::binary_u8::BinaryTableU8;
use nnhal_kernels::ops::conv_u8::{ConvQuant, PackedConvU8};
use nnhal_kernels::ops::dwconv_f32::PackedDwF32;
use nnhal_kernels::ops::dwconv_u8::PackedDwU8;
use nnhal_kernels::ops::{self as fast, FilterShape, PackedConvF32};
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::{
    conv, elementwise as ew, layout, lookup as lk, normalization as norm, pool, recurrent,
    Activation, KernelError, Nhwc, Padding, QuantParams, Window,
};
use smallvec::SmallVec;
use std::sync::Arc;

/// Constant operands re-laid out for an operation's fast kernel, built once at prepare.
#[derive(Debug)]
pub enum Packed {
    /// CONV_2D / FULLY_CONNECTED float32 filter and bias.
    ConvF32(PackedConvF32),
    /// DEPTHWISE_CONV_2D float32 filter and bias.
    DwF32(PackedDwF32),
    /// CONV_2D / FULLY_CONNECTED uint8 filter, with the zero-point corrections folded into
    /// the bias and the requantization precomputed.
    ConvU8(PackedConvU8),
    /// DEPTHWISE_CONV_2D uint8 filter, bias and requantization.
    DwU8(PackedDwU8),
    /// ADD / MUL uint8: the result for every pair of input bytes.
    BinaryU8(BinaryTableU8),
}

/// What packing sees: the operation, its resolved parameters and the model's constants.
pub struct PackArgs<'a> {
    pub model: &'a ValidModel,
    pub op: &'a OperationInfo,
    pub params: &'a Params,
    pub kernels: &'static Ukernels,
    /// Decoded constant values, by operand index.
    pub constants: &'a [Option<Arc<Tensor>>],
}

impl<'a> PackArgs<'a> {
    /// The constant value at input position `pos`, if that input is a constant.
    pub fn constant(&self, pos: usize) -> Option<TensorRef<'a>> {
        let i = *self.op.inputs.get(pos)?;
        self.constants.get(i)?.as_deref().map(Tensor::view)
    }

    pub fn info(&self, pos: usize) -> &'a OperandInfo {
        &self.model.operands[self.op.inputs[pos]]
    }

    pub fn out_info(&self, pos: usize) -> &'a OperandInfo {
        &self.model.operands[self.op.outputs[pos]]
    }
}

/// Everything one run of an operation reads: its values by input position (`None` =
/// omitted), resolved parameters, packed constants and the operand descriptions.
pub struct Call<'a> {
    pub model: &'a ValidModel,
    pub op: &'a OperationInfo,
    pub params: &'a Params,
    pub packed: Option<&'a Packed>,
    /// The micro-kernels the plan was compiled for.
    pub kernels: &'static Ukernels,
    pub values: &'a [Option<TensorRef<'a>>],
}

impl<'a> Call<'a> {
    fn t(&self, i: usize) -> HalResult<TensorRef<'a>> {
        self.values
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| HalError::InvalidArgument(format!("input {i} is missing")))
    }
    fn f(&self, i: usize) -> HalResult<&'a [f32]> {
        self.t(i)?.f32()
    }
    fn opt_f(&self, i: usize) -> HalResult<Option<&'a [f32]>> {
        self.values
            .get(i)
            .copied()
            .flatten()
            .map(|t| t.f32())
            .transpose()
    }
    fn u(&self, i: usize) -> HalResult<&'a [u8]> {
        self.t(i)?.u8()
    }
    fn i(&self, i: usize) -> HalResult<&'a [i32]> {
        self.t(i)?.i32()
    }
    fn q(&self, i: usize) -> QuantParams {
        quant(&self.model.operands[self.op.inputs[i]])
    }
    fn out_q(&self, j: usize) -> QuantParams {
        quant(&self.model.operands[self.op.outputs[j]])
    }
    fn dims(&self, i: usize) -> HalResult<&'a [u32]> {
        Ok(self.t(i)?.dims)
    }
}

/// The size of an operation for [`OpImpl::work`]: elements read and written, the resolved
/// parameters and the filter dimensions (input 1) where there is one.
pub struct WorkArgs<'a> {
    pub params: &'a Params,
    pub read: u64,
    pub written: u64,
    pub filter_dims: Option<&'a [u32]>,
}

/// How one operation on one operand type is packed, run and costed.
pub struct OpImpl {
    pub name: &'static str,
    /// Re-lays out constant operands for the fast kernel; `None` when there is nothing to pack
    /// (or the weights only arrive at execution).
    pub pack: fn(&PackArgs) -> HalResult<Option<Packed>>,
    pub run: fn(&Call, &mut [TensorMut]) -> HalResult<()>,
    /// About one unit per multiply-add or element visited; decides inline execution.
    pub work: fn(&WorkArgs) -> u64,
    /// Whether `run` writes every element of its outputs. Outputs of the others are zeroed
    /// first, since arena slots hold whatever the previous execution left there.
    pub fills: bool,
    /// Input positions whose values `run` no longer reads once `pack` has packed them.
    pub packs: &'static [usize],
}

/// The registration of `op` on inputs of type `ty` (the type of its first input), if this
/// driver runs it.
pub fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (Add, F) => &ADD_F32,
        (Add, Q) => &ADD_U8,
        (Add, I) => &ADD_I32,
        (Mul, F) => &MUL_F32,
        (Mul, Q) => &MUL_U8,
        (Mul, I) => &MUL_I32,
        (AveragePool2d, F) => &AVERAGE_POOL_F32,
        (AveragePool2d, Q) => &AVERAGE_POOL_U8,
        (MaxPool2d, F) => &MAX_POOL_F32,
        (MaxPool2d, Q) => &MAX_POOL_U8,
        (L2Pool2d, F) => &L2_POOL_F32,
        (Concatenation, F | Q) => &CONCATENATION,
        (Conv2d, F) => &CONV_F32,
        (Conv2d, Q) => &CONV_U8,
        (DepthwiseConv2d, F) => &DEPTHWISE_F32,
        (DepthwiseConv2d, Q) => &DEPTHWISE_U8,
        (DepthToSpace | SpaceToDepth, F | Q) => &BLOCK_REARRANGE,
        (Dequantize, Q) => &DEQUANTIZE,
        (EmbeddingLookup, I) => &EMBEDDING_LOOKUP,
        (HashtableLookup, I) => &HASHTABLE_LOOKUP,
        (Floor, F) => &FLOOR,
        (FullyConnected, F) => &FULLY_CONNECTED_F32,
        (FullyConnected, Q) => &FULLY_CONNECTED_U8,
        (L2Normalization, F) => &L2_NORMALIZATION,
        (L2Normalization, Q) => &L2_NORMALIZATION_U8,
        (LocalResponseNormalization, F) => &LRN,
        (Logistic, F) => &LOGISTIC_F32,
        (Logistic, Q) => &LOGISTIC_U8,
        (LshProjection, F) => &LSH_PROJECTION,
        (Lstm, F) => &LSTM,
        (Relu | Relu1 | Relu6, F) => &CLAMP_F32,
        (Relu | Relu1 | Relu6, Q) => &CLAMP_U8,
        (Reshape, _) => &RESHAPE,
        (ResizeBilinear, F | Q) => &RESIZE_BILINEAR,
        (Rnn, F) => &RNN,
        (Softmax, F) => &SOFTMAX_F32,
        (Softmax, Q) => &SOFTMAX_U8,
        (Svdf, F) => &SVDF,
        (Tanh, F) => &TANH,
        (Tanh, Q) => &TANH_U8,
        _ => return None,
    })
}

/// Runs `imp` on an NCHW operation (types.hal V1_2: the image operations' BOOL `layout`):
/// input 0 is transposed to NHWC into scratch, the NHWC registration runs with `nhwc`, and
/// its output is transposed back into output 0. Moving values leaves quant8 exact.
pub fn run_nchw(imp: &OpImpl, call: &Call, nhwc: &Params, outs: &mut [TensorMut]) -> HalResult<()> {
    fn shape(nchw: &[u32]) -> HalResult<Nhwc> {
        match *nchw {
            [n, c, h, w] => Ok(Nhwc::new(n as usize, h as usize, w as usize, c as usize)),
            _ => Err(HalError::GeneralFailure(format!(
                "an NCHW tensor has rank 4, not {nchw:?}"
            ))),
        }
    }
    let x = call.t(0)?;
    let xs = shape(x.dims)?;
    let x_dims = [xs.n, xs.h, xs.w, xs.c].map(|d| d as u32);
    let input = Tensor {
        dims: x_dims.to_vec(),
        data: match x.data {
            DataRef::F32(v) => {
                let mut t = vec![0.0; v.len()];
                layout::nchw_to_nhwc(v, xs, &mut t);
                Data::F32(t)
            }
            DataRef::U8(v) => {
                let mut t = vec![0; v.len()];
                layout::nchw_to_nhwc(v, xs, &mut t);
                Data::U8(t)
            }
            DataRef::I32(_) => {
                return Err(HalError::GeneralFailure("no NCHW int32 operation".into()))
            }
        },
    };
    let out = outs
        .first_mut()
        .ok_or_else(|| HalError::GeneralFailure("NCHW operation without output".into()))?;
    let ys = shape(out.dims)?;
    let mut output = Tensor {
        dims: [ys.n, ys.h, ys.w, ys.c].map(|d| d as u32).to_vec(),
        data: match &out.data {
            DataMut::F32(v) => Data::F32(vec![0.0; v.len()]),
            DataMut::U8(v) => Data::U8(vec![0; v.len()]),
            DataMut::I32(_) => {
                return Err(HalError::GeneralFailure("no NCHW int32 operation".into()))
            }
        },
    };
    let mut values: SmallVec<[Option<TensorRef>; 16]> = call.values.iter().copied().collect();
    values[0] = Some(input.view());
    let inner = Call {
        model: call.model,
        op: call.op,
        params: nhwc,
        packed: call.packed,
        kernels: call.kernels,
        values: &values,
    };
    (imp.run)(&inner, &mut [output.view_mut()])?;
    match (&output.data, &mut out.data) {
        (Data::F32(y), DataMut::F32(o)) => layout::nhwc_to_nchw(y, ys, o),
        (Data::U8(y), DataMut::U8(o)) => layout::nhwc_to_nchw(y, ys, o),
        _ => return Err(HalError::GeneralFailure("NCHW output type mismatch".into())),
    }
    Ok(())
}

macro_rules! registration {
    ($name:ident, $run:expr, $work:expr) => {
        registration!($name, no_pack, $run, $work, true);
    };
    ($name:ident, $run:expr, $work:expr, partial) => {
        registration!($name, no_pack, $run, $work, false);
    };
    ($name:ident, $pack:expr, $run:expr, $work:expr, $fills:expr) => {
        registration!($name, $pack, $run, $work, $fills, &[]);
    };
    ($name:ident, $pack:expr, $run:expr, $work:expr, $fills:expr, $packs:expr) => {
        static $name: OpImpl = OpImpl {
            name: stringify!($name),
            pack: $pack,
            run: $run,
            work: $work,
            fills: $fills,
            packs: $packs,
        };
    };
}

registration!(
    ADD_F32,
    |c, o| binary_f32(c, o, fast::elementwise_f32::add_f32, ew::add_f32),
    elementwise
);
registration!(
    MUL_F32,
    |c, o| binary_f32(c, o, fast::elementwise_f32::mul_f32, ew::mul_f32),
    elementwise
);
registration!(
    ADD_U8,
    |a| pack_binary_u8(a, BinaryTableU8::add),
    |c, o| binary_u8(c, o, ew::add_u8),
    elementwise,
    true
);
registration!(
    MUL_U8,
    |a| pack_binary_u8(a, BinaryTableU8::mul),
    |c, o| binary_u8(c, o, ew::mul_u8),
    elementwise,
    true
);
registration!(ADD_I32, |c, o| binary_i32(c, o, false), elementwise);
registration!(MUL_I32, |c, o| binary_i32(c, o, true), elementwise);
registration!(AVERAGE_POOL_F32, average_pool_f32, window_work);
registration!(AVERAGE_POOL_U8, average_pool_u8, window_work);
registration!(MAX_POOL_F32, max_pool_f32, window_work);
registration!(MAX_POOL_U8, max_pool_u8, window_work);
registration!(L2_POOL_F32, l2_pool_f32, window_work);
registration!(CONCATENATION, concatenation, elementwise);
registration!(CONV_F32, pack_conv_f32, conv_f32, conv_work, true, WEIGHTS);
registration!(CONV_U8, pack_conv_u8, conv_u8, conv_work, true, WEIGHTS);
registration!(
    DEPTHWISE_F32,
    pack_depthwise_f32,
    depthwise_f32,
    window_work,
    true,
    WEIGHTS
);
registration!(
    DEPTHWISE_U8,
    pack_depthwise_u8,
    depthwise_u8,
    window_work,
    true,
    WEIGHTS
);
registration!(BLOCK_REARRANGE, block_rearrange, elementwise, partial);
registration!(DEQUANTIZE, dequantize, elementwise);
registration!(EMBEDDING_LOOKUP, embedding_lookup, elementwise, partial);
registration!(HASHTABLE_LOOKUP, hashtable_lookup, elementwise, partial);
registration!(
    FLOOR,
    |c, o| {
        ew::floor_f32(c.f(0)?, out0(o)?.f32_mut()?);
        Ok(())
    },
    elementwise
);
registration!(
    FULLY_CONNECTED_F32,
    pack_fc_f32,
    fully_connected_f32,
    fc_work,
    true,
    WEIGHTS
);
registration!(
    FULLY_CONNECTED_U8,
    pack_conv_u8,
    fully_connected_u8,
    fc_work,
    true,
    WEIGHTS
);
registration!(L2_NORMALIZATION, l2_normalization, elementwise, partial);
registration!(
    L2_NORMALIZATION_U8,
    l2_normalization_u8,
    elementwise,
    partial
);
registration!(LRN, local_response_normalization, lrn_work, partial);
registration!(
    LOGISTIC_F32,
    |c, o| unary_f32(c, o, fast::elementwise_f32::logistic_f32),
    elementwise
);
registration!(LOGISTIC_U8, logistic_u8, elementwise);
registration!(LSH_PROJECTION, lsh_projection, elementwise, partial);
registration!(LSTM, lstm, recurrent_work, partial);
registration!(CLAMP_F32, clamp_f32, elementwise);
registration!(CLAMP_U8, clamp_u8, elementwise);
registration!(RESHAPE, reshape, elementwise);
registration!(RESIZE_BILINEAR, resize_bilinear, elementwise, partial);
registration!(RNN, rnn, recurrent_work, partial);
registration!(SOFTMAX_F32, softmax_f32, elementwise);
registration!(SOFTMAX_U8, softmax_u8, elementwise);
registration!(SVDF, svdf, recurrent_work, partial);
registration!(
    TANH,
    |c, o| unary_f32(c, o, fast::elementwise_f32::tanh_f32),
    elementwise
);

registration!(
    TANH_U8,
    |c, o| ew::tanh_u8(c.u(0)?, c.q(0), out0(o)?.u8_mut()?).map_err(kernel_error),
    elementwise
);

/// Filter and bias: what the convolution-like registrations pack.
const WEIGHTS: &[usize] = &[1, 2];

fn no_pack(_: &PackArgs) -> HalResult<Option<Packed>> {
    Ok(None)
}

// ---- work estimates -------------------------------------------------------------------------

fn elementwise(w: &WorkArgs) -> u64 {
    w.read.saturating_add(w.written)
}

/// Filter `[out_c, h, w, in_c]`: each output element sums h·w·in_c products.
fn conv_work(w: &WorkArgs) -> u64 {
    let taps = w
        .filter_dims
        .and_then(|d| d.get(1..))
        .map_or(1, |d| d.iter().map(|&x| u64::from(x)).product::<u64>());
    elementwise(w).saturating_add(w.written.saturating_mul(taps))
}

fn window_work(w: &WorkArgs) -> u64 {
    let taps = match w.params {
        Params::Depthwise { window, .. } | Params::Pool { window, .. } => {
            u64::from(window.filter_h) * u64::from(window.filter_w)
        }
        _ => 1,
    };
    elementwise(w).saturating_add(w.written.saturating_mul(taps))
}

fn fc_work(w: &WorkArgs) -> u64 {
    let n = match w.params {
        Params::FullyConnected { input_size, .. } => u64::from(*input_size),
        _ => 1,
    };
    elementwise(w).saturating_add(w.written.saturating_mul(n))
}

fn lrn_work(w: &WorkArgs) -> u64 {
    let n = match w.params {
        Params::Lrn { radius, .. } => u64::from(*radius).saturating_mul(2) + 1,
        _ => 1,
    };
    elementwise(w).saturating_add(w.written.saturating_mul(n))
}

/// Recurrent cells multiply every weight once per batch row.
fn recurrent_work(w: &WorkArgs) -> u64 {
    let batch = match w.params {
        Params::Lstm(p) => p.batch,
        Params::Rnn { batch, .. } | Params::Svdf { batch, .. } => *batch,
        _ => 1,
    };
    elementwise(w).saturating_add(w.read.saturating_mul(u64::from(batch)))
}

// ---- helpers ---------------------------------------------------------------------------------

fn act(a: FusedActivationFunc) -> Activation {
    match a {
        FusedActivationFunc::None => Activation::None,
        FusedActivationFunc::Relu => Activation::Relu,
        FusedActivationFunc::Relu1 => Activation::Relu1,
        FusedActivationFunc::Relu6 => Activation::Relu6,
    }
}

fn nhwc(d: &[u32]) -> Nhwc {
    Nhwc::new(d[0] as usize, d[1] as usize, d[2] as usize, d[3] as usize)
}

fn shape(d: &[u32]) -> Vec<usize> {
    d.iter().map(|&x| x as usize).collect()
}

fn quant(o: &OperandInfo) -> QuantParams {
    QuantParams::new(o.scale, o.zero_point)
}

fn window(p: &WindowParams, input: &[u32], output: &[u32]) -> Window {
    Window {
        input: nhwc(input),
        output: nhwc(output),
        filter_h: p.filter_h as usize,
        filter_w: p.filter_w as usize,
        stride_h: p.stride_h as usize,
        stride_w: p.stride_w as usize,
        padding: Padding {
            left: p.pad.left as usize,
            right: p.pad.right as usize,
            top: p.pad.top as usize,
            bottom: p.pad.bottom as usize,
        },
    }
}

fn kernel_error(e: KernelError) -> HalError {
    match e {
        KernelError::InvalidData(m) => HalError::InvalidArgument(m),
    }
}

fn mismatch(c: &Call) -> HalError {
    HalError::GeneralFailure(format!(
        "{}: operand data of an unexpected type or parameters of another operation",
        c.op.ty
    ))
}

fn out0<'o, 'b>(outs: &'o mut [TensorMut<'b>]) -> HalResult<&'o mut TensorMut<'b>> {
    outs.first_mut()
        .ok_or_else(|| HalError::GeneralFailure("an operation has no output".into()))
}

fn fused(c: &Call) -> HalResult<Activation> {
    match c.params {
        Params::Binary { act: a }
        | Params::Pool { act: a, .. }
        | Params::Conv { act: a, .. }
        | Params::Depthwise { act: a, .. }
        | Params::FullyConnected { act: a, .. } => Ok(act(*a)),
        _ => Err(mismatch(c)),
    }
}

/// The window of a pooling or convolution call, from its parameters and actual shapes.
fn call_window(c: &Call, out: &TensorMut) -> HalResult<Window> {
    let w = match c.params {
        Params::Pool { window, .. }
        | Params::Conv { window, .. }
        | Params::Depthwise { window, .. } => window,
        _ => return Err(mismatch(c)),
    };
    Ok(window(w, c.dims(0)?, out.dims))
}

// ---- element-wise ----------------------------------------------------------------------------

type BinaryF32 = fn(&[f32], &[usize], &[f32], &[usize], Activation, &mut [f32], &[usize]);
type SameShapeF32 = fn(&Ukernels, &[f32], &[f32], Activation, &mut [f32]);

/// Same-shape operands take the vector kernel; broadcasting ones the reference.
fn binary_f32(
    c: &Call,
    outs: &mut [TensorMut],
    same: SameShapeF32,
    broadcast: BinaryF32,
) -> HalResult<()> {
    let a = fused(c)?;
    let o = out0(outs)?;
    if c.dims(0)? == o.dims && c.dims(1)? == o.dims {
        same(c.kernels, c.f(0)?, c.f(1)?, a, o.f32_mut()?);
    } else {
        let (ad, bd, od) = (shape(c.dims(0)?), shape(c.dims(1)?), shape(o.dims));
        broadcast(c.f(0)?, &ad, c.f(1)?, &bd, a, o.f32_mut()?, &od);
    }
    Ok(())
}

type BinaryU8 = fn(
    &[u8],
    &[usize],
    QuantParams,
    &[u8],
    &[usize],
    QuantParams,
    QuantParams,
    Activation,
    &mut [u8],
    &[usize],
) -> Result<(), KernelError>;

type TableU8 =
    fn(QuantParams, QuantParams, QuantParams, Activation) -> Result<BinaryTableU8, KernelError>;

/// The quantization of ADD/MUL is static, so the whole operation becomes a table of the
/// reference's results; parameters the reference refuses are left to it at execution.
fn pack_binary_u8(a: &PackArgs, build: TableU8) -> HalResult<Option<Packed>> {
    let Params::Binary { act: f } = a.params else {
        return Ok(None);
    };
    let (x, y, o) = (quant(a.info(0)), quant(a.info(1)), quant(a.out_info(0)));
    Ok(build(x, y, o, act(*f)).ok().map(Packed::BinaryU8))
}

/// Same-shape operands take the packed table; broadcasting ones the reference.
fn binary_u8(c: &Call, outs: &mut [TensorMut], f: BinaryU8) -> HalResult<()> {
    let a = fused(c)?;
    let oq = c.out_q(0);
    let o = out0(outs)?;
    if let Some(Packed::BinaryU8(t)) = c.packed {
        if c.dims(0)? == o.dims && c.dims(1)? == o.dims {
            t.apply(c.u(0)?, c.u(1)?, o.u8_mut()?);
            return Ok(());
        }
    }
    let (ad, bd, od) = (shape(c.dims(0)?), shape(c.dims(1)?), shape(o.dims));
    f(
        c.u(0)?,
        &ad,
        c.q(0),
        c.u(1)?,
        &bd,
        c.q(1),
        oq,
        a,
        o.u8_mut()?,
        &od,
    )
    .map_err(kernel_error)
}

/// TENSOR_INT32 ADD (`mul` false) or MUL (NNAPI 1.3).
fn binary_i32(c: &Call, outs: &mut [TensorMut], mul: bool) -> HalResult<()> {
    let a = fused(c)?;
    let o = out0(outs)?;
    let (ad, bd, od) = (shape(c.dims(0)?), shape(c.dims(1)?), shape(o.dims));
    ew::binary_i32(c.i(0)?, &ad, c.i(1)?, &bd, mul, a, o.i32_mut()?, &od).map_err(kernel_error)
}

fn unary_f32(
    c: &Call,
    outs: &mut [TensorMut],
    f: fn(&Ukernels, &[f32], &mut [f32]),
) -> HalResult<()> {
    f(c.kernels, c.f(0)?, out0(outs)?.f32_mut()?);
    Ok(())
}

fn clamp_kind(c: &Call) -> Activation {
    match c.op.ty {
        OperationType::Relu => Activation::Relu,
        OperationType::Relu1 => Activation::Relu1,
        _ => Activation::Relu6,
    }
}

fn clamp_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let o = out0(outs)?.f32_mut()?;
    fast::elementwise_f32::clamp_f32(c.kernels, clamp_kind(c), c.f(0)?, o);
    Ok(())
}

fn clamp_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    ew::clamp_u8(clamp_kind(c), c.q(0), c.u(0)?, out0(outs)?.u8_mut()?);
    Ok(())
}

fn logistic_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    ew::logistic_u8(c.u(0)?, c.q(0), out0(outs)?.u8_mut()?).map_err(kernel_error)
}

fn dequantize(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    ew::dequantize(c.u(0)?, c.q(0), out0(outs)?.f32_mut()?);
    Ok(())
}

/// RESHAPE keeps the bytes; the plan aliases its output to its input where it can, so this
/// copy only runs when it cannot (a constant input, or the dynamic path).
fn reshape(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    out0(outs)?.copy_from(c.t(0)?.data)
}

/// Shape lists inline: a CONCATENATION of up to 8 rank-4 inputs allocates nothing per run.
type Dims = SmallVec<[usize; 4]>;

fn concatenation(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Concat { axis } = c.params else {
        return Err(mismatch(c));
    };
    let n = c.op.inputs.len() - 1;
    let dims: SmallVec<[Dims; 8]> = (0..n)
        .map(|i| Ok(c.dims(i)?.iter().map(|&d| d as usize).collect()))
        .collect::<HalResult<_>>()?;
    let oq = c.out_q(0);
    let o = out0(outs)?;
    match &mut o.data {
        DataMut::U8(out) => {
            // Inputs in another quantization than the output's (NNAPI 1.2) are requantized
            // first.
            let requantized: SmallVec<[Option<Vec<u8>>; 8]> = (0..n)
                .map(|i| {
                    let q = c.q(i);
                    if (q.scale, q.zero_point) == (oq.scale, oq.zero_point) {
                        return Ok(None);
                    }
                    let x = c.u(i)?;
                    let mut y = vec![0; x.len()];
                    ew::requantize_u8(x, q, oq, &mut y);
                    Ok(Some(y))
                })
                .collect::<HalResult<_>>()?;
            let parts: SmallVec<[(&[u8], &[usize]); 8]> = (0..n)
                .map(|i| {
                    let data = match &requantized[i] {
                        Some(y) => y.as_slice(),
                        None => c.u(i)?,
                    };
                    Ok((data, dims[i].as_slice()))
                })
                .collect::<HalResult<_>>()?;
            layout::concatenation(&parts, *axis, out);
        }
        DataMut::F32(out) => {
            let parts: SmallVec<[(&[f32], &[usize]); 8]> = (0..n)
                .map(|i| Ok((c.f(i)?, dims[i].as_slice())))
                .collect::<HalResult<_>>()?;
            layout::concatenation(&parts, *axis, out);
        }
        DataMut::I32(_) => return Err(mismatch(c)),
    }
    Ok(())
}

// ---- pooling ---------------------------------------------------------------------------------

fn average_pool_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    fast::pool_f32::average_pool_f32(c.kernels, &win, c.f(0)?, a, o.f32_mut()?);
    Ok(())
}

fn average_pool_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    fast::pool_u8::average_pool_u8(c.kernels, &win, c.u(0)?, c.q(0), a, o.u8_mut()?);
    Ok(())
}

fn max_pool_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    fast::pool_f32::max_pool_f32(c.kernels, &win, c.f(0)?, a, o.f32_mut()?);
    Ok(())
}

fn max_pool_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    fast::pool_u8::max_pool_u8(c.kernels, &win, c.u(0)?, c.q(0), a, o.u8_mut()?);
    Ok(())
}

fn l2_pool_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    pool::l2_pool_f32(&win, c.f(0)?, a, o.f32_mut()?);
    Ok(())
}

// ---- convolutions ----------------------------------------------------------------------------

/// The filter `[out_c, kh, kw, in_c]` (FULLY_CONNECTED `[units, input_size]`) and bias, when
/// both are constants of the expected types.
fn constant_filter<'a>(a: &PackArgs<'a>) -> Option<(FilterShape, TensorRef<'a>, TensorRef<'a>)> {
    let (filter, bias) = (a.constant(1)?, a.constant(2)?);
    let d: Vec<usize> = filter.dims.iter().map(|&x| x as usize).collect();
    let shape = match *d.as_slice() {
        [out_c, kh, kw, in_c] => FilterShape {
            out_c,
            kh,
            kw,
            in_c,
        },
        [out_c, in_c] => FilterShape {
            out_c,
            kh: 1,
            kw: 1,
            in_c,
        },
        _ => return None,
    };
    Some((shape, filter, bias))
}

fn pack_conv_f32(a: &PackArgs) -> HalResult<Option<Packed>> {
    let Some((shape, filter, bias)) = constant_filter(a).filter(|_| dilation(a.params).is_none())
    else {
        return Ok(None);
    };
    Ok(Some(Packed::ConvF32(PackedConvF32::pack(
        a.kernels,
        shape,
        filter.f32()?,
        bias.f32()?,
    ))))
}

/// The dilation factors of a convolution call when any is not 1: such calls run the dilated
/// reference kernels (and nothing is packed for them); the fast kernels take factors of 1.
fn dilation(params: &Params) -> Option<conv::Dilation> {
    match params.nhwc() {
        Params::Conv { window, .. } | Params::Depthwise { window, .. }
            if (window.dilation_h, window.dilation_w) != (1, 1) =>
        {
            Some(conv::Dilation {
                h: window.dilation_h as usize,
                w: window.dilation_w as usize,
            })
        }
        _ => None,
    }
}

fn conv_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    if let Some(d) = dilation(c.params) {
        let (x, f, b) = (c.f(0)?, c.f(1)?, c.f(2)?);
        conv::conv2d_dilated_f32(&win, d, x, f, b, a, o.f32_mut()?);
        return Ok(());
    }
    match c.packed {
        Some(Packed::ConvF32(p)) => fast::conv_f32::conv2d_f32(&win, p, c.f(0)?, a, o.f32_mut()?),
        _ => conv::conv2d_f32(&win, c.f(0)?, c.f(1)?, c.f(2)?, a, o.f32_mut()?),
    }
    Ok(())
}

/// The quantization of a convolution-like operation from its operands and parameters.
fn conv_quant(a: &PackArgs) -> Option<ConvQuant> {
    let act = match a.params {
        Params::Conv { act, .. }
        | Params::Depthwise { act, .. }
        | Params::FullyConnected { act, .. } => self::act(*act),
        _ => return None,
    };
    Some(ConvQuant {
        input: quant(a.info(0)),
        filter: quant(a.info(1)),
        output: quant(a.out_info(0)),
        act,
    })
}

/// Parameters the packer refuses are left to the reference kernel, which reports them at
/// execution exactly as an unpacked model would.
fn pack_conv_u8(a: &PackArgs) -> HalResult<Option<Packed>> {
    let (Some((shape, filter, bias)), Some(q)) = (constant_filter(a), conv_quant(a)) else {
        return Ok(None);
    };
    if dilation(a.params).is_some() {
        return Ok(None);
    }
    Ok(
        PackedConvU8::pack(a.kernels, shape, filter.u8()?, bias.i32()?, q)
            .ok()
            .map(Packed::ConvU8),
    )
}

fn conv_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, oq, o) = (fused(c)?, c.out_q(0), out0(outs)?);
    let win = call_window(c, o)?;
    if let Some(d) = dilation(c.params) {
        let (x, f, b) = (c.u(0)?, c.u(1)?, c.i(2)?);
        return conv::conv2d_dilated_u8(&win, d, x, c.q(0), f, c.q(1), b, oq, a, o.u8_mut()?)
            .map_err(kernel_error);
    }
    if let Some(Packed::ConvU8(p)) = c.packed {
        fast::conv_u8::conv2d_u8(&win, p, c.u(0)?, o.u8_mut()?);
        return Ok(());
    }
    conv::conv2d_u8(
        &win,
        c.u(0)?,
        c.q(0),
        c.u(1)?,
        c.q(1),
        c.i(2)?,
        oq,
        a,
        o.u8_mut()?,
    )
    .map_err(kernel_error)
}

fn multiplier(c: &Call) -> HalResult<usize> {
    match c.params {
        Params::Depthwise { multiplier, .. } => Ok(*multiplier as usize),
        _ => Err(mismatch(c)),
    }
}

fn pack_depthwise_f32(a: &PackArgs) -> HalResult<Option<Packed>> {
    let (Some(filter), Some(bias)) = (a.constant(1), a.constant(2)) else {
        return Ok(None);
    };
    if dilation(a.params).is_some() {
        return Ok(None);
    }
    let &[1, kh, kw, out_c] = filter.dims else {
        return Ok(None);
    };
    Ok(Some(Packed::DwF32(PackedDwF32::pack(
        a.kernels,
        kh as usize,
        kw as usize,
        out_c as usize,
        filter.f32()?,
        bias.f32()?,
    ))))
}

fn depthwise_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, m, o) = (fused(c)?, multiplier(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    let (input, out) = (c.f(0)?, o.f32_mut()?);
    if let Some(d) = dilation(c.params) {
        let (f, b) = (c.f(1)?, c.f(2)?);
        conv::depthwise_conv2d_dilated_f32(&win, d, m, input, f, b, a, out);
        return Ok(());
    }
    match c.packed {
        Some(Packed::DwF32(p)) => fast::dwconv_f32::depthwise_conv2d_f32(&win, m, p, input, a, out),
        _ => conv::depthwise_conv2d_f32(&win, m, input, c.f(1)?, c.f(2)?, a, out),
    }
    Ok(())
}

fn pack_depthwise_u8(a: &PackArgs) -> HalResult<Option<Packed>> {
    let (Some(filter), Some(bias), Some(q)) = (a.constant(1), a.constant(2), conv_quant(a)) else {
        return Ok(None);
    };
    if dilation(a.params).is_some() {
        return Ok(None);
    }
    let &[1, kh, kw, out_c] = filter.dims else {
        return Ok(None);
    };
    let (kh, kw, out_c) = (kh as usize, kw as usize, out_c as usize);
    Ok(
        PackedDwU8::pack(a.kernels, kh, kw, out_c, filter.u8()?, bias.i32()?, q)
            .ok()
            .map(Packed::DwU8),
    )
}

fn depthwise_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, m, oq, o) = (fused(c)?, multiplier(c)?, c.out_q(0), out0(outs)?);
    let win = call_window(c, o)?;
    if let Some(d) = dilation(c.params) {
        let (x, f, b) = (c.u(0)?, c.u(1)?, c.i(2)?);
        return conv::depthwise_conv2d_dilated_u8(
            &win,
            d,
            m,
            x,
            c.q(0),
            f,
            c.q(1),
            b,
            oq,
            a,
            o.u8_mut()?,
        )
        .map_err(kernel_error);
    }
    if let Some(Packed::DwU8(p)) = c.packed {
        fast::dwconv_u8::depthwise_conv2d_u8(&win, m, p, c.u(0)?, o.u8_mut()?);
        return Ok(());
    }
    conv::depthwise_conv2d_u8(
        &win,
        m,
        c.u(0)?,
        c.q(0),
        c.u(1)?,
        c.q(1),
        c.i(2)?,
        oq,
        a,
        o.u8_mut()?,
    )
    .map_err(kernel_error)
}

/// (batch, input_size, units) of a FULLY_CONNECTED call.
fn fc_dims(c: &Call) -> HalResult<(usize, usize, usize)> {
    match c.params {
        Params::FullyConnected {
            batch,
            input_size,
            units,
            ..
        } => Ok((*batch as usize, *input_size as usize, *units as usize)),
        _ => Err(mismatch(c)),
    }
}

fn pack_fc_f32(a: &PackArgs) -> HalResult<Option<Packed>> {
    pack_conv_f32(a)
}

fn fully_connected_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let ((b, n, u), a) = (fc_dims(c)?, fused(c)?);
    let o = out0(outs)?;
    match c.packed {
        Some(Packed::ConvF32(p)) if p.shape().in_c == n && p.shape().out_c == u => {
            fast::conv_f32::fully_connected_f32(p, b, c.f(0)?, a, o.f32_mut()?)
        }
        _ => conv::fully_connected_f32(b, n, u, c.f(0)?, c.f(1)?, c.f(2)?, a, o.f32_mut()?),
    }
    Ok(())
}

fn fully_connected_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let ((b, n, u), a, oq) = (fc_dims(c)?, fused(c)?, c.out_q(0));
    let o = out0(outs)?;
    if let Some(Packed::ConvU8(p)) = c.packed {
        if p.shape().in_c == n && p.shape().out_c == u {
            fast::conv_u8::fully_connected_u8(p, b, c.u(0)?, o.u8_mut()?);
            return Ok(());
        }
    }
    conv::fully_connected_u8(
        b,
        n,
        u,
        c.u(0)?,
        c.q(0),
        c.u(1)?,
        c.q(1),
        c.i(2)?,
        oq,
        a,
        o.u8_mut()?,
    )
    .map_err(kernel_error)
}

// ---- layout and lookups ----------------------------------------------------------------------

fn block_rearrange(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Block { block } = c.params else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let b = *block as usize;
    let d2s = c.op.ty == OperationType::DepthToSpace;
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(i), DataMut::F32(o)) if d2s => layout::depth_to_space(i, s, b, o),
        (DataRef::F32(i), DataMut::F32(o)) => layout::space_to_depth(i, s, b, o),
        (DataRef::U8(i), DataMut::U8(o)) if d2s => layout::depth_to_space(i, s, b, o),
        (DataRef::U8(i), DataMut::U8(o)) => layout::space_to_depth(i, s, b, o),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn embedding_lookup(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lookup { rows, row_len } = c.params else {
        return Err(mismatch(c));
    };
    let (rows, row_len) = (*rows as usize, *row_len as usize);
    let lookups = c.i(0)?;
    match (c.t(1)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(v), DataMut::F32(o)) => lk::embedding_lookup(lookups, v, rows, row_len, o),
        (DataRef::I32(v), DataMut::I32(o)) => lk::embedding_lookup(lookups, v, rows, row_len, o),
        (DataRef::U8(v), DataMut::U8(o)) => lk::embedding_lookup(lookups, v, rows, row_len, o),
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}

fn hashtable_lookup(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lookup { row_len, .. } = c.params else {
        return Err(mismatch(c));
    };
    let row_len = *row_len as usize;
    let (lookups, keys) = (c.i(0)?, c.i(1)?);
    let [first, hits] = outs else {
        return Err(mismatch(c));
    };
    let hits = hits.u8_mut()?;
    match (c.t(2)?.data, &mut first.data) {
        (DataRef::F32(v), DataMut::F32(o)) => {
            lk::hashtable_lookup(lookups, keys, v, row_len, o, hits)
        }
        (DataRef::I32(v), DataMut::I32(o)) => {
            lk::hashtable_lookup(lookups, keys, v, row_len, o, hits)
        }
        (DataRef::U8(v), DataMut::U8(o)) => {
            lk::hashtable_lookup(lookups, keys, v, row_len, o, hits)
        }
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn lsh_projection(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lsh {
        kind,
        num_hash,
        num_bits,
        input_rows,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let kind = match kind {
        LshKind::Sparse => lk::LshProjectionType::Sparse,
        LshKind::Dense => lk::LshProjectionType::Dense,
        LshKind::SparseBucketed => lk::LshProjectionType::SparseBucketed,
    };
    let input = c.t(1)?.data.to_le_bytes();
    lk::lsh_projection(
        c.f(0)?,
        *num_hash as usize,
        *num_bits as usize,
        &input,
        *input_rows as usize,
        c.opt_f(2)?,
        kind,
        out0(outs)?.i32_mut()?,
    );
    Ok(())
}

fn resize_bilinear(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Resize {
        height,
        width,
        align_corners,
        half_pixel_centers,
    } = *c.params
    else {
        return Err(mismatch(c));
    };
    let s = nhwc(c.dims(0)?);
    let mode = layout::ResizeMode {
        align_corners,
        half_pixel_centers,
    };
    let (h, w) = (height as usize, width as usize);
    match (c.t(0)?.data, &mut out0(outs)?.data) {
        (DataRef::F32(x), DataMut::F32(y)) => layout::resize_bilinear(x, s, h, w, mode, y),
        (DataRef::U8(x), DataMut::U8(y)) => layout::resize_bilinear(x, s, h, w, mode, y),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

// ---- normalization ---------------------------------------------------------------------------

/// Runs `f` on rows of `depth` consecutive elements. The axis an operation works along has
/// its elements `inner` apart; when that is not the last axis (`inner` > 1) the input is
/// regrouped so the axis becomes the last one, and the result is put back in place.
fn along_axis<T: Copy + Default, E>(
    input: &[T],
    out: &mut [T],
    depth: usize,
    inner: usize,
    f: impl FnOnce(&[T], &mut [T]) -> Result<(), E>,
) -> Result<(), E> {
    if inner <= 1 {
        return f(input, out);
    }
    let block = depth * inner;
    let mut moved = vec![T::default(); input.len()];
    for (src, dst) in input.chunks_exact(block).zip(moved.chunks_exact_mut(block)) {
        for d in 0..depth {
            for i in 0..inner {
                dst[i * depth + d] = src[d * inner + i];
            }
        }
    }
    let mut result = vec![T::default(); input.len()];
    f(&moved, &mut result)?;
    for (src, dst) in result.chunks_exact(block).zip(out.chunks_exact_mut(block)) {
        for d in 0..depth {
            for i in 0..inner {
                dst[d * inner + i] = src[i * depth + d];
            }
        }
    }
    Ok(())
}

fn l2_normalization_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Depth { depth, inner } = c.params else {
        return Err(mismatch(c));
    };
    let depth = *depth as usize;
    let zero_point = c.q(0).zero_point;
    along_axis(
        c.u(0)?,
        out0(outs)?.u8_mut()?,
        depth,
        *inner as usize,
        |x, o| {
            norm::l2_normalization_u8(x, depth, zero_point, o);
            Ok::<(), HalError>(())
        },
    )
}

fn l2_normalization(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Depth { depth, inner } = c.params else {
        return Err(mismatch(c));
    };
    let depth = *depth as usize;
    along_axis(
        c.f(0)?,
        out0(outs)?.f32_mut()?,
        depth,
        *inner as usize,
        |x, o| {
            norm::l2_normalization_f32(x, depth, o);
            Ok::<(), HalError>(())
        },
    )
}

fn local_response_normalization(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lrn {
        radius,
        bias,
        alpha,
        beta,
        depth,
        inner,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let depth = *depth as usize;
    along_axis(
        c.f(0)?,
        out0(outs)?.f32_mut()?,
        depth,
        *inner as usize,
        |x, o| {
            norm::local_response_normalization_f32(
                x,
                depth,
                *radius as usize,
                *bias,
                *alpha,
                *beta,
                o,
            );
            Ok::<(), HalError>(())
        },
    )
}

fn softmax_params(c: &Call) -> HalResult<(f32, usize, usize)> {
    match c.params {
        Params::Softmax { beta, depth, inner } => Ok((*beta, *depth as usize, *inner as usize)),
        _ => Err(mismatch(c)),
    }
}

fn softmax_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (beta, depth, inner) = softmax_params(c)?;
    let o = out0(outs)?.f32_mut()?;
    along_axis(c.f(0)?, o, depth, inner, |x, o| {
        fast::elementwise_f32::softmax_f32(c.kernels, beta, depth, x, o);
        Ok::<(), HalError>(())
    })
}

fn softmax_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (beta, depth, inner) = softmax_params(c)?;
    let q = c.q(0);
    along_axis(c.u(0)?, out0(outs)?.u8_mut()?, depth, inner, |x, o| {
        norm::softmax_u8(x, q, depth, beta, o)
    })
    .map_err(kernel_error)
}

// ---- recurrent -------------------------------------------------------------------------------

fn lstm(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Lstm(p) = c.params else {
        return Err(mismatch(c));
    };
    let activation = recurrent::LstmActivation::from_code(p.activation)
        .ok_or_else(|| HalError::InvalidArgument(format!("LSTM activation {}", p.activation)))?;
    let inputs = recurrent::LstmInputs {
        input: c.f(0)?,
        input_to_input_weights: c.opt_f(1)?,
        input_to_forget_weights: c.f(2)?,
        input_to_cell_weights: c.f(3)?,
        input_to_output_weights: c.f(4)?,
        recurrent_to_input_weights: c.opt_f(5)?,
        recurrent_to_forget_weights: c.f(6)?,
        recurrent_to_cell_weights: c.f(7)?,
        recurrent_to_output_weights: c.f(8)?,
        cell_to_input_weights: c.opt_f(9)?,
        cell_to_forget_weights: c.opt_f(10)?,
        cell_to_output_weights: c.opt_f(11)?,
        input_gate_bias: c.opt_f(12)?,
        forget_gate_bias: c.f(13)?,
        cell_bias: c.f(14)?,
        output_gate_bias: c.f(15)?,
        projection_weights: c.opt_f(16)?,
        projection_bias: c.opt_f(17)?,
        output_state_in: c.f(18)?,
        cell_state_in: c.f(19)?,
        layer_norm: if p.layer_norm {
            Some(recurrent::LstmLayerNorm {
                input: c.opt_f(23)?,
                forget: c.f(24)?,
                cell: c.f(25)?,
                output: c.f(26)?,
            })
        } else {
            None
        },
    };
    let dims = recurrent::LstmDims {
        batch: p.batch as usize,
        input_size: p.input_size as usize,
        num_units: p.units as usize,
        output_size: p.output_size as usize,
    };
    let params = recurrent::LstmParams {
        activation,
        cell_clip: p.cell_clip,
        proj_clip: p.proj_clip,
    };
    let [scratch, state, cell, output] = outs else {
        return Err(mismatch(c));
    };
    let outputs = recurrent::LstmOutputs {
        scratch: scratch.f32_mut()?,
        output_state_out: state.f32_mut()?,
        cell_state_out: cell.f32_mut()?,
        output: output.f32_mut()?,
    };
    recurrent::lstm_f32(dims, &inputs, params, outputs);
    Ok(())
}

fn rnn(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Rnn {
        batch,
        input_size,
        units,
        act: a,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let dims = recurrent::RnnDims {
        batch: *batch as usize,
        input_size: *input_size as usize,
        num_units: *units as usize,
    };
    let inputs = recurrent::RnnInputs {
        input: c.f(0)?,
        weights: c.f(1)?,
        recurrent_weights: c.f(2)?,
        bias: c.f(3)?,
        hidden_state_in: c.f(4)?,
    };
    let [state, output] = outs else {
        return Err(mismatch(c));
    };
    recurrent::rnn_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
    Ok(())
}

fn svdf(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Svdf {
        batch,
        input_size,
        num_filters,
        memory_size,
        rank,
        act: a,
        ..
    } = c.params
    else {
        return Err(mismatch(c));
    };
    let dims = recurrent::SvdfDims {
        batch: *batch as usize,
        input_size: *input_size as usize,
        num_filters: *num_filters as usize,
        memory_size: *memory_size as usize,
        rank: *rank as usize,
    };
    let inputs = recurrent::SvdfInputs {
        input: c.f(0)?,
        weights_feature: c.f(1)?,
        weights_time: c.f(2)?,
        bias: c.opt_f(3)?,
        state_in: c.f(4)?,
    };
    let [state, output] = outs else {
        return Err(mismatch(c));
    };
    recurrent::svdf_f32(dims, &inputs, act(*a), state.f32_mut()?, output.f32_mut()?);
    Ok(())
}
