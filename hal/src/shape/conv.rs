//! Signatures and shape rules of the convolution family (types.hal 1.0 `OperationType`):
//! CONV_2D (3) and DEPTHWISE_CONV_2D (4), with explicit or implicit padding, NNAPI 1.2's
//! optional NCHW `layout` and dilation factors, and FULLY_CONNECTED (9). The quant8
//! convolutions take NNAPI 1.2's TENSOR_QUANT8_SYMM_PER_CHANNEL filters too.

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
        _ => return None,
    })
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
