//! The operator loops of NNAPI 1.2's data movement (SLICE, TILE, CHANNEL_SHUFFLE, SPLIT),
//! with the semantics of the oracles in [`super::reference`]. Each loop copies the longest
//! runs that are contiguous in both input and output with `copy_from_slice`, and splits long
//! outputs over the pool in whole runs (see [`super::nd`]).

use super::nd::{by_rows, gather, row_index, MAX_RANK};

/// Row-major strides of `shape` (rank at most [`MAX_RANK`]), inline: the loops allocate
/// nothing.
fn strides(shape: &[usize]) -> [usize; MAX_RANK] {
    let mut s = [1; MAX_RANK];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// SLICE: along axis `k`, `size[k]` elements from index `begin[k]` (a strided view of step 1,
/// whose rows are contiguous runs of the input).
pub fn slice<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    begin: &[usize],
    size: &[usize],
    out: &mut [T],
) {
    let rank = shape.len();
    assert!((1..=MAX_RANK).contains(&rank));
    let s = strides(shape);
    let base: isize = (0..rank).map(|k| (begin[k] * s[k]) as isize).sum();
    let step = s.map(|x| x as isize);
    gather(input, base, size, &step[..rank], out);
}

/// TILE: the input repeated `multiples[k]` times along axis `k`. Each output row (last axis)
/// is one input row copied `multiples[last]` times.
pub fn tile<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    multiples: &[usize],
    out: &mut [T],
) {
    let rank = shape.len();
    assert!((1..=MAX_RANK).contains(&rank) && multiples.len() == rank);
    let mut out_shape = [1; MAX_RANK];
    for k in 0..rank {
        out_shape[k] = shape[k] * multiples[k];
    }
    debug_assert_eq!(out.len(), out_shape.iter().product::<usize>());
    let s = strides(shape);
    let width = shape[rank - 1];
    let len = out_shape[rank - 1];
    by_rows(out, len, |first, chunk| {
        let mut idx = [0usize; MAX_RANK];
        for (r, row) in chunk.chunks_exact_mut(len.max(1)).enumerate() {
            row_index(first + r, &out_shape[..rank - 1], &mut idx[..rank - 1]);
            let at: usize = (0..rank - 1).map(|k| (idx[k] % shape[k]) * s[k]).sum();
            for piece in row.chunks_exact_mut(width.max(1)) {
                piece.copy_from_slice(&input[at..at + width]);
            }
        }
    });
}

/// CHANNEL_SHUFFLE on the input viewed as `[outer, channels, inner]` (the extents before
/// `axis`, on it, and after it): output channel `i · groups + j` is input channel
/// `j · (channels / groups) + i`, a contiguous run of `inner` elements.
pub fn channel_shuffle<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    groups: usize,
    axis: usize,
    out: &mut [T],
) {
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let per_group = channels / groups;
    let block = channels * inner;
    debug_assert_eq!(out.len(), input.len());
    by_rows(out, block, |first, chunk| {
        for (r, rows) in chunk.chunks_exact_mut(block.max(1)).enumerate() {
            let src = &input[(first + r) * block..(first + r + 1) * block];
            if inner == 1 {
                for (c, o) in rows.iter_mut().enumerate() {
                    *o = src[(c % groups) * per_group + c / groups];
                }
            } else {
                for (c, run) in rows.chunks_exact_mut(inner).enumerate() {
                    let at = ((c % groups) * per_group + c / groups) * inner;
                    run.copy_from_slice(&src[at..at + inner]);
                }
            }
        }
    });
}

/// SPLIT into `outs.len()` equal parts along `axis`: part `p` of each of the `outer` blocks
/// (the extents before `axis`) is one contiguous run of `shape[axis] / n · inner` elements.
pub fn split<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    axis: usize,
    outs: &mut [&mut [T]],
) {
    let n = outs.len();
    let inner: usize = shape[axis + 1..].iter().product();
    let run = shape[axis] / n * inner;
    let block = shape[axis] * inner;
    for (p, out) in outs.iter_mut().enumerate() {
        by_rows(out, run, |first, chunk| {
            for (r, o) in chunk.chunks_exact_mut(run.max(1)).enumerate() {
                let at = (first + r) * block + p * run;
                o.copy_from_slice(&input[at..at + run]);
            }
        });
    }
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

    /// Random shapes of ranks 1–4, some long enough for the pool split, single-element ones
    /// among them.
    fn cases(seed: u64, rounds: usize, mut body: impl FnMut(&mut u64, Vec<usize>)) {
        let mut seed = seed;
        for round in 0..rounds {
            let rank = 1 + lcg(&mut seed) % 4;
            let max = match round % 50 {
                0 => 60,
                1 => 1,
                _ => 6,
            };
            let sh = shape(&mut seed, rank, max);
            body(&mut seed, sh);
        }
    }

    #[test]
    fn slice_matches_the_oracle() {
        cases(5, 400, |seed, sh| {
            let n: usize = sh.iter().product();
            let x: Vec<u32> = (0..n as u32).collect();
            let begin: Vec<usize> = sh.iter().map(|&d| lcg(seed) % d).collect();
            let size: Vec<usize> = sh
                .iter()
                .zip(&begin)
                .map(|(&d, &b)| 1 + lcg(seed) % (d - b))
                .collect();
            let len: usize = size.iter().product();
            let (mut a, mut b) = (vec![0; len], vec![0; len]);
            slice(&x, &sh, &begin, &size, &mut a);
            oracle::slice(&x, &sh, &begin, &size, &mut b);
            assert_eq!(a, b, "{sh:?} {begin:?} {size:?}");
        });
    }

    #[test]
    fn tile_matches_the_oracle() {
        cases(6, 400, |seed, sh| {
            let n: usize = sh.iter().product();
            let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
            let m: Vec<usize> = sh.iter().map(|_| 1 + lcg(seed) % 3).collect();
            let len: usize = sh.iter().zip(&m).map(|(d, m)| d * m).product();
            let (mut a, mut b) = (vec![0.0; len], vec![0.0; len]);
            tile(&x, &sh, &m, &mut a);
            oracle::tile(&x, &sh, &m, &mut b);
            assert_eq!(a, b, "{sh:?} {m:?}");
        });
    }

    #[test]
    fn channel_shuffle_matches_the_oracle_and_inverts() {
        cases(7, 400, |seed, mut sh| {
            let axis = lcg(seed) % sh.len();
            let groups = 1 + lcg(seed) % 4;
            sh[axis] = groups * (1 + lcg(seed) % 4);
            let n: usize = sh.iter().product();
            let x: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let (mut a, mut b) = (vec![0; n], vec![0; n]);
            channel_shuffle(&x, &sh, groups, axis, &mut a);
            oracle::channel_shuffle(&x, &sh, groups, axis, &mut b);
            assert_eq!(a, b, "{sh:?} {groups} {axis}");
            // Shuffling with channels / groups groups undoes it.
            let mut back = vec![0; n];
            channel_shuffle(&a, &sh, sh[axis] / groups, axis, &mut back);
            assert_eq!(back, x, "{sh:?} {groups} {axis}");
        });
    }

    #[test]
    fn split_matches_the_oracle() {
        cases(8, 400, |seed, mut sh| {
            let axis = lcg(seed) % sh.len();
            let parts = 1 + lcg(seed) % 4;
            sh[axis] = parts * (1 + lcg(seed) % 3);
            let n: usize = sh.iter().product();
            let x: Vec<i32> = (0..n as i32).collect();
            let len = n / parts;
            let mut a = vec![vec![-1; len]; parts];
            let mut b = vec![vec![-2; len]; parts];
            split(
                &x,
                &sh,
                axis,
                &mut a.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>(),
            );
            oracle::split(
                &x,
                &sh,
                axis,
                &mut b.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>(),
            );
            assert_eq!(a, b, "{sh:?} {axis} {parts}");
            // The parts, concatenated again, are the input.
            let mut joined = vec![0; n];
            let parts_in: Vec<(&[i32], Vec<usize>)> = a
                .iter()
                .map(|p| {
                    let mut s = sh.clone();
                    s[axis] /= parts;
                    (p.as_slice(), s)
                })
                .collect();
            let views: Vec<(&[i32], &[usize])> =
                parts_in.iter().map(|(p, s)| (*p, s.as_slice())).collect();
            oracle::concatenation(&views, axis, &mut joined);
            assert_eq!(joined, x);
        });
    }

    #[test]
    fn long_outputs_split_over_a_pool_match_the_oracles() {
        let pool = crate::parallel::Pool::new(3, "blocks-test").unwrap();
        pool.run(|| {
            // Outputs past MIN_ELEMENTS, so each loop cuts them into parts.
            let sh = [3usize, 40, 30, 24];
            let n: usize = sh.iter().product();
            let x: Vec<u16> = (0..n).map(|i| i as u16).collect();

            let (begin, size) = ([1, 3, 2, 1], [2, 37, 27, 22]);
            let len: usize = size.iter().product();
            let (mut a, mut b) = (vec![0; len], vec![0; len]);
            slice(&x, &sh, &begin, &size, &mut a);
            oracle::slice(&x, &sh, &begin, &size, &mut b);
            assert_eq!(a, b);

            let m = [2, 1, 2, 2];
            let (mut a, mut b) = (vec![0; n * 8], vec![0; n * 8]);
            tile(&x, &sh, &m, &mut a);
            oracle::tile(&x, &sh, &m, &mut b);
            assert_eq!(a, b);

            for (groups, axis) in [(4, 3), (5, 1), (3, 0)] {
                let (mut a, mut b) = (vec![0; n], vec![0; n]);
                channel_shuffle(&x, &sh, groups, axis, &mut a);
                oracle::channel_shuffle(&x, &sh, groups, axis, &mut b);
                assert_eq!(a, b, "{groups} {axis}");
            }

            for (parts, axis) in [(2, 1), (3, 2), (4, 3)] {
                let mut a = vec![vec![0; n / parts]; parts];
                let mut b = vec![vec![1; n / parts]; parts];
                split(
                    &x,
                    &sh,
                    axis,
                    &mut a.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>(),
                );
                oracle::split(
                    &x,
                    &sh,
                    axis,
                    &mut b.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>(),
                );
                assert_eq!(a, b, "{parts} {axis}");
            }
        });
    }
}
