//! Signatures and shape rules of the detection family (NeuralNetworks.h `OperationCode`,
//! NNAPI 1.2): BOX_WITH_NMS_LIMIT (44), ROI_ALIGN (81) and ROI_POOLING (82) on float32, and on quant8 feature
//! maps and scores with TENSOR_QUANT16_ASYMM boxes (scale 0.125, zero point 0). Signed quant8
//! runs as its unsigned image.
//!
//! BOX_WITH_NMS_LIMIT's output count depends on the scores' values, so its shapes are never
//! known from shapes alone: this module checks its inputs and answers "unknown", and the
//! executor counts the kept boxes when the operation runs (dynamic output shapes).

use super::{one, InferError, Inferred, Ins, Params, Res};
use crate::ops::{sig, Arity, Signature};
use crate::types::OperationType;

use crate::types::OperandType::{
    Bool as SB, Float32 as SF, Int32 as SI, TensorFloat32 as F, TensorInt32 as I,
    TensorQuant16Asymm as Q16, TensorQuant8Asymm as Q,
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
