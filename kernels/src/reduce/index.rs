//! The operator loops of ARGMAX, ARGMIN and TOPK_V2 (NNAPI 1.2), with the reference's tie
//! rules ([`super::reference`]): ARGMAX / ARGMIN keep the first index of the extreme value;
//! TOPK_V2 orders by (value, index), both descending.
//!
//! ARGMAX / ARGMIN run as `[outer, n, inner]`: blocks of up to 64 adjacent `inner` lanes keep
//! their best values and indices on the stack while the `n` input rows stream by, so the
//! compare-and-select loop runs over contiguous slices (along the last axis each output scans
//! its own run); the outputs are split over the pool.
//! TOPK_V2 keeps each row's best `k` sorted in the output itself, inserting an element only
//! when it beats the `k`-th (a scan of the row, no allocation) while `k` is small; a large `k`
//! sorts a copy of the row. Rows are split over the pool.

use super::mean::split;
use super::TopKey;
use crate::parallel::{for_parts, threads, MIN_ELEMENTS};
use std::cmp::Ordering;

const LANES: usize = 64;

/// ARGMAX (`min` false) or ARGMIN along `axis` of `input` of `shape`.
pub fn arg_min_max<T: PartialOrd + Copy + Default + Send + Sync>(
    input: &[T],
    shape: &[usize],
    axis: usize,
    min: bool,
    out: &mut [i32],
) {
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    if n == 0 || inner == 0 {
        return;
    }
    split(out, input.len(), |start, chunk| {
        if inner == 1 {
            // The axis is the last: each output scans one contiguous run.
            for (j, y) in chunk.iter_mut().enumerate() {
                let x = &input[(start + j) * n..][..n];
                let (mut best, mut index) = (x[0], 0);
                for (k, &v) in x.iter().enumerate().skip(1) {
                    if (min && v < best) || (!min && v > best) {
                        best = v;
                        index = k;
                    }
                }
                *y = index as i32;
            }
            return;
        }
        let mut at = 0;
        while at < chunk.len() {
            let flat = start + at;
            let (o, i0) = (flat / inner, flat % inner);
            let len = (inner - i0).min(chunk.len() - at).min(LANES);
            let mut best = [T::default(); LANES];
            let mut index = [0i32; LANES];
            let best = &mut best[..len];
            let index = &mut index[..len];
            best.copy_from_slice(&input[o * n * inner + i0..][..len]);
            index.fill(0);
            for k in 1..n {
                let x = &input[(o * n + k) * inner + i0..][..len];
                for ((b, i), &v) in best.iter_mut().zip(index.iter_mut()).zip(x) {
                    // Strict: an equal value later on keeps the first index.
                    if (min && v < *b) || (!min && v > *b) {
                        *b = v;
                        *i = k as i32;
                    }
                }
            }
            chunk[at..at + len].copy_from_slice(index);
            at += len;
        }
    });
}

/// `k` up to which TOPK_V2 inserts into the output instead of sorting a copy of the row.
const INSERT_K: usize = 32;

/// TOPK_V2 of the rows of `row` elements of `input` into `values` and `indices` (`k` per row).
pub fn top_k<T: TopKey>(input: &[T], row: usize, k: usize, values: &mut [T], indices: &mut [i32]) {
    if row == 0 || k == 0 || k > row {
        return;
    }
    let rows = (input.len() / row)
        .min(values.len() / k)
        .min(indices.len() / k);
    let parts = if input.len() >= MIN_ELEMENTS && threads() > 1 {
        rows.min(4 * threads())
    } else {
        1
    };
    let per = rows.div_ceil(parts.max(1)).max(1);
    let (vals, idxs) = (Shared(values.as_mut_ptr()), Shared(indices.as_mut_ptr()));
    for_parts(rows.div_ceil(per), |p| {
        let (r0, r1) = (p * per, ((p + 1) * per).min(rows));
        // SAFETY: part p writes rows r0..r1 of both outputs, which hold `rows` rows of `k`;
        // parts are disjoint and the outputs outlive the fork-join.
        let (v, ix) = unsafe {
            (
                std::slice::from_raw_parts_mut(vals.at(r0 * k), (r1 - r0) * k),
                std::slice::from_raw_parts_mut(idxs.at(r0 * k), (r1 - r0) * k),
            )
        };
        let mut scratch = Vec::new();
        for r in r0..r1 {
            let x = &input[r * row..(r + 1) * row];
            let (v, ix) = (&mut v[(r - r0) * k..][..k], &mut ix[(r - r0) * k..][..k]);
            if k <= INSERT_K {
                insert_top(x, v, ix);
            } else {
                sort_top(x, &mut scratch, v, ix);
            }
        }
    });
}

/// A raw output pointer the parts share; each writes its own rows.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: only disjoint ranges are written through it, one part each.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}
impl<T> Shared<T> {
    fn at(self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

/// The row's best `v.len()` in order, by inserting each element that beats the last kept one.
/// Elements come in index order, so a later one ranks above every kept equal value.
fn insert_top<T: TopKey>(x: &[T], v: &mut [T], ix: &mut [i32]) {
    let k = v.len();
    let mut kept = 0;
    for (i, &e) in x.iter().enumerate() {
        if kept == k && T::order(e, v[k - 1]) == Ordering::Less {
            continue;
        }
        // One insertion-sort step from the end (a full list drops its last): kept values not
        // above `e` move down, equal ones too, since `e` comes later.
        let mut j = kept.min(k - 1);
        while j > 0 && T::order(v[j - 1], e) != Ordering::Greater {
            v[j] = v[j - 1];
            ix[j] = ix[j - 1];
            j -= 1;
        }
        v[j] = e;
        ix[j] = i as i32;
        kept = (kept + 1).min(k);
    }
}

/// The row's best `v.len()` by selecting them from a copy and sorting those.
fn sort_top<T: TopKey>(x: &[T], scratch: &mut Vec<(T, i32)>, v: &mut [T], ix: &mut [i32]) {
    let k = v.len();
    scratch.clear();
    scratch.extend(x.iter().copied().zip(0..));
    let desc = |a: &(T, i32), b: &(T, i32)| T::order(b.0, a.0).then(b.1.cmp(&a.1));
    if k < scratch.len() {
        scratch.select_nth_unstable_by(k - 1, desc);
    }
    scratch[..k].sort_unstable_by(desc);
    for (j, &(e, i)) in scratch[..k].iter().enumerate() {
        v[j] = e;
        ix[j] = i;
    }
}

#[cfg(test)]
mod tests {
    use super::super::reference;
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn shapes(seed: &mut u64) -> Vec<usize> {
        let rank = 1 + lcg(seed) as usize % 4;
        (0..rank).map(|_| 1 + lcg(seed) as usize % 9).collect()
    }

    #[test]
    fn fast_arg_min_max_is_the_reference_with_ties() {
        let mut seed = 3u64;
        for _ in 0..500 {
            let shape = shapes(&mut seed);
            let total: usize = shape.iter().product();
            // Few distinct values: many ties.
            let xf: Vec<f32> = (0..total)
                .map(|_| (lcg(&mut seed) % 5) as f32 - 2.0)
                .collect();
            let xu: Vec<u8> = xf.iter().map(|&v| (v + 3.0) as u8).collect();
            let xi: Vec<i32> = xf.iter().map(|&v| v as i32 * 1000).collect();
            for axis in 0..shape.len() {
                let outs = total / shape[axis];
                for min in [false, true] {
                    let (mut a, mut b) = (vec![-1; outs], vec![-2; outs]);
                    arg_min_max(&xf, &shape, axis, min, &mut a);
                    reference::arg_min_max(&xf, &shape, axis, min, &mut b);
                    assert_eq!(a, b, "{shape:?} axis {axis} min {min}");
                    arg_min_max(&xu, &shape, axis, min, &mut a);
                    assert_eq!(a, b, "u8 {shape:?} axis {axis} min {min}");
                    arg_min_max(&xi, &shape, axis, min, &mut a);
                    assert_eq!(a, b, "i32 {shape:?} axis {axis} min {min}");
                }
            }
        }
    }

    #[test]
    fn arg_max_of_a_large_tensor_splits_and_agrees() {
        let shape = [4, 300, 100];
        let x: Vec<f32> = (0..120_000).map(|i| ((i * 7919) % 1009) as f32).collect();
        for axis in 0..3 {
            let outs = x.len() / shape[axis];
            let (mut a, mut b) = (vec![0; outs], vec![0; outs]);
            arg_min_max(&x, &shape, axis, false, &mut a);
            reference::arg_min_max(&x, &shape, axis, false, &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn the_reference_keeps_the_first_extreme() {
        let mut y = [0; 2];
        reference::arg_min_max(&[1.0, 3.0, 3.0, 2.0, 2.0, 0.0], &[2, 3], 1, false, &mut y);
        assert_eq!(y, [1, 0]);
        reference::arg_min_max(&[1.0, 3.0, 3.0, 2.0, 2.0, 0.0], &[2, 3], 1, true, &mut y);
        assert_eq!(y, [0, 2]);
    }

    fn check_top_k<T: TopKey + PartialEq + std::fmt::Debug>(x: &[T], row: usize, k: usize) {
        let rows = x.len() / row;
        let (mut va, mut ia) = (vec![x[0]; rows * k], vec![-1; rows * k]);
        let (mut vb, mut ib) = (vec![x[0]; rows * k], vec![-2; rows * k]);
        top_k(x, row, k, &mut va, &mut ia);
        reference::top_k(x, row, k, &mut vb, &mut ib);
        assert_eq!(ia, ib, "row {row} k {k}");
        assert_eq!(va, vb, "row {row} k {k}");
    }

    #[test]
    fn fast_top_k_is_the_reference_with_ties() {
        let mut seed = 5u64;
        for case in 0..400 {
            let row = 1 + lcg(&mut seed) as usize % 80;
            let rows = 1 + lcg(&mut seed) as usize % 5;
            let k = 1 + lcg(&mut seed) as usize % row;
            let spread = if case % 2 == 0 { 4 } else { 1000 };
            let xf: Vec<f32> = (0..row * rows)
                .map(|_| (lcg(&mut seed) % spread) as f32 - 2.0)
                .collect();
            check_top_k(&xf, row, k);
            let xu: Vec<u8> = xf.iter().map(|&v| (v + 2.0) as u8).collect();
            check_top_k(&xu, row, k);
            let xi: Vec<i32> = xf.iter().map(|&v| -(v as i32)).collect();
            check_top_k(&xi, row, k);
        }
        // Large rows take both paths, split over the pool.
        let x: Vec<f32> = (0..200_000).map(|i| ((i * 7919) % 997) as f32).collect();
        check_top_k(&x, 1000, 5);
        check_top_k(&x, 1000, 100);
    }

    #[test]
    fn the_reference_puts_the_later_of_equal_values_first() {
        let (mut v, mut i) = ([0.0; 3], [0; 3]);
        reference::top_k(&[1.0, 5.0, 1.0, 5.0, -0.0, 0.0], 6, 3, &mut v, &mut i);
        assert_eq!((v, i), ([5.0, 5.0, 1.0], [3, 1, 2]));
        // −0 and +0 are equal values: the later index wins.
        let (mut v, mut i) = ([0.0; 1], [0; 1]);
        reference::top_k(&[0.0, -0.0, -1.0], 3, 1, &mut v, &mut i);
        assert_eq!(i, [1]);
    }
}
