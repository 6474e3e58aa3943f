//! Registrations of the detection family (NeuralNetworks.h `OperationCode`, NNAPI 1.2):
//! BOX_WITH_NMS_LIMIT (44), ROI_ALIGN (81) and ROI_POOLING (82) on float32, and on quant8 with
//! TENSOR_QUANT16_ASYMM boxes (stored as int16 bits, read as u16). Signed quant8 runs as its
//! unsigned image: the selection reads dequantized scores, ROI_ALIGN's arithmetic subtracts the
//! zero point, so both are exact under the +128 shift.
//!
//! BOX_WITH_NMS_LIMIT's output extent is the number of boxes it keeps, which only the values
//! decide: [`shape_at_run`] runs the selection to size the outputs, then the registration
//! runs it again to write them (the inputs are a few hundred boxes).

use super::{kernel_error, mismatch, out0, Call, OpImpl, WorkArgs};
use crate::tensor::{DataMut, DataRef, TensorMut};
use nnhal_hal::shape::{Inferred, Params};
use nnhal_hal::{HalError, HalResult, OperandType, OperationType};
use nnhal_kernels::detection::reference::{
    self as r, NmsKernel, NmsParams, RoiAlign, RoiPool, Selection,
};
use nnhal_kernels::Nhwc;

/// The registration of `op` on inputs of type `ty`, for the operations of this family.
pub(super) fn lookup(op: OperationType, ty: OperandType) -> Option<&'static OpImpl> {
    use OperandType::{TensorFloat32 as F, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (BoxWithNmsLimit, F | Q) => &BOX_WITH_NMS_LIMIT,
        (RoiAlign, F | Q) => &ROI_ALIGN,
        (RoiPooling, F | Q) => &ROI_POOLING,
        _ => return None,
    })
}

registration!(BOX_WITH_NMS_LIMIT, box_with_nms_limit, detection_work);
registration!(ROI_ALIGN, roi_align, detection_work);
registration!(ROI_POOLING, roi_pooling, detection_work);

fn detection_work(w: &WorkArgs) -> u64 {
    w.read.saturating_add(w.written).saturating_mul(4)
}

/// Output shapes of an operation of this family whose extents only its values decide
/// (BOX_WITH_NMS_LIMIT), computed from the bound inputs.
pub(super) fn shape_at_run(op: OperationType) -> Option<fn(&Call) -> HalResult<Inferred>> {
    match op {
        OperationType::BoxWithNmsLimit => Some(nms_shape),
        _ => None,
    }
}

fn nms_shape(c: &Call) -> HalResult<Inferred> {
    let n = select(c)?.index.len() as u32;
    Ok(Inferred {
        outputs: vec![vec![n], vec![n, 4], vec![n], vec![n]],
        params: Params::Plain,
    })
}

fn scalar_f32(c: &Call, i: usize) -> HalResult<f32> {
    match c.t(i)?.data {
        DataRef::F32(&[v]) if v.is_finite() => Ok(v),
        DataRef::F32(&[v]) => Err(HalError::InvalidArgument(format!(
            "{}: scalar input {i} is not finite ({v})",
            c.op.ty
        ))),
        _ => Err(mismatch(c)),
    }
}

fn scalar_i32(c: &Call, i: usize) -> HalResult<i32> {
    match c.t(i)?.data {
        DataRef::I32(&[v]) => Ok(v),
        _ => Err(mismatch(c)),
    }
}

/// TENSOR_QUANT16_ASYMM values (stored as int16 bits).
fn u16s(c: &Call, i: usize) -> HalResult<Vec<u16>> {
    Ok(c.t(i)?.i16()?.iter().map(|&v| v as u16).collect())
}

/// Runs BOX_WITH_NMS_LIMIT's selection on the bound inputs (scores and boxes dequantized).
fn select(c: &Call) -> HalResult<Selection> {
    let d = c.dims(0)?;
    let classes = *d.get(1).ok_or_else(|| mismatch(c))? as usize;
    let kernel = match scalar_i32(c, 5)? {
        0 => NmsKernel::Hard,
        1 => NmsKernel::Linear,
        2 => NmsKernel::Gaussian,
        k => {
            return Err(HalError::InvalidArgument(format!(
                "BOX_WITH_NMS_LIMIT: NMS kernel {k} is not 0, 1 or 2"
            )))
        }
    };
    let p = NmsParams {
        score_threshold: scalar_f32(c, 3)?,
        max_detections: scalar_i32(c, 4)?,
        kernel,
        iou_threshold: scalar_f32(c, 6)?,
        sigma: scalar_f32(c, 7)?,
        nms_score_threshold: scalar_f32(c, 8)?,
    };
    let batches = c.i(2)?;
    match c.t(0)?.data {
        DataRef::F32(s) => r::box_with_nms_limit(s, c.f(1)?, batches, classes, &p),
        DataRef::U8(s) => {
            let q = c.q(0);
            let b = c.q(1);
            let scores: Vec<f32> = s
                .iter()
                .map(|&v| (i32::from(v) - q.zero_point) as f32 * q.scale)
                .collect();
            let boxes: Vec<f32> = u16s(c, 1)?
                .iter()
                .map(|&v| (i32::from(v) - b.zero_point) as f32 * b.scale)
                .collect();
            r::box_with_nms_limit(&scores, &boxes, batches, classes, &p)
        }
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}

/// BOX_WITH_NMS_LIMIT: kept scores (requantized to the output's scale for quant8), their
/// boxes copied as given, classes and batch indices.
fn box_with_nms_limit(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let sel = select(c)?;
    let n = sel.index.len();
    if outs.len() != 4 || outs.iter().any(|o| o.dims.first() != Some(&(n as u32))) {
        return Err(mismatch(c));
    }
    let classes = c.dims(0)?[1] as usize;
    let oq = c.out_q(0);
    match (c.t(1)?.data, &mut outs[1].data) {
        (DataRef::F32(b), DataMut::F32(o)) => {
            for (k, &i) in sel.index.iter().enumerate() {
                o[k * 4..k * 4 + 4].copy_from_slice(&b[i * 4..i * 4 + 4]);
            }
        }
        (DataRef::I16(b), DataMut::I16(o)) => {
            for (k, &i) in sel.index.iter().enumerate() {
                o[k * 4..k * 4 + 4].copy_from_slice(&b[i * 4..i * 4 + 4]);
            }
        }
        _ => return Err(mismatch(c)),
    }
    match &mut outs[0].data {
        DataMut::F32(o) => o.copy_from_slice(&sel.score),
        DataMut::U8(o) => {
            for (v, &s) in o.iter_mut().zip(&sel.score) {
                let q = (s / oq.scale + oq.zero_point as f32).round();
                *v = q.clamp(0.0, 255.0) as u8;
            }
        }
        _ => return Err(mismatch(c)),
    }
    for (v, &i) in outs[2].i32_mut()?.iter_mut().zip(&sel.index) {
        *v = (i % classes) as i32;
    }
    outs[3].i32_mut()?.copy_from_slice(&sel.batch);
    Ok(())
}

/// ROI_ALIGN (NHWC; the NCHW form runs through `run_nchw`).
fn roi_align(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let x = c.dims(0)?;
    let out = out0(outs)?;
    let (&[n, h, w, d], &[_, out_h, out_w, _]) = (x, out.dims) else {
        return Err(mismatch(c));
    };
    let ratio = |i| -> HalResult<usize> {
        usize::try_from(scalar_i32(c, i)?).map_err(|_| {
            HalError::InvalidArgument(format!("ROI_ALIGN: sampling ratio (input {i}) is negative"))
        })
    };
    let stride = |i| -> HalResult<f32> {
        let v = scalar_f32(c, i)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(HalError::InvalidArgument(format!(
                "ROI_ALIGN: stride (input {i}) must be positive, is {v}"
            )))
        }
    };
    let g = RoiAlign {
        input: Nhwc::new(n as usize, h as usize, w as usize, d as usize),
        out_h: out_h as usize,
        out_w: out_w as usize,
        stride_h: stride(5)?,
        stride_w: stride(6)?,
        ratio_h: ratio(7)?,
        ratio_w: ratio(8)?,
    };
    let batches = c.i(2)?;
    match (c.t(0)?.data, &mut out.data) {
        (DataRef::F32(v), DataMut::F32(o)) => r::roi_align_f32(v, c.f(1)?, batches, &g, o),
        (DataRef::U8(v), DataMut::U8(o)) => {
            let (xq, yq) = (c.q(0), c.out_q(0));
            r::roi_align_u8(
                v,
                xq.zero_point,
                xq.scale,
                &u16s(c, 1)?,
                batches,
                &g,
                yq.scale,
                yq.zero_point,
                o,
            )
        }
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}

/// ROI_POOLING (NHWC; the NCHW form runs through `run_nchw`). Quant8 keeps the input's
/// quantization, so the maximum is taken on the stored bytes; quantized regions are read as
/// their real values (units of 1/8).
fn roi_pooling(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let x = c.dims(0)?;
    let out = out0(outs)?;
    let (&[n, h, w, d], &[_, out_h, out_w, _]) = (x, out.dims) else {
        return Err(mismatch(c));
    };
    let stride = |i| -> HalResult<f32> {
        let v = scalar_f32(c, i)?;
        if v > 0.0 {
            Ok(v)
        } else {
            Err(HalError::InvalidArgument(format!(
                "ROI_POOLING: stride (input {i}) must be positive, is {v}"
            )))
        }
    };
    let g = RoiPool {
        input: Nhwc::new(n as usize, h as usize, w as usize, d as usize),
        out_h: out_h as usize,
        out_w: out_w as usize,
        stride_h: stride(5)?,
        stride_w: stride(6)?,
    };
    let batches = c.i(2)?;
    match (c.t(0)?.data, &mut out.data) {
        (DataRef::F32(v), DataMut::F32(o)) => r::roi_pooling(v, c.f(1)?, batches, &g, 0.0, o),
        (DataRef::U8(v), DataMut::U8(o)) => {
            let (xq, yq, bq) = (c.q(0), c.out_q(0), c.q(1));
            if (xq.scale, xq.zero_point) != (yq.scale, yq.zero_point) {
                return Err(HalError::InvalidArgument(
                    "ROI_POOLING: the output's quantization must be the input's".into(),
                ));
            }
            let boxes: Vec<f32> = u16s(c, 1)?
                .iter()
                .map(|&v| (i32::from(v) - bq.zero_point) as f32 * bq.scale)
                .collect();
            let empty = xq.zero_point.clamp(0, 255) as u8;
            r::roi_pooling(v, &boxes, batches, &g, empty, o)
        }
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}
