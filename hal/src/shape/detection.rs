//! Signatures and shape rules of the detection family (NeuralNetworks.h `OperationCode`,
//! NNAPI 1.2): AXIS_ALIGNED_BBOX_TRANSFORM (41), BOX_WITH_NMS_LIMIT (44), DETECTION_POSTPROCESSING
//! (47, float32), GENERATE_PROPOSALS (52), HEATMAP_MAX_KEYPOINT (56), ROI_ALIGN (81) and ROI_POOLING (82) on float32, and on quant8 feature maps, scores and deltas with
//! TENSOR_QUANT16_ASYMM boxes (scale 0.125, zero point 0). Signed quant8 runs as its unsigned
//! image.
//!
//! BOX_WITH_NMS_LIMIT's and GENERATE_PROPOSALS' output counts depend on the scores' values, so
//! their shapes are never
//! known from shapes alone: this module checks its inputs and answers "unknown", and the
//! executor counts the kept boxes when the operation runs (dynamic output shapes).

use super::{one, InferError, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as SB, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant16Asymm as Q16, TensorQuant16Symm as Q16S, TensorQuant8Asymm as Q,
};

/// The signatures this driver runs, for the operations of this family.
pub(crate) fn signatures(op: OperationType) -> Option<Arity> {
    use OperationType::*;
    Some(Arity::Fixed(match op {
        BoxWithNmsLimit => {
            const S: &[Signature] = &[
                sig(&[F, F, I, SF, SI, SI, SF, SF, SF], &[F, F, I, I]),
                sig(&[Q, Q16, I, SF, SI, SI, SF, SF, SF], &[Q, Q16, I, I]),
            ];
            S
        }
        RoiAlign => {
            const S: &[Signature] = &[
                sig(&[F, F, I, SI, SI, SF, SF, SI, SI, SB], &[F]),
                sig(&[Q, Q16, I, SI, SI, SF, SF, SI, SI, SB], &[Q]),
            ];
            S
        }
        RoiPooling => {
            const S: &[Signature] = &[
                sig(&[F, F, I, SI, SI, SF, SF, SB], &[F]),
                sig(&[Q, Q16, I, SI, SI, SF, SF, SB], &[Q]),
            ];
            S
        }
        AxisAlignedBboxTransform => {
            const S: &[Signature] = &[sig(&[F, F, I, F], &[F]), sig(&[Q16, Q, I, Q16], &[Q16])];
            S
        }
        HeatmapMaxKeypoint => {
            const S: &[Signature] = &[sig(&[F, F, SB], &[F, F]), sig(&[Q, Q16, SB], &[Q, Q16])];
            S
        }
        GenerateProposals => {
            const S: &[Signature] = &[
                sig(&[F, F, F, F, SF, SF, SI, SI, SF, SF, SB], &[F, F, I]),
                sig(&[Q, Q, Q16S, Q16, SF, SF, SI, SI, SF, SF, SB], &[Q, Q16, I]),
            ];
            S
        }
        DetectionPostprocessing => {
            const S: &[Signature] = &[sig(
                &[F, F, F, SF, SF, SF, SF, SB, SI, SI, SI, SF, SF, SB],
                &[F, F, I, I],
            )];
            S
        }
        _ => return None,
    }))
}

/// Output shapes and parameters, for the operations of this family.
pub(super) fn infer(op: OperationType, ins: &Ins) -> Option<Res<Inferred>> {
    use OperationType::*;
    Some(match op {
        BoxWithNmsLimit => box_with_nms_limit(ins),
        RoiAlign => roi_align(ins, true),
        RoiPooling => roi_align(ins, false),
        AxisAlignedBboxTransform => axis_aligned_bbox_transform(ins),
        HeatmapMaxKeypoint => heatmap_max_keypoint(ins),
        GenerateProposals => generate_proposals(ins),
        DetectionPostprocessing => detection_postprocessing(ins),
        _ => return None,
    })
}

/// The scale and zero point TENSOR_QUANT16_ASYMM boxes must have beside quant8 data.
fn quant_boxes(ins: &Ins, i: usize) -> Res<()> {
    let a = ins.get(i)?;
    if a.ty == Q16 {
        check!(
            a.scale == 0.125 && a.zero_point == 0,
            "quantized boxes (input {i}) must have scale 0.125 and zero point 0, have {} and {}",
            a.scale,
            a.zero_point
        );
    }
    Ok(())
}

/// BOX_WITH_NMS_LIMIT: scores `[rois, classes]` (classes > 1), boxes `[rois, classes·4]`,
/// batch indices `[rois]`, the NMS kernel 0..=2. The outputs' extent is the number of kept
/// boxes: unknown until the operation runs.
fn box_with_nms_limit(ins: &Ins) -> Res<Inferred> {
    let s = ins.dims_rank(0, 2, "scores")?;
    let b = ins.dims_rank(1, 2, "boxes")?;
    let n = ins.dims_rank(2, 1, "batch indices")?;
    check!(s[1] > 1, "scores need more than one class, have {}", s[1]);
    check!(
        b[0] == s[0] && u64::from(b[1]) == 4 * u64::from(s[1]) && n[0] == s[0],
        "scores {s:?}, boxes {b:?} and batch indices {n:?} disagree"
    );
    quant_boxes(ins, 1)?;
    let kernel = ins.i32(5)?;
    check!(
        (0..=2).contains(&kernel),
        "NMS kernel (input 5) must be 0, 1 or 2, is {kernel}"
    );
    for (i, what) in [
        (3, "score threshold"),
        (6, "IoU threshold"),
        (7, "sigma"),
        (8, "NMS score threshold"),
    ] {
        ins.f32(i).map_err(|e| match e {
            InferError::Invalid(why) => InferError::Invalid(format!("{what}: {why}")),
            other => other,
        })?;
    }
    ins.i32(4)?;
    Err(InferError::Unknown)
}

/// ROI_ALIGN and ROI_POOLING (NHWC here; the NCHW form is transposed around it): `[rois,
/// out_h, out_w, depth]`. ROI_ALIGN adds the sampling ratios (inputs 7 and 8).
fn roi_align(ins: &Ins, sampling: bool) -> Res<Inferred> {
    let x = ins.dims_rank(0, 4, "input")?;
    let r = ins.dims_rank(1, 2, "regions")?;
    let n = ins.dims_rank(2, 1, "batch indices")?;
    check!(r[1] == 4, "regions must be [rois, 4], are {r:?}");
    check!(n[0] == r[0], "{} batch indices for {} regions", n[0], r[0]);
    quant_boxes(ins, 1)?;
    let out_h = ins.positive(3, "output height")?;
    let out_w = ins.positive(4, "output width")?;
    for (i, what) in [(5, "height stride"), (6, "width stride")] {
        let v = f32::from_bits(ins.i32(i)? as u32);
        check!(
            v.is_finite() && v > 0.0,
            "{what} (input {i}) must be positive and finite, is {v}"
        );
    }
    if sampling {
        ins.non_negative(7, "height sampling ratio")?;
        ins.non_negative(8, "width sampling ratio")?;
    }
    let out = vec![r[0], out_h, out_w, x[3]];
    super::element_count(&out).map_err(InferError::Invalid)?;
    one(out, Params::Plain)
}

/// AXIS_ALIGNED_BBOX_TRANSFORM: boxes `[rois, 4]`, deltas `[rois, classes·4]` (classes > 0),
/// batch indices `[rois]`, image sizes `[batches, 2]` (batches > 0) → `[rois, classes·4]`.
fn axis_aligned_bbox_transform(ins: &Ins) -> Res<Inferred> {
    let r = ins.dims_rank(0, 2, "boxes")?;
    let d = ins.dims_rank(1, 2, "deltas")?;
    let n = ins.dims_rank(2, 1, "batch indices")?;
    let info = ins.dims_rank(3, 2, "image sizes")?;
    check!(r[1] == 4, "boxes must be [rois, 4], are {r:?}");
    check!(
        d[1].is_multiple_of(4) && d[0] == r[0] && n[0] == r[0],
        "boxes {r:?}, deltas {d:?} and batch indices {n:?} disagree"
    );
    check!(
        info[1] == 2,
        "image sizes must be [batches, 2], are {info:?}"
    );
    quant_boxes(ins, 0)?;
    quant_boxes(ins, 3)?;
    one(vec![r[0], d[1]], Params::Plain)
}

/// HEATMAP_MAX_KEYPOINT: heatmaps `[boxes, size, size, keypoints]` (NCHW: `[boxes, keypoints,
/// size, size]`, input 2 true), size ≥ 2, boxes `[boxes, 4]` → scores `[boxes, keypoints]`
/// and keypoints `[boxes, keypoints, 2]`. The layout is read by the registration itself: the
/// outputs are not images.
fn heatmap_max_keypoint(ins: &Ins) -> Res<Inferred> {
    let nchw = ins.bool(2)?;
    let x = ins.dims_rank(0, 4, "heatmaps")?;
    let b = ins.dims_rank(1, 2, "boxes")?;
    let (size, other, keypoints) = if nchw {
        (x[2], x[3], x[1])
    } else {
        (x[1], x[2], x[3])
    };
    check!(
        size == other && size >= 2,
        "heatmaps {x:?} must be square and at least 2×2"
    );
    check!(
        b[0] == x[0] && b[1] == 4,
        "boxes {b:?} must be [{}, 4] for heatmaps {x:?}",
        x[0]
    );
    quant_boxes(ins, 1)?;
    Ok(Inferred {
        outputs: vec![vec![x[0], keypoints], vec![x[0], keypoints, 2]],
        params: Params::Plain,
    })
}

/// GENERATE_PROPOSALS: scores `[batches, height, width, anchors]` and deltas `[batches,
/// height, width, anchors·4]` (NCHW, input 10 true: `[batches, anchors(·4), height, width]`),
/// anchors `[anchors, 4]`, image sizes `[batches, 2]`. The outputs' extent is the number of
/// proposals kept: unknown until the operation runs.
fn generate_proposals(ins: &Ins) -> Res<Inferred> {
    let nchw = ins.bool(10)?;
    let s = ins.dims_rank(0, 4, "scores")?;
    let d = ins.dims_rank(1, 4, "deltas")?;
    let a = ins.dims_rank(2, 2, "anchors")?;
    let info = ins.dims_rank(3, 2, "image sizes")?;
    let nhwc = |x: &[u32]| {
        if nchw {
            [x[0], x[2], x[3], x[1]]
        } else {
            [x[0], x[1], x[2], x[3]]
        }
    };
    let (sn, dn) = (nhwc(s), nhwc(d));
    check!(
        sn[..3] == dn[..3] && u64::from(dn[3]) == 4 * u64::from(sn[3]),
        "scores {s:?} and deltas {d:?} disagree"
    );
    check!(
        a[0] == sn[3] && a[1] == 4,
        "anchors must be [{}, 4], are {a:?}",
        sn[3]
    );
    check!(
        info[0] == s[0] && info[1] == 2,
        "image sizes must be [{}, 2], are {info:?}",
        s[0]
    );
    if ins.get(0)?.ty == Q {
        let an = ins.get(2)?;
        check!(
            an.scale == 0.125,
            "quantized anchors (input 2) must have scale 0.125, have {}",
            an.scale
        );
        quant_boxes(ins, 3)?;
    }
    for (i, what) in [
        (4, "height stride"),
        (5, "width stride"),
        (8, "IoU threshold"),
        (9, "minimum size"),
    ] {
        ins.f32(i).map_err(|e| match e {
            InferError::Invalid(why) => InferError::Invalid(format!("{what}: {why}")),
            other => other,
        })?;
    }
    ins.i32(6)?;
    ins.i32(7)?;
    Err(InferError::Unknown)
}

/// DETECTION_POSTPROCESSING: scores `[batches, anchors, classes]` (classes > 1), deltas
/// `[batches, anchors, length ≥ 4]`, anchors `[anchors, 4]` → per batch `max_detections`
/// (times `max_classes_per_detection` without regular NMS) scores, boxes and classes, and the
/// count found `[batches]`.
fn detection_postprocessing(ins: &Ins) -> Res<Inferred> {
    let s = ins.dims_rank(0, 3, "scores")?;
    let d = ins.dims_rank(1, 3, "deltas")?;
    let a = ins.dims_rank(2, 2, "anchors")?;
    check!(s[2] > 1, "scores need more than one class, have {}", s[2]);
    check!(
        d[0] == s[0] && d[1] == s[1] && d[2] >= 4,
        "deltas {d:?} must be [{}, {}, ≥ 4]",
        s[0],
        s[1]
    );
    check!(
        a[0] == s[1] && a[1] == 4,
        "anchors must be [{}, 4], are {a:?}",
        s[1]
    );
    for (i, what) in [
        (3, "y scale"),
        (4, "x scale"),
        (5, "height scale"),
        (6, "width scale"),
    ] {
        let v = ins.f32(i)?;
        check!(v > 0.0, "{what} (input {i}) must be positive, is {v}");
    }
    for (i, what) in [(11, "score threshold"), (12, "IoU threshold")] {
        let v = ins.f32(i)?;
        check!(v >= 0.0, "{what} (input {i}) must not be negative, is {v}");
    }
    ins.bool(13)?;
    let max = ins.positive(8, "maximum detections")?;
    let per = if ins.bool(7)? {
        ins.positive(10, "maximum detections per class")?;
        max
    } else {
        let classes = ins.positive(9, "maximum classes per detection")?;
        max.checked_mul(classes).ok_or_else(|| {
            InferError::Invalid(format!("{max} detections of {classes} classes overflow"))
        })?
    };
    let out = vec![s[0], per, 4];
    super::element_count(&out).map_err(InferError::Invalid)?;
    Ok(Inferred {
        outputs: vec![vec![s[0], per], out, vec![s[0], per], vec![s[0]]],
        params: Params::Plain,
    })
}
