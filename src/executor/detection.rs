//! Registrations of the detection family (NeuralNetworks.h `OperationCode`, NNAPI 1.2):
//! AXIS_ALIGNED_BBOX_TRANSFORM (41), BOX_WITH_NMS_LIMIT (44), DETECTION_POSTPROCESSING (47, float32
//! only), GENERATE_PROPOSALS (52), HEATMAP_MAX_KEYPOINT (56), ROI_ALIGN (81) and ROI_POOLING (82)
//! on float32, and on quant8 with TENSOR_QUANT16_ASYMM boxes (stored as int16 bits, read as u16). Signed quant8 runs as its
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
    use OperandType::{TensorFloat32 as F, TensorQuant16Asymm as Q16, TensorQuant8Asymm as Q};
    use OperationType::*;
    Some(match (op, ty) {
        (AxisAlignedBboxTransform, F | Q16) => &AXIS_ALIGNED_BBOX_TRANSFORM,
        (HeatmapMaxKeypoint, F | Q) => &HEATMAP_MAX_KEYPOINT,
        (GenerateProposals, F | Q) => &GENERATE_PROPOSALS,
        (DetectionPostprocessing, F) => &DETECTION_POSTPROCESSING,
        (BoxWithNmsLimit, F | Q) => &BOX_WITH_NMS_LIMIT,
        (RoiAlign, F | Q) => &ROI_ALIGN,
        (RoiPooling, F | Q) => &ROI_POOLING,
        _ => return None,
    })
}

registration!(
    AXIS_ALIGNED_BBOX_TRANSFORM,
    axis_aligned_bbox_transform,
    detection_work
);
registration!(HEATMAP_MAX_KEYPOINT, heatmap_max_keypoint, detection_work);
registration!(GENERATE_PROPOSALS, generate_proposals, detection_work);
registration!(
    DETECTION_POSTPROCESSING,
    detection_postprocessing,
    detection_work
);
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
        OperationType::GenerateProposals => Some(proposals_shape),
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

/// A finite FLOAT32 scalar input that must be above 0 (a stride, a scale), named `what` in
/// the error.
fn positive_f32(c: &Call, i: usize, what: &str) -> HalResult<f32> {
    let v = scalar_f32(c, i)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(HalError::InvalidArgument(format!(
            "{}: {what} (input {i}) must be positive, is {v}",
            c.op.ty
        )))
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
    let stride = |i| positive_f32(c, i, "stride");
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
    let stride = |i| positive_f32(c, i, "stride");
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

/// AXIS_ALIGNED_BBOX_TRANSFORM. Quantized boxes, deltas and image sizes are dequantized, the
/// float transform runs, and the boxes are requantized to the output's scale, rounding half
/// away from zero and saturating to 0..=65535 as the platform's reference does.
fn axis_aligned_bbox_transform(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let batches = c.i(2)?;
    let out = out0(outs)?;
    match (c.t(0)?.data, &mut out.data) {
        (DataRef::F32(rois), DataMut::F32(o)) => {
            r::axis_aligned_bbox_transform(rois, c.f(1)?, batches, c.f(3)?, o).map_err(kernel_error)
        }
        (DataRef::I16(_), DataMut::I16(o)) => {
            let dq16 = |i: usize| -> HalResult<Vec<f32>> {
                let q = c.q(i);
                Ok(u16s(c, i)?
                    .iter()
                    .map(|&v| (i32::from(v) - q.zero_point) as f32 * q.scale)
                    .collect())
            };
            let dq = c.q(1);
            let deltas: Vec<f32> = c
                .u(1)?
                .iter()
                .map(|&v| (i32::from(v) - dq.zero_point) as f32 * dq.scale)
                .collect();
            let mut real = vec![0.0; o.len()];
            r::axis_aligned_bbox_transform(&dq16(0)?, &deltas, batches, &dq16(3)?, &mut real)
                .map_err(kernel_error)?;
            let oq = c.out_q(0);
            for (v, &x) in o.iter_mut().zip(&real) {
                let q = (x / oq.scale + oq.zero_point as f32).round();
                *v = q.clamp(0.0, 65535.0) as u16 as i16;
            }
            Ok(())
        }
        _ => Err(mismatch(c)),
    }
}

/// HEATMAP_MAX_KEYPOINT, either layout (input 2). Quant8 heatmaps and TENSOR_QUANT16_ASYMM
/// boxes are dequantized, the float search runs, and scores and keypoints are requantized to
/// their outputs' parameters (half away from zero, saturating) as the platform's reference
/// does.
fn heatmap_max_keypoint(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let nchw = c.u(2)?.first().is_some_and(|&v| v != 0);
    let x = c.dims(0)?;
    let &[_, d1, d2, d3] = x else {
        return Err(mismatch(c));
    };
    let (size, keypoints) = if nchw { (d2, d1) } else { (d1, d3) };
    let (size, keypoints) = (size as usize, keypoints as usize);
    // The platform's tolerance of a singular fit on float32 data.
    const TOL: f32 = 1e-5;
    let [scores, points] = outs else {
        return Err(mismatch(c));
    };
    match (c.t(0)?.data, &mut scores.data, &mut points.data) {
        (DataRef::F32(h), DataMut::F32(s), DataMut::F32(p)) => {
            r::heatmap_max_keypoint(h, c.f(1)?, size, keypoints, nchw, TOL, s, p)
                .map_err(kernel_error)
        }
        (DataRef::U8(h), DataMut::U8(s), DataMut::I16(p)) => {
            let (hq, bq) = (c.q(0), c.q(1));
            let heat: Vec<f32> = h
                .iter()
                .map(|&v| (i32::from(v) - hq.zero_point) as f32 * hq.scale)
                .collect();
            let boxes: Vec<f32> = u16s(c, 1)?
                .iter()
                .map(|&v| (i32::from(v) - bq.zero_point) as f32 * bq.scale)
                .collect();
            let mut rs = vec![0.0; s.len()];
            let mut rp = vec![0.0; p.len()];
            r::heatmap_max_keypoint(&heat, &boxes, size, keypoints, nchw, TOL, &mut rs, &mut rp)
                .map_err(kernel_error)?;
            let (sq, pq) = (c.out_q(0), c.out_q(1));
            for (v, &x) in s.iter_mut().zip(&rs) {
                *v = (x / sq.scale + sq.zero_point as f32)
                    .round()
                    .clamp(0.0, 255.0) as u8;
            }
            for (v, &x) in p.iter_mut().zip(&rp) {
                let q = (x / pq.scale + pq.zero_point as f32).round();
                *v = q.clamp(0.0, 65535.0) as u16 as i16;
            }
            Ok(())
        }
        _ => Err(mismatch(c)),
    }
}

fn proposals_shape(c: &Call) -> HalResult<Inferred> {
    let n = proposals(c)?.batch.len() as u32;
    Ok(Inferred {
        outputs: vec![vec![n], vec![n, 4], vec![n]],
        params: Params::Plain,
    })
}

/// Runs GENERATE_PROPOSALS on the bound inputs (quantized inputs dequantized).
fn proposals(c: &Call) -> HalResult<r::Proposals> {
    let nchw = c.u(10)?.first().is_some_and(|&v| v != 0);
    let &[batches, d1, d2, d3] = c.dims(0)? else {
        return Err(mismatch(c));
    };
    let (h, w) = if nchw { (d2, d3) } else { (d1, d2) };
    let p = r::ProposalParams {
        stride_h: scalar_f32(c, 4)?,
        stride_w: scalar_f32(c, 5)?,
        pre_nms: scalar_i32(c, 6)?,
        post_nms: scalar_i32(c, 7)?,
        iou_threshold: scalar_f32(c, 8)?,
        min_size: scalar_f32(c, 9)?,
    };
    let geometry = (batches as usize, h as usize, w as usize);
    match c.t(0)?.data {
        DataRef::F32(s) => r::generate_proposals(s, c.f(1)?, c.f(2)?, c.f(3)?, geometry, nchw, &p),
        DataRef::U8(s) => {
            let dq8 = |i: usize, v: &[u8]| -> Vec<f32> {
                let q = c.q(i);
                v.iter()
                    .map(|&v| (i32::from(v) - q.zero_point) as f32 * q.scale)
                    .collect()
            };
            let aq = c.q(2);
            let anchors: Vec<f32> = c
                .t(2)?
                .i16()?
                .iter()
                .map(|&v| (i32::from(v) - aq.zero_point) as f32 * aq.scale)
                .collect();
            let iq = c.q(3);
            let info: Vec<f32> = u16s(c, 3)?
                .iter()
                .map(|&v| (i32::from(v) - iq.zero_point) as f32 * iq.scale)
                .collect();
            let (scores, deltas) = (dq8(0, s), dq8(1, c.u(1)?));
            r::generate_proposals(&scores, &deltas, &anchors, &info, geometry, nchw, &p)
        }
        _ => return Err(mismatch(c)),
    }
    .map_err(kernel_error)
}

/// GENERATE_PROPOSALS: kept scores (requantized to the output's parameters for quant8), boxes
/// (to TENSOR_QUANT16_ASYMM), batch indices.
fn generate_proposals(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let p = proposals(c)?;
    let n = p.batch.len();
    let [scores, rois, batch] = outs else {
        return Err(mismatch(c));
    };
    if [&*scores, &*rois, &*batch]
        .iter()
        .any(|o| o.dims.first() != Some(&(n as u32)))
    {
        return Err(mismatch(c));
    }
    match (&mut scores.data, &mut rois.data) {
        (DataMut::F32(s), DataMut::F32(b)) => {
            s.copy_from_slice(&p.score);
            b.copy_from_slice(&p.roi);
        }
        (DataMut::U8(s), DataMut::I16(b)) => {
            let (sq, bq) = (c.out_q(0), c.out_q(1));
            for (v, &x) in s.iter_mut().zip(&p.score) {
                *v = (x / sq.scale + sq.zero_point as f32)
                    .round()
                    .clamp(0.0, 255.0) as u8;
            }
            for (v, &x) in b.iter_mut().zip(&p.roi) {
                let q = (x / bq.scale + bq.zero_point as f32).round();
                *v = q.clamp(0.0, 65535.0) as u16 as i16;
            }
        }
        _ => return Err(mismatch(c)),
    }
    batch.i32_mut()?.copy_from_slice(&p.batch);
    Ok(())
}

/// DETECTION_POSTPROCESSING (float32).
fn detection_postprocessing(c: &Call, outs: &mut [TensorMut]) -> HalResult<()> {
    let &[batches, _, classes] = c.dims(0)? else {
        return Err(mismatch(c));
    };
    let &[_, _, length] = c.dims(1)? else {
        return Err(mismatch(c));
    };
    let flag = |i: usize| -> HalResult<bool> { Ok(c.u(i)?.first().is_some_and(|&v| v != 0)) };
    let p = r::PostprocessParams {
        scale: [
            scalar_f32(c, 3)?,
            scalar_f32(c, 4)?,
            scalar_f32(c, 5)?,
            scalar_f32(c, 6)?,
        ],
        regular_nms: flag(7)?,
        max_detections: scalar_i32(c, 8)?,
        max_classes_per_detection: scalar_i32(c, 9)?,
        max_detections_per_class: scalar_i32(c, 10)?,
        score_threshold: scalar_f32(c, 11)?,
        iou_threshold: scalar_f32(c, 12)?,
        background_in_label: flag(13)?,
    };
    let [scores, boxes, classes_out, found] = outs else {
        return Err(mismatch(c));
    };
    r::detection_postprocessing(
        c.f(0)?,
        c.f(1)?,
        c.f(2)?,
        (batches as usize, classes as usize, length as usize),
        &p,
        scores.f32_mut()?,
        boxes.f32_mut()?,
        classes_out.i32_mut()?,
        found.i32_mut()?,
    )
    .map_err(kernel_error)
}
