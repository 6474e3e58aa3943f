//! Batteries of the detection family against the specification (NeuralNetworks.h
//! BOX_WITH_NMS_LIMIT, ROI_ALIGN): the selection's defining properties on random boxes
//! (degenerate and tied ones included) for every NMS kernel and batch split, and ROI_ALIGN
//! against a bilinear sampler written independently (one output value at a time, from the
//! specification's formulas), float32 and quant8; ROI_POOLING against a per-cell maximum over
//! the pixels whose centres the cell covers. AXIS_ALIGNED_BBOX_TRANSFORM, HEATMAP_MAX_KEYPOINT,
//! GENERATE_PROPOSALS and DETECTION_POSTPROCESSING against the properties the specification
//! states (identity deltas, the exact peak of a quadratic heatmap, the selection's limits,
//! order and overlaps, both layouts).
//!
//! The detection loops take no micro-kernel table: every ISA level runs the same code.

// Negated comparisons are deliberate: an IoU of 0/0 (NaN) and the NaN scores it gives must
// count as "not below the threshold", as in the platform's arithmetic.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use nnhal_kernels::detection::reference::{
    axis_aligned_bbox_transform, box_with_nms_limit, detection_postprocessing, generate_proposals,
    heatmap_max_keypoint, iou, roi_align_f32, roi_align_u8, roi_pooling, NmsKernel, NmsParams,
    PostprocessParams, ProposalParams, RoiAlign, RoiPool,
};
use nnhal_kernels::Nhwc;
use proptest::prelude::*;

/// Boxes on a coarse grid (so ties and identical boxes happen), some of zero width or height.
fn corner_box() -> impl Strategy<Value = [f32; 4]> {
    (0u8..8, 0u8..8, 0u8..5, 0u8..5)
        .prop_map(|(x, y, w, h)| [x as f32, y as f32, (x + w) as f32, (y + h) as f32])
}

/// Scores from a small set, so equal scores are common.
fn score() -> impl Strategy<Value = f32> {
    (0u8..10).prop_map(|s| s as f32 / 10.0)
}

fn nms_case() -> impl Strategy<Value = (usize, Vec<f32>, Vec<f32>, Vec<i32>, NmsParams)> {
    (
        1usize..=12,
        2usize..=4,
        1usize..=3,
        0u8..3,
        -1i32..5,
        0u8..3,
    )
        .prop_flat_map(|(rois, classes, groups, kernel, max, th)| {
            (
                prop::collection::vec(score(), rois * classes),
                prop::collection::vec(corner_box(), rois * classes),
                prop::collection::vec(0..groups as i32, rois),
            )
                .prop_map(move |(scores, boxes, mut batches)| {
                    batches.sort_unstable();
                    let p = NmsParams {
                        score_threshold: 0.05 + 0.2 * th as f32,
                        max_detections: max,
                        kernel: [NmsKernel::Hard, NmsKernel::Linear, NmsKernel::Gaussian]
                            [kernel as usize],
                        iou_threshold: 0.3 + 0.2 * th as f32,
                        sigma: 0.5,
                        nms_score_threshold: 0.05 * (th + 1) as f32,
                    };
                    (classes, scores, boxes.concat(), batches, p)
                })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// What the specification promises of the selection: only candidates of classes 1.. above
    /// the score threshold, each kept once, at most `max` per class and per batch group, hard
    /// NMS keeps no overlapping pair of a class, the order is batch group, class, then score
    /// descending, and hard NMS scores are the inputs'.
    #[test]
    fn nms_keeps_what_the_specification_allows((classes, scores, boxes, batches, p) in nms_case()) {
        let sel = box_with_nms_limit(&scores, &boxes, &batches, classes, &p).unwrap();
        let n = sel.index.len();
        prop_assert_eq!(sel.score.len(), n);
        prop_assert_eq!(sel.batch.len(), n);
        let mut seen = std::collections::HashSet::new();
        for k in 0..n {
            let i = sel.index[k];
            prop_assert!(seen.insert(i), "index {} kept twice", i);
            prop_assert!(!i.is_multiple_of(classes), "background kept");
            prop_assert!(scores[i] > p.score_threshold);
            prop_assert_eq!(sel.batch[k], batches[i / classes]);
            // Two boxes of zero area have no IoU (0/0): the soft kernels then give NaN, as the
            // platform's arithmetic does; no kernel ever raises a score.
            prop_assert!(!(sel.score[k] > scores[i]));
            if p.kernel == NmsKernel::Hard {
                prop_assert_eq!(sel.score[k], scores[i]);
            }
            if k > 0 {
                let (a, b) = (sel.index[k - 1], i);
                let key = |x: usize| (batches[x / classes], x % classes);
                prop_assert!(key(a) <= key(b), "order of groups and classes");
                if key(a) == key(b) {
                    prop_assert!(!(sel.score[k - 1] < sel.score[k]), "score order");
                }
            }
        }
        // Limits per class and per group.
        if p.max_detections >= 0 {
            let max = p.max_detections as usize;
            for g in batches.iter().collect::<std::collections::BTreeSet<_>>() {
                let in_group = sel.batch.iter().filter(|&b| b == g).count();
                prop_assert!(in_group <= max);
            }
        }
        if p.kernel == NmsKernel::Hard {
            for a in 0..n {
                for b in a + 1..n {
                    let (x, y) = (sel.index[a], sel.index[b]);
                    if x % classes == y % classes && sel.batch[a] == sel.batch[b] {
                        let o = iou(&boxes[x * 4..x * 4 + 4], &boxes[y * 4..y * 4 + 4]);
                        prop_assert!(!(o >= p.iou_threshold), "overlapping pair kept: IoU {}", o);
                    }
                }
            }
            // Greedy completeness without limits: every dropped candidate overlaps a kept one
            // of its class and group that scores at least as much (an IoU of 0/0, two boxes of
            // zero area, is not below the threshold: it suppresses too).
            if p.max_detections < 0 {
                for i in 0..scores.len() {
                    if i.is_multiple_of(classes) || !(scores[i] > p.score_threshold) || seen.contains(&i) {
                        continue;
                    }
                    let covered = sel.index.iter().any(|&j| {
                        j % classes == i % classes
                            && batches[j / classes] == batches[i / classes]
                            && scores[j] >= scores[i]
                            && !(iou(&boxes[i * 4..i * 4 + 4], &boxes[j * 4..j * 4 + 4]) < p.iou_threshold)
                    });
                    prop_assert!(covered, "candidate {} dropped without cause", i);
                }
            }
        }
    }
}

/// Soft NMS lowers an overlapping box's score by the kernel's factor.
#[test]
fn soft_kernels_lower_overlapping_scores() {
    let boxes = [
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 4.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 2.0],
    ]
    .concat();
    let scores = [0.0, 0.9, 0.0, 0.8];
    let o = 0.5f32; // [0,0,4,2] inside [0,0,4,4]
    for (kernel, want) in [
        (NmsKernel::Linear, 0.8 * (1.0 - o)),
        (NmsKernel::Gaussian, 0.8 * (-o * o / 0.5f32).exp()),
        (NmsKernel::Hard, 0.0),
    ] {
        let p = NmsParams {
            score_threshold: 0.1,
            max_detections: -1,
            kernel,
            iou_threshold: 0.4,
            sigma: 0.5,
            nms_score_threshold: 0.01,
        };
        let sel = box_with_nms_limit(&scores, &boxes, &[3, 3], 2, &p).unwrap();
        if kernel == NmsKernel::Hard {
            assert_eq!(sel.index, vec![1], "suppressed");
        } else {
            assert_eq!(sel.index, vec![1, 3]);
            assert_eq!(sel.score, vec![0.9, want]);
            assert_eq!(sel.batch, vec![3, 3]);
        }
    }
}

/// Bilinear value of channel `c` at (y, x) of one image, clamped at the last row and column.
fn sample(img: &[f32], h: usize, w: usize, d: usize, c: usize, y: f32, x: f32) -> f32 {
    let (yl, xl) = (y.floor() as usize, x.floor() as usize);
    let (y0, fy) = if yl >= h - 1 {
        (h - 1, 0.0)
    } else {
        (yl, y - yl as f32)
    };
    let (x0, fx) = if xl >= w - 1 {
        (w - 1, 0.0)
    } else {
        (xl, x - xl as f32)
    };
    let (y1, x1) = ((y0 + 1).min(h - 1), (x0 + 1).min(w - 1));
    let at = |yy: usize, xx: usize| img[(yy * w + xx) * d + c];
    (1.0 - fy) * ((1.0 - fx) * at(y0, x0) + fx * at(y0, x1))
        + fy * ((1.0 - fx) * at(y1, x0) + fx * at(y1, x1))
}

fn align_case() -> impl Strategy<Value = (RoiAlign, Vec<f32>, Vec<f32>, Vec<i32>)> {
    (
        1usize..=2,
        1usize..=6,
        1usize..=6,
        1usize..=3,
        1usize..=3,
        1usize..=3,
        0usize..=2,
        0usize..=2,
        1u8..=3,
        1usize..=4,
    )
        .prop_flat_map(|(n, h, w, d, oh, ow, rh, rw, stride, rois)| {
            let g = RoiAlign {
                input: Nhwc::new(n, h, w, d),
                out_h: oh,
                out_w: ow,
                stride_h: stride as f32 / 2.0,
                stride_w: 1.0 / stride as f32,
                ratio_h: rh,
                ratio_w: rw,
            };
            let max_x = w as f32 * g.stride_w;
            let max_y = h as f32 * g.stride_h;
            (
                Just(g),
                prop::collection::vec(-8i8..8, n * h * w * d)
                    .prop_map(|v| v.iter().map(|&x| x as f32 / 4.0).collect()),
                prop::collection::vec(
                    (0.0f32..=1.0, 0.0f32..=1.0, 0.0f32..=1.0, 0.0f32..=1.0),
                    rois,
                )
                .prop_map(move |b| {
                    b.iter()
                        .flat_map(|&(a, bb, c, e)| {
                            [
                                a.min(c) * max_x,
                                bb.min(e) * max_y,
                                a.max(c) * max_x,
                                bb.max(e) * max_y,
                            ]
                        })
                        .collect()
                }),
                prop::collection::vec(0..n as i32, rois),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn roi_align_f32_matches_the_bilinear_sampler((g, x, boxes, batches) in align_case()) {
        let (h, w, d) = (g.input.h, g.input.w, g.input.c);
        let mut out = vec![f32::NAN; batches.len() * g.out_h * g.out_w * d];
        roi_align_f32(&x, &boxes, &batches, &g, &mut out).unwrap();
        for (k, b) in boxes.chunks_exact(4).enumerate() {
            let img = &x[batches[k] as usize * h * w * d..][..h * w * d];
            let (x0, y0) = (b[0] / g.stride_w, b[1] / g.stride_h);
            let rw = (b[2] / g.stride_w - x0).max(1.0);
            let rh = (b[3] / g.stride_h - y0).max(1.0);
            let (cw, ch) = (rw / g.out_w as f32, rh / g.out_h as f32);
            let sw = if g.ratio_w > 0 { g.ratio_w } else { cw.ceil() as usize };
            let sh = if g.ratio_h > 0 { g.ratio_h } else { ch.ceil() as usize };
            for i in 0..g.out_h {
                for j in 0..g.out_w {
                    for c in 0..d {
                        let mut sum = 0.0f64;
                        for a in 0..sh {
                            for bb in 0..sw {
                                let y = y0 + ch * i as f32 + ch / sh as f32 * (a as f32 + 0.5);
                                let xx = x0 + cw * j as f32 + cw / sw as f32 * (bb as f32 + 0.5);
                                sum += f64::from(sample(img, h, w, d, c, y, xx));
                            }
                        }
                        let want = sum / (sh * sw) as f64;
                        let got = out[((k * g.out_h + i) * g.out_w + j) * d + c];
                        prop_assert!((f64::from(got) - want).abs() <= 1e-4 * (1.0 + want.abs()),
                            "region {} cell ({}, {}) channel {}: {} vs {}", k, i, j, c, got, want);
                    }
                }
            }
        }
    }

    /// Quant8 ROI_ALIGN is the float result requantized, within the 1/255 weight quantization
    /// (at most one step off).
    #[test]
    fn roi_align_u8_follows_the_float_result((g, x, boxes, batches) in align_case(), zp in 0i32..=255) {
        // Boxes on the 1/8 grid of TENSOR_QUANT16_ASYMM.
        let q16: Vec<u16> = boxes.iter().map(|&v| (v * 8.0).floor() as u16).collect();
        let fboxes: Vec<f32> = q16.iter().map(|&v| v as f32 * 0.125).collect();
        let scale = 0.25f32;
        let xu: Vec<u8> = x.iter().map(|&v| ((v / scale).round() as i32 + zp).clamp(0, 255) as u8).collect();
        let xf: Vec<f32> = xu.iter().map(|&v| (i32::from(v) - zp) as f32 * scale).collect();
        let n = batches.len() * g.out_h * g.out_w * g.input.c;
        let mut want = vec![0.0; n];
        roi_align_f32(&xf, &fboxes, &batches, &g, &mut want).unwrap();
        let mut got = vec![0u8; n];
        roi_align_u8(&xu, zp, scale, &q16, &batches, &g, scale, zp, &mut got).unwrap();
        for (k, (&q, &f)) in got.iter().zip(&want).enumerate() {
            let ideal = (f / scale + zp as f32).round().clamp(0.0, 255.0);
            prop_assert!((f32::from(q) - ideal).abs() <= 1.0, "element {}: {} vs {}", k, q, ideal);
        }
    }
}

#[test]
fn roi_align_rejects_regions_it_cannot_sample() {
    let g = RoiAlign {
        input: Nhwc::new(1, 2, 2, 1),
        out_h: 1,
        out_w: 1,
        stride_h: 1.0,
        stride_w: 1.0,
        ratio_h: 0,
        ratio_w: 0,
    };
    let x = [1.0, 2.0, 3.0, 4.0];
    let mut out = [0.0];
    for (b, batch) in [
        ([0.0, 0.0, 1.0, 1.0], 1),
        ([0.0, 0.0, 1.0, 1.0], -1),
        ([0.0, 0.0, 3.0, 1.0], 0),
        ([1.0, 0.0, 0.5, 1.0], 0),
        ([0.0, f32::INFINITY, 1.0, 1.0], 0),
    ] {
        assert!(
            roi_align_f32(&x, &b, &[batch], &g, &mut out).is_err(),
            "{b:?} {batch}"
        );
    }
    assert_eq!(out, [0.0], "nothing written");
    // Zero regions: nothing to do.
    roi_align_f32(&x, &[], &[], &g, &mut []).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// ROI_POOLING: each output is the maximum over the cell's pixel rectangle (rounded region
    /// corners, cells from the floor to the ceiling of equal fractions), the empty value where
    /// the rectangle is empty; bytes order as the values they encode.
    #[test]
    fn roi_pooling_is_the_maximum_of_each_cell((g, x, boxes, batches) in align_case()) {
        let p = RoiPool { input: g.input, out_h: g.out_h, out_w: g.out_w, stride_h: g.stride_h, stride_w: g.stride_w };
        let (h, w, d) = (g.input.h, g.input.w, g.input.c);
        let mut out = vec![f32::NAN; batches.len() * g.out_h * g.out_w * d];
        roi_pooling(&x, &boxes, &batches, &p, -99.0, &mut out).unwrap();
        let bytes: Vec<u8> = x.iter().map(|&v| (v * 4.0 + 128.0) as u8).collect();
        let mut out_u8 = vec![0u8; out.len()];
        roi_pooling(&bytes, &boxes, &batches, &p, 7, &mut out_u8).unwrap();
        for (k, b) in boxes.chunks_exact(4).enumerate() {
            let img = &x[batches[k] as usize * h * w * d..][..h * w * d];
            let xs = (b[0] / p.stride_w).round();
            let ys = (b[1] / p.stride_h).round();
            let rw = ((b[2] / p.stride_w).round() - xs + 1.0).max(1.0);
            let rh = ((b[3] / p.stride_h).round() - ys + 1.0).max(1.0);
            for i in 0..p.out_h {
                for j in 0..p.out_w {
                    let y0 = ((rh / p.out_h as f32 * i as f32 + ys).floor() as usize).min(h);
                    let y1 = ((rh / p.out_h as f32 * (i + 1) as f32 + ys).ceil() as usize).min(h);
                    let x0 = ((rw / p.out_w as f32 * j as f32 + xs).floor() as usize).min(w);
                    let x1 = ((rw / p.out_w as f32 * (j + 1) as f32 + xs).ceil() as usize).min(w);
                    for c in 0..d {
                        let vals: Vec<f32> = (y0..y1)
                            .flat_map(|yy| (x0..x1).map(move |xx| (yy, xx)))
                            .map(|(yy, xx)| img[(yy * w + xx) * d + c])
                            .collect();
                        let want = vals.iter().copied().fold(None, |m: Option<f32>, v| Some(m.map_or(v, |m| m.max(v))));
                        let at = ((k * p.out_h + i) * p.out_w + j) * d + c;
                        prop_assert_eq!(out[at], want.unwrap_or(-99.0));
                        let want_u8 = want.map_or(7, |v| (v * 4.0 + 128.0) as u8);
                        prop_assert_eq!(out_u8[at], want_u8);
                    }
                }
            }
        }
    }
}

/// Boxes inside a 16×12 (width × height) image, of positive size.
fn inner_box() -> impl Strategy<Value = [f32; 4]> {
    (0u8..10, 0u8..8, 1u8..6, 1u8..4)
        .prop_map(|(x, y, w, h)| [x as f32, y as f32, (x + w) as f32, (y + h) as f32])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// AXIS_ALIGNED_BBOX_TRANSFORM: zero deltas return the box; a centre delta moves the
    /// centre by that fraction of the box's size, a size delta of ln 2 doubles the size about
    /// the centre, and every result lies within its image.
    #[test]
    fn bbox_transform_moves_and_scales_boxes(
        rois in prop::collection::vec(inner_box(), 1..6),
        deltas in prop::collection::vec(-2.0f32..2.0, 24),
    ) {
        let n = rois.len();
        let boxes = rois.concat();
        let info = [12.0, 16.0];
        let batches = vec![0; n];
        let mut out = vec![0.0; n * 8];
        let mut d = vec![0.0; n * 8];
        // Class 0: zero deltas; class 1: the random ones.
        for k in 0..n {
            d[k * 8 + 4..k * 8 + 8].copy_from_slice(&deltas[(k % 6) * 4..(k % 6) * 4 + 4]);
        }
        axis_aligned_bbox_transform(&boxes, &d, &batches, &info, &mut out).unwrap();
        for (k, b) in rois.iter().enumerate() {
            prop_assert_eq!(&out[k * 8..k * 8 + 4], &b[..]);
            let o = &out[k * 8 + 4..k * 8 + 8];
            prop_assert!(o[0] >= 0.0 && o[2] <= 16.0 && o[1] >= 0.0 && o[3] <= 12.0, "{:?}", o);
            prop_assert!(o[0] <= o[2] && o[1] <= o[3], "{:?}", o);
        }
        let one = [[4.0, 2.0, 8.0, 6.0]].concat();
        let mut o = [0.0; 4];
        axis_aligned_bbox_transform(&one, &[0.25, -0.25, 2f32.ln(), 0.0], &[0], &info, &mut o).unwrap();
        // Centre (6, 4) + (1, −1); width 4 → 8; height 4.
        prop_assert!(o.iter().zip([3.0, 1.0, 11.0, 5.0]).all(|(a, b)| (a - b).abs() < 1e-5), "{:?}", o);
    }

    /// HEATMAP_MAX_KEYPOINT recovers the peak of a paraboloid sampled on the grid (the fit is
    /// exact for a quadratic), in both layouts, and maps it into its box.
    #[test]
    fn heatmap_keypoint_finds_a_quadratic_peak(
        size in 3usize..8,
        px in 0.0f32..1.0,
        py in 0.0f32..1.0,
        keypoints in 1usize..3,
    ) {
        // Peak strictly inside the grid, at least one cell from the edge.
        let (x0, y0) = (1.0 + px * (size as f32 - 3.0), 1.0 + py * (size as f32 - 3.0));
        let f = |y: usize, x: usize, k: usize| {
            5.0 + k as f32 - 0.5 * ((x as f32 - x0).powi(2) + 2.0 * (y as f32 - y0).powi(2))
        };
        let mut nhwc = vec![0.0; size * size * keypoints];
        let mut nchw = vec![0.0; size * size * keypoints];
        for y in 0..size {
            for x in 0..size {
                for k in 0..keypoints {
                    nhwc[(y * size + x) * keypoints + k] = f(y, x, k);
                    nchw[(k * size + y) * size + x] = f(y, x, k);
                }
            }
        }
        let roi = [2.0, 1.0, 2.0 + size as f32 * 2.0, 1.0 + size as f32];
        for (map, layout) in [(&nhwc, false), (&nchw, true)] {
            let mut s = vec![0.0; keypoints];
            let mut p = vec![0.0; keypoints * 2];
            heatmap_max_keypoint(map, &roi, size, keypoints, layout, 1e-5, &mut s, &mut p).unwrap();
            for k in 0..keypoints {
                prop_assert!((s[k] - (5.0 + k as f32)).abs() < 1e-3, "score {}", s[k]);
                // Cell centres: x = (i + 0.5) / size of the box width.
                let want_x = roi[0] + (x0 + 0.5) * 2.0;
                let want_y = roi[1] + (y0 + 0.5);
                prop_assert!((p[k * 2] - want_x).abs() < 1e-3, "x {} want {}", p[k * 2], want_x);
                prop_assert!((p[k * 2 + 1] - want_y).abs() < 1e-3, "y {} want {}", p[k * 2 + 1], want_y);
            }
        }
    }

    /// GENERATE_PROPOSALS: per image at most `post_nms` proposals, scores non-increasing, no
    /// kept pair overlapping at the threshold, every box larger than the minimum size and
    /// centred in its image; the NCHW form gives the NHWC result.
    #[test]
    fn proposals_keep_what_the_specification_allows(
        (h, w, a) in (1usize..4, 1usize..4, 1usize..3),
        seed in prop::collection::vec(0u8..10, 2 * 3 * 3 * 2 * 5),
        post in -1i32..6,
        pre in 0i32..8,
    ) {
        let batches = 2;
        let cells = h * w * a;
        let scores: Vec<f32> = (0..batches * cells).map(|i| seed[i % seed.len()] as f32 / 10.0).collect();
        let deltas: Vec<f32> = (0..batches * cells * 4).map(|i| (seed[(i * 7) % seed.len()] as f32 - 5.0) / 10.0).collect();
        let anchors: Vec<f32> = (0..a).flat_map(|k| [0.0, 0.0, 4.0 + k as f32 * 2.0, 3.0 + k as f32]).collect();
        let info = [10.0, 12.0, 6.0, 8.0];
        let p = ProposalParams { stride_h: 2.0, stride_w: 3.0, pre_nms: pre, post_nms: post, iou_threshold: 0.4, min_size: 1.0 };
        let got = generate_proposals(&scores, &deltas, &anchors, &info, (batches, h, w), false, &p).unwrap();
        let n = got.batch.len();
        prop_assert_eq!(got.score.len(), n);
        prop_assert_eq!(got.roi.len(), n * 4);
        for b in 0..batches as i32 {
            let idx: Vec<usize> = (0..n).filter(|&i| got.batch[i] == b).collect();
            if post >= 0 {
                prop_assert!(idx.len() <= post as usize);
            }
            for (j, &i) in idx.iter().enumerate() {
                let r = &got.roi[i * 4..i * 4 + 4];
                let (ih, iw) = (info[b as usize * 2], info[b as usize * 2 + 1]);
                prop_assert!(r[2] - r[0] > 1.0 && r[3] - r[1] > 1.0, "{:?}", r);
                prop_assert!((r[0] + r[2]) / 2.0 < iw + 1e-4 && (r[1] + r[3]) / 2.0 < ih + 1e-4);
                prop_assert!(r[0] >= 0.0 && r[2] <= iw && r[1] >= 0.0 && r[3] <= ih);
                if j > 0 {
                    prop_assert!(got.score[idx[j - 1]] >= got.score[i]);
                }
                for &k in &idx[..j] {
                    let o = iou(&got.roi[k * 4..k * 4 + 4], r);
                    prop_assert!(o < 0.4, "kept pair with IoU {}", o);
                }
            }
        }
        prop_assert!(got.batch.windows(2).all(|x| x[0] <= x[1]));
        // The same data laid out NCHW.
        let t = |x: &[f32], ch: usize| -> Vec<f32> {
            let per = h * w * ch;
            let mut out = vec![0.0; x.len()];
            for b in 0..batches {
                for i in 0..h * w {
                    for c in 0..ch {
                        out[b * per + c * h * w + i] = x[b * per + i * ch + c];
                    }
                }
            }
            out
        };
        let nchw = generate_proposals(&t(&scores, a), &t(&deltas, a * 4), &anchors, &info, (batches, h, w), true, &p).unwrap();
        prop_assert_eq!(nchw, got);
    }

    /// DETECTION_POSTPROCESSING: at most the limits, scores non-increasing (regular) and
    /// zeros past the detections found, background never reported, no kept pair of one class
    /// (regular) or of any class (fast) overlapping at the threshold.
    #[test]
    fn postprocessing_keeps_what_the_specification_allows(
        anchors_n in 1usize..8,
        classes in 2usize..4,
        seed in prop::collection::vec(0u8..10, 64),
        regular in any::<bool>(),
        bg in any::<bool>(),
        (max, per_class, max_classes) in (1i32..5, 1i32..3, 1i32..3),
    ) {
        let scores: Vec<f32> = (0..anchors_n * classes).map(|i| seed[i % 64] as f32 / 10.0).collect();
        let deltas: Vec<f32> = (0..anchors_n * 4).map(|i| (seed[(i * 5 + 3) % 64] as f32 - 5.0) / 5.0).collect();
        let anchors: Vec<f32> = (0..anchors_n).flat_map(|k| [k as f32 % 3.0, (k / 3) as f32, 2.0, 2.0]).collect();
        let p = PostprocessParams {
            scale: [10.0, 10.0, 5.0, 5.0],
            regular_nms: regular,
            max_detections: max,
            max_classes_per_detection: max_classes,
            max_detections_per_class: per_class,
            iou_threshold: 0.5,
            score_threshold: 0.25,
            background_in_label: bg,
        };
        let per = p.per_batch();
        let (mut s, mut b, mut c, mut n) = (vec![9.0; per], vec![9.0; per * 4], vec![9; per], vec![9]);
        detection_postprocessing(&scores, &deltas, &anchors, (1, classes, 4), &p, &mut s, &mut b, &mut c, &mut n).unwrap();
        let found = n[0] as usize;
        prop_assert!(found <= per);
        let first = if bg { 1 } else { 0 };
        for k in 0..per {
            if k >= found {
                prop_assert_eq!((s[k], c[k]), (0.0, 0));
                prop_assert!(b[k * 4..k * 4 + 4].iter().all(|&v| v == 0.0));
                continue;
            }
            prop_assert!(s[k] > 0.25 || !regular);
            prop_assert!(c[k] >= first && (c[k] as usize) < classes - 1 + first as usize);
            if regular && k > 0 {
                prop_assert!(s[k - 1] >= s[k]);
            }
            for j in 0..k {
                let o = iou(&b[j * 4..j * 4 + 4], &b[k * 4..k * 4 + 4]);
                if (regular && c[j] == c[k]) || (!regular && b[j * 4..j * 4 + 4] != b[k * 4..k * 4 + 4]) {
                    prop_assert!(!(o >= 0.5), "kept pair with IoU {}", o);
                }
            }
        }
    }
}
