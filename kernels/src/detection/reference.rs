//! Reference loops of the detection family (NeuralNetworks.h `OperationCode`
//! BOX_WITH_NMS_LIMIT, ROI_ALIGN, ROI_POOLING).
//!
//! Boxes are `[x1, y1, x2, y2]` corners. The order of the selection is the platform's: per
//! batch group (consecutive boxes with one batch index), classes 1.. (class 0 is the
//! background and never selected), within a class greedy suppression from the highest score
//! (the first of equal scores wins), then the group's survivors ordered by score to apply the
//! total limit, and finally by class, then by score, for the output.

use crate::quant::{
    multiply_by_quantized_multiplier_smaller_than_one, quantize_multiplier_smaller_than_one,
};
use crate::{KernelError, Nhwc};
use std::cmp::Ordering;

/// How a kept box lowers the scores of the boxes it overlaps (BOX_WITH_NMS_LIMIT input 5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NmsKernel {
    /// An overlap at or above the IoU threshold zeroes the score.
    Hard,
    /// An overlap at or above the IoU threshold scales the score by `1 − IoU`.
    Linear,
    /// Every overlap scales the score by `exp(−IoU² / sigma)`.
    Gaussian,
}

/// The scalar parameters of BOX_WITH_NMS_LIMIT (inputs 3–8).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NmsParams {
    /// Boxes scoring at or below this are not candidates.
    pub score_threshold: f32,
    /// Most boxes kept per class and per batch group; negative: no limit.
    pub max_detections: i32,
    pub kernel: NmsKernel,
    pub iou_threshold: f32,
    pub sigma: f32,
    /// A candidate whose lowered score falls below this is dropped.
    pub nms_score_threshold: f32,
}

/// The kept boxes, in output order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// Flat index into the scores (`roi · classes + class`), so also the box's index in the
    /// per-class boxes.
    pub index: Vec<usize>,
    /// The (possibly lowered) score of each kept box.
    pub score: Vec<f32>,
    /// The batch index of each kept box.
    pub batch: Vec<i32>,
}

/// Intersection over union of two corner boxes.
pub fn iou(a: &[f32], b: &[f32]) -> f32 {
    let area_a = (a[2] - a[0]) * (a[3] - a[1]);
    let area_b = (b[2] - b[0]) * (b[3] - b[1]);
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    inter / (area_a + area_b - inter)
}

/// Scores from high to low. A total order: the IoU of two boxes of zero area is 0/0, and the
/// soft kernels then make NaN scores, which must not break the sort.
fn descending(a: f32, b: f32) -> Ordering {
    b.total_cmp(&a)
}

/// BOX_WITH_NMS_LIMIT on float values: `scores` `[rois, classes]`, `boxes` `[rois, classes·4]`,
/// `batches` `[rois]`. An inverted candidate box (x2 < x1 or y2 < y1) or a non-finite one is
/// invalid data.
pub fn box_with_nms_limit(
    scores: &[f32],
    boxes: &[f32],
    batches: &[i32],
    classes: usize,
    p: &NmsParams,
) -> Result<Selection, KernelError> {
    let rois = batches.len();
    if classes == 0 || scores.len() != rois * classes || boxes.len() != scores.len() * 4 {
        return Err(KernelError::InvalidData(format!(
            "BOX_WITH_NMS_LIMIT: {} scores, {} box coordinates and {rois} batch indices disagree",
            scores.len(),
            boxes.len()
        )));
    }
    let mut s = scores.to_vec();
    let mut out = Selection::default();
    let mut start = 0;
    while start < rois {
        let id = batches[start];
        let end = start + batches[start..].iter().take_while(|&&b| b == id).count();
        let mut group: Vec<usize> = Vec::new();
        for c in 1..classes {
            let first = group.len();
            group.extend(
                (start..end)
                    .map(|r| r * classes + c)
                    .filter(|&i| s[i] > p.score_threshold),
            );
            for &i in &group[first..] {
                let b = &boxes[i * 4..i * 4 + 4];
                if !b.iter().all(|v| v.is_finite()) || b[0] > b[2] || b[1] > b[3] {
                    return Err(KernelError::InvalidData(format!(
                        "BOX_WITH_NMS_LIMIT: box {} of class {c} is not a box: {b:?}",
                        i / classes
                    )));
                }
            }
            let kept = suppress(&mut s, boxes, &mut group[first..], p);
            group.truncate(first + kept);
        }
        group.sort_by(|&a, &b| descending(s[a], s[b]));
        if p.max_detections >= 0 {
            group.truncate(p.max_detections as usize);
        }
        group.sort_by(|&a, &b| {
            (a % classes)
                .cmp(&(b % classes))
                .then(descending(s[a], s[b]))
        });
        for i in group {
            out.index.push(i);
            out.score.push(s[i]);
            out.batch.push(id);
        }
        start = end;
    }
    Ok(out)
}

/// Greedy suppression within one class, in place: moves the kept candidates to the front of
/// `cand` in the order they were kept and returns how many there are.
fn suppress(s: &mut [f32], boxes: &[f32], cand: &mut [usize], p: &NmsParams) -> usize {
    let limit = if p.max_detections < 0 {
        cand.len()
    } else {
        p.max_detections as usize
    };
    let (mut kept, mut end) = (0, cand.len());
    while kept < end && kept < limit {
        let mut best = kept;
        for j in kept + 1..end {
            if s[cand[j]] > s[cand[best]] {
                best = j;
            }
        }
        cand.swap(kept, best);
        let top = cand[kept];
        let top_box = &boxes[top * 4..top * 4 + 4];
        let mut j = kept + 1;
        while j < end {
            let i = cand[j];
            let o = iou(&boxes[i * 4..i * 4 + 4], top_box);
            s[i] *= match p.kernel {
                NmsKernel::Hard if o < p.iou_threshold => 1.0,
                NmsKernel::Hard => 0.0,
                NmsKernel::Linear if o < p.iou_threshold => 1.0,
                NmsKernel::Linear => 1.0 - o,
                NmsKernel::Gaussian => (-o * o / p.sigma).exp(),
            };
            if s[i] < p.nms_score_threshold {
                end -= 1;
                cand.swap(j, end);
            } else {
                j += 1;
            }
        }
        kept += 1;
    }
    kept
}

/// ROI_ALIGN geometry shared by the float and quantized forms (NHWC).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoiAlign {
    pub input: Nhwc,
    pub out_h: usize,
    pub out_w: usize,
    /// Input pixels per box unit along height and width (inputs 5 and 6).
    pub stride_h: f32,
    pub stride_w: f32,
    /// Samples per output cell along height and width; 0: `ceil(cell extent)`.
    pub ratio_h: usize,
    pub ratio_w: usize,
}

/// The sampling grid of one region: start, cell size and bin size per axis, and the sample
/// counts.
struct Grid {
    h0: f32,
    w0: f32,
    cell_h: f32,
    cell_w: f32,
    bin_h: f32,
    bin_w: f32,
    n_h: usize,
    n_w: usize,
}

/// Checks region `k` (`b` in box units, of image `batch`) against the input as the reference
/// does and returns its corners in input pixels `[x1, y1, x2, y2]`.
fn region(
    op: &str,
    input: Nhwc,
    stride_h: f32,
    stride_w: f32,
    b: [f32; 4],
    k: usize,
    batch: i32,
) -> Result<[f32; 4], KernelError> {
    let bad = |why: &str| {
        Err(KernelError::InvalidData(format!(
            "{op}: region {k} ({b:?}, batch {batch}) {why}"
        )))
    };
    if batch < 0 || batch as usize >= input.n {
        return bad(&format!("names a batch outside 0..{}", input.n));
    }
    let (sh, sw) = (1.0 / stride_h, 1.0 / stride_w);
    let (w0, h0, w1, h1) = (b[0] * sw, b[1] * sh, b[2] * sw, b[3] * sh);
    let (iw, ih) = (input.w as f32, input.h as f32);
    if !b.iter().all(|v| v.is_finite() && *v >= 0.0) {
        return bad("has a negative or non-finite corner");
    }
    if w0 > iw || w1 > iw || h0 > ih || h1 > ih {
        return bad("reaches outside the image");
    }
    if b[0] > b[2] || b[1] > b[3] {
        return bad("is inverted");
    }
    Ok([w0, h0, w1, h1])
}

impl RoiAlign {
    fn grid(&self, b: [f32; 4], k: usize, batch: i32) -> Result<Grid, KernelError> {
        let [w0, h0, w1, h1] = region(
            "ROI_ALIGN",
            self.input,
            self.stride_h,
            self.stride_w,
            b,
            k,
            batch,
        )?;
        let cell_w = (w1 - w0).max(1.0) / self.out_w as f32;
        let cell_h = (h1 - h0).max(1.0) / self.out_h as f32;
        let n_w = if self.ratio_w > 0 {
            self.ratio_w
        } else {
            cell_w.ceil() as usize
        };
        let n_h = if self.ratio_h > 0 {
            self.ratio_h
        } else {
            cell_h.ceil() as usize
        };
        Ok(Grid {
            h0,
            w0,
            cell_h,
            cell_w,
            bin_h: cell_h / n_h as f32,
            bin_w: cell_w / n_w as f32,
            n_h,
            n_w,
        })
    }
}

/// ROI_POOLING geometry (NHWC).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoiPool {
    pub input: Nhwc,
    pub out_h: usize,
    pub out_w: usize,
    /// Input pixels per box unit along height and width (inputs 5 and 6).
    pub stride_h: f32,
    pub stride_w: f32,
}

/// ROI_POOLING, NHWC: the maximum of each of `out_h × out_w` cells of every region, whose
/// corners are rounded to whole pixels (half away from zero) and whose cells are the floor and
/// ceiling of equal fractions of it; an empty cell is `empty` (the input's zero point). Any
/// ordered element type: quant8 values compare as their stored bytes, which order as the
/// real values do.
pub fn roi_pooling<T: Copy + PartialOrd>(
    x: &[T],
    boxes: &[f32],
    batches: &[i32],
    g: &RoiPool,
    empty: T,
    out: &mut [T],
) -> Result<(), KernelError> {
    let (h, w, d) = (g.input.h, g.input.w, g.input.c);
    let cells = g.out_h * g.out_w * d;
    for (k, (&batch, b)) in batches.iter().zip(boxes.chunks_exact(4)).enumerate() {
        let r = region(
            "ROI_POOLING",
            g.input,
            g.stride_h,
            g.stride_w,
            [b[0], b[1], b[2], b[3]],
            k,
            batch,
        )?;
        let [ws, hs, we, he] = r.map(|v| v.round() as i32);
        let rw = (we - ws + 1).max(1) as f32;
        let rh = (he - hs + 1).max(1) as f32;
        let (step_w, step_h) = (rw / g.out_w as f32, rh / g.out_h as f32);
        let image = &x[batch as usize * h * w * d..][..h * w * d];
        for (cell, o) in out[k * cells..(k + 1) * cells]
            .chunks_exact_mut(d)
            .enumerate()
        {
            let (i, j) = (cell / g.out_w, cell % g.out_w);
            let edge = |step: f32, at: usize, start: i32, limit: usize, up: bool| {
                let v = step * at as f32 + start as f32;
                let v = if up { v.ceil() } else { v.floor() };
                (v.max(0.0) as usize).min(limit)
            };
            let (y0, y1) = (
                edge(step_h, i, hs, h, false),
                edge(step_h, i + 1, hs, h, true),
            );
            let (x0, x1) = (
                edge(step_w, j, ws, w, false),
                edge(step_w, j + 1, ws, w, true),
            );
            for (c, v) in o.iter_mut().enumerate() {
                let mut best: Option<T> = None;
                for yy in y0..y1 {
                    for xx in x0..x1 {
                        let e = image[(yy * w + xx) * d + c];
                        if best.is_none_or(|m| e > m) {
                            best = Some(e);
                        }
                    }
                }
                *v = best.unwrap_or(empty);
            }
        }
    }
    Ok(())
}

/// The four bilinear taps of a sample point: offsets (in pixels of one image) and weights,
/// clamped at the last row and column as the reference clamps.
fn taps(y: f32, x: f32, h: usize, w: usize) -> ([usize; 4], [f32; 4]) {
    let (mut x1, mut y1) = (x.floor() as usize, y.floor() as usize);
    let (mut x2, mut y2) = (x1 + 1, y1 + 1);
    let (mut dx, mut dy) = (x - x1 as f32, y - y1 as f32);
    if x1 >= w - 1 {
        x1 = w - 1;
        x2 = w - 1;
        dx = 0.0;
    }
    if y1 >= h - 1 {
        y1 = h - 1;
        y2 = h - 1;
        dy = 0.0;
    }
    let (ex, ey) = (1.0 - dx, 1.0 - dy);
    (
        [y1 * w + x1, y1 * w + x2, y2 * w + x1, y2 * w + x2],
        [ex * ey, dx * ey, ex * dy, dx * dy],
    )
}

/// ROI_ALIGN float32, NHWC: `boxes` `[rois, 4]` in box units, `batches` `[rois]`, `out`
/// `[rois, out_h, out_w, depth]`.
pub fn roi_align_f32(
    x: &[f32],
    boxes: &[f32],
    batches: &[i32],
    g: &RoiAlign,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let (h, w, d) = (g.input.h, g.input.w, g.input.c);
    let cells = g.out_h * g.out_w * d;
    for (k, (&batch, b)) in batches.iter().zip(boxes.chunks_exact(4)).enumerate() {
        let grid = g.grid([b[0], b[1], b[2], b[3]], k, batch)?;
        let image = &x[batch as usize * h * w * d..][..h * w * d];
        let points = (grid.n_h * grid.n_w) as f32;
        for (cell, o) in out[k * cells..(k + 1) * cells]
            .chunks_exact_mut(d)
            .enumerate()
        {
            let (i, j) = (cell / g.out_w, cell % g.out_w);
            let hs = grid.cell_h * i as f32 + grid.h0;
            let ws = grid.cell_w * j as f32 + grid.w0;
            o.fill(0.0);
            for yi in 0..grid.n_h {
                for xi in 0..grid.n_w {
                    let y = hs + grid.bin_h / 2.0 + grid.bin_h * yi as f32;
                    let x = ws + grid.bin_w / 2.0 + grid.bin_w * xi as f32;
                    let (at, wt) = taps(y, x, h, w);
                    for (c, v) in o.iter_mut().enumerate() {
                        let mut sum = 0.0;
                        for t in 0..4 {
                            sum += wt[t] * image[at[t] * d + c];
                        }
                        *v += sum;
                    }
                }
            }
            for v in o.iter_mut() {
                *v /= points;
            }
        }
    }
    Ok(())
}

/// ROI_ALIGN quant8, NHWC, `boxes` as TENSOR_QUANT16_ASYMM values (units of 1/8). The tap
/// weights are quantized to 1/255 and summed against the input minus its zero point in int32;
/// one multiplier (input scale / 255 / output scale / samples) brings the sum to the output.
#[allow(clippy::too_many_arguments)]
pub fn roi_align_u8(
    x: &[u8],
    x_zero: i32,
    x_scale: f32,
    boxes: &[u16],
    batches: &[i32],
    g: &RoiAlign,
    out_scale: f32,
    out_zero: i32,
    out: &mut [u8],
) -> Result<(), KernelError> {
    const W_SCALE: f32 = 1.0 / 255.0;
    let (h, w, d) = (g.input.h, g.input.w, g.input.c);
    let cells = g.out_h * g.out_w * d;
    let mut acc = vec![0i32; d];
    for (k, (&batch, b)) in batches.iter().zip(boxes.chunks_exact(4)).enumerate() {
        let corners = [b[0], b[1], b[2], b[3]].map(|v| v as f32 * 0.125);
        let grid = g.grid(corners, k, batch)?;
        let image = &x[batch as usize * h * w * d..][..h * w * d];
        let points = (grid.n_h * grid.n_w) as i32;
        let real = x_scale * W_SCALE / out_scale / points as f32;
        let (mult, shift) =
            quantize_multiplier_smaller_than_one(f64::from(real)).ok_or_else(|| {
                KernelError::InvalidData(format!(
                    "ROI_ALIGN: the output multiplier {real} of region {k} is not below 1"
                ))
            })?;
        for (cell, o) in out[k * cells..(k + 1) * cells]
            .chunks_exact_mut(d)
            .enumerate()
        {
            let (i, j) = (cell / g.out_w, cell % g.out_w);
            let hs = grid.cell_h * i as f32 + grid.h0;
            let ws = grid.cell_w * j as f32 + grid.w0;
            acc.fill(0);
            for yi in 0..grid.n_h {
                for xi in 0..grid.n_w {
                    let y = hs + grid.bin_h / 2.0 + grid.bin_h * yi as f32;
                    let x = ws + grid.bin_w / 2.0 + grid.bin_w * xi as f32;
                    let (at, wt) = taps(y, x, h, w);
                    let wq = wt.map(|v| (v / W_SCALE).round() as i32);
                    for (c, a) in acc.iter_mut().enumerate() {
                        let mut sum = 0i32;
                        for t in 0..4 {
                            sum = sum.wrapping_add(
                                wq[t].wrapping_mul(i32::from(image[at[t] * d + c]) - x_zero),
                            );
                        }
                        *a = a.wrapping_add(sum);
                    }
                }
            }
            for (v, &a) in o.iter_mut().zip(&acc) {
                let r =
                    multiply_by_quantized_multiplier_smaller_than_one(a, mult, shift) + out_zero;
                *v = r.clamp(0, 255) as u8;
            }
        }
    }
    Ok(())
}
