//! Registrations of the pooling family (types.hal 1.0 `OperationType`): AVERAGE_POOL_2D (1)
//! and MAX_POOL_2D (17) on float32 and uint8 over the pooling micro-kernels, L2_POOL_2D (12)
//! on float32 through the reference loop. NCHW forms (NNAPI 1.2 `layout`) run transposed
//! ([`super::run_nchw`]).

use super::{call_window, fused, out0, window_work, Call, OpImpl};
use crate::tensor::TensorMut;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::pool::{f32 as pool_f32, reference, u8 as pool_u8};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (AveragePool2d, F) => &AVERAGE_POOL_F32,
        (AveragePool2d, Q) => &AVERAGE_POOL_U8,
        (MaxPool2d, F) => &MAX_POOL_F32,
        (MaxPool2d, Q) => &MAX_POOL_U8,
        (L2Pool2d, F) => &L2_POOL_F32,
        _ => return None,
    })
}

registration!(AVERAGE_POOL_F32, average_pool_f32, window_work);
registration!(AVERAGE_POOL_U8, average_pool_u8, window_work);
registration!(MAX_POOL_F32, max_pool_f32, window_work);
registration!(MAX_POOL_U8, max_pool_u8, window_work);
registration!(L2_POOL_F32, l2_pool_f32, window_work);

fn average_pool_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    pool_f32::average_pool_f32(c.kernels, &win, c.f(0)?, a, o.f32_mut()?);
    Ok(())
}

fn average_pool_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    pool_u8::average_pool_u8(c.kernels, &win, c.u(0)?, c.q(0), a, o.u8_mut()?);
    Ok(())
}

fn max_pool_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    pool_f32::max_pool_f32(c.kernels, &win, c.f(0)?, a, o.f32_mut()?);
    Ok(())
}

fn max_pool_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    pool_u8::max_pool_u8(c.kernels, &win, c.u(0)?, c.q(0), a, o.u8_mut()?);
    Ok(())
}

fn l2_pool_f32(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let (a, o) = (fused(c)?, out0(outs)?);
    let win = call_window(c, o)?;
    reference::l2_pool_f32(&win, c.f(0)?, a, o.f32_mut()?);
    Ok(())
}
