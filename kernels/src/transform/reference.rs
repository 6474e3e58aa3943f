//! Data movement and resampling, types.hal 1.0 `OperationType`: CONCATENATION (2),
//! DEPTH_TO_SPACE (5) and SPACE_TO_DEPTH (26) for any element type (TENSOR_FLOAT32 and
//! TENSOR_QUANT8_ASYMM share one generic copy, since these ops keep the quantization
//! parameters), and RESIZE_BILINEAR (23) for TENSOR_FLOAT32 and TENSOR_QUANT8_ASYMM with the
//! NNAPI 1.3 `align_corners` / `half_pixel_centers` modes.
//!
//! The copies are organised around the longest runs that are contiguous in both the source
//! and the destination, so each kernel is a sequence of `copy_from_slice` calls.

use crate::parallel::MIN_ELEMENTS;
use crate::Nhwc;

/// CONCATENATION along `axis`. Every input has the output's rank and extents except on
/// `axis`; the output extent there is the sum of the inputs'.
///
/// With `outer` the product of the extents before `axis` and `inner` the product after it,
/// input `i` is `outer` blocks of `dim_i[axis] · inner` contiguous elements, and the output
/// interleaves those blocks input by input.
pub fn concatenation<T: Copy>(inputs: &[(&[T], &[usize])], axis: usize, output: &mut [T]) {
    let Some(&(_, first_shape)) = inputs.first() else {
        return;
    };
    debug_assert!(axis < first_shape.len());
    for (data, shape) in inputs {
        debug_assert_eq!(data.len(), shape.iter().product::<usize>());
        debug_assert_eq!(shape.len(), first_shape.len());
    }
    let outer: usize = first_shape[..axis].iter().product();
    let inner: usize = first_shape[axis + 1..].iter().product();
    let out_block: usize = inputs.iter().map(|(_, shape)| shape[axis] * inner).sum();
    debug_assert_eq!(output.len(), outer * out_block);
    if out_block == 0 {
        return;
    }
    for (o, dst) in output.chunks_exact_mut(out_block).take(outer).enumerate() {
        let mut at = 0;
        for (data, shape) in inputs {
            let block = shape[axis] * inner;
            dst[at..at + block].copy_from_slice(&data[o * block..(o + 1) * block]);
            at += block;
        }
    }
}

/// DEPTH_TO_SPACE: `[n, h, w, c]` → `[n, h·b, w·b, c/b²]`, where output pixel
/// `(y·b + by, x·b + bx)` takes the channel slice `(by·b + bx)·c' .. (by·b + bx + 1)·c'` of
/// input pixel `(y, x)` (`c' = c/b²`).
///
/// For a fixed output row, the `b` output pixels fed by one input pixel are adjacent and
/// read a contiguous `b·c'` channel range, so each (output row, input column) is one copy.
pub fn depth_to_space<T: Copy>(input: &[T], shape: Nhwc, block: usize, output: &mut [T]) {
    debug_assert!(block >= 1 && shape.c.is_multiple_of(block * block));
    debug_assert_eq!(input.len(), shape.len());
    debug_assert_eq!(output.len(), shape.len());
    if block == 0 || shape.is_empty() {
        return;
    }
    let out_c = shape.c / (block * block);
    let run = block * out_c; // output pixels bx = 0..b of one input pixel, all channels
    let out_row = shape.w * run;
    if run == 0 {
        return;
    }
    let rows = shape.n * shape.h * block;
    for (row, dst) in output.chunks_exact_mut(out_row).take(rows).enumerate() {
        // Output row `row` is (n, y·b + by).
        let n = row / (shape.h * block);
        let out_y = row % (shape.h * block);
        let (y, by) = (out_y / block, out_y % block);
        for (x, dst_run) in dst.chunks_exact_mut(run).enumerate() {
            let src = shape.offset(n, y, x, by * run);
            dst_run.copy_from_slice(&input[src..src + run]);
        }
    }
}

/// SPACE_TO_DEPTH: `[n, h, w, c]` → `[n, h/b, w/b, c·b²]`, the inverse of
/// [`depth_to_space`]: input pixel `(y·b + by, x·b + bx)` lands in channels
/// `(by·b + bx)·c .. (by·b + bx + 1)·c` of output pixel `(y, x)`.
pub fn space_to_depth<T: Copy>(input: &[T], shape: Nhwc, block: usize, output: &mut [T]) {
    debug_assert!(block >= 1 && shape.h.is_multiple_of(block) && shape.w.is_multiple_of(block));
    debug_assert_eq!(input.len(), shape.len());
    debug_assert_eq!(output.len(), shape.len());
    if block == 0 || shape.is_empty() {
        return;
    }
    let (out_h, out_w) = (shape.h / block, shape.w / block);
    let run = block * shape.c; // input pixels bx = 0..b of one output pixel, all channels
    let out_pixel = block * run;
    if out_h == 0 || out_w == 0 {
        return;
    }
    let pixels = shape.n * out_h * out_w;
    for (pixel, dst) in output.chunks_exact_mut(out_pixel).take(pixels).enumerate() {
        let n = pixel / (out_h * out_w);
        let (y, x) = ((pixel / out_w) % out_h, pixel % out_w);
        for (by, dst_run) in dst.chunks_exact_mut(run).enumerate() {
            let src = shape.offset(n, y * block + by, x * block, 0);
            dst_run.copy_from_slice(&input[src..src + run]);
        }
    }
}

/// How RESIZE_BILINEAR maps output pixels to input coordinates (types.hal V1_3
/// `RESIZE_BILINEAR`, inputs 4 and 5; both false is the NNAPI 1.0 operation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResizeMode {
    /// Corner pixels of input and output coincide: scale `(in − 1)/(out − 1)` when `out > 1`.
    pub align_corners: bool,
    /// Pixel centres at half-integers: output `y` samples the input at `(y + ½)·scale − ½`.
    pub half_pixel_centers: bool,
}

/// An element RESIZE_BILINEAR interpolates: float32 as is; uint8 through float32, rounded
/// half up on the way back (the reference adds ½ and truncates).
pub trait Bilinear: Copy + Send + Sync {
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

impl Bilinear for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl Bilinear for u8 {
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
    fn from_f32(v: f32) -> Self {
        // `as` saturates: a sum of non-negative weights of bytes stays within 0..=255.5.
        (v + 0.5) as u8
    }
}

/// One axis: the sampled coordinate and its two neighbours, the far one clamped to the last
/// row/column and the near one to the first (half-pixel centres reach below 0).
fn sample(out: usize, scale: f32, half_pixel: bool, size: usize) -> (f32, usize, usize) {
    let v = if half_pixel {
        (out as f32 + 0.5) * scale - 0.5
    } else {
        out as f32 * scale
    };
    let last = size as i64 - 1;
    let lo = (v.floor() as i64).clamp(0, last);
    let hi = (v.ceil() as i64).clamp(0, last);
    (v, lo as usize, hi as usize)
}

fn axis_scale(input: usize, output: usize, align_corners: bool) -> f32 {
    if align_corners && output > 1 {
        (input - 1) as f32 / (output - 1) as f32
    } else {
        input as f32 / output as f32
    }
}

/// RESIZE_BILINEAR on `[n, h, w, c]` to `[n, out_h, out_w, c]`: output `(y, x)` samples the
/// input at the coordinates [`ResizeMode`] gives, interpolating between the neighbouring rows
/// and columns. Scales and weights are float32 and the four-term sum is evaluated in the
/// reference's order.
pub fn resize_bilinear<T: Bilinear>(
    input: &[T],
    shape: Nhwc,
    out_h: usize,
    out_w: usize,
    mode: ResizeMode,
    output: &mut [T],
) {
    debug_assert_eq!(input.len(), shape.len());
    debug_assert_eq!(output.len(), shape.n * out_h * out_w * shape.c);
    let row_len = out_w * shape.c;
    if shape.is_empty() || row_len == 0 || out_h == 0 {
        return;
    }
    let rows = (shape.n * out_h).min(output.len() / row_len);
    let output = &mut output[..rows * row_len];
    let height_scale = axis_scale(shape.h, out_h, mode.align_corners);
    let width_scale = axis_scale(shape.w, out_w, mode.align_corners);
    let c = shape.c;
    let fill_row = |row: usize, dst: &mut [T]| {
        let (n, y) = (row / out_h, row % out_h);
        let (input_y, y0, y1) = sample(y, height_scale, mode.half_pixel_centers, shape.h);
        let dy = input_y - y0 as f32;
        for (x, px) in dst.chunks_exact_mut(c).enumerate() {
            let (input_x, x0, x1) = sample(x, width_scale, mode.half_pixel_centers, shape.w);
            let dx = input_x - x0 as f32;
            let p00 = &input[shape.offset(n, y0, x0, 0)..][..c];
            let p10 = &input[shape.offset(n, y1, x0, 0)..][..c];
            let p01 = &input[shape.offset(n, y0, x1, 0)..][..c];
            let p11 = &input[shape.offset(n, y1, x1, 0)..][..c];
            for (ch, out) in px.iter_mut().enumerate() {
                *out = T::from_f32(
                    p00[ch].to_f32() * (1.0 - dy) * (1.0 - dx)
                        + p10[ch].to_f32() * dy * (1.0 - dx)
                        + p01[ch].to_f32() * (1.0 - dy) * dx
                        + p11[ch].to_f32() * dy * dx,
                );
            }
        }
    };
    if output.len() >= MIN_ELEMENTS {
        crate::parallel::for_chunks(output, row_len, fill_row);
    } else {
        for (row, dst) in output.chunks_exact_mut(row_len).enumerate() {
            fill_row(row, dst);
        }
    }
}

/// The input row or column RESIZE_NEAREST_NEIGHBOR (NNAPI 1.2) takes for output `out` of an
/// axis of `size` inputs: the float32 coordinate `out · scale` (`(out + ½) · scale` with
/// half-pixel centres), rounded half away from zero with aligned corners and floored
/// otherwise, then clamped to the last input (and, with half-pixel centres, to the first).
pub fn nearest_index(out: usize, scale: f32, mode: ResizeMode, size: usize) -> usize {
    let v = if mode.half_pixel_centers {
        (out as f32 + 0.5) * scale
    } else {
        out as f32 * scale
    };
    let v = if mode.align_corners {
        v.round()
    } else {
        v.floor()
    };
    // `as` saturates; the coordinate is never negative, but the clamp to 0 is the reference's.
    (v as i64).clamp(0, size as i64 - 1) as usize
}

/// The scale of one axis of a resize, `in / out` or, with aligned corners and more than one
/// output, `(in − 1) / (out − 1)`, in float32.
pub fn resize_scale(input: usize, output: usize, align_corners: bool) -> f32 {
    axis_scale(input, output, align_corners)
}

/// RESIZE_NEAREST_NEIGHBOR (NNAPI 1.2) on `[n, h, w, c]` to `[n, out_h, out_w, c]`, one
/// output element at a time: the oracle of [`super::nd::resize_nearest`].
pub fn resize_nearest<T: Copy>(
    input: &[T],
    shape: Nhwc,
    out_h: usize,
    out_w: usize,
    mode: ResizeMode,
    output: &mut [T],
) {
    let hs = axis_scale(shape.h, out_h, mode.align_corners);
    let ws = axis_scale(shape.w, out_w, mode.align_corners);
    let mut at = 0;
    for n in 0..shape.n {
        for y in 0..out_h {
            let iy = nearest_index(y, hs, mode, shape.h);
            for x in 0..out_w {
                let ix = nearest_index(x, ws, mode, shape.w);
                for ch in 0..shape.c {
                    output[at] = input[shape.offset(n, iy, ix, ch)];
                    at += 1;
                }
            }
        }
    }
}

/// RESIZE_BILINEAR as NNAPI 1.0 defines it (float32, neither coordinate mode).
pub fn resize_bilinear_f32(
    input: &[f32],
    shape: Nhwc,
    out_h: usize,
    out_w: usize,
    output: &mut [f32],
) {
    resize_bilinear(input, shape, out_h, out_w, ResizeMode::default(), output);
}

// ---- NNAPI 1.1 data movement: the oracles, one output element at a time ----------------------

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// The multi-index of flat position `i` in `shape`.
fn unflatten(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        idx[k] = i % shape[k];
        i /= shape[k];
    }
    idx
}

/// PAD (NNAPI 1.1): `before[k]` and `after[k]` elements of `value` around axis `k`.
pub fn pad<T: Copy>(
    input: &[T],
    shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: T,
    out: &mut [T],
) {
    let out_shape: Vec<usize> = (0..shape.len())
        .map(|k| before[k] + shape[k] + after[k])
        .collect();
    let s = strides(shape);
    for (i, o) in out.iter_mut().enumerate() {
        let idx = unflatten(i, &out_shape);
        let inside = (0..shape.len()).all(|k| idx[k] >= before[k] && idx[k] < before[k] + shape[k]);
        *o = if inside {
            input[(0..shape.len())
                .map(|k| (idx[k] - before[k]) * s[k])
                .sum::<usize>()]
        } else {
            value
        };
    }
}

/// TRANSPOSE (NNAPI 1.1): output axis `k` is input axis `perm[k]`.
pub fn transpose<T: Copy>(input: &[T], shape: &[usize], perm: &[usize], out: &mut [T]) {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let s = strides(shape);
    for (i, o) in out.iter_mut().enumerate() {
        let idx = unflatten(i, &out_shape);
        *o = input[(0..perm.len()).map(|k| idx[k] * s[perm[k]]).sum::<usize>()];
    }
}

/// STRIDED_SLICE (NNAPI 1.1) once its bounds are resolved: along axis `k`, `count[k]`
/// elements from index `begin[k]`, `step[k]` apart (negative: backwards).
pub fn strided_slice<T: Copy>(
    input: &[T],
    shape: &[usize],
    begin: &[usize],
    step: &[isize],
    count: &[usize],
    out: &mut [T],
) {
    let s = strides(shape);
    for (i, o) in out.iter_mut().enumerate() {
        let idx = unflatten(i, count);
        let at: isize = (0..shape.len())
            .map(|k| (begin[k] as isize + idx[k] as isize * step[k]) * s[k] as isize)
            .sum();
        *o = input[at as usize];
    }
}

/// SPACE_TO_BATCH_ND (NNAPI 1.1), NHWC: the input padded by `pad` (top, bottom, left, right)
/// with `value`, cut into `block` (height, width) tiles whose pixel `(i, j)` goes to batch
/// `(i · block_w + j) · n + b`.
pub fn space_to_batch<T: Copy>(
    input: &[T],
    s: Nhwc,
    block: [usize; 2],
    pad: [usize; 4],
    value: T,
    out: &mut [T],
) {
    let oh = (s.h + pad[0] + pad[1]) / block[0];
    let ow = (s.w + pad[2] + pad[3]) / block[1];
    let out_shape = [s.n * block[0] * block[1], oh, ow, s.c];
    for (i, o) in out.iter_mut().enumerate() {
        let [ob, y, x, c] = <[usize; 4]>::try_from(unflatten(i, &out_shape)).unwrap_or([0; 4]);
        let (b, tile) = (ob % s.n, ob / s.n);
        let (ty, tx) = (tile / block[1], tile % block[1]);
        let (iy, ix) = (y * block[0] + ty, x * block[1] + tx);
        *o = if iy < pad[0] || iy >= pad[0] + s.h || ix < pad[2] || ix >= pad[2] + s.w {
            value
        } else {
            input[s.offset(b, iy - pad[0], ix - pad[2], c)]
        };
    }
}

/// BATCH_TO_SPACE_ND (NNAPI 1.1), NHWC: the inverse of [`space_to_batch`] without padding.
pub fn batch_to_space<T: Copy>(input: &[T], s: Nhwc, block: [usize; 2], out: &mut [T]) {
    let n = s.n / (block[0] * block[1]);
    let out_shape = [n, s.h * block[0], s.w * block[1], s.c];
    for (i, o) in out.iter_mut().enumerate() {
        let [b, y, x, c] = <[usize; 4]>::try_from(unflatten(i, &out_shape)).unwrap_or([0; 4]);
        let tile = (y % block[0]) * block[1] + x % block[1];
        *o = input[s.offset(tile * n + b, y / block[0], x / block[1], c)];
    }
}

// ---- NNAPI 1.2 data movement: the oracles, one output element at a time ----------------------

/// SLICE (NNAPI 1.2): along axis `k`, `size[k]` elements from index `begin[k]`.
pub fn slice<T: Copy>(
    input: &[T],
    shape: &[usize],
    begin: &[usize],
    size: &[usize],
    out: &mut [T],
) {
    let s = strides(shape);
    for (i, o) in out.iter_mut().enumerate() {
        let idx = unflatten(i, size);
        *o = input[(0..shape.len())
            .map(|k| (begin[k] + idx[k]) * s[k])
            .sum::<usize>()];
    }
}

/// TILE (NNAPI 1.2): the input repeated `multiples[k]` times along axis `k`; output element
/// `idx` is input element `idx[k] mod shape[k]`.
pub fn tile<T: Copy>(input: &[T], shape: &[usize], multiples: &[usize], out: &mut [T]) {
    let out_shape: Vec<usize> = shape.iter().zip(multiples).map(|(d, m)| d * m).collect();
    let s = strides(shape);
    for (i, o) in out.iter_mut().enumerate() {
        let idx = unflatten(i, &out_shape);
        *o = input[(0..shape.len())
            .map(|k| (idx[k] % shape[k]) * s[k])
            .sum::<usize>()];
    }
}

/// CHANNEL_SHUFFLE (NNAPI 1.2): the `shape[axis]` channels, seen as `groups` groups of
/// `shape[axis] / groups`, are transposed: output channel `i · groups + j` is input channel
/// `j · (shape[axis] / groups) + i`.
pub fn channel_shuffle<T: Copy>(
    input: &[T],
    shape: &[usize],
    groups: usize,
    axis: usize,
    out: &mut [T],
) {
    let per_group = shape[axis] / groups;
    let s = strides(shape);
    for (i, o) in out.iter_mut().enumerate() {
        let mut idx = unflatten(i, shape);
        let c = idx[axis];
        idx[axis] = (c % groups) * per_group + c / groups;
        *o = input[(0..shape.len()).map(|k| idx[k] * s[k]).sum::<usize>()];
    }
}

/// SPLIT (NNAPI 1.2): `outs.len()` equal parts along `axis`; part `p` holds the input's
/// indices `p · shape[axis] / n ..` on that axis.
pub fn split<T: Copy>(input: &[T], shape: &[usize], axis: usize, outs: &mut [&mut [T]]) {
    let part = shape[axis] / outs.len();
    let mut part_shape = shape.to_vec();
    part_shape[axis] = part;
    let s = strides(shape);
    for (p, out) in outs.iter_mut().enumerate() {
        for (i, o) in out.iter_mut().enumerate() {
            let mut idx = unflatten(i, &part_shape);
            idx[axis] += p * part;
            *o = input[(0..shape.len()).map(|k| idx[k] * s[k]).sum::<usize>()];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concatenation_on_each_axis() {
        let a = [1, 2, 3, 4, 5, 6]; // [2, 3]
        let b = [7, 8, 9]; // [1, 3]
        let mut out = [0; 9];
        concatenation(&[(&a[..], &[2, 3][..]), (&b[..], &[1, 3][..])], 0, &mut out);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let c = [10, 20]; // [2, 1]
        let mut out = [0; 8];
        concatenation(&[(&a[..], &[2, 3][..]), (&c[..], &[2, 1][..])], 1, &mut out);
        assert_eq!(out, [1, 2, 3, 10, 4, 5, 6, 20]);
        // Three inputs along the middle axis of a rank-3 tensor, one of them empty there.
        let x = [1u8, 2, 3, 4]; // [2, 1, 2]
        let y = [5u8, 6, 7, 8]; // [2, 1, 2]
        let z: [u8; 0] = []; // [2, 0, 2]
        let mut out = [0u8; 8];
        concatenation(
            &[
                (&x[..], &[2, 1, 2][..]),
                (&z[..], &[2, 0, 2][..]),
                (&y[..], &[2, 1, 2][..]),
            ],
            1,
            &mut out,
        );
        assert_eq!(out, [1, 2, 5, 6, 3, 4, 7, 8]);
        // A single input is a copy.
        let mut out = [0; 6];
        concatenation(&[(&a[..], &[2, 3][..])], 1, &mut out);
        assert_eq!(out, a);
    }

    #[test]
    fn depth_to_space_hand_case() {
        // [1, 1, 2, 4] with b = 2 → [1, 2, 4, 1].
        let x = [1, 2, 3, 4, 5, 6, 7, 8];
        let mut out = [0; 8];
        depth_to_space(&x, Nhwc::new(1, 1, 2, 4), 2, &mut out);
        assert_eq!(out, [1, 2, 5, 6, 3, 4, 7, 8]);
        let mut back = [0; 8];
        space_to_depth(&out, Nhwc::new(1, 2, 4, 1), 2, &mut back);
        assert_eq!(back, x);
    }

    #[test]
    fn depth_space_round_trip() {
        for &(n, h, w, c, b) in &[
            (2, 3, 2, 8, 2),
            (1, 2, 3, 9, 3),
            (3, 1, 1, 5, 1),
            (2, 2, 2, 32, 4),
        ] {
            let shape = Nhwc::new(n, h, w, c);
            let x: Vec<u32> = (0..shape.len() as u32).collect();
            let mut spread = vec![0; x.len()];
            depth_to_space(&x, shape, b, &mut spread);
            // Check every element against the definition.
            let out_shape = Nhwc::new(n, h * b, w * b, c / (b * b));
            for (i, &got) in spread.iter().enumerate() {
                let oc = i % out_shape.c;
                let ox = (i / out_shape.c) % out_shape.w;
                let oy = (i / (out_shape.c * out_shape.w)) % out_shape.h;
                let on = i / (out_shape.c * out_shape.w * out_shape.h);
                let ic = ((oy % b) * b + ox % b) * out_shape.c + oc;
                assert_eq!(got, x[shape.offset(on, oy / b, ox / b, ic)]);
            }
            let mut back = vec![0; x.len()];
            space_to_depth(&spread, out_shape, b, &mut back);
            assert_eq!(back, x);
        }
    }

    proptest::proptest! {
        #[test]
        fn space_depth_round_trip_random(n in 1usize..3, h in 1usize..4, w in 1usize..4, c in 1usize..4, b in 1usize..4) {
            let shape = Nhwc::new(n, h * b, w * b, c);
            let x: Vec<u16> = (0..shape.len() as u16).collect();
            let mut packed = vec![0; x.len()];
            space_to_depth(&x, shape, b, &mut packed);
            let mut back = vec![0; x.len()];
            depth_to_space(&packed, Nhwc::new(n, h, w, c * b * b), b, &mut back);
            proptest::prop_assert_eq!(back, x);
        }
    }

    #[test]
    fn resize_bilinear_upscale_and_identity() {
        // 2×2 → 3×3: scale 2/3, samples at 0, 2/3, 4/3 (clamped to the last row/column).
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let mut out = [0.0; 9];
        resize_bilinear(
            &x,
            Nhwc::new(1, 2, 2, 1),
            3,
            3,
            ResizeMode::default(),
            &mut out,
        );
        let want = [
            1.0,
            5.0 / 3.0,
            2.0,
            7.0 / 3.0,
            3.0,
            10.0 / 3.0,
            3.0,
            11.0 / 3.0,
            4.0,
        ];
        for (o, w) in out.iter().zip(want) {
            assert!((o - w).abs() < 1e-6, "{out:?}");
        }
        // Same size is the identity, channel by channel.
        let y: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let mut same = vec![0.0; 24];
        resize_bilinear(
            &y,
            Nhwc::new(2, 2, 3, 2),
            2,
            3,
            ResizeMode::default(),
            &mut same,
        );
        assert_eq!(same, y);
        // Downscale by two picks the even pixels.
        let mut half = vec![0.0; 4];
        resize_bilinear_f32(&y, Nhwc::new(1, 2, 6, 2), 1, 2, &mut half);
        assert_eq!(half, [0.0, 1.0, 6.0, 7.0]);
    }

    #[test]
    fn resize_bilinear_parallel_matches_formula() {
        let shape = Nhwc::new(2, 5, 7, 3);
        let x: Vec<f32> = (0..shape.len()).map(|i| (i % 17) as f32).collect();
        let (oh, ow) = (90, 130);
        let mut out = vec![0.0; 2 * oh * ow * 3];
        resize_bilinear_f32(&x, shape, oh, ow, &mut out);
        let (hs, ws) = (5.0f32 / oh as f32, 7.0f32 / ow as f32);
        for &(n, y, xo, c) in &[(0, 0, 0, 0), (1, 89, 129, 2), (0, 45, 77, 1), (1, 13, 3, 0)] {
            let iy = y as f32 * hs;
            let ix = xo as f32 * ws;
            let (y0, x0) = (iy.floor() as usize, ix.floor() as usize);
            let (y1, x1) = ((y0 + 1).min(4), (x0 + 1).min(6));
            let (dy, dx) = (iy - y0 as f32, ix - x0 as f32);
            let v = |yy, xx| x[shape.offset(n, yy, xx, c)];
            let want = v(y0, x0) * (1.0 - dy) * (1.0 - dx)
                + v(y1, x0) * dy * (1.0 - dx)
                + v(y0, x1) * (1.0 - dy) * dx
                + v(y1, x1) * dy * dx;
            assert_eq!(out[((n * oh + y) * ow + xo) * 3 + c], want);
        }
    }
    fn resize_2x2_to_3x3(mode: ResizeMode) -> Vec<f32> {
        let mut out = vec![0.0; 9];
        resize_bilinear(
            &[1.0, 2.0, 3.0, 4.0],
            Nhwc::new(1, 2, 2, 1),
            3,
            3,
            mode,
            &mut out,
        );
        out
    }

    fn assert_near(got: &[f32], want: &[f32]) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-5, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn resize_bilinear_align_corners_and_half_pixel_centers() {
        // Aligned corners: scale (2 − 1)/(3 − 1) = ½, the corners are the input's.
        let aligned = resize_2x2_to_3x3(ResizeMode {
            align_corners: true,
            half_pixel_centers: false,
        });
        assert_near(&aligned, &[1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0]);
        // Half-pixel centres: scale 2/3, samples at −1/6 (clamped to row 0), ½ and 7/6
        // (clamped to row 1).
        let centred = resize_2x2_to_3x3(ResizeMode {
            align_corners: false,
            half_pixel_centers: true,
        });
        assert_near(&centred, &[1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0]);
        // Neither: samples at 0, 2/3, 4/3.
        let plain = resize_2x2_to_3x3(ResizeMode::default());
        assert_near(&plain[..3], &[1.0, 1.0 + 2.0 / 3.0, 2.0]);
        // A 1-pixel output with aligned corners keeps the plain scale (no division by 0).
        let mut one = [0.0f32; 1];
        let mode = ResizeMode {
            align_corners: true,
            half_pixel_centers: false,
        };
        resize_bilinear(&[5.0, 7.0], Nhwc::new(1, 1, 2, 1), 1, 1, mode, &mut one);
        assert_eq!(one, [5.0]);
    }

    #[test]
    fn resize_bilinear_u8_rounds_half_up() {
        let run = |mode| {
            let mut out = [0u8; 3];
            resize_bilinear(&[0u8, 255], Nhwc::new(1, 1, 2, 1), 1, 3, mode, &mut out);
            out
        };
        // Aligned: 127.5 rounds up to 128.
        let aligned = ResizeMode {
            align_corners: true,
            half_pixel_centers: false,
        };
        assert_eq!(run(aligned), [0, 128, 255]);
        // Plain: 255·2/3 = 170, then the last column clamps.
        assert_eq!(run(ResizeMode::default()), [0, 170, 255]);
    }
}
