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

/// The bilinear taps one ROI_ALIGN execution may evaluate: 2^28, a fraction of a second of work
/// (a thousand regions of 14 × 14 cells of 256 channels at 2 × 2 samples, the largest head in
/// common use, is three quarters of it). The
/// sampling ratio is a model scalar and the adaptive one grows with the region, so a ratio of
/// 2^30 or a region millions of pixels tall (a tiny stride) would otherwise keep the service
/// busy for hours on one request; past the budget the execution is INVALID_ARGUMENT, checked
/// over every region before the first is sampled.
const MAX_ROI_ALIGN_TAPS: u64 = 1 << 28;

/// Taps spent so far in one ROI_ALIGN execution (see [`MAX_ROI_ALIGN_TAPS`]).
#[derive(Default)]
struct SampleBudget(u64);

impl SampleBudget {
    /// Charges one region's samples over `cells` output values (cells × channels).
    fn spend(&mut self, grid: &Grid, cells: usize) -> Result<(), KernelError> {
        let taps = (grid.n_h as u64)
            .saturating_mul(grid.n_w as u64)
            .saturating_mul(cells as u64);
        self.0 = self.0.saturating_add(taps);
        if self.0 > MAX_ROI_ALIGN_TAPS {
            return Err(KernelError::InvalidData(format!(
                "ROI_ALIGN: {} × {} samples per cell over {cells} cell values would pass {MAX_ROI_ALIGN_TAPS} samples in one execution (a sampling ratio or a region far beyond the image)",
                grid.n_h, grid.n_w
            )));
        }
        Ok(())
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
    let mut budget = SampleBudget::default();
    for (k, (&batch, b)) in batches.iter().zip(boxes.chunks_exact(4)).enumerate() {
        budget.spend(&g.grid([b[0], b[1], b[2], b[3]], k, batch)?, cells)?;
    }
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
    let corners = |b: &[u16]| [b[0], b[1], b[2], b[3]].map(|v| v as f32 * 0.125);
    let mut budget = SampleBudget::default();
    for (k, (&batch, b)) in batches.iter().zip(boxes.chunks_exact(4)).enumerate() {
        budget.spend(&g.grid(corners(b), k, batch)?, cells)?;
    }
    for (k, (&batch, b)) in batches.iter().zip(boxes.chunks_exact(4)).enumerate() {
        let grid = g.grid(corners(b), k, batch)?;
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

/// AXIS_ALIGNED_BBOX_TRANSFORM on float values: `rois` `[rois, 4]` corner boxes, `deltas`
/// `[rois, classes·4]` as `(dx, dy, dw, dh)`, `batches` `[rois]`, `image_info` `[batches, 2]`
/// as `(height, width)`; writes `[rois, classes·4]` corner boxes. Each box moves its centre by
/// the deltas times its size, scales its size by `exp` of the size deltas, and is clipped to
/// `[0, width] × [0, height]` of its image. A batch index outside the images or an inverted
/// box (x2 < x1 or y2 < y1) is invalid data.
pub fn axis_aligned_bbox_transform(
    rois: &[f32],
    deltas: &[f32],
    batches: &[i32],
    image_info: &[f32],
    out: &mut [f32],
) -> Result<(), KernelError> {
    let n = batches.len();
    let images = image_info.len() / 2;
    if rois.len() != n * 4 || n == 0 && !deltas.is_empty() {
        return Err(KernelError::InvalidData(format!(
            "AXIS_ALIGNED_BBOX_TRANSFORM: {} box values for {n} batch indices",
            rois.len()
        )));
    }
    let per = deltas.len().checked_div(n).unwrap_or(0);
    if !per.is_multiple_of(4) || per * n != deltas.len() || out.len() != deltas.len() {
        return Err(KernelError::InvalidData(format!(
            "AXIS_ALIGNED_BBOX_TRANSFORM: {} deltas and {} outputs for {n} boxes",
            deltas.len(),
            out.len()
        )));
    }
    for (k, ((roi, &batch), (d, o))) in rois
        .chunks_exact(4)
        .zip(batches)
        .zip(
            deltas
                .chunks_exact(per.max(1))
                .zip(out.chunks_exact_mut(per.max(1))),
        )
        .enumerate()
    {
        let b = usize::try_from(batch)
            .ok()
            .filter(|&b| b < images)
            .ok_or_else(|| {
                KernelError::InvalidData(format!(
                    "AXIS_ALIGNED_BBOX_TRANSFORM: box {k} has batch index {batch}, outside 0..{images}"
                ))
            })?;
        if !(roi[0] <= roi[2] && roi[1] <= roi[3]) {
            return Err(KernelError::InvalidData(format!(
                "AXIS_ALIGNED_BBOX_TRANSFORM: box {k} {roi:?} is inverted or not a number"
            )));
        }
        let (height, width) = (image_info[2 * b], image_info[2 * b + 1]);
        let (w, h) = (roi[2] - roi[0], roi[3] - roi[1]);
        let (cx, cy) = ((roi[0] + roi[2]) / 2.0, (roi[1] + roi[3]) / 2.0);
        for (dc, oc) in d.chunks_exact(4).zip(o.chunks_exact_mut(4)) {
            let (nw, nh) = (dc[2].exp() * w, dc[3].exp() * h);
            let (nx, ny) = (cx + dc[0] * w, cy + dc[1] * h);
            // max then min rather than `clamp`, which panics on a negative image extent.
            let clip = |v: f32, hi: f32| v.max(0.0).min(hi);
            oc[0] = clip(nx - nw / 2.0, width);
            oc[1] = clip(ny - nh / 2.0, height);
            oc[2] = clip(nx + nw / 2.0, width);
            oc[3] = clip(ny + nh / 2.0, height);
        }
    }
    Ok(())
}

/// HEATMAP_MAX_KEYPOINT on float values: `heatmaps` `[boxes, size, size, keypoints]` (NHWC) or
/// `[boxes, keypoints, size, size]` (`nchw`), `boxes` `[boxes, 4]` corners; writes the score
/// `[boxes, keypoints]` and the position `[boxes, keypoints, 2]` (x, y) of each keypoint.
///
/// The maximum of each heatmap (the first of equal values) is refined by the extremum of the
/// quadratic fitted to its 3×3 neighbourhood (neighbours past an edge mirror inward); a
/// near-singular fit (|det| below `tol + tol · A00·A11`) keeps the grid point, and a shift
/// longer than 1.5 cells is scaled back to 1.5. An inverted box is invalid data.
#[allow(clippy::too_many_arguments)]
pub fn heatmap_max_keypoint(
    heatmaps: &[f32],
    boxes: &[f32],
    size: usize,
    keypoints: usize,
    nchw: bool,
    tol: f32,
    scores: &mut [f32],
    points: &mut [f32],
) -> Result<(), KernelError> {
    let n = boxes.len() / 4;
    let plane = size * size * keypoints;
    if size < 2
        || boxes.len() != n * 4
        || heatmaps.len() != n * plane
        || scores.len() != n * keypoints
        || points.len() != n * keypoints * 2
    {
        return Err(KernelError::InvalidData(format!(
            "HEATMAP_MAX_KEYPOINT: {} heatmap values of size {size} with {keypoints} keypoints for {n} boxes",
            heatmaps.len()
        )));
    }
    for (b, roi) in boxes.chunks_exact(4).enumerate() {
        if !(roi[0] <= roi[2] && roi[1] <= roi[3]) {
            return Err(KernelError::InvalidData(format!(
                "HEATMAP_MAX_KEYPOINT: box {b} {roi:?} is inverted or not a number"
            )));
        }
        let map = &heatmaps[b * plane..][..plane];
        for k in 0..keypoints {
            let at = |y: usize, x: usize| {
                if nchw {
                    map[(k * size + y) * size + x]
                } else {
                    map[(y * size + x) * keypoints + k]
                }
            };
            let (mut best, mut max) = (0, f32::MIN);
            for i in 0..size * size {
                let v = at(i / size, i % size);
                if max < v {
                    max = v;
                    best = i;
                }
            }
            let (my, mx) = (best / size, best % size);
            // Off-grid neighbours mirror to the cell one step inside the edge.
            let clamp = |v: usize, d: usize| -> usize {
                match (v + d).checked_sub(1) {
                    None => 1,
                    Some(i) if i >= size => size - 2,
                    Some(i) => i,
                }
            };
            let mut g = [[0.0f32; 3]; 3];
            for (dy, row) in g.iter_mut().enumerate() {
                for (dx, v) in row.iter_mut().enumerate() {
                    *v = at(clamp(my, dy), clamp(mx, dx));
                }
            }
            let (delta, score) = refine(&g, tol).unwrap_or(([0.0, 0.0], max));
            let (w, h) = (roi[2] - roi[0], roi[3] - roi[1]);
            let rel_x = (mx as f32 + delta[0] + 0.5) / size as f32;
            let rel_y = (my as f32 + delta[1] + 0.5) / size as f32;
            scores[b * keypoints + k] = score;
            points[(b * keypoints + k) * 2] = rel_x * w + roi[0];
            points[(b * keypoints + k) * 2 + 1] = rel_y * h + roi[1];
        }
    }
    Ok(())
}

/// The (x, y) shift to the extremum of the quadratic through the 3×3 grid `g` (rows y, columns
/// x) and the value there; `None` when the fit is near singular.
fn refine(g: &[[f32; 3]; 3], tol: f32) -> Option<([f32; 2], f32)> {
    let b = [-(g[1][2] - g[1][0]) / 2.0, -(g[2][1] - g[0][1]) / 2.0];
    let a00 = g[1][0] - 2.0 * g[1][1] + g[1][2];
    let a01 = (g[2][2] - g[2][0] - g[0][2] + g[0][0]) / 4.0;
    let a11 = g[0][1] - 2.0 * g[1][1] + g[2][1];
    let cross = a00 * a11;
    let det = cross - a01 * a01;
    if det.abs() < tol + tol * cross {
        return None;
    }
    let mut d = [
        (a11 * b[0] - a01 * b[1]) / det,
        (a00 * b[1] - a01 * b[0]) / det,
    ];
    let longest = d[0].abs().max(d[1].abs());
    if longest > 1.5 {
        let s = 1.5 / longest;
        d = [d[0] * s, d[1] * s];
    }
    let score = g[1][1] - b[0] * d[0] - b[1] * d[1]
        + ((a00 * d[0] + a01 * d[1]) * d[0] + (a01 * d[0] + a11 * d[1]) * d[1]) / 2.0;
    Some((d, score))
}

/// The scalar parameters of GENERATE_PROPOSALS (inputs 4–9).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProposalParams {
    /// Image pixels between two feature-map rows and columns (inputs 4 and 5).
    pub stride_h: f32,
    pub stride_w: f32,
    /// Candidates kept by score before the suppression; 0 or negative: all.
    pub pre_nms: i32,
    /// Most boxes kept per image by the suppression; negative: no limit.
    pub post_nms: i32,
    pub iou_threshold: f32,
    /// Boxes not wider and taller than this are dropped.
    pub min_size: f32,
}

/// The proposals of GENERATE_PROPOSALS, image by image in kept order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proposals {
    pub score: Vec<f32>,
    /// `[x1, y1, x2, y2]` per proposal.
    pub roi: Vec<f32>,
    pub batch: Vec<i32>,
}

/// GENERATE_PROPOSALS on float values. `scores` `[batches, height, width, anchors]` and
/// `deltas` `[batches, height, width, anchors·4]` (NHWC; `nchw`: `[batches, anchors, height,
/// width]` and `[batches, anchors·4, height, width]`), `anchors` `[anchors, 4]`, `image_info`
/// `[batches, 2]` (height, width).
///
/// Per image: every anchor shifted to every feature-map cell is moved by its deltas as
/// AXIS_ALIGNED_BBOX_TRANSFORM does, the `pre_nms` best scores are kept (ties in index order),
/// boxes not larger than `min_size` or centred outside the image are dropped, and greedy hard
/// suppression keeps at most `post_nms`.
#[allow(clippy::too_many_arguments)]
pub fn generate_proposals(
    scores: &[f32],
    deltas: &[f32],
    anchors: &[f32],
    image_info: &[f32],
    (batches, height, width): (usize, usize, usize),
    nchw: bool,
    p: &ProposalParams,
) -> Result<Proposals, KernelError> {
    let a = anchors.len() / 4;
    let cells = height * width * a;
    if anchors.len() != a * 4
        || scores.len() != batches * cells
        || deltas.len() != scores.len() * 4
        || image_info.len() != batches * 2
    {
        return Err(KernelError::InvalidData(format!(
            "GENERATE_PROPOSALS: {} scores, {} deltas, {} anchor values and {} image sizes disagree",
            scores.len(),
            deltas.len(),
            anchors.len(),
            image_info.len()
        )));
    }
    // Shifted anchors, in NHWC cell order (row, column, anchor).
    let mut shifted = Vec::with_capacity(cells * 4);
    for y in 0..height {
        let dy = y as f32 * p.stride_h;
        for x in 0..width {
            let dx = x as f32 * p.stride_w;
            for b in anchors.chunks_exact(4) {
                shifted.extend_from_slice(&[b[0] + dx, b[1] + dy, b[2] + dx, b[3] + dy]);
            }
        }
    }
    let zeros = vec![0i32; cells];
    let mut moved = vec![0.0f32; cells * 4];
    let mut out = Proposals::default();
    for b in 0..batches {
        let (s, d) = if nchw {
            (
                to_nhwc(&scores[b * cells..][..cells], a, height * width),
                to_nhwc(&deltas[b * cells * 4..][..cells * 4], a * 4, height * width),
            )
        } else {
            (
                scores[b * cells..][..cells].to_vec(),
                deltas[b * cells * 4..][..cells * 4].to_vec(),
            )
        };
        let info = &image_info[b * 2..b * 2 + 2];
        axis_aligned_bbox_transform(&shifted, &d, &zeros, info, &mut moved).map_err(|e| {
            let KernelError::InvalidData(why) = e;
            KernelError::InvalidData(format!("GENERATE_PROPOSALS: {why}"))
        })?;
        let mut cand: Vec<usize> = (0..cells).collect();
        if p.pre_nms > 0 && (p.pre_nms as usize) < cells {
            cand.sort_by(|&i, &j| descending(s[i], s[j]));
            cand.truncate(p.pre_nms as usize);
        }
        cand.retain(|&i| {
            let r = &moved[i * 4..i * 4 + 4];
            let (w, h) = (r[2] - r[0], r[3] - r[1]);
            w > p.min_size && h > p.min_size && r[0] + w / 2.0 < info[1] && r[1] + h / 2.0 < info[0]
        });
        let kept = hard_nms(&s, &moved, &mut cand, p.iou_threshold, p.post_nms);
        for &i in &cand[..kept] {
            out.score.push(s[i]);
            out.roi.extend_from_slice(&moved[i * 4..i * 4 + 4]);
            out.batch.push(b as i32);
        }
    }
    Ok(out)
}

/// `[channels, cells]` to `[cells, channels]`.
fn to_nhwc(x: &[f32], channels: usize, cells: usize) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for c in 0..channels {
        for i in 0..cells {
            out[i * channels + c] = x[c * cells + i];
        }
    }
    out
}

/// Greedy hard suppression in place: the highest remaining score (the first of equal ones) is
/// kept, every remaining box overlapping it at or above `iou_threshold` is swapped out to the
/// end; at most `limit` kept (negative: no limit). Returns how many lead `cand`.
fn hard_nms(s: &[f32], boxes: &[f32], cand: &mut [usize], iou_threshold: f32, limit: i32) -> usize {
    let limit = usize::try_from(limit).unwrap_or(cand.len());
    let (mut kept, mut end) = (0, cand.len());
    while kept < end && kept < limit {
        let mut best = kept;
        for j in kept + 1..end {
            if s[cand[j]] > s[cand[best]] {
                best = j;
            }
        }
        cand.swap(kept, best);
        let top = &boxes[cand[kept] * 4..cand[kept] * 4 + 4];
        let mut j = kept + 1;
        while j < end {
            let i = cand[j];
            if iou(&boxes[i * 4..i * 4 + 4], top) >= iou_threshold {
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

/// The scalar parameters of DETECTION_POSTPROCESSING (inputs 3–13).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PostprocessParams {
    /// Divisors of the y, x, height and width deltas (inputs 3–6).
    pub scale: [f32; 4],
    /// Per-class suppression (true) or one suppression over each anchor's best class.
    pub regular_nms: bool,
    pub max_detections: i32,
    pub max_classes_per_detection: i32,
    pub max_detections_per_class: i32,
    pub iou_threshold: f32,
    pub score_threshold: f32,
    /// Whether class 0 (the background) counts in the output class numbers.
    pub background_in_label: bool,
}

impl PostprocessParams {
    /// Detections written per batch: the outputs' second extent.
    pub fn per_batch(&self) -> usize {
        let n = usize::try_from(self.max_detections).unwrap_or(0);
        if self.regular_nms {
            n
        } else {
            n * usize::try_from(self.max_classes_per_detection).unwrap_or(0)
        }
    }
}

/// DETECTION_POSTPROCESSING on float values: `scores` `[batches, anchors, classes]` (class 0
/// the background), `deltas` `[batches, anchors, length ≥ 4]` as `(dy, dx, dh, dw, …)`,
/// `anchors` `[anchors, 4]` as `(y centre, x centre, height, width)`. Writes per batch
/// [`PostprocessParams::per_batch`] scores, `[y1, x1, y2, x2]` boxes and classes (zero past
/// the detections found) and the number found.
///
/// Regular: per class (background excluded) the candidates above the score threshold go
/// through hard suppression with the per-class limit, then the best `max_detections` overall
/// (by score). Fast: each anchor's best non-background score is the candidate's, one hard
/// suppression keeps `max_detections` anchors, each reporting its best
/// `max_classes_per_detection` classes.
#[allow(clippy::too_many_arguments)]
pub fn detection_postprocessing(
    scores: &[f32],
    deltas: &[f32],
    anchors: &[f32],
    (batches, classes, length): (usize, usize, usize),
    p: &PostprocessParams,
    out_scores: &mut [f32],
    out_boxes: &mut [f32],
    out_classes: &mut [i32],
    found: &mut [i32],
) -> Result<(), KernelError> {
    let a = anchors.len() / 4;
    if p.max_detections <= 0
        || (!p.regular_nms && p.max_classes_per_detection <= 0)
        || (p.regular_nms && p.max_detections_per_class <= 0)
    {
        return Err(KernelError::InvalidData(format!(
            "DETECTION_POSTPROCESSING: the detection limits must be positive, are {}, {} and {}",
            p.max_detections, p.max_classes_per_detection, p.max_detections_per_class
        )));
    }
    let per = p.per_batch();
    if classes < 2
        || length < 4
        || anchors.len() != a * 4
        || scores.len() != batches * a * classes
        || deltas.len() != batches * a * length
        || out_scores.len() != batches * per
        || out_boxes.len() != batches * per * 4
        || out_classes.len() != batches * per
        || found.len() != batches
    {
        return Err(KernelError::InvalidData(format!(
            "DETECTION_POSTPROCESSING: {} scores, {} deltas and {} anchor values disagree with \
             {batches} batches of {classes} classes",
            scores.len(),
            deltas.len(),
            anchors.len()
        )));
    }
    out_scores.fill(0.0);
    out_boxes.fill(0.0);
    out_classes.fill(0);
    let label = |c: usize| c as i32 - i32::from(!p.background_in_label);
    let mut boxes = vec![0.0f32; a * 4];
    for b in 0..batches {
        let s = &scores[b * a * classes..][..a * classes];
        for (k, (an, d)) in anchors
            .chunks_exact(4)
            .zip(deltas[b * a * length..].chunks_exact(length))
            .enumerate()
        {
            let yc = an[0] + an[2] * d[0] / p.scale[0];
            let xc = an[1] + an[3] * d[1] / p.scale[1];
            let h = an[2] * (d[2] / p.scale[2]).exp() * 0.5;
            let w = an[3] * (d[3] / p.scale[3]).exp() * 0.5;
            boxes[k * 4..k * 4 + 4].copy_from_slice(&[yc - h, xc - w, yc + h, xc + w]);
        }
        let os = &mut out_scores[b * per..][..per];
        let ob = &mut out_boxes[b * per * 4..][..per * 4];
        let oc = &mut out_classes[b * per..][..per];
        if p.regular_nms {
            // Candidates are flat indices anchor · classes + class; the box is the anchor's.
            let class_boxes: Vec<f32> = (0..a * classes)
                .flat_map(|i| boxes[i / classes * 4..i / classes * 4 + 4].to_vec())
                .collect();
            let mut select: Vec<usize> = Vec::new();
            for c in 1..classes {
                let first = select.len();
                select.extend(
                    (0..a)
                        .map(|k| k * classes + c)
                        .filter(|&i| s[i] > p.score_threshold),
                );
                let kept = hard_nms(
                    s,
                    &class_boxes,
                    &mut select[first..],
                    p.iou_threshold,
                    p.max_detections_per_class,
                );
                select.truncate(first + kept);
            }
            select.sort_by(|&i, &j| descending(s[i], s[j]));
            select.truncate(per);
            for (n, &i) in select.iter().enumerate() {
                os[n] = s[i];
                ob[n * 4..n * 4 + 4].copy_from_slice(&boxes[i / classes * 4..i / classes * 4 + 4]);
                oc[n] = label(i % classes);
            }
            found[b] = select.len() as i32;
        } else {
            let out_classes_per =
                (classes - 1).min(usize::try_from(p.max_classes_per_detection).unwrap_or(0));
            let best: Vec<f32> = s
                .chunks_exact(classes)
                .map(|row| {
                    row[1..]
                        .iter()
                        .fold(f32::NEG_INFINITY, |m, &v| if m < v { v } else { m })
                })
                .collect();
            let mut select: Vec<usize> = (0..a).filter(|&k| best[k] > p.score_threshold).collect();
            let kept = hard_nms(
                &best,
                &boxes,
                &mut select,
                p.iou_threshold,
                p.max_detections,
            );
            let mut n = 0;
            for &k in &select[..kept] {
                let row = &s[k * classes..(k + 1) * classes];
                let mut order: Vec<usize> = (1..classes).collect();
                order.sort_by(|&i, &j| descending(row[i], row[j]));
                for &c in &order[..out_classes_per] {
                    os[n] = row[c];
                    ob[n * 4..n * 4 + 4].copy_from_slice(&boxes[k * 4..k * 4 + 4]);
                    oc[n] = label(c);
                    n += 1;
                }
            }
            found[b] = n as i32;
        }
    }
    Ok(())
}
