//! Signatures and shape rules of the convolution family (types.hal 1.0 `OperationType`):
//! CONV_2D (3) and DEPTHWISE_CONV_2D (4), with explicit or implicit padding, NNAPI 1.2's
//! optional NCHW `layout` and dilation factors, and FULLY_CONNECTED (9); NNAPI 1.2's
//! GROUPED_CONV_2D (55) and TRANSPOSE_CONV_2D (91), explicit or implicit padding (for
//! TRANSPOSE_CONV_2D an output-shape tensor), their `layout`, with a per-tensor or a
//! TENSOR_QUANT8_SYMM_PER_CHANNEL filter (which the quant8 CONV_2D and DEPTHWISE_CONV_2D take
//! too).

use super::{element_count, mul, one, spatial_out, window, InferError, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as B, Int32 as SI, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
    TensorQuant8SymmPerChannel as QC,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        Conv2d => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI], &[Q]),
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, B], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, B], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, B], &[Q]),
                // Then dilation factors: run when constant 1s (see validate).
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, B, SI, SI], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, B, SI, SI], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, B, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, B, SI, SI], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, B, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, B, SI, SI], &[Q]),
            ];
            S
        }
        DepthwiseConv2d => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, SI], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, SI], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI], &[Q]),
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, SI, B], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, SI, B], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, SI, B, SI, SI], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, SI, B, SI, SI], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, SI, B, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, SI, B, SI, SI], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, B, SI, SI], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, B, SI, SI], &[Q]),
            ];
            S
        }
        FullyConnected => {
            const S: &[Signature] = &[sig(&[F, F, F, SI], &[F]), sig(&[Q, Q, I, SI], &[Q])];
            S
        }
        // Input, filter, bias; explicit paddings (4), strides, groups, activation, or the
        // padding scheme, strides, groups, activation; then the layout.
        GroupedConv2d => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, SI, B], &[F]),
                sig(&[F, F, F, SI, SI, SI, SI, SI, B], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, B], &[Q]),
            ];
            S
        }
        // Input, filter, bias; explicit paddings (4), strides, activation, or the output
        // shape, padding scheme, strides, activation; then the layout.
        TransposeConv2d => {
            const S: &[Signature] = &[
                sig(&[F, F, F, SI, SI, SI, SI, SI, SI, SI, B], &[F]),
                sig(&[F, F, F, I, SI, SI, SI, SI, B], &[F]),
                sig(&[Q, Q, I, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, Q, I, I, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, SI, SI, SI, SI, SI, SI, SI, B], &[Q]),
                sig(&[Q, QC, I, I, SI, SI, SI, SI, B], &[Q]),
            ];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters (of the NHWC form), for the operations of this family; the
/// convolutions take their (width, height) `dilation` factors.
pub(super) fn infer(op: OperationType, ins: &Ins, dilation: (u32, u32)) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        Conv2d | DepthwiseConv2d => conv2d(op, ins, dilation),
        FullyConnected => fully_connected(ins),
        GroupedConv2d => grouped_conv2d(ins),
        TransposeConv2d => transpose_conv2d(ins),
        _ => return None,
    })
}

/// GROUPED_CONV_2D: CONV_2D's window on `groups` slices of the input channels; the filter is
/// `[out_c, kh, kw, in_c / groups]` and `out_c` a multiple of `groups`.
fn grouped_conv2d(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let f = ins.dims_rank(1, 4, "filter")?;
    let b = ins.dims_rank(2, 1, "bias")?;
    let explicit = ins.args.len() == 11;
    let w = window(ins, explicit, 3, d[1], d[2], Some((f[2], f[1])))?;
    let after = if explicit { 9 } else { 6 };
    let groups = ins.positive(after, "number of groups")?;
    let act = ins.act(after + 1)?;
    let (oh, ow) = spatial_out(&w, d[1], d[2])?;
    let out_c = f[0];
    check!(
        u64::from(f[3]) * u64::from(groups) == u64::from(d[3]),
        "filter depth {} × {groups} groups ≠ input depth {}",
        f[3],
        d[3]
    );
    check!(
        out_c % groups == 0,
        "{out_c} output channels do not split into {groups} groups"
    );
    check!(
        b[0] == out_c,
        "bias has {} elements for {out_c} output channels",
        b[0]
    );
    one(
        vec![d[0], oh, ow, out_c],
        Params::GroupedConv {
            window: w,
            groups,
            act,
        },
    )
}

/// TRANSPOSE_CONV_2D: each output extent is `in·stride + filter − stride − head − tail`.
/// Explicit paddings give head and tail (the tail may be negative); the implicit form derives
/// them from the output-shape tensor as the reference does: SAME pads so the window of the
/// last stride ends exactly at the requested extent, VALID not at all.
fn transpose_conv2d(ins: &Ins) -> Res<Inferred> {
    let d = ins.dims_rank(0, 4, "input")?;
    let f = ins.dims_rank(1, 4, "filter")?;
    let b = ins.dims_rank(2, 1, "bias")?;
    let explicit = ins.args.len() == 10;
    let (strides, act_at) = if explicit { (7, 9) } else { (5, 7) };
    let stride_w = ins.positive(strides, "stride width")?;
    let stride_h = ins.positive(strides + 1, "stride height")?;
    let act = ins.act(act_at)?;
    let ((left, right), (top, bottom)) = if explicit {
        (
            (
                i64::from(ins.non_negative(3, "padding left")?),
                i64::from(ins.i32(4)?),
            ),
            (
                i64::from(ins.non_negative(5, "padding top")?),
                i64::from(ins.i32(6)?),
            ),
        )
    } else {
        let shape = ins.get(3)?;
        check!(
            shape.dims == [4],
            "output shape (input 3) must have dimensions [4], has {:?}",
            shape.dims
        );
        let v = ins.bytes(3)?;
        check!(
            v.len() == 16,
            "output shape (input 3) has {} bytes",
            v.len()
        );
        let at =
            |i: usize| i32::from_le_bytes([v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]]);
        let scheme = ins.i32(4)?;
        check!(
            matches!(scheme, 0..=2),
            "padding scheme must be 1 (SAME) or 2 (VALID), is {scheme}"
        );
        let pads = |size: i32, stride: u32, filter: u32| -> Res<(i64, i64)> {
            check!(size > 0, "output shape extent {size} is not positive");
            if scheme != 1 {
                return Ok((0, 0));
            }
            let (size, stride, filter) = (i64::from(size), i64::from(stride), i64::from(filter));
            let out = (size + stride - 1) / stride;
            let needed = (out - 1) * stride + filter - size;
            let head = if needed > 0 { needed / 2 } else { 0 };
            Ok((head, needed - head))
        };
        (pads(at(2), stride_w, f[2])?, pads(at(1), stride_h, f[1])?)
    };
    let extent = |input: u32, filter: u32, stride: u32, head: i64, tail: i64, axis: &str| {
        let out = i64::from(input) * i64::from(stride) + i64::from(filter)
            - i64::from(stride)
            - head
            - tail;
        check!(
            out > 0 && out <= i64::from(u32::MAX),
            "{axis}: output extent {out} is out of range"
        );
        Ok(out as u32)
    };
    let oh = extent(d[1], f[1], stride_h, top, bottom, "height")?;
    let ow = extent(d[2], f[2], stride_w, left, right, "width")?;
    check!(f[3] == d[3], "filter depth {} ≠ input depth {}", f[3], d[3]);
    check!(
        b[0] == f[0],
        "bias has {} elements for {} output channels",
        b[0],
        f[0]
    );
    let (pad_left, pad_top) = (
        u32::try_from(left).map_err(|_| InferError::Invalid("padding overflows".into()))?,
        u32::try_from(top).map_err(|_| InferError::Invalid("padding overflows".into()))?,
    );
    one(
        vec![d[0], oh, ow, f[0]],
        Params::TransposeConv {
            pad_left,
            pad_top,
            stride_w,
            stride_h,
            act,
        },
    )
}

fn conv2d(op: OperationType, ins: &Ins, dilation: (u32, u32)) -> Res<Inferred> {
    let depthwise = op == OperationType::DepthwiseConv2d;
    let d = ins.dims_rank(0, 4, "input")?;
    let f = ins.dims_rank(1, 4, "filter")?;
    let b = ins.dims_rank(2, 1, "bias")?;
    let explicit = ins.args.len() == if depthwise { 11 } else { 10 };
    let span = |k: u32, d: u32| -> Res<u32> {
        let s = u64::from(k.max(1) - 1) * u64::from(d) + 1;
        u32::try_from(s).map_err(|_| InferError::Invalid("dilated window overflows".into()))
    };
    let (dw, dh) = dilation;
    let mut w = window(
        ins,
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

fn fully_connected(ins: &Ins) -> Res<Inferred> {
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
