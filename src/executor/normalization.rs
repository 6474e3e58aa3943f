//! Registrations of the normalization family (types.hal 1.0 `OperationType`):
//! L2_NORMALIZATION (11) on float32 and (NNAPI 1.2) uint8, LOCAL_RESPONSE_NORMALIZATION (13)
//! on float32 and SOFTMAX (25) on float32 and uint8, along the last axis or NNAPI 1.2's
//! `axis`; NNAPI 1.2's INSTANCE_NORMALIZATION (57) on float32, NHWC or NCHW.

use super::{elementwise_work, kernel_error, mismatch, out0, Call, OpImpl, WorkArgs};
use crate::tensor::TensorMut;
use nnhal_hal::shape::Params;
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::elementwise::f32 as ew_f32;
use nnhal_kernels::normalization::reference as norm;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (L2Normalization, F) => &L2_NORMALIZATION,
        (L2Normalization, Q) => &L2_NORMALIZATION_U8,
        (LocalResponseNormalization, F) => &LRN,
        (Softmax, F) => &SOFTMAX_F32,
        (Softmax, Q) => &SOFTMAX_U8,
        (InstanceNormalization, F) => &INSTANCE_NORMALIZATION,
        _ => return None,
    })
}

registration!(
    L2_NORMALIZATION,
    l2_normalization,
    elementwise_work,
    partial
);
registration!(
    L2_NORMALIZATION_U8,
    l2_normalization_u8,
    elementwise_work,
    partial
);
registration!(LRN, local_response_normalization, lrn_work, partial);
registration!(SOFTMAX_F32, softmax_f32, elementwise_work);
registration!(SOFTMAX_U8, softmax_u8, elementwise_work);
registration!(
    INSTANCE_NORMALIZATION,
    instance_normalization,
    instance_norm_work
);

/// Three passes over the input: the mean, the variance, the normalised values.
fn instance_norm_work(w: &WorkArgs) -> u64 {
    elementwise_work(w).saturating_add(w.read.saturating_mul(2))
}

fn instance_normalization(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::InstanceNorm {
        gamma,
        beta,
        epsilon,
    } = *c.params
    else {
        return Err(mismatch(c));
    };
    let x = c.t(0)?;
    let &[n, h, w, ch] = x.dims else {
        return Err(mismatch(c));
    };
    let shape = nnhal_kernels::Nhwc::new(n as usize, h as usize, w as usize, ch as usize);
    let o = out0(outs)?;
    norm::instance_normalization_f32(x.f32()?, shape, gamma, beta, epsilon, o.f32_mut()?);
    Ok(())
}

fn lrn_work(w: &WorkArgs) -> u64 {
    let n = match w.params {
        Params::Lrn { radius, .. } => u64::from(*radius).saturating_mul(2) + 1,
        _ => 1,
    };
    elementwise_work(w).saturating_add(w.written.saturating_mul(n))
}

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
        ew_f32::softmax_f32(c.kernels, beta, depth, x, o);
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
