//! MEAN's operator loop: a reduction over adjacent axes (see [`super::split_reduction`]) runs
//! as `[outer, reduced, inner]`, each output row of `inner` accumulated over the `reduced` input
//! rows with a plain slice loop the compiler vectorises (the channel-vectorised global average
//! pooling of an NHWC image), split over the pool by output ranges. Each output sums its inputs
//! in the same order as [`super::reference`], so float32 results are the oracle's bit for bit.
//! Other axis sets run the reference.

use super::{reference, split_reduction};
use crate::parallel::{for_chunks, pays_to_split, speed, threads};

/// Outputs per parallel part: about four parts per thread, whole cache lines.
pub(super) fn part_len(outputs: usize) -> usize {
    outputs.div_ceil(4 * threads()).next_multiple_of(16).max(16)
}

/// Runs `body(start, chunk)` over `out`, in parallel parts when the input is long.
pub(super) fn split<T: Send>(
    out: &mut [T],
    input_len: usize,
    body: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if pays_to_split(input_len, speed::MEAN_INPUTS) && threads() > 1 && out.len() > 16 {
        let n = part_len(out.len());
        for_chunks(out, n, |i, chunk| body(i * n, chunk));
    } else {
        body(0, out);
    }
}

/// The output range `start..start + len` of an `[outer, inner]` output as runs within one row:
/// `(o, i0, len)`.
pub(super) fn rows(
    start: usize,
    len: usize,
    inner: usize,
    mut f: impl FnMut(usize, usize, usize, usize),
) {
    let mut at = 0;
    while at < len {
        let flat = start + at;
        let (o, i0) = (flat / inner, flat % inner);
        let run = (inner - i0).min(len - at);
        f(at, o, i0, run);
        at += run;
    }
}

/// MEAN on float32 over `axes` (each once, in range) of `input` of `shape`.
pub fn mean_f32(input: &[f32], shape: &[usize], axes: &[usize], out: &mut [f32]) {
    let Some([_, r, inner]) = split_reduction(shape, axes) else {
        return reference::mean_f32(input, shape, axes, out);
    };
    let n = r as f32;
    split(out, input.len(), |start, chunk| {
        rows(start, chunk.len(), inner, |at, o, i0, run| {
            let acc = &mut chunk[at..at + run];
            acc.fill(0.0);
            for k in 0..r {
                let x = &input[(o * r + k) * inner + i0..][..run];
                for (a, &v) in acc.iter_mut().zip(x) {
                    *a += v;
                }
            }
            for a in acc {
                *a /= n;
            }
        });
    });
}

/// MEAN on quant8 bytes; `signed`: the bytes are the +128 image of int8 values (see
/// [`super::reference`] for the truncation this keeps).
pub fn mean_u8(input: &[u8], shape: &[usize], axes: &[usize], signed: bool, out: &mut [u8]) {
    // 255 · r must fit the i32 accumulator.
    let fits = |r: usize| r < (i32::MAX as usize) / 256;
    let Some([_, r, inner]) = split_reduction(shape, axes).filter(|s| fits(s[1])) else {
        return reference::mean_u8(input, shape, axes, signed, out);
    };
    const BLOCK: usize = 256;
    let n = r as i32;
    let bias = if signed { 128 } else { 0 };
    split(out, input.len(), |start, chunk| {
        rows(start, chunk.len(), inner, |at, o, i0, run| {
            let mut acc = [0i32; BLOCK];
            let mut b = 0;
            while b < run {
                let len = BLOCK.min(run - b);
                let acc = &mut acc[..len];
                acc.fill(0);
                for k in 0..r {
                    let x = &input[(o * r + k) * inner + i0 + b..][..len];
                    for (a, &v) in acc.iter_mut().zip(x) {
                        *a += i32::from(v);
                    }
                }
                for (y, &s) in chunk[at + b..at + b + len].iter_mut().zip(acc.iter()) {
                    // Integer division truncates towards zero, as the reference's does.
                    *y = ((s - bias * n) / n + bias).clamp(0, 255) as u8;
                }
                b += len;
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_axes_split_and_others_do_not() {
        assert_eq!(split_reduction(&[2, 3, 4, 5], &[1, 2]), Some([2, 12, 5]));
        assert_eq!(split_reduction(&[2, 3, 4, 5], &[0]), Some([1, 2, 60]));
        assert_eq!(split_reduction(&[2, 1, 4, 5], &[0, 2]), Some([1, 8, 5]));
        assert_eq!(split_reduction(&[2, 3, 4, 5], &[0, 2]), None);
        assert_eq!(split_reduction(&[2, 3], &[]), Some([1, 1, 6]));
    }

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn fast_mean_is_the_reference_on_random_shapes_and_axes() {
        let mut seed = 7u64;
        for _ in 0..400 {
            let rank = 1 + lcg(&mut seed) as usize % 4;
            let shape: Vec<usize> = (0..rank).map(|_| 1 + lcg(&mut seed) as usize % 7).collect();
            let axes: Vec<usize> = (0..rank)
                .filter(|_| lcg(&mut seed).is_multiple_of(2))
                .collect();
            let total: usize = shape.iter().product();
            let outs = total / axes.iter().map(|&a| shape[a]).product::<usize>();
            let xf: Vec<f32> = (0..total)
                .map(|_| lcg(&mut seed) as f32 / 1e6 - 1000.0)
                .collect();
            let (mut a, mut b) = (vec![0.0; outs], vec![0.0; outs]);
            mean_f32(&xf, &shape, &axes, &mut a);
            reference::mean_f32(&xf, &shape, &axes, &mut b);
            assert_eq!(a, b, "{shape:?} {axes:?}");
            let xu: Vec<u8> = (0..total).map(|_| lcg(&mut seed) as u8).collect();
            for signed in [false, true] {
                let (mut a, mut b) = (vec![0; outs], vec![0; outs]);
                mean_u8(&xu, &shape, &axes, signed, &mut a);
                reference::mean_u8(&xu, &shape, &axes, signed, &mut b);
                assert_eq!(a, b, "{shape:?} {axes:?} signed {signed}");
            }
        }
    }

    #[test]
    fn signed_mean_truncates_towards_zero() {
        // int8 values −1 and −2 (bytes 127, 126): mean −1.5 truncates to −1 (byte 127), where
        // the unsigned mean of the bytes would floor to 126.
        let mut y = [0u8; 1];
        mean_u8(&[127, 126], &[2], &[0], true, &mut y);
        assert_eq!(y, [127]);
        mean_u8(&[127, 126], &[2], &[0], false, &mut y);
        assert_eq!(y, [126]);
    }

    #[test]
    fn global_average_pool_of_a_large_nhwc_image_splits_and_agrees() {
        let shape = [1, 64, 64, 40];
        let x: Vec<u8> = (0..shape.iter().product::<usize>())
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        let (mut a, mut b) = (vec![0; 40], vec![0; 40]);
        mean_u8(&x, &shape, &[1, 2], false, &mut a);
        reference::mean_u8(&x, &shape, &[1, 2], false, &mut b);
        assert_eq!(a, b);
    }
}
