//! One registration per operation and operand type (types.hal 1.0, `OperationType`): how the
//! compiled plan packs an operation's constant operands at prepare ([`OpImpl::pack`]), runs it
//! ([`OpImpl::run`]) and estimates its work ([`OpImpl::work`]). [`lookup`] is the only table;
//! later operation versions extend it, not a `match` in the executor.
//!
//! The registrations sit in one module per operation family (`conv`, `detection`, `elementwise`, `index`, `lookup`,
//! `normalization`, `pool`, `quantize`, `recurrent`, `reduce`, `transform`: the names of the kernels' families and of
//! `nnhal_hal::shape`'s), each with a `lookup` of its own that [`lookup`] chains. This module
//! holds what they share: the call and packing arguments, [`Packed`], the NCHW wrapper
//! [`run_nchw`], the work estimates more than one family uses and the small helpers.
//!
//! Shapes were inferred and checked before any of this is called, so slice lengths agree with
//! the dimensions handed to the kernels. A registration with packed weights runs the fast
//! operator loops of its kernel family on the micro-kernels chosen at prepare; without
//! (weights given at execution, or no fast path) it runs the reference kernels.

use crate::tensor::{Data, DataMut, DataRef, Tensor, TensorMut, TensorRef};
use nnhal_hal::shape::{Params, WindowParams};
use nnhal_hal::validate::{OperandInfo, OperationInfo, ValidModel};
use nnhal_hal::{FusedActivationFunc, HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::conv::dw_f32::PackedDwF32;
use nnhal_kernels::conv::dw_u8::PackedDwU8;
use nnhal_kernels::conv::f32::PackedConvF32;
use nnhal_kernels::conv::u8::PackedConvU8;
use nnhal_kernels::elementwise::binary_u8::PackedBinaryU8;
use nnhal_kernels::quant::ChannelRequant;
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::{layout, Activation, KernelError, Nhwc, Padding, QuantParams, Window};
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
    /// ADD / MUL / SUB uint8: the multipliers of the vector kernel, or the result for every
    /// pair of input bytes.
    BinaryU8(PackedBinaryU8),
    /// GROUPED_CONV_2D float32 or uint8: one packed CONV_2D GEMM per group.
    Grouped(nnhal_kernels::conv::grouped::PackedGrouped),
    /// TRANSPOSE_CONV_2D float32: the filter as one GEMM over input pixels.
    TransposeF32(nnhal_kernels::conv::transpose::PackedTransposeF32),
    /// TRANSPOSE_CONV_2D quant8: the filter as one uint8 GEMM with int32 sums, the bias and the
    /// per-channel requantizers.
    TransposeU8(nnhal_kernels::conv::transpose::PackedTransposeU8),
    /// LSTM / RNN and their sequence forms, float32: each direction's gate weights packed for
    /// the float32 GEMM, and the operation's step scratch.
    Recurrent(Box<recurrent::PackedRecurrent>),
    /// CONV_2D / DEPTHWISE_CONV_2D with a TENSOR_QUANT8_SYMM_PER_CHANNEL filter: the filter's
    /// unsigned image (zero point 128), the bias and one requantizer per output channel.
    PerChannel {
        filter: Vec<u8>,
        bias: Vec<i32>,
        rq: ChannelRequant,
    },
}

impl Packed {
    /// The name of every variant, in declaration order (tests that must meet each one).
    pub const KINDS: &'static [&'static str] = &[
        "ConvF32",
        "DwF32",
        "ConvU8",
        "DwU8",
        "BinaryU8",
        "Grouped",
        "TransposeF32",
        "TransposeU8",
        "Recurrent",
        "PerChannel",
    ];

    /// This variant's name in [`Packed::KINDS`].
    pub fn kind(&self) -> &'static str {
        match self {
            Packed::ConvF32(_) => "ConvF32",
            Packed::DwF32(_) => "DwF32",
            Packed::ConvU8(_) => "ConvU8",
            Packed::DwU8(_) => "DwU8",
            Packed::BinaryU8(_) => "BinaryU8",
            Packed::Grouped(_) => "Grouped",
            Packed::TransposeF32(_) => "TransposeF32",
            Packed::TransposeU8(_) => "TransposeU8",
            Packed::Recurrent(_) => "Recurrent",
            Packed::PerChannel { .. } => "PerChannel",
        }
    }
}

/// Whether `packed`, read back from a compilation cache, is what `a`'s operation packs: a
/// variant that operation's registration builds, on its operand type, with the filter
/// extents (and group count) its kernels check against the window. Anything else makes the
/// cache a miss; the values inside a fitting variant are trusted as far as a forged cache
/// may be (wrong outputs for that model, never an access out of bounds).
pub fn packed_fits(packed: &Packed, a: &PackArgs) -> bool {
    use nnhal_kernels::conv::FilterShape;
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType as T;
    let filter =
        a.op.inputs
            .get(1)
            .map(|&i| a.model.operands[i].dims.as_slice());
    let shape = match filter {
        Some(&[out_c, kh, kw, in_c]) => Some([out_c, kh, kw, in_c]),
        Some(&[out_c, in_c]) => Some([out_c, 1, 1, in_c]),
        _ => None,
    }
    .map(|[out_c, kh, kw, in_c]| FilterShape {
        out_c: out_c as usize,
        kh: kh as usize,
        kw: kw as usize,
        in_c: in_c as usize,
    });
    let depthwise = |dims: (usize, usize, usize)| match filter {
        Some(&[1, kh, kw, out_c]) => dims == (kh as usize, kw as usize, out_c as usize),
        _ => false,
    };
    let ty = a.model.operands[a.op.inputs[0]].ty;
    match (packed, a.op.ty, ty) {
        (Packed::ConvF32(p), T::Conv2d | T::FullyConnected, F) => shape == Some(p.shape()),
        (Packed::ConvU8(p), T::Conv2d | T::FullyConnected, Q) => shape == Some(p.shape()),
        (Packed::DwF32(p), T::DepthwiseConv2d, F) => depthwise(p.dims()),
        (Packed::DwU8(p), T::DepthwiseConv2d, Q) => depthwise(p.dims()),
        (Packed::Grouped(p), T::GroupedConv2d, F | Q) => {
            shape == Some(p.shape())
                && matches!(a.params, nnhal_hal::shape::Params::GroupedConv { groups, .. }
                    if *groups as usize == p.groups())
        }
        (Packed::TransposeF32(p), T::TransposeConv2d, F) => shape == Some(p.shape()),
        (Packed::TransposeU8(p), T::TransposeConv2d, Q) => shape == Some(p.shape()),
        (Packed::BinaryU8(_), T::Add | T::Mul | T::Sub, Q) => true,
        (Packed::PerChannel { filter, bias, rq }, T::Conv2d | T::DepthwiseConv2d, Q) => {
            let Some(dims) = a.op.inputs.get(1).map(|&i| &a.model.operands[i].dims) else {
                return false;
            };
            let out_c = match (a.op.ty, dims.as_slice()) {
                (T::Conv2d, &[out_c, ..]) => out_c,
                (T::DepthwiseConv2d, &[1, _, _, out_c]) => out_c,
                _ => return false,
            } as usize;
            let taps = dims
                .iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d as usize));
            dims.len() == 4
                && taps == Some(filter.len())
                && bias.len() == out_c
                && rq.channels() == out_c
        }
        _ => false,
    }
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
    elementwise::lookup(op, ty)
        .or_else(|| conv::lookup(op, ty))
        .or_else(|| pool::lookup(op, ty))
        .or_else(|| normalization::lookup(op, ty))
        .or_else(|| transform::lookup(op, ty))
        .or_else(|| lookup::lookup(op, ty))
        .or_else(|| recurrent::lookup(op, ty))
        .or_else(|| math::lookup(op, ty))
        .or_else(|| logic::lookup(op, ty))
        .or_else(|| reduce::lookup(op, ty))
        .or_else(|| quantize::lookup(op, ty))
        .or_else(|| index::lookup(op, ty))
        .or_else(|| random::lookup(op, ty))
        .or_else(|| detection::lookup(op, ty))
}

/// For an operation whose output extents only its input values decide (dynamic output
/// shapes), the function that computes them from the bound inputs.
pub fn shape_at_run(
    op: OperationType,
) -> Option<fn(&Call) -> HalResult<nnhal_hal::shape::Inferred>> {
    detection::shape_at_run(op)
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
            DataRef::I32(_) | DataRef::I16(_) => {
                return Err(HalError::GeneralFailure("no NCHW integer operation".into()))
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
            DataMut::I32(_) | DataMut::I16(_) => {
                return Err(HalError::GeneralFailure("no NCHW integer operation".into()))
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
        registration!($name, $crate::executor::no_pack, $run, $work, true);
    };
    ($name:ident, $run:expr, $work:expr, partial) => {
        registration!($name, $crate::executor::no_pack, $run, $work, false);
    };
    ($name:ident, $pack:expr, $run:expr, $work:expr, $fills:expr) => {
        registration!($name, $pack, $run, $work, $fills, &[]);
    };
    ($name:ident, $pack:expr, $run:expr, $work:expr, $fills:expr, $packs:expr) => {
        static $name: $crate::executor::OpImpl = $crate::executor::OpImpl {
            name: stringify!($name),
            pack: $pack,
            run: $run,
            work: $work,
            fills: $fills,
            packs: $packs,
        };
    };
}

// The families, after the macro their registrations use.
mod conv;
mod detection;
mod elementwise;
mod index;
mod logic;
mod lookup;
mod math;
mod normalization;
mod pool;
mod quantize;
mod random;
mod recurrent;
mod reduce;
mod transform;

fn no_pack(_: &PackArgs) -> HalResult<Option<Packed>> {
    Ok(None)
}

// ---- work estimates shared by several families ------------------------------------------

fn elementwise_work(w: &WorkArgs) -> u64 {
    w.read.saturating_add(w.written)
}

fn window_work(w: &WorkArgs) -> u64 {
    let taps = match w.params {
        Params::Depthwise { window, .. } | Params::Pool { window, .. } => {
            u64::from(window.filter_h) * u64::from(window.filter_w)
        }
        _ => 1,
    };
    elementwise_work(w).saturating_add(w.written.saturating_mul(taps))
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
