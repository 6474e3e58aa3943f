//! Malformed-input classes BI-73…BI-76 of the bad-input catalogue (`docs/bad-inputs.md`): the
//! run-time errors of the detection family (BOX_WITH_NMS_LIMIT, ROI_ALIGN,
//! AXIS_ALIGNED_BBOX_TRANSFORM, HEATMAP_MAX_KEYPOINT, GENERATE_PROPOSALS,
//! DETECTION_POSTPROCESSING). Each model is valid and runs; the request's dimensions or values
//! make one execution malformed, which is `INVALID_ARGUMENT` with a reason, never a panic or a
//! write outside the output; the next well-formed execution runs.

mod common;

use nnhal::hal::*;
use nnhal::Driver;

use common::*;
use OperandLifeTime::*;
use OperandType::*;

/// ROI_ALIGN NHWC of a [2, 4, 4, 1] feature map (a model input) to 2×2 cells: regions and
/// batch indices arrive with the request; `stride` is a model input when `None`.
fn roi_align_model(stride: Option<f32>) -> Model {
    roi_align_sampled(stride, 2)
}

/// [`roi_align_model`] with `ratio` sampling points per cell along each axis.
fn roi_align_sampled(stride: Option<f32>, ratio: i32) -> Model {
    let mut constants = vec![
        (3, i32_bytes(&[2])),
        (4, i32_bytes(&[2])),
        (6, f32_bytes(&[1.0])),
        (7, i32_bytes(&[ratio])),
        (8, i32_bytes(&[ratio])),
        (9, vec![0u8]),
    ];
    if let Some(s) = stride {
        constants.push((5, f32_bytes(&[s])));
    }
    single_op(
        OperationType::RoiAlign,
        vec![
            Operand::new(TensorFloat32, &[2, 4, 4, 1], ModelInput),
            Operand::new(TensorFloat32, &[0, 4], ModelInput),
            Operand::new(TensorInt32, &[0], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Bool, &[], ModelInput),
            Operand::new(TensorFloat32, &[0, 2, 2, 1], ModelOutput),
        ],
        &constants,
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        &[10],
    )
}

fn feature_map() -> (Vec<u8>, Vec<u32>) {
    let v: Vec<f32> = (0..32).map(|i| i as f32).collect();
    (f32_bytes(&v), vec![2, 4, 4, 1])
}

#[test]
fn bi73_roi_align_region_outside_its_batch_or_image() {
    let prepared = prepare(roi_align_model(Some(1.0)));
    let run = |boxes: &[f32], batches: &[i32]| {
        let n = batches.len() as u32;
        request(
            &[
                feature_map(),
                (f32_bytes(boxes), vec![boxes.len() as u32 / 4, 4]),
                (i32_bytes(batches), vec![n]),
            ],
            &[16 * n.max(1)],
        )
    };
    let cases: [(&[f32], &[i32]); 7] = [
        (&[0.0, 0.0, 2.0, 2.0], &[2]),
        (&[0.0, 0.0, 2.0, 2.0], &[-1]),
        (&[0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 1.0, 1.0], &[0, i32::MAX]),
        (&[0.0, 0.0, 5.0, 2.0], &[0]),
        (&[-1.0, 0.0, 2.0, 2.0], &[1]),
        (&[3.0, 0.0, 2.0, 2.0], &[0]),
        (&[0.0, f32::NAN, 2.0, 2.0], &[0]),
    ];
    for (boxes, batches) in cases {
        let req = run(boxes, batches);
        assert_eq!(
            status(&prepared, &req),
            Some(ErrorStatus::InvalidArgument),
            "{boxes:?} {batches:?}"
        );
        let err = prepared.execute(&req).unwrap_err();
        assert!(err.to_string().contains("ROI_ALIGN"), "{err}");
    }
    // The whole of batch 1, averaged over 2×2 cells of 2×2 samples.
    let req = run(&[0.0, 0.0, 4.0, 4.0], &[1]);
    assert_eq!(status(&prepared, &req), None);
    let got = f32_values(&output(&req, 0));
    // Cell (0, 0) samples y, x in {0.5, 1.5} of the ramp 16 + 4y + x; the last row and
    // column clamp the samples at 3.5 to 3.
    assert_eq!(got, [21.0, 22.75, 28.0, 29.75]);
}

#[test]
fn bi74_box_with_nms_limit_inverted_or_non_finite_candidate() {
    // Two regions of two classes: scores, boxes and batch indices arrive with the request.
    let m = single_op(
        OperationType::BoxWithNmsLimit,
        vec![
            Operand::new(TensorFloat32, &[0, 2], ModelInput),
            Operand::new(TensorFloat32, &[0, 8], ModelInput),
            Operand::new(TensorInt32, &[0], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(TensorFloat32, &[0], ModelOutput),
            Operand::new(TensorFloat32, &[0, 4], ModelOutput),
            Operand::new(TensorInt32, &[0], ModelOutput),
            Operand::new(TensorInt32, &[0], ModelOutput),
        ],
        &[
            (3, f32_bytes(&[0.1])),
            (4, i32_bytes(&[-1])),
            (5, i32_bytes(&[0])),
            (6, f32_bytes(&[0.5])),
            (7, f32_bytes(&[1.0])),
            (8, f32_bytes(&[0.0])),
        ],
        &[0, 1, 2, 3, 4, 5, 6, 7, 8],
        &[9, 10, 11, 12],
    );
    let d = Driver::new(2).unwrap();
    assert_eq!(d.supported_operations(&m).unwrap(), vec![true]);
    let prepared = d.prepare_model(m).unwrap();
    let run = |class1: [f32; 4]| {
        let boxes = [
            [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 2.0],
            [
                0.0, 0.0, 1.0, 1.0, class1[0], class1[1], class1[2], class1[3],
            ],
        ]
        .concat();
        request(
            &[
                (f32_bytes(&[0.9, 0.8, 0.9, 0.7]), vec![2, 2]),
                (f32_bytes(&boxes), vec![2, 8]),
                (i32_bytes(&[0, 0]), vec![2]),
            ],
            &[8, 32, 8, 8],
        )
    };
    for bad in [
        [2.0, 0.0, 1.0, 1.0],
        [0.0, 2.0, 1.0, 1.0],
        [0.0, 0.0, f32::NAN, 1.0],
        [0.0, f32::NEG_INFINITY, 1.0, 1.0],
    ] {
        let req = run(bad);
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{bad:?}");
        assert!(err.to_string().contains("BOX_WITH_NMS_LIMIT"), "{err}");
        assert_eq!(output(&req, 0), vec![0xAB; 8], "nothing is written");
    }
    // Disjoint boxes: both kept, highest score first, class 1, batch 0.
    let req = run([5.0, 5.0, 6.0, 6.0]);
    let shapes = prepared.execute(&req).unwrap();
    assert_eq!(shapes.output_shapes[0], vec![2]);
    assert_eq!(f32_values(&output(&req, 0)), [0.8, 0.7]);
}

#[test]
fn bi75_region_counts_that_disagree_at_run_time() {
    let prepared = prepare(roi_align_model(Some(1.0)));
    for (rois, batches) in [(2u32, 1u32), (1, 3)] {
        let req = request(
            &[
                feature_map(),
                (f32_bytes(&vec![0.0; rois as usize * 4]), vec![rois, 4]),
                (i32_bytes(&vec![0; batches as usize]), vec![batches]),
            ],
            &[64],
        );
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument);
        assert!(err.to_string().contains("batch indices"), "{err}");
        assert_eq!(output(&req, 0), vec![0xAB; 64], "nothing is written");
    }
}

#[test]
fn bi76_non_finite_or_non_positive_scalars_at_run_time() {
    let prepared = prepare(roi_align_model(None));
    for stride in [f32::NAN, f32::INFINITY, 0.0, -1.0] {
        let req = request(
            &[
                feature_map(),
                (f32_bytes(&[0.0, 0.0, 2.0, 2.0]), vec![1, 4]),
                (i32_bytes(&[0]), vec![1]),
                (f32_bytes(&[stride]), vec![]),
            ],
            &[16],
        );
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{stride}");
        assert!(err.to_string().contains("stride"), "{err}");
    }
    let req = request(
        &[
            feature_map(),
            (f32_bytes(&[0.0, 0.0, 2.0, 2.0]), vec![1, 4]),
            (i32_bytes(&[0]), vec![1]),
            (f32_bytes(&[1.0]), vec![]),
        ],
        &[16],
    );
    assert_eq!(status(&prepared, &req), None);
}

/// AXIS_ALIGNED_BBOX_TRANSFORM float32 with every input given by the request: boxes, deltas of
/// two classes, batch indices, image sizes of two images.
fn bbox_transform_model() -> Model {
    single_op(
        OperationType::AxisAlignedBboxTransform,
        vec![
            Operand::new(TensorFloat32, &[0, 4], ModelInput),
            Operand::new(TensorFloat32, &[0, 8], ModelInput),
            Operand::new(TensorInt32, &[0], ModelInput),
            Operand::new(TensorFloat32, &[2, 2], ModelInput),
            Operand::new(TensorFloat32, &[0, 8], ModelOutput),
        ],
        &[],
        &[0, 1, 2, 3],
        &[4],
    )
}

fn bbox_transform_request(boxes: &[f32], deltas_rows: u32, batches: &[i32]) -> Request {
    let n = boxes.len() as u32 / 4;
    request(
        &[
            (f32_bytes(boxes), vec![n, 4]),
            (
                f32_bytes(&vec![0.0; deltas_rows as usize * 8]),
                vec![deltas_rows, 8],
            ),
            (i32_bytes(batches), vec![batches.len() as u32]),
            (f32_bytes(&[10.0, 10.0, 4.0, 4.0]), vec![2, 2]),
        ],
        &[32 * n.max(1)],
    )
}

#[test]
fn bi73_bbox_transform_region_outside_its_batch() {
    let prepared = prepare(bbox_transform_model());
    for batch in [2, -1, i32::MAX] {
        let req = bbox_transform_request(&[0.0, 0.0, 2.0, 2.0], 1, &[batch]);
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{batch}");
        assert!(
            err.to_string().contains("AXIS_ALIGNED_BBOX_TRANSFORM"),
            "{err}"
        );
    }
    // Zero deltas in image 1 (4 × 4): the box, clipped to the image.
    let req = bbox_transform_request(&[1.0, 1.0, 6.0, 3.0], 1, &[1]);
    assert_eq!(status(&prepared, &req), None);
    assert_eq!(
        f32_values(&output(&req, 0)),
        [1.0, 1.0, 4.0, 3.0, 1.0, 1.0, 4.0, 3.0]
    );
}

#[test]
fn bi74_bbox_transform_and_heatmap_inverted_or_non_finite_box() {
    let prepared = prepare(bbox_transform_model());
    for bad in [
        [2.0, 0.0, 1.0, 1.0],
        [0.0, 2.0, 1.0, 1.0],
        [0.0, 0.0, f32::NAN, 1.0],
    ] {
        let req = bbox_transform_request(&bad, 1, &[0]);
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{bad:?}");
        assert!(
            err.to_string().contains("AXIS_ALIGNED_BBOX_TRANSFORM"),
            "{err}"
        );
        assert_eq!(output(&req, 0), vec![0xAB; 32], "nothing is written");
    }
    // HEATMAP_MAX_KEYPOINT NHWC, one 2×2 heatmap of one keypoint per box.
    let m = single_op(
        OperationType::HeatmapMaxKeypoint,
        vec![
            Operand::new(TensorFloat32, &[1, 2, 2, 1], ModelInput),
            Operand::new(TensorFloat32, &[1, 4], ModelInput),
            Operand::new(Bool, &[], ModelInput),
            Operand::new(TensorFloat32, &[1, 1], ModelOutput),
            Operand::new(TensorFloat32, &[1, 1, 2], ModelOutput),
        ],
        &[(2, vec![0])],
        &[0, 1, 2],
        &[3, 4],
    );
    let prepared = prepare(m);
    let run = |roi: [f32; 4]| {
        request(
            &[
                (f32_bytes(&[0.0, 1.0, 0.0, 0.0]), vec![1, 2, 2, 1]),
                (f32_bytes(&roi), vec![1, 4]),
            ],
            &[4, 8],
        )
    };
    for bad in [[3.0, 0.0, 1.0, 4.0], [0.0, f32::NAN, 4.0, 4.0]] {
        let req = run(bad);
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{bad:?}");
        assert!(err.to_string().contains("HEATMAP_MAX_KEYPOINT"), "{err}");
    }
    let req = run([0.0, 0.0, 4.0, 4.0]);
    assert_eq!(status(&prepared, &req), None);
    // The maximum is cell (0, 1); a 2×2 grid mirrors every neighbour onto the grid, and the
    // fit is singular, so the keypoint is that cell's centre: (1.5 / 2 · 4, 0.5 / 2 · 4).
    assert_eq!(f32_values(&output(&req, 1)), [3.0, 1.0]);
    assert_eq!(f32_values(&output(&req, 0)), [1.0]);
}

#[test]
fn bi75_bbox_transform_counts_that_disagree_at_run_time() {
    let prepared = prepare(bbox_transform_model());
    for (rows, batches) in [(2u32, &[0][..]), (1, &[0, 0][..])] {
        let req = bbox_transform_request(&[0.0, 0.0, 2.0, 2.0], rows, batches);
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument);
        assert!(err.to_string().contains("disagree"), "{err}");
        assert_eq!(output(&req, 0), vec![0xAB; 32], "nothing is written");
    }
}

#[test]
fn bi76_proposal_and_postprocessing_scalars_at_run_time() {
    // GENERATE_PROPOSALS NHWC on a 1×1 map of one anchor; the height stride is a model input.
    let m = single_op(
        OperationType::GenerateProposals,
        vec![
            Operand::new(TensorFloat32, &[1, 1, 1, 1], ModelInput),
            Operand::new(TensorFloat32, &[1, 1, 1, 4], ModelInput),
            Operand::new(TensorFloat32, &[1, 4], ModelInput),
            Operand::new(TensorFloat32, &[1, 2], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Bool, &[], ModelInput),
            Operand::new(TensorFloat32, &[0], ModelOutput),
            Operand::new(TensorFloat32, &[0, 4], ModelOutput),
            Operand::new(TensorInt32, &[0], ModelOutput),
        ],
        &[
            (5, f32_bytes(&[1.0])),
            (6, i32_bytes(&[-1])),
            (7, i32_bytes(&[-1])),
            (8, f32_bytes(&[0.5])),
            (9, f32_bytes(&[0.0])),
            (10, vec![0]),
        ],
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        &[11, 12, 13],
    );
    let prepared = prepare(m);
    let run = |stride: f32| {
        request(
            &[
                (f32_bytes(&[0.7]), vec![1, 1, 1, 1]),
                (f32_bytes(&[0.0; 4]), vec![1, 1, 1, 4]),
                (f32_bytes(&[1.0, 1.0, 3.0, 4.0]), vec![1, 4]),
                (f32_bytes(&[8.0, 8.0]), vec![1, 2]),
                (f32_bytes(&[stride]), vec![]),
            ],
            &[4, 16, 4],
        )
    };
    for stride in [f32::NAN, f32::INFINITY] {
        let err = prepared.execute(&run(stride)).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{stride}");
        assert!(err.to_string().contains("not finite"), "{err}");
    }
    let req = run(1.0);
    let shapes = prepared.execute(&req).unwrap();
    assert_eq!(shapes.output_shapes[0], vec![1]);
    assert_eq!(f32_values(&output(&req, 0)), [0.7]);
    assert_eq!(f32_values(&output(&req, 1)), [1.0, 1.0, 3.0, 4.0]);

    // DETECTION_POSTPROCESSING: a scale of zero, or a detection limit of zero, given by the
    // request is refused before anything runs.
    let m = single_op(
        OperationType::DetectionPostprocessing,
        vec![
            Operand::new(TensorFloat32, &[1, 1, 2], ModelInput),
            Operand::new(TensorFloat32, &[1, 1, 4], ModelInput),
            Operand::new(TensorFloat32, &[1, 4], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Bool, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Int32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Float32, &[], ModelInput),
            Operand::new(Bool, &[], ModelInput),
            Operand::new(TensorFloat32, &[0, 0], ModelOutput),
            Operand::new(TensorFloat32, &[0, 0, 4], ModelOutput),
            Operand::new(TensorInt32, &[0, 0], ModelOutput),
            Operand::new(TensorInt32, &[0], ModelOutput),
        ],
        &[
            (4, f32_bytes(&[10.0])),
            (5, f32_bytes(&[5.0])),
            (6, f32_bytes(&[5.0])),
            (7, vec![1]),
            (9, i32_bytes(&[1])),
            (10, i32_bytes(&[1])),
            (11, f32_bytes(&[0.0])),
            (12, f32_bytes(&[0.5])),
            (13, vec![0]),
        ],
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
        &[14, 15, 16, 17],
    );
    let prepared = prepare(m);
    let run = |scale: f32, max: i32| {
        request(
            &[
                (f32_bytes(&[0.1, 0.9]), vec![1, 1, 2]),
                (f32_bytes(&[0.0; 4]), vec![1, 1, 4]),
                (f32_bytes(&[1.0, 2.0, 2.0, 2.0]), vec![1, 4]),
                (f32_bytes(&[scale]), vec![]),
                (i32_bytes(&[max]), vec![]),
            ],
            &[8, 32, 8, 4],
        )
    };
    for (scale, max) in [(0.0, 1), (-1.0, 1), (f32::NAN, 1), (10.0, 0), (10.0, -2)] {
        let req = run(scale, max);
        let err = prepared.execute(&req).unwrap_err();
        assert_eq!(err.status(), ErrorStatus::InvalidArgument, "{scale} {max}");
        assert_eq!(output(&req, 3), vec![0xAB; 4], "nothing is written");
    }
    // One anchor kept: class 1 reported as 0 (background not in the label), box (y, x) corners.
    let req = run(10.0, 1);
    let shapes = prepared.execute(&req).unwrap();
    assert_eq!(shapes.output_shapes[0], vec![1, 1]);
    assert_eq!(f32_values(&output(&req, 0))[0], 0.9);
    assert_eq!(f32_values(&output(&req, 1))[..4], [0.0, 1.0, 2.0, 3.0]);
}

#[test]
fn bi76_roi_align_sampling_past_the_budget_at_run_time() {
    // A sampling ratio of 2^17 along each axis asks 2^34 bilinear taps for each of the 4 cells
    // of one region: refused before any is taken (the service would otherwise be busy for
    // hours); the same model with one region of a few samples is fine at ratio 2.
    let huge = prepare(roi_align_sampled(Some(1.0), 1 << 17));
    let one_region = || {
        request(
            &[
                feature_map(),
                (f32_bytes(&[0.0, 0.0, 2.0, 2.0]), vec![1, 4]),
                (i32_bytes(&[0]), vec![1]),
            ],
            &[16],
        )
    };
    let req = one_region();
    assert_eq!(status(&huge, &req), Some(ErrorStatus::InvalidArgument));
    assert!(output(&req, 0).iter().all(|&b| b == 0xAB), "output written");
    let fine = prepare(roi_align_sampled(Some(1.0), 2));
    assert_eq!(status(&fine, &one_region()), None);
}
