//! Registrations of the logic family (NNAPI 1.2 `OperationType`): EQUAL (48), GREATER (53),
//! GREATER_EQUAL (54), LESS (58), LESS_EQUAL (59) and NOT_EQUAL (68) on TENSOR_BOOL8, float32,
//! int32 and uint8 (real values compared) into TENSOR_BOOL8, with broadcasting; LOGICAL_AND
//! (61), LOGICAL_OR (63), LOGICAL_NOT (62); SELECT (84) of float32, int32 and uint8 values
//! (requantized to the output's scale). TENSOR_BOOL8 rides on the byte storage.

use super::math::{signed_output, zip_or_broadcast};
use super::{elementwise_work, mismatch, out0, Call, OpImpl};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::logic::reference::{self as l, Comparison};
use nnhal_kernels::math::fast;
use nnhal_kernels::math::reference::requantize;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{
        TensorBool8 as B8, TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q,
    };
    use OperationType::*;
    Some(match (op, ty) {
        (Equal | NotEqual | Greater | GreaterEqual | Less | LessEqual, F | I | B8) => &COMPARE,
        (Equal | NotEqual | Greater | GreaterEqual | Less | LessEqual, Q) => &COMPARE_U8,
        (LogicalAnd | LogicalOr, B8) => &LOGICAL,
        (LogicalNot, B8) => &LOGICAL_NOT,
        (Select, B8) => &SELECT,
        _ => return None,
    })
}

registration!(COMPARE, compare, elementwise_work);
registration!(COMPARE_U8, compare_u8, elementwise_work);
registration!(LOGICAL, logical, elementwise_work);
registration!(LOGICAL_NOT, logical_not, elementwise_work);
registration!(SELECT, select, elementwise_work);

fn comparison(c: &Call) -> HalResult<Comparison> {
    use OperationType::*;
    Ok(match c.op.ty {
        Equal => Comparison::Equal,
        NotEqual => Comparison::NotEqual,
        Greater => Comparison::Greater,
        GreaterEqual => Comparison::GreaterEqual,
        Less => Comparison::Less,
        LessEqual => Comparison::LessEqual,
        _ => return Err(mismatch(c)),
    })
}

/// `out = f(a, b)` into a byte output (see [`zip_or_broadcast`]).
fn bytes_out<A: Copy + Sync, B: Copy + Sync>(
    c: &Call,
    a: &[A],
    b: &[B],
    outs: &mut [TensorMut],
    f: impl Fn(A, B) -> u8 + Sync + Send,
) -> HalResult<()> {
    let o = out0(outs)?;
    let od = o.dims;
    zip_or_broadcast(c, a, b, od, o.u8_mut()?, f)
}

/// Comparisons of stored values: float32, int32 and TENSOR_BOOL8 bytes.
fn compare(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let k = comparison(c)?;
    match (c.t(0)?.data, c.t(1)?.data) {
        (DataRef::F32(a), DataRef::F32(b)) => bytes_out(c, a, b, outs, move |x, y| k.test(x, y)),
        (DataRef::I32(a), DataRef::I32(b)) => bytes_out(c, a, b, outs, move |x, y| k.test(x, y)),
        (DataRef::U8(a), DataRef::U8(b)) => bytes_out(c, a, b, outs, move |x, y| k.test(x, y)),
        _ => Err(mismatch(c)),
    }
}

/// Comparisons of uint8 tensors: the real values, each with its own quantization.
fn compare_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let k = comparison(c)?;
    let (qa, qb) = (c.q(0), c.q(1));
    bytes_out(c, c.u(0)?, c.u(1)?, outs, move |x, y| {
        k.test(l::real(x, qa), l::real(y, qb))
    })
}

fn logical(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, b) = (c.u(0)?, c.u(1)?);
    match c.op.ty {
        OperationType::LogicalAnd => bytes_out(c, a, b, outs, l::and),
        OperationType::LogicalOr => bytes_out(c, a, b, outs, l::or),
        _ => Err(mismatch(c)),
    }
}

fn logical_not(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    fast::map(c.u(0)?, out0(outs)?.u8_mut()?, l::not);
    Ok(())
}

/// SELECT; uint8 values are requantized to the output's scale as the platform's reference does
/// (the identity when the scales agree).
fn select(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let cond = c.u(0)?;
    let (qa, qb, qo, signed) = (c.q(1), c.q(2), c.out_q(0), signed_output(c, 0));
    let o = out0(outs)?;
    match (c.t(1)?.data, c.t(2)?.data, &mut o.data) {
        (DataRef::F32(a), DataRef::F32(b), DataMut::F32(o)) => l::select(cond, a, b, o, |v| v),
        (DataRef::I32(a), DataRef::I32(b), DataMut::I32(o)) => l::select(cond, a, b, o, |v| v),
        (DataRef::U8(a), DataRef::U8(b), DataMut::U8(o)) => {
            for (((o, &k), &x), &y) in o.iter_mut().zip(cond).zip(a.iter()).zip(b.iter()) {
                *o = if k != 0 {
                    requantize(x, qa, qo, signed)
                } else {
                    requantize(y, qb, qo, signed)
                };
            }
        }
        _ => return Err(mismatch(c)),
    }
    Ok(())
}
