//! The operator loops of NNAPI 1.1's data movement (PAD, TRANSPOSE, STRIDED_SLICE,
//! SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND), with the semantics of the oracles in
//! [`super::reference`]. Every output is written row by row (its last axis): a row that is a
//! contiguous run of the input is one `copy_from_slice`, a padded row one `fill`; the rows are
//! split over the pool in whole-row parts once the tensor is long. RESIZE_NEAREST_NEIGHBOR
//! (NNAPI 1.2) gathers whole channel runs: each output pixel is one `copy_from_slice` of the
//! `c` values of the input pixel it takes.

use super::reference::{nearest_index, resize_scale, strides, ResizeMode};
use crate::parallel::{for_chunks, threads, MIN_ELEMENTS};
use crate::Nhwc;

/// Runs `body(first_row, rows)` over `out` cut into rows of `row` elements, in parallel parts
/// of whole rows when `out` is long.
pub(crate) fn by_rows<T: Send>(
    out: &mut [T],
    row: usize,
    body: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let row = row.max(1);
    if out.len() >= MIN_ELEMENTS && threads() > 1 && out.len() > row {
        let rows = out.len() / row;
        let per = rows.div_ceil(4 * threads()).max(1);
        for_chunks(out, per * row, |i, chunk| body(i * per, chunk));
    } else {
        body(0, out);
    }
}

/// The multi-index of row `r` over `dims` (all axes but the last), written into `idx`.
pub(crate) fn row_index(mut r: usize, dims: &[usize], idx: &mut [usize]) {
    for k in (0..dims.len()).rev() {
        idx[k] = r % dims[k];
        r /= dims[k];
    }
}

/// Largest rank the loops handle (4-D tensors, and BATCH_TO_SPACE_ND's 6-D view of one).
pub const MAX_RANK: usize = 6;

/// `out` (of shape `dims`) gathers `input[base + Σ idx[k] · step[k]]`: a strided view of the
/// input. Every index it reaches must be in `input`.
pub fn gather<T: Copy + Send + Sync>(
    input: &[T],
    base: isize,
    dims: &[usize],
    step: &[isize],
    out: &mut [T],
) {
    let rank = dims.len();
    assert!((1..=MAX_RANK).contains(&rank) && step.len() == rank);
    debug_assert_eq!(out.len(), dims.iter().product::<usize>());
    let (len, last) = (dims[rank - 1], step[rank - 1]);
    let outer = &dims[..rank - 1];
    by_rows(out, len, |first, chunk| {
        let mut idx = [0usize; MAX_RANK];
        for (r, row) in chunk.chunks_exact_mut(len.max(1)).enumerate() {
            row_index(first + r, outer, &mut idx[..rank - 1]);
            let at = base
                + (0..rank - 1)
                    .map(|k| idx[k] as isize * step[k])
                    .sum::<isize>();
            if last == 1 {
                let at = at as usize;
                row.copy_from_slice(&input[at..at + len]);
            } else {
                for (i, o) in row.iter_mut().enumerate() {
                    *o = input[(at + i as isize * last) as usize];
                }
            }
        }
    });
}

/// TRANSPOSE: output axis `k` is input axis `perm[k]`.
pub fn transpose<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    perm: &[usize],
    out: &mut [T],
) {
    let s = strides(shape);
    let dims: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let step: Vec<isize> = perm.iter().map(|&p| s[p] as isize).collect();
    gather(input, 0, &dims, &step, out);
}

/// STRIDED_SLICE with resolved bounds (see [`super::reference::strided_slice`]).
pub fn strided_slice<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    begin: &[usize],
    step: &[isize],
    count: &[usize],
    out: &mut [T],
) {
    // Fixed arrays, not vectors: a steady-state execution allocates nothing.
    let rank = shape.len();
    assert!(rank <= MAX_RANK, "rank {rank}");
    let mut s = [1usize; MAX_RANK];
    for k in (0..rank.saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    let base: isize = (0..rank).map(|k| (begin[k] * s[k]) as isize).sum();
    let mut st = [0isize; MAX_RANK];
    for k in 0..rank {
        st[k] = step[k] * s[k] as isize;
    }
    gather(input, base, count, &st[..rank], out);
}

/// BATCH_TO_SPACE_ND, NHWC: the output `[b, y·bh + i, x·bw + j, c]` viewed as
/// `[b, y, i, x, j, c]` gathers input batch `(i · bw + j) · n + b`.
pub fn batch_to_space<T: Copy + Send + Sync>(
    input: &[T],
    s: Nhwc,
    block: [usize; 2],
    out: &mut [T],
) {
    let n = s.n / (block[0] * block[1]);
    let image = (s.h * s.w * s.c) as isize;
    let dims = [n, s.h, block[0], s.w, block[1], s.c];
    let step = [
        image,
        (s.w * s.c) as isize,
        (block[1] * n) as isize * image,
        s.c as isize,
        n as isize * image,
        1,
    ];
    gather(input, 0, &dims, &step, out);
}

/// PAD: `before[k]` and `after[k]` elements of `value` around axis `k`.
pub fn pad<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: T,
    out: &mut [T],
) {
    let rank = shape.len();
    assert!((1..=MAX_RANK).contains(&rank));
    let out_shape: Vec<usize> = (0..rank).map(|k| before[k] + shape[k] + after[k]).collect();
    let s = strides(shape);
    let (len, lead, width) = (out_shape[rank - 1], before[rank - 1], shape[rank - 1]);
    by_rows(out, len, |first, chunk| {
        let mut idx = [0usize; MAX_RANK];
        for (r, row) in chunk.chunks_exact_mut(len.max(1)).enumerate() {
            row_index(first + r, &out_shape[..rank - 1], &mut idx[..rank - 1]);
            let inside =
                (0..rank - 1).all(|k| idx[k] >= before[k] && idx[k] < before[k] + shape[k]);
            if !inside {
                row.fill(value);
                continue;
            }
            let at: usize = (0..rank - 1).map(|k| (idx[k] - before[k]) * s[k]).sum();
            row[..lead].fill(value);
            row[lead..lead + width].copy_from_slice(&input[at..at + width]);
            row[lead + width..].fill(value);
        }
    });
}

/// SPACE_TO_BATCH_ND, NHWC (see [`super::reference::space_to_batch`]).
pub fn space_to_batch<T: Copy + Send + Sync>(
    input: &[T],
    s: Nhwc,
    block: [usize; 2],
    pad: [usize; 4],
    value: T,
    out: &mut [T],
) {
    let oh = (s.h + pad[0] + pad[1]) / block[0];
    let ow = (s.w + pad[2] + pad[3]) / block[1];
    let row = ow * s.c;
    by_rows(out, row, |first, chunk| {
        for (r, line) in chunk.chunks_exact_mut(row.max(1)).enumerate() {
            let (ob, y) = ((first + r) / oh, (first + r) % oh);
            let (b, tile) = (ob % s.n, ob / s.n);
            let (ty, tx) = (tile / block[1], tile % block[1]);
            let iy = y * block[0] + ty;
            if iy < pad[0] || iy >= pad[0] + s.h {
                line.fill(value);
                continue;
            }
            for (x, px) in line.chunks_exact_mut(s.c.max(1)).enumerate() {
                let ix = x * block[1] + tx;
                if ix < pad[2] || ix >= pad[2] + s.w {
                    px.fill(value);
                } else {
                    let at = s.offset(b, iy - pad[0], ix - pad[2], 0);
                    px.copy_from_slice(&input[at..at + s.c]);
                }
            }
        }
    });
}

/// RESIZE_NEAREST_NEIGHBOR on `[n, h, w, c]` to `[n, out_h, out_w, c]`, with the indices of
/// [`super::reference::nearest_index`]; output rows (one `y` of one batch) are split over the
/// pool.
pub fn resize_nearest<T: Copy + Send + Sync>(
    input: &[T],
    shape: Nhwc,
    out_h: usize,
    out_w: usize,
    mode: ResizeMode,
    output: &mut [T],
) {
    let c = shape.c;
    let row = out_w * c;
    if row == 0 || out_h == 0 || shape.is_empty() {
        return;
    }
    let rows = (shape.n * out_h).min(output.len() / row);
    let hs = resize_scale(shape.h, out_h, mode.align_corners);
    let ws = resize_scale(shape.w, out_w, mode.align_corners);
    by_rows(&mut output[..rows * row], row, |r0, chunk| {
        for (j, dst) in chunk.chunks_exact_mut(row).enumerate() {
            let (n, y) = ((r0 + j) / out_h, (r0 + j) % out_h);
            let iy = nearest_index(y, hs, mode, shape.h);
            let src = &input[shape.offset(n, iy, 0, 0)..][..shape.w * c];
            for (x, px) in dst.chunks_exact_mut(c).enumerate() {
                let ix = nearest_index(x, ws, mode, shape.w);
                px.copy_from_slice(&src[ix * c..(ix + 1) * c]);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::reference as oracle;
    use super::*;

    fn lcg(seed: &mut u64) -> usize {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as usize
    }

    fn shape(seed: &mut u64, rank: usize, max: usize) -> Vec<usize> {
        (0..rank).map(|_| 1 + lcg(seed) % max).collect()
    }

    #[test]
    fn pad_transpose_and_slice_match_the_oracles_on_random_shapes() {
        let mut seed = 3u64;
        for round in 0..300 {
            let rank = 1 + lcg(&mut seed) % 4;
            // Some long tensors, so the pool split runs too.
            let max = if round % 50 == 0 { 40 } else { 6 };
            let sh = shape(&mut seed, rank, max);
            let n: usize = sh.iter().product();
            let x: Vec<u16> = (0..n).map(|i| i as u16).collect();

            let before: Vec<usize> = (0..rank).map(|_| lcg(&mut seed) % 3).collect();
            let after: Vec<usize> = (0..rank).map(|_| lcg(&mut seed) % 3).collect();
            let len: usize = (0..rank).map(|k| before[k] + sh[k] + after[k]).product();
            let (mut a, mut b) = (vec![0; len], vec![0; len]);
            pad(&x, &sh, &before, &after, 9999, &mut a);
            oracle::pad(&x, &sh, &before, &after, 9999, &mut b);
            assert_eq!(a, b, "pad {sh:?} {before:?} {after:?}");

            let mut perm: Vec<usize> = (0..rank).collect();
            for k in (1..rank).rev() {
                perm.swap(k, lcg(&mut seed) % (k + 1));
            }
            let (mut a, mut b) = (vec![0; n], vec![0; n]);
            transpose(&x, &sh, &perm, &mut a);
            oracle::transpose(&x, &sh, &perm, &mut b);
            assert_eq!(a, b, "transpose {sh:?} {perm:?}");

            let mut begin = vec![];
            let mut step = vec![];
            let mut count = vec![];
            for &d in &sh {
                let s = (1 + lcg(&mut seed) % 3) as isize;
                let backwards = lcg(&mut seed).is_multiple_of(2);
                let b = lcg(&mut seed) % d;
                let c = if backwards {
                    b / s as usize + 1
                } else {
                    (d - b).div_ceil(s as usize)
                };
                begin.push(b);
                step.push(if backwards { -s } else { s });
                count.push(c);
            }
            let len: usize = count.iter().product();
            let (mut a, mut b) = (vec![0; len], vec![0; len]);
            strided_slice(&x, &sh, &begin, &step, &count, &mut a);
            oracle::strided_slice(&x, &sh, &begin, &step, &count, &mut b);
            assert_eq!(a, b, "slice {sh:?} {begin:?} {step:?} {count:?}");
        }
    }

    #[test]
    fn space_batch_moves_match_the_oracles_and_invert() {
        let mut seed = 11u64;
        for round in 0..200 {
            let block = [1 + lcg(&mut seed) % 3, 1 + lcg(&mut seed) % 3];
            let big = round % 40 == 0;
            let m = if big { 30 } else { 4 };
            let (h, w) = (
                block[0] * (1 + lcg(&mut seed) % m),
                block[1] * (1 + lcg(&mut seed) % m),
            );
            let c = 1 + lcg(&mut seed) % if big { 40 } else { 5 };
            let nb = 1 + lcg(&mut seed) % 3;
            let s = Nhwc::new(nb, h, w, c);
            let x: Vec<u32> = (0..s.len()).map(|i| i as u32).collect();
            // Without padding, BATCH_TO_SPACE_ND undoes SPACE_TO_BATCH_ND.
            let mut moved = vec![0; s.len()];
            space_to_batch(&x, s, block, [0; 4], 0, &mut moved);
            let mut back = vec![0; s.len()];
            let t = Nhwc::new(nb * block[0] * block[1], h / block[0], w / block[1], c);
            batch_to_space(&moved, t, block, &mut back);
            assert_eq!(back, x);
            let mut o = vec![0; s.len()];
            oracle::batch_to_space(&moved, t, block, &mut o);
            assert_eq!(o, x);

            let pad = [lcg(&mut seed) % 2, 0, lcg(&mut seed) % 2, 0];
            let mut pad = pad;
            pad[1] = (block[0] - (h + pad[0]) % block[0]) % block[0];
            pad[3] = (block[1] - (w + pad[2]) % block[1]) % block[1];
            let len = nb * (h + pad[0] + pad[1]) * (w + pad[2] + pad[3]) * c;
            let (mut a, mut b) = (vec![0; len], vec![0; len]);
            space_to_batch(&x, s, block, pad, 7, &mut a);
            oracle::space_to_batch(&x, s, block, pad, 7, &mut b);
            assert_eq!(a, b, "{s:?} {block:?} {pad:?}");
        }
    }

    #[test]
    fn resize_nearest_matches_the_oracle_in_every_mode() {
        let mut seed = 17u64;
        let modes = [(false, false), (true, false), (false, true)];
        for round in 0..300 {
            let big = round % 60 == 0;
            let d = |s: &mut u64| 1 + lcg(s) % if big { 40 } else { 7 };
            let s = Nhwc::new(
                1 + lcg(&mut seed) % 2,
                d(&mut seed),
                d(&mut seed),
                d(&mut seed),
            );
            let (oh, ow) = (d(&mut seed), d(&mut seed));
            let x: Vec<u16> = (0..s.len()).map(|i| i as u16).collect();
            for (align_corners, half_pixel_centers) in modes {
                let mode = ResizeMode {
                    align_corners,
                    half_pixel_centers,
                };
                let len = s.n * oh * ow * s.c;
                let (mut a, mut b) = (vec![0; len], vec![1; len]);
                resize_nearest(&x, s, oh, ow, mode, &mut a);
                oracle::resize_nearest(&x, s, oh, ow, mode, &mut b);
                assert_eq!(a, b, "{s:?} to {oh}x{ow} {mode:?}");
            }
        }
    }

    #[test]
    fn nearest_indices_follow_the_specification() {
        let m = |align_corners, half_pixel_centers| ResizeMode {
            align_corners,
            half_pixel_centers,
        };
        let pick = |input: usize, output: usize, mode: ResizeMode| -> Vec<usize> {
            let scale = oracle::resize_scale(input, output, mode.align_corners);
            (0..output)
                .map(|o| oracle::nearest_index(o, scale, mode, input))
                .collect()
        };
        // 2 → 5: scale 0.4, floor(0, 0.4, 0.8, 1.2, 1.6).
        assert_eq!(pick(2, 5, m(false, false)), [0, 0, 0, 1, 1]);
        // Aligned corners: scale 1/4, round(0, .25, .5, .75, 1): .5 rounds away from zero.
        assert_eq!(pick(2, 5, m(true, false)), [0, 0, 1, 1, 1]);
        // Half-pixel centres: floor((o + ½)·0.4) = floor(.2, .6, 1, 1.4, 1.8).
        assert_eq!(pick(2, 5, m(false, true)), [0, 0, 1, 1, 1]);
        // Downscaling 5 → 2 with half-pixel centres: floor(1.25, 3.75).
        assert_eq!(pick(5, 2, m(false, true)), [1, 3]);
        // One output with aligned corners takes scale in/out, as the reference does.
        assert_eq!(pick(4, 1, m(true, false)), [0]);
    }
}
