//! The operator loops of the indexing family: GATHER as one `copy_from_slice` of the `inner`
//! contiguous elements per gathered slice, FILL as slice fills; both split long outputs over
//! the pool (see [`crate::parallel`]).

use super::check_indices;
use crate::parallel::{for_chunks, threads, MIN_ELEMENTS};
use crate::transform::nd::by_rows;
use crate::KernelError;

/// GATHER along `axis` (see [`super::reference::gather`]); the indices are checked before
/// anything is written.
pub fn gather<T: Copy + Send + Sync>(
    input: &[T],
    shape: &[usize],
    axis: usize,
    indices: &[i32],
    out: &mut [T],
) -> Result<(), KernelError> {
    check_indices(indices, shape[axis])?;
    let inner: usize = shape[axis + 1..].iter().product();
    let extent = shape[axis];
    let count = indices.len().max(1);
    by_rows(out, inner, |first, chunk| {
        for (r, run) in chunk.chunks_exact_mut(inner.max(1)).enumerate() {
            let (outer, n) = ((first + r) / count, (first + r) % count);
            let at = (outer * extent + indices[n] as usize) * inner;
            run.copy_from_slice(&input[at..at + inner]);
        }
    });
    Ok(())
}

/// FILL: every element is `value`.
pub fn fill<T: Copy + Send + Sync>(value: T, out: &mut [T]) {
    if out.len() >= MIN_ELEMENTS && threads() > 1 {
        let per = out.len().div_ceil(4 * threads());
        for_chunks(out, per, |_, chunk| chunk.fill(value));
    } else {
        out.fill(value);
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

    #[test]
    fn gather_matches_the_oracle_on_random_shapes_axes_and_indices() {
        let mut seed = 17u64;
        for round in 0..400 {
            let rank = 1 + lcg(&mut seed) % 4;
            let max = match round % 50 {
                0 => 60,
                1 => 1,
                _ => 6,
            };
            let sh: Vec<usize> = (0..rank).map(|_| 1 + lcg(&mut seed) % max).collect();
            let axis = lcg(&mut seed) % rank;
            let count = 1 + lcg(&mut seed) % 7;
            let indices: Vec<i32> = (0..count)
                .map(|_| (lcg(&mut seed) % sh[axis]) as i32)
                .collect();
            let n: usize = sh.iter().product();
            let x: Vec<u32> = (0..n as u32).collect();
            let len = n / sh[axis] * count;
            let (mut a, mut b) = (vec![0; len], vec![1; len]);
            gather(&x, &sh, axis, &indices, &mut a).unwrap();
            oracle::gather(&x, &sh, axis, &indices, &mut b).unwrap();
            assert_eq!(a, b, "{sh:?} axis {axis} {indices:?}");
        }
    }

    #[test]
    fn gather_refuses_an_index_out_of_range_before_writing() {
        let x = [1.0f32, 2.0, 3.0, 4.0];
        for bad in [-1, 2, i32::MIN, i32::MAX] {
            let mut out = [9.0f32; 2];
            let e = gather(&x, &[2, 2], 0, &[0, bad], &mut out).unwrap_err();
            assert!(format!("{e}").contains(&format!("{bad}")), "{e}");
            assert_eq!(out, [9.0; 2], "nothing is written");
            assert!(oracle::gather(&x, &[2, 2], 0, &[bad], &mut out[..2]).is_err());
        }
    }

    #[test]
    fn fill_matches_the_oracle() {
        for len in [1, 7, 1 << 17] {
            let (mut a, mut b) = (vec![0i32; len], vec![1i32; len]);
            fill(-5, &mut a);
            oracle::fill(-5, &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn long_outputs_split_over_a_pool_match_the_oracles() {
        let pool = crate::parallel::Pool::new(3, "index-test").unwrap();
        pool.run(|| {
            let sh = [4usize, 50, 30, 20];
            let n: usize = sh.iter().product();
            let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
            for axis in 0..4 {
                let indices: Vec<i32> = (0..sh[axis] as i32).rev().chain([0, 1]).collect();
                let len = n / sh[axis] * indices.len();
                let (mut a, mut b) = (vec![0.0; len], vec![1.0; len]);
                gather(&x, &sh, axis, &indices, &mut a).unwrap();
                oracle::gather(&x, &sh, axis, &indices, &mut b).unwrap();
                assert_eq!(a, b, "axis {axis}");
            }
            let (mut a, mut b) = (vec![0u8; 1 << 18], vec![1u8; 1 << 18]);
            fill(7, &mut a);
            oracle::fill(7, &mut b);
            assert_eq!(a, b);
        });
    }
}
