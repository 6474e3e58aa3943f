//! Registrations of the math family (NNAPI 1.2–1.3 `OperationType`): ABS (38) and NEG (67) on
//! float32 and int32; EXP (49), LOG (60), RSQRT (83), SIN (85), SQRT (88), ELU (98),
//! LOG_SOFTMAX (64) and POW (70) on float32; HARD_SWISH (99) on float32 and uint8; MAXIMUM (65)
//! and MINIMUM (66) on float32, int32 and uint8, PRELU (71) on float32 and uint8, all three
//! broadcasting; CAST (45) between float32, int32 and uint8 and the TENSOR_BOOL8 identity.
//! Signed quant8 runs as its unsigned image. Same-shape operands run the chunked, pooled loops
//! of `nnhal_kernels::math::fast` (EXP and LOG on the level's vector loops); broadcasting ones
//! the reference.

use super::{elementwise_work, mismatch, out0, shape, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::Params;
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::math::reference::{self as m, HardSwishU8, PreluU8};
use nnhal_kernels::math::{fast, reference};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{
        TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I, TensorQuant16Asymm as Q16,
        TensorQuant16Symm as Q16S, TensorQuant8Asymm as Q, TensorQuant8Symm as Q8S,
    };
    use OperationType::*;
    Some(match (op, ty) {
        (Abs | Neg | Exp | Log | Rsqrt | Sin | Sqrt, F) => &UNARY_F32,
        (Abs | Neg, I) => &UNARY_I32,
        (HardSwish, F) => &UNARY_F32,
        (HardSwish, Q) => &HARD_SWISH_U8,
        (Elu, F) => &ELU,
        (LogSoftmax, F) => &LOG_SOFTMAX,
        (Pow | Maximum | Minimum | Prelu, F) => &BINARY_F32,
        (Maximum | Minimum, I) => &BINARY_I32,
        (Maximum | Minimum, Q) => &MAX_MIN_U8,
        (Prelu, Q) => &PRELU_U8,
        (Cast, F | I | Q | B8 | Q8S | Q16S | Q16) => &CAST,
        _ => return None,
    })
}

registration!(UNARY_F32, unary_f32, elementwise_work);
registration!(UNARY_I32, unary_i32, elementwise_work);
registration!(HARD_SWISH_U8, hard_swish_u8, elementwise_work);
registration!(ELU, elu, elementwise_work);
registration!(LOG_SOFTMAX, log_softmax, elementwise_work);
registration!(BINARY_F32, binary_f32, elementwise_work);
registration!(BINARY_I32, binary_i32, elementwise_work);
registration!(MAX_MIN_U8, max_min_u8, elementwise_work);
registration!(PRELU_U8, prelu_u8, elementwise_work);
registration!(CAST, cast, elementwise_work);

fn unary_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    use OperationType::*;
    let (x, o) = (c.f(0)?, out0(outs)?.f32_mut()?);
    match c.op.ty {
        Abs => fast::map(x, o, f32::abs),
        Neg => fast::map(x, o, |v: f32| -v),
        Exp => fast::exp_f32(c.kernels, x, o),
        Log => fast::log_f32(c.kernels, x, o),
        Rsqrt => fast::map(x, o, m::rsqrt),
        Sin => fast::map(x, o, f32::sin),
        Sqrt => fast::map(x, o, f32::sqrt),
        HardSwish => fast::map(x, o, m::hard_swish),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

/// ABS and NEG of int32 wrap at `i32::MIN` as two's-complement arithmetic does.
fn unary_i32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (x, o) = (c.i(0)?, out0(outs)?.i32_mut()?);
    match c.op.ty {
        OperationType::Abs => fast::map(x, o, i32::wrapping_abs),
        OperationType::Neg => fast::map(x, o, i32::wrapping_neg),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}

fn hard_swish_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let k = HardSwishU8::new(c.q(0), c.out_q(0)).ok_or_else(|| {
        HalError::InvalidArgument(
            "HARD_SWISH: the output scale is too small for the input scale".into(),
        )
    })?;
    fast::map(c.u(0)?, out0(outs)?.u8_mut()?, |x| k.apply(x));
    Ok(())
}

fn elu(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Elu { alpha } = *c.params else {
        return Err(mismatch(c));
    };
    fast::map(c.f(0)?, out0(outs)?.f32_mut()?, move |x| m::elu(x, alpha));
    Ok(())
}

fn log_softmax(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let Params::Softmax { beta, depth, inner } = *c.params else {
        return Err(mismatch(c));
    };
    let o = out0(outs)?.f32_mut()?;
    reference::log_softmax(c.f(0)?, beta, depth as usize, inner as usize, o);
    Ok(())
}

/// Same-shape operands element by element over the pool, others through the broadcast into
/// `out` (of dimensions `od`).
pub(super) fn zip_or_broadcast<A, B, U>(
    c: &Call,
    a: &[A],
    b: &[B],
    od: &[u32],
    out: &mut [U],
    f: impl Fn(A, B) -> U + Sync + Send,
) -> HalResult<()>
where
    A: Copy + Sync,
    B: Copy + Sync,
    U: Send,
{
    let (ad, bd) = (c.dims(0)?, c.dims(1)?);
    if ad == od && bd == od {
        fast::zip(a, b, out, f);
    } else {
        m::broadcast_map(a, &shape(ad), b, &shape(bd), out, &shape(od), f);
    }
    Ok(())
}

fn binary_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    use OperationType::*;
    let (a, b) = (c.f(0)?, c.f(1)?);
    let o = out0(outs)?;
    let od = o.dims;
    let out = o.f32_mut()?;
    match c.op.ty {
        Pow => zip_or_broadcast(c, a, b, od, out, f32::powf),
        Maximum => zip_or_broadcast(c, a, b, od, out, m::max_of),
        Minimum => zip_or_broadcast(c, a, b, od, out, m::min_of),
        Prelu => zip_or_broadcast(c, a, b, od, out, m::prelu),
        _ => Err(mismatch(c)),
    }
}

fn binary_i32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, b) = (c.i(0)?, c.i(1)?);
    let o = out0(outs)?;
    let od = o.dims;
    let out = o.i32_mut()?;
    match c.op.ty {
        OperationType::Maximum => zip_or_broadcast(c, a, b, od, out, m::max_of),
        OperationType::Minimum => zip_or_broadcast(c, a, b, od, out, m::min_of),
        _ => Err(mismatch(c)),
    }
}

/// Whether output `j` stands for a TENSOR_QUANT8_ASYMM_SIGNED operand of the model as given.
pub(super) fn signed_output(c: &Call, j: usize) -> bool {
    c.model
        .signed
        .get(c.op.outputs[j])
        .copied()
        .unwrap_or(false)
}

/// MAXIMUM / MINIMUM, uint8: each input requantized to the output's scale, then compared.
fn max_min_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (qa, qb, qo, signed) = (c.q(0), c.q(1), c.out_q(0), signed_output(c, 0));
    let (a, b) = (c.u(0)?, c.u(1)?);
    let o = out0(outs)?;
    let od = o.dims;
    let out = o.u8_mut()?;
    let ra = move |x| m::requantize(x, qa, qo, signed);
    let rb = move |y| m::requantize(y, qb, qo, signed);
    match c.op.ty {
        OperationType::Maximum => {
            zip_or_broadcast(c, a, b, od, out, move |x, y| m::max_of(ra(x), rb(y)))
        }
        OperationType::Minimum => {
            zip_or_broadcast(c, a, b, od, out, move |x, y| m::min_of(ra(x), rb(y)))
        }
        _ => Err(mismatch(c)),
    }
}

fn prelu_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let k = PreluU8::new(c.q(0), c.q(1), c.out_q(0));
    let (a, b) = (c.u(0)?, c.u(1)?);
    let o = out0(outs)?;
    let od = o.dims;
    zip_or_broadcast(c, a, b, od, o.u8_mut()?, move |x, y| k.apply(x, y))
}

/// CAST converts stored values, not real ones: quantization parameters play no part (the
/// platform's reference), and uint8 outputs saturate.
fn cast(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let x = c.t(0)?.data;
    let o = out0(outs)?;
    match (x, &mut o.data) {
        (DataRef::F32(x), DataMut::F32(o)) => o.copy_from_slice(x),
        (DataRef::F32(x), DataMut::I32(o)) => fast::map(x, o, |v| v as i32),
        (DataRef::F32(x), DataMut::U8(o)) => fast::map(x, o, m::f32_to_u8),
        (DataRef::I32(x), DataMut::F32(o)) => fast::map(x, o, |v| v as f32),
        (DataRef::I32(x), DataMut::I32(o)) => o.copy_from_slice(x),
        (DataRef::I32(x), DataMut::U8(o)) => fast::map(x, o, m::i32_to_u8),
        (DataRef::U8(x), DataMut::F32(o)) => fast::map(x, o, f32::from),
        (DataRef::U8(x), DataMut::I32(o)) => fast::map(x, o, i32::from),
        (DataRef::U8(x), DataMut::U8(o)) => o.copy_from_slice(x),
        (DataRef::I16(x), DataMut::I16(o)) => o.copy_from_slice(x),
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
