//! Registrations of the convolution family (types.hal 1.0 `OperationType`): CONV_2D (3),
//! DEPTHWISE_CONV_2D (4) and FULLY_CONNECTED (9) on float32 and uint8. Constant filters and
//! biases are packed at prepare for the GEMM and depthwise micro-kernels
//! (`nnhal_kernels::conv::{f32, u8, dw_f32, dw_u8}`); filters given at execution, and NNAPI
//! 1.2's dilation factors other than 1, run the reference loops. NCHW forms (NNAPI 1.2
//! `layout`) run transposed ([`super::run_nchw`]).
//!
//! NNAPI 1.2's GROUPED_CONV_2D (55) and TRANSPOSE_CONV_2D (91) on float32 and uint8 (signed
//! quant8 as its unsigned image), with a per-tensor or a per-channel
//! (TENSOR_QUANT8_SYMM_PER_CHANNEL) filter: GROUPED_CONV_2D runs one packed CONV_2D GEMM per
//! group (`nnhal_kernels::conv::grouped`) and TRANSPOSE_CONV_2D float32 one GEMM with a col2im
//! scatter (`nnhal_kernels::conv::transpose`), quant8 the same product on the uint8 GEMM with
//! int32 sums, scattered, then requantized per channel.
//!
//! Per-channel filters of CONV_2D, DEPTHWISE_CONV_2D and GROUPED_CONV_2D are packed as their
//! unsigned image (zero point 128) for the same micro-kernels, whose epilogue then takes one
//! multiplier and shift pair per output column (including the left shift of a multiplier of 1
//! or more, which also lets a per-tensor GROUPED_CONV_2D with such a multiplier run packed);
//! dilated per-channel convolutions run the reference loops.

use super::{
    act, call_window, elementwise_work, fused, kernel_error, mismatch, nhwc, out0, quant, window,
    window_work, Call, OpImpl, PackArgs, Packed, WorkArgs,
};
use crate::tensor::{DataRef, TensorMut, TensorRef};
use nnhal_hal::shape::{Params, WindowParams};
use nnhal_hal::validate::OperandInfo;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::conv::dw_f32::{self, PackedDwF32};
use nnhal_kernels::conv::dw_u8::{self, PackedDwU8};
use nnhal_kernels::conv::f32::{self as fast_f32, PackedConvF32};
use nnhal_kernels::conv::grouped::{self, PackedGrouped};
use nnhal_kernels::conv::transpose::{
    self, PackedTransposeF32, PackedTransposeU8, TransposeWindow,
};
use nnhal_kernels::conv::u8::{self as fast_u8, ConvQuant, PackedConvU8};
use nnhal_kernels::conv::FilterQuant;
use nnhal_kernels::conv::{reference, FilterShape};
use nnhal_kernels::quant::ChannelRequant;
use nnhal_kernels::{Activation, Window};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (Conv2d, F) => &CONV_F32,
        (Conv2d, Q) => &CONV_U8,
        (DepthwiseConv2d, F) => &DEPTHWISE_F32,
        (DepthwiseConv2d, Q) => &DEPTHWISE_U8,
        (FullyConnected, F) => &FULLY_CONNECTED_F32,
        (FullyConnected, Q) => &FULLY_CONNECTED_U8,
        (GroupedConv2d, F) => &GROUPED_F32,
        (GroupedConv2d, Q) => &GROUPED_U8,
        (TransposeConv2d, F) => &TRANSPOSE_F32,
        (TransposeConv2d, Q) => &TRANSPOSE_U8,
        _ => return None,
    })
}

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

registration!(
    GROUPED_F32,
    pack_grouped,
    grouped_f32,
    conv_work,
    true,
    WEIGHTS
);
registration!(
    GROUPED_U8,
    pack_grouped,
    grouped_u8,
    conv_work,
    true,
    WEIGHTS
);
registration!(
    TRANSPOSE_F32,
    pack_transpose_f32,
    transpose_f32,
    transpose_work,
    true,
    WEIGHTS
);
registration!(
    TRANSPOSE_U8,
    pack_transpose_u8,
    transpose_u8,
    transpose_work,
    true,
    WEIGHTS
);

/// Filter and bias: what the convolution-like registrations pack.
const WEIGHTS: &[usize] = &[1, 2];

/// Filter `[out_c, h, w, in_c]`: each output element sums h·w·in_c products.
fn conv_work(w: &WorkArgs) -> u64 {
    let taps = w
        .filter_dims
        .and_then(|d| d.get(1..))
        .map_or(1, |d| d.iter().map(|&x| u64::from(x)).product::<u64>());
    elementwise_work(w).saturating_add(w.written.saturating_mul(taps))
}

fn fc_work(w: &WorkArgs) -> u64 {
    let n = match w.params {
        Params::FullyConnected { input_size, .. } => u64::from(*input_size),
        _ => 1,
    };
    elementwise_work(w).saturating_add(w.written.saturating_mul(n))
}

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
fn dilation(params: &Params) -> Option<reference::Dilation> {
    match params.nhwc() {
        Params::Conv { window, .. } | Params::Depthwise { window, .. }
            if (window.dilation_h, window.dilation_w) != (1, 1) =>
        {
            Some(reference::Dilation {
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
        reference::conv2d_dilated_f32(&win, d, x, f, b, a, o.f32_mut()?);
        return Ok(());
    }
    match c.packed {
        Some(Packed::ConvF32(p)) => fast_f32::conv2d_f32(&win, p, c.f(0)?, a, o.f32_mut()?),
        _ => reference::conv2d_f32(&win, c.f(0)?, c.f(1)?, c.f(2)?, a, o.f32_mut()?),
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
    if channel_scales(a.info(1)).is_some() {
        return pack_per_channel(a);
    }
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
    if channel_scales(filter_info(c)).is_some() {
        return per_channel(c, outs, false);
    }
    let (a, oq, o) = (fused(c)?, c.out_q(0), out0(outs)?);
    let win = call_window(c, o)?;
    if let Some(d) = dilation(c.params) {
        let (x, f, b) = (c.u(0)?, c.u(1)?, c.i(2)?);
        return reference::conv2d_dilated_u8(&win, d, x, c.q(0), f, c.q(1), b, oq, a, o.u8_mut()?)
            .map_err(kernel_error);
    }
    if let Some(Packed::ConvU8(p)) = c.packed {
        fast_u8::conv2d_u8(&win, p, c.u(0)?, o.u8_mut()?);
        return Ok(());
    }
    reference::conv2d_u8(
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
        reference::depthwise_conv2d_dilated_f32(&win, d, m, input, f, b, a, out);
        return Ok(());
    }
    match c.packed {
        Some(Packed::DwF32(p)) => dw_f32::depthwise_conv2d_f32(&win, m, p, input, a, out),
        _ => reference::depthwise_conv2d_f32(&win, m, input, c.f(1)?, c.f(2)?, a, out),
    }
    Ok(())
}

fn pack_depthwise_u8(a: &PackArgs) -> HalResult<Option<Packed>> {
    if channel_scales(a.info(1)).is_some() {
        return pack_per_channel(a);
    }
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
    if channel_scales(filter_info(c)).is_some() {
        return per_channel(c, outs, true);
    }
    let (a, m, oq, o) = (fused(c)?, multiplier(c)?, c.out_q(0), out0(outs)?);
    let win = call_window(c, o)?;
    if let Some(d) = dilation(c.params) {
        let (x, f, b) = (c.u(0)?, c.u(1)?, c.i(2)?);
        return reference::depthwise_conv2d_dilated_u8(
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
        dw_u8::depthwise_conv2d_u8(&win, m, p, c.u(0)?, o.u8_mut()?);
        return Ok(());
    }
    reference::depthwise_conv2d_u8(
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

/// The channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL filter (NNAPI 1.2).
fn channel_scales(filter: &OperandInfo) -> Option<&[f32]> {
    match (&filter.channel_quant, filter.ty) {
        (Some(cq), OperandType::TensorQuant8SymmPerChannel) => Some(&cq.scales),
        _ => None,
    }
}

fn filter_info<'a>(c: &Call<'a>) -> &'a OperandInfo {
    &c.model.operands[c.op.inputs[1]]
}

/// The per-channel requantizers of a convolution with a per-channel filter.
fn channel_requant(
    input: &OperandInfo,
    filter: &OperandInfo,
    output: &OperandInfo,
    params: &Params,
) -> HalResult<ChannelRequant> {
    let act = match params {
        Params::Conv { act, .. } | Params::Depthwise { act, .. } => self::act(*act),
        _ => {
            return Err(nnhal_hal::HalError::GeneralFailure(
                "per-channel filter on an operation without a convolution window".into(),
            ))
        }
    };
    let scales = channel_scales(filter).unwrap_or_default();
    ChannelRequant::per_channel(quant(input), scales, quant(output), act).map_err(kernel_error)
}

/// Constant per-channel filter and bias: without dilation, packed for the GEMM or depthwise
/// micro-kernels with per-column requantization; otherwise the filter's unsigned image, the
/// bias and the requantizers, built once for the reference loops. Parameters the requantizer
/// refuses are left to execution, which reports them as an unpacked model would.
fn pack_per_channel(a: &PackArgs) -> HalResult<Option<Packed>> {
    let (Some(filter), Some(bias)) = (a.constant(1), a.constant(2)) else {
        return Ok(None);
    };
    let Ok(rq) = channel_requant(a.info(0), a.info(1), a.out_info(0), a.params) else {
        return Ok(None);
    };
    let (image, bias) = (reference::filter_image(filter.u8()?), bias.i32()?);
    if dilation(a.params).is_none() {
        let input = quant(a.info(0));
        let fast = match (a.params, filter.dims) {
            (Params::Depthwise { .. }, &[1, kh, kw, out_c]) => {
                let (kh, kw, out_c) = (kh as usize, kw as usize, out_c as usize);
                PackedDwU8::pack_channels(a.kernels, kh, kw, out_c, &image, bias, input, &rq)
                    .map(Packed::DwU8)
            }
            (Params::Conv { .. }, _) => constant_filter(a).and_then(|(shape, _, _)| {
                PackedConvU8::pack_channels(a.kernels, shape, &image, bias, input, &rq)
                    .map(Packed::ConvU8)
            }),
            _ => None,
        };
        if fast.is_some() {
            return Ok(fast);
        }
    }
    Ok(Some(Packed::PerChannel {
        filter: image,
        bias: bias.to_vec(),
        rq,
    }))
}

/// CONV_2D or DEPTHWISE_CONV_2D with a per-channel filter, uint8 activations (signed ones as
/// their unsigned image).
fn per_channel(c: &Call, outs: &mut [TensorMut], depthwise: bool) -> HalResult<()> {
    let o = out0(outs)?;
    let win = call_window(c, o)?;
    match c.packed {
        Some(Packed::ConvU8(p)) if !depthwise => {
            fast_u8::conv2d_u8(&win, p, c.u(0)?, o.u8_mut()?);
            return Ok(());
        }
        Some(Packed::DwU8(p)) if depthwise => {
            dw_u8::depthwise_conv2d_u8(&win, multiplier(c)?, p, c.u(0)?, o.u8_mut()?);
            return Ok(());
        }
        _ => {}
    }
    let built;
    let (filter, bias, rq) = match c.packed {
        Some(Packed::PerChannel { filter, bias, rq }) => (filter.as_slice(), bias.as_slice(), rq),
        _ => {
            let info = |i: usize| &c.model.operands[i];
            let rq = channel_requant(
                info(c.op.inputs[0]),
                filter_info(c),
                info(c.op.outputs[0]),
                c.params,
            )?;
            built = (reference::filter_image(c.u(1)?), rq);
            (built.0.as_slice(), c.i(2)?, &built.1)
        }
    };
    if rq.channels() != win.output.c {
        return Err(mismatch(c));
    }
    // The filter image's zero point: 128 stands for int8 0.
    let zps = (c.q(0).zero_point, 128);
    let (x, y) = (c.u(0)?, o.u8_mut()?);
    match (depthwise, dilation(c.params)) {
        (false, None) => reference::conv2d_u8_channels(&win, x, filter, zps, bias, rq, y),
        (false, Some(d)) => {
            reference::conv2d_dilated_u8_channels(&win, d, x, filter, zps, bias, rq, y)
        }
        (true, None) => {
            let m = multiplier(c)?;
            reference::depthwise_conv2d_u8_channels(&win, m, x, filter, zps, bias, rq, y)
        }
        (true, Some(d)) => {
            let m = multiplier(c)?;
            reference::depthwise_conv2d_dilated_u8_channels(&win, d, m, x, filter, zps, bias, rq, y)
        }
    }
    Ok(())
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
            fast_f32::fully_connected_f32(p, b, c.f(0)?, a, o.f32_mut()?)
        }
        _ => reference::fully_connected_f32(b, n, u, c.f(0)?, c.f(1)?, c.f(2)?, a, o.f32_mut()?),
    }
    Ok(())
}

fn fully_connected_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let ((b, n, u), a, oq) = (fc_dims(c)?, fused(c)?, c.out_q(0));
    let o = out0(outs)?;
    if let Some(Packed::ConvU8(p)) = c.packed {
        if p.shape().in_c == n && p.shape().out_c == u {
            fast_u8::fully_connected_u8(p, b, c.u(0)?, o.u8_mut()?);
            return Ok(());
        }
    }
    reference::fully_connected_u8(
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

// ---- GROUPED_CONV_2D and TRANSPOSE_CONV_2D (NNAPI 1.2) --------------------------------------

/// Each input element meets `kh·kw·out_c` filter taps.
fn transpose_work(w: &WorkArgs) -> u64 {
    let taps = w
        .filter_dims
        .and_then(|d| d.get(..3))
        .map_or(1, |d| d.iter().map(|&x| u64::from(x)).product::<u64>());
    elementwise_work(w).saturating_add(w.read.saturating_mul(taps))
}

/// How the filter of a quantized call stands for values: one zero point, or per channel.
fn filter_quant<'a>(info: &'a OperandInfo) -> FilterQuant<'a> {
    match channel_scales(info) {
        Some(scales) => FilterQuant::Channel(scales),
        None => FilterQuant::Tensor(quant(info)),
    }
}

fn grouped_params(params: &Params) -> Option<(&WindowParams, usize, Activation)> {
    match params {
        Params::GroupedConv {
            window,
            groups,
            act: a,
        } => Some((window, *groups as usize, act(*a))),
        _ => None,
    }
}

fn pack_grouped(a: &PackArgs) -> HalResult<Option<Packed>> {
    let (Some((shape, filter, bias)), Some((_, groups, act))) =
        (constant_filter(a), grouped_params(a.params))
    else {
        return Ok(None);
    };
    Ok(match (filter.data, a.info(1).ty) {
        (DataRef::F32(f), _) => Some(PackedGrouped::pack_f32(
            a.kernels,
            shape,
            groups,
            f,
            bias.f32()?,
        )),
        (DataRef::U8(f), OperandType::TensorQuant8Asymm) => {
            let q = ConvQuant {
                input: quant(a.info(0)),
                filter: quant(a.info(1)),
                output: quant(a.out_info(0)),
                act,
            };
            let bias = bias.i32()?;
            // A multiplier of 1 or more takes the per-column requantization.
            PackedGrouped::pack_u8(a.kernels, shape, groups, f, bias, q).or_else(|| {
                let fq = FilterQuant::Tensor(q.filter);
                let rq = grouped::requantizers(q.input, fq, shape.out_c, q.output, act).ok()?;
                let zf = q.filter.zero_point;
                PackedGrouped::pack_u8_requant(a.kernels, shape, groups, f, zf, bias, q.input, &rq)
            })
        }
        (DataRef::U8(f), OperandType::TensorQuant8SymmPerChannel) => {
            let (input, output) = (quant(a.info(0)), quant(a.out_info(0)));
            let fq = filter_quant(a.info(1));
            let Ok(rq) = grouped::requantizers(input, fq, shape.out_c, output, act) else {
                return Ok(None);
            };
            let image = reference::filter_image(f);
            let bias = bias.i32()?;
            PackedGrouped::pack_u8_requant(a.kernels, shape, groups, &image, 128, bias, input, &rq)
        }
        _ => None,
    }
    .map(Packed::Grouped))
}

/// Whether grouped weights packed as `packed_groups` × `shape` fit a call's groups and window.
fn packed_for(packed_groups: usize, shape: FilterShape, groups: usize, w: &Window) -> bool {
    packed_groups == groups
        && shape
            == (FilterShape {
                out_c: w.output.c,
                kh: w.filter_h,
                kw: w.filter_w,
                in_c: w.input.c / groups.max(1),
            })
}

fn grouped_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (w, groups, a) = grouped_params(c.params).ok_or_else(|| mismatch(c))?;
    let o = out0(outs)?;
    let win = window(w, c.dims(0)?, o.dims);
    match c.packed {
        Some(Packed::Grouped(p)) if packed_for(p.groups(), p.shape(), groups, &win) => {
            grouped::grouped_conv2d_f32_fast(&win, p, c.f(0)?, a, o.f32_mut()?)
        }
        _ => grouped::grouped_conv2d_f32(&win, groups, c.f(0)?, c.f(1)?, c.f(2)?, a, o.f32_mut()?),
    }
    Ok(())
}

fn grouped_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (w, groups, a) = grouped_params(c.params).ok_or_else(|| mismatch(c))?;
    let oq = c.out_q(0);
    let o = out0(outs)?;
    let win = window(w, c.dims(0)?, o.dims);
    if let Some(Packed::Grouped(p)) = c.packed {
        if packed_for(p.groups(), p.shape(), groups, &win) {
            grouped::grouped_conv2d_u8_fast(&win, p, c.u(0)?, o.u8_mut()?);
            return Ok(());
        }
    }
    let fq = filter_quant(&c.model.operands[c.op.inputs[1]]);
    grouped::grouped_conv2d_u8(
        &win,
        groups,
        c.u(0)?,
        c.q(0),
        c.u(1)?,
        fq,
        c.i(2)?,
        oq,
        a,
        o.u8_mut()?,
    )
    .map_err(kernel_error)
}

/// The geometry and activation of a TRANSPOSE_CONV_2D call.
fn transpose_window(c: &Call, out: &TensorMut) -> HalResult<(TransposeWindow, Activation)> {
    let Params::TransposeConv {
        pad_left,
        pad_top,
        stride_w,
        stride_h,
        act: a,
    } = c.params
    else {
        return Err(mismatch(c));
    };
    // A filter the plan packed and released is absent from the call's values: its declared
    // dimensions (fully specified, as a constant's are) give the window.
    let f = match c.dims(1) {
        Ok(d) => d,
        Err(_) if c.packed.is_some() => c.model.operands[c.op.inputs[1]].dims.as_slice(),
        Err(e) => return Err(e),
    };
    if f.len() != 4 {
        return Err(mismatch(c));
    }
    Ok((
        TransposeWindow {
            input: nhwc(c.dims(0)?),
            output: nhwc(out.dims),
            filter_h: f[1] as usize,
            filter_w: f[2] as usize,
            stride_h: *stride_h as usize,
            stride_w: *stride_w as usize,
            pad_top: *pad_top as usize,
            pad_left: *pad_left as usize,
        },
        act(*a),
    ))
}

fn pack_transpose_f32(a: &PackArgs) -> HalResult<Option<Packed>> {
    let Some((shape, filter, bias)) = constant_filter(a) else {
        return Ok(None);
    };
    Ok(Some(Packed::TransposeF32(PackedTransposeF32::pack(
        a.kernels,
        shape,
        filter.f32()?,
        bias.f32()?,
    ))))
}

fn transpose_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let o = out0(outs)?;
    let (w, a) = transpose_window(c, o)?;
    match c.packed {
        Some(Packed::TransposeF32(p))
            if p.shape()
                == (FilterShape {
                    out_c: w.output.c,
                    kh: w.filter_h,
                    kw: w.filter_w,
                    in_c: w.input.c,
                }) =>
        {
            transpose::transpose_conv2d_f32_fast(&w, p, c.f(0)?, a, o.f32_mut()?)
        }
        _ => transpose::transpose_conv2d_f32(&w, c.f(0)?, c.f(1)?, c.f(2)?, a, o.f32_mut()?),
    }
    Ok(())
}

/// A constant quant8 filter and bias packed for the uint8 GEMM; parameters the reference
/// refuses are left to execution, which reports them as an unpacked model would.
fn pack_transpose_u8(a: &PackArgs) -> HalResult<Option<Packed>> {
    let (Some((shape, filter, bias)), Params::TransposeConv { act: f, .. }) =
        (constant_filter(a), a.params)
    else {
        return Ok(None);
    };
    let (iq, oq) = (quant(a.info(0)), quant(a.out_info(0)));
    let fq = filter_quant(a.info(1));
    Ok(PackedTransposeU8::pack(
        a.kernels,
        shape,
        filter.u8()?,
        fq,
        bias.i32()?,
        iq,
        oq,
        act(*f),
    )
    .map(Packed::TransposeU8))
}

fn transpose_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let oq = c.out_q(0);
    let o = out0(outs)?;
    let (w, a) = transpose_window(c, o)?;
    if let Some(Packed::TransposeU8(p)) = c.packed {
        let s = FilterShape {
            out_c: w.output.c,
            kh: w.filter_h,
            kw: w.filter_w,
            in_c: w.input.c,
        };
        if p.shape() == s {
            transpose::transpose_conv2d_u8_fast(&w, p, c.u(0)?, o.u8_mut()?);
            return Ok(());
        }
    }
    let fq = filter_quant(&c.model.operands[c.op.inputs[1]]);
    transpose::transpose_conv2d_u8(
        &w,
        c.u(0)?,
        c.q(0),
        c.u(1)?,
        fq,
        c.i(2)?,
        oq,
        a,
        o.u8_mut()?,
    )
    .map_err(kernel_error)
}
