//! Registrations of the element-wise family (types.hal 1.0 `OperationType`): ADD (0) and
//! MUL (18) on float32, uint8 and (NNAPI 1.3) int32 with broadcasting,
//! FLOOR (8), LOGISTIC (14), RELU / RELU1 / RELU6 (19–21) and TANH (28); NNAPI 1.1's SUB
//! (float32, uint8, int32) and DIV (float32, int32), broadcasting alike. Same-shape float32
//! operands run the vector loops of `nnhal_kernels::elementwise::f32`, uint8 ADD, MUL and SUB
//! the form packed at prepare (vector arithmetic, or a table of every byte pair); broadcasting
//! runs the reference, which is split over the pool.

use super::{
    act, elementwise_work, fused, kernel_error, out0, quant, shape, Call, OpImpl, PackArgs, Packed,
};
use crate::tensor::TensorMut;
use nnhal_hal::shape::Params;
use nnhal_hal::{HalResult, OperandType, OperationType};
use nnhal_kernels::elementwise::binary_u8::PackedBinaryU8;
use nnhal_kernels::elementwise::reference::IntOp;
use nnhal_kernels::elementwise::{f32 as fast, reference as ew};
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::{Activation, KernelError, QuantParams};

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorInt32 as I, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (Add, F) => &ADD_F32,
        (Add, Q) => &ADD_U8,
        (Add, I) => &ADD_I32,
        (Mul, F) => &MUL_F32,
        (Mul, Q) => &MUL_U8,
        (Mul, I) => &MUL_I32,
        (Sub, F) => &SUB_F32,
        (Sub, Q) => &SUB_U8,
        (Sub, I) => &SUB_I32,
        (Div, F) => &DIV_F32,
        (Div, I) => &DIV_I32,
        (Floor, F) => &FLOOR,
        (Logistic, F) => &LOGISTIC_F32,
        (Logistic, Q) => &LOGISTIC_U8,
        (Relu | Relu1 | Relu6, F) => &CLAMP_F32,
        (Relu | Relu1 | Relu6, Q) => &CLAMP_U8,
        (Tanh, F) => &TANH,
        (Tanh, Q) => &TANH_U8,
        _ => return None,
    })
}

registration!(
    ADD_F32,
    |c, o| binary_f32(c, o, fast::add_f32, ew::add_f32),
    elementwise_work
);
registration!(
    MUL_F32,
    |c, o| binary_f32(c, o, fast::mul_f32, ew::mul_f32),
    elementwise_work
);
registration!(
    ADD_U8,
    |a| pack_binary_u8(a, PackedBinaryU8::add),
    |c, o| binary_u8(c, o, ew::add_u8),
    elementwise_work,
    true
);
registration!(
    MUL_U8,
    |a| pack_binary_u8(a, PackedBinaryU8::mul),
    |c, o| binary_u8(c, o, ew::mul_u8),
    elementwise_work,
    true
);
registration!(
    SUB_F32,
    |c, o| binary_f32(c, o, |_, a, b, f, y| fast::sub_f32(a, b, f, y), ew::sub_f32),
    elementwise_work
);
registration!(
    DIV_F32,
    |c, o| binary_f32(c, o, |_, a, b, f, y| fast::div_f32(a, b, f, y), ew::div_f32),
    elementwise_work
);
registration!(
    SUB_U8,
    |a| pack_binary_u8(a, PackedBinaryU8::sub),
    |c, o| binary_u8(c, o, ew::sub_u8),
    elementwise_work,
    true
);
registration!(
    ADD_I32,
    |c, o| binary_i32(c, o, IntOp::Add),
    elementwise_work
);
registration!(
    MUL_I32,
    |c, o| binary_i32(c, o, IntOp::Mul),
    elementwise_work
);
registration!(
    SUB_I32,
    |c, o| binary_i32(c, o, IntOp::Sub),
    elementwise_work
);
registration!(
    DIV_I32,
    |c, o| binary_i32(c, o, IntOp::Div),
    elementwise_work
);
registration!(
    FLOOR,
    |c, o| {
        ew::floor_f32(c.f(0)?, out0(o)?.f32_mut()?);
        Ok(())
    },
    elementwise_work
);
registration!(
    LOGISTIC_F32,
    |c, o| unary_f32(c, o, fast::logistic_f32),
    elementwise_work
);
registration!(LOGISTIC_U8, logistic_u8, elementwise_work);
registration!(CLAMP_F32, clamp_f32, elementwise_work);
registration!(CLAMP_U8, clamp_u8, elementwise_work);
registration!(
    TANH,
    |c, o| unary_f32(c, o, fast::tanh_f32),
    elementwise_work
);
registration!(
    TANH_U8,
    |c, o| ew::tanh_u8(c.u(0)?, c.q(0), out0(o)?.u8_mut()?).map_err(kernel_error),
    elementwise_work
);

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

type PackU8 = fn(
    &Ukernels,
    QuantParams,
    QuantParams,
    QuantParams,
    Activation,
) -> Result<PackedBinaryU8, KernelError>;

/// The quantization of ADD/MUL/SUB is static, so the multipliers (or, without a vector
/// kernel, a table of the reference's results) are derived once; parameters the reference
/// refuses are left to it at execution.
fn pack_binary_u8(a: &PackArgs, build: PackU8) -> HalResult<Option<Packed>> {
    let Params::Binary { act: f } = a.params else {
        return Ok(None);
    };
    let (x, y, o) = (quant(a.info(0)), quant(a.info(1)), quant(a.out_info(0)));
    Ok(build(a.kernels, x, y, o, act(*f))
        .ok()
        .map(Packed::BinaryU8))
}

/// Same-shape operands take the packed form; broadcasting ones the reference.
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

/// TENSOR_INT32 ADD, MUL, SUB or DIV (NNAPI 1.3).
fn binary_i32(c: &Call, outs: &mut [TensorMut], op: IntOp) -> HalResult<()> {
    let a = fused(c)?;
    let o = out0(outs)?;
    let (ad, bd, od) = (shape(c.dims(0)?), shape(c.dims(1)?), shape(o.dims));
    ew::binary_i32(c.i(0)?, &ad, c.i(1)?, &bd, op, a, o.i32_mut()?, &od).map_err(kernel_error)
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
    fast::clamp_f32(c.kernels, clamp_kind(c), c.f(0)?, o);
    Ok(())
}

fn clamp_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    ew::clamp_u8(clamp_kind(c), c.q(0), c.u(0)?, out0(outs)?.u8_mut()?);
    Ok(())
}

fn logistic_u8(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    ew::logistic_u8(c.u(0)?, c.q(0), out0(outs)?.u8_mut()?).map_err(kernel_error)
}
