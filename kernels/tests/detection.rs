//! Batteries of the detection family against the specification (NeuralNetworks.h
//! BOX_WITH_NMS_LIMIT, ROI_ALIGN): the selection's defining properties on random boxes
//! (degenerate and tied ones included) for every NMS kernel and batch split, and ROI_ALIGN
//! against a bilinear sampler written independently (one output value at a time, from the
//! specification's formulas), float32 and quant8; ROI_POOLING against a per-cell maximum over
//! the pixels whose centres the cell covers.
//!
//! The detection loops take no micro-kernel table: every ISA level runs the same code.

// Negated comparisons are deliberate: an IoU of 0/0 (NaN) and the NaN scores it gives must
// count as "not below the threshold", as in the platform's arithmetic.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

use nnhal_kernels::detection::reference::{
    box_with_nms_limit, iou, roi_align_f32, roi_align_u8, roi_pooling, NmsKernel, NmsParams,
    RoiAlign, RoiPool,
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
