//! The operator loop of REDUCE_MAX, REDUCE_MIN, REDUCE_PROD and REDUCE_SUM (NNAPI 1.2): as
//! MEAN's ([`super::mean`]), a reduction over adjacent axes runs as `[outer, reduced, inner]`,
//! each output row of `inner` folded over the `reduced` input rows with a plain slice loop the
//! compiler vectorises, split over the pool by output ranges; a reduction of the last axes
//! (`inner` = 1) folds each contiguous input run. Each output takes its inputs in input order,
//! as [`super::reference::fold`] does, so results are the oracle's bit for bit. Other axis
//! sets run the reference.

use super::mean::{rows, split};
use super::{reference, split_reduction, Fold, FoldKind};

/// REDUCE_MAX / REDUCE_MIN / REDUCE_PROD / REDUCE_SUM over `axes` (each once, in range) of
/// `input` of `shape`.
pub fn fold<T: Fold>(kind: FoldKind, input: &[T], shape: &[usize], axes: &[usize], out: &mut [T]) {
    match kind {
        // One instance per kind, so the step inlines into the row loops.
        FoldKind::Max => fold_as(FoldKind::Max, input, shape, axes, out),
        FoldKind::Min => fold_as(FoldKind::Min, input, shape, axes, out),
        FoldKind::Prod => fold_as(FoldKind::Prod, input, shape, axes, out),
        FoldKind::Sum => fold_as(FoldKind::Sum, input, shape, axes, out),
    }
}

#[inline(always)]
fn fold_as<T: Fold>(kind: FoldKind, input: &[T], shape: &[usize], axes: &[usize], out: &mut [T]) {
    let Some([_, r, inner]) = split_reduction(shape, axes) else {
        return reference::fold(kind, input, shape, axes, out);
    };
    let init = T::identity(kind);
    split(out, input.len(), |start, chunk| {
        if inner == 1 {
            for (j, y) in chunk.iter_mut().enumerate() {
                let o = start + j;
                *y = input[o * r..(o + 1) * r]
                    .iter()
                    .fold(init, |a, &x| T::step(kind, a, x));
            }
            return;
        }
        rows(start, chunk.len(), inner, |at, o, i0, run| {
            let acc = &mut chunk[at..at + run];
            acc.fill(init);
            for k in 0..r {
                let x = &input[(o * r + k) * inner + i0..][..run];
                for (a, &v) in acc.iter_mut().zip(x) {
                    *a = T::step(kind, *a, v);
                }
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    const KINDS: [FoldKind; 4] = [FoldKind::Max, FoldKind::Min, FoldKind::Prod, FoldKind::Sum];

    #[test]
    fn fast_fold_is_the_reference_on_random_shapes_and_axes() {
        let mut seed = 11u64;
        for case in 0..600 {
            let rank = 1 + lcg(&mut seed) as usize % 4;
            let shape: Vec<usize> = (0..rank).map(|_| 1 + lcg(&mut seed) as usize % 7).collect();
            let axes: Vec<usize> = (0..rank)
                .filter(|_| lcg(&mut seed).is_multiple_of(2))
                .collect();
            let total: usize = shape.iter().product();
            let outs = total / axes.iter().map(|&a| shape[a]).product::<usize>();
            // Values near 1 keep products finite; every 7th input is 0, some are ±∞.
            let xf: Vec<f32> = (0..total)
                .map(|i| match lcg(&mut seed) % 29 {
                    0 => 0.0,
                    1 if case % 3 == 0 => f32::INFINITY,
                    2 if case % 3 == 0 => f32::NEG_INFINITY,
                    v => 0.5 + v as f32 / 20.0 - (i % 3) as f32,
                })
                .collect();
            for kind in KINDS {
                let (mut a, mut b) = (vec![7.0; outs], vec![-7.0; outs]);
                fold(kind, &xf, &shape, &axes, &mut a);
                reference::fold(kind, &xf, &shape, &axes, &mut b);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{kind:?} {shape:?} {axes:?}");
            }
            let xu: Vec<u8> = (0..total).map(|_| lcg(&mut seed) as u8).collect();
            for kind in [FoldKind::Max, FoldKind::Min] {
                let (mut a, mut b) = (vec![1; outs], vec![2; outs]);
                fold(kind, &xu, &shape, &axes, &mut a);
                reference::fold(kind, &xu, &shape, &axes, &mut b);
                assert_eq!(a, b, "{kind:?} {shape:?} {axes:?}");
            }
        }
    }

    #[test]
    fn a_large_reduction_splits_over_the_pool_and_agrees() {
        let shape = [2, 48, 48, 33];
        let x: Vec<f32> = (0..shape.iter().product::<usize>())
            .map(|i| (i * 37 % 251) as f32 / 100.0)
            .collect();
        for axes in [&[1, 2][..], &[3], &[0]] {
            let outs = x.len() / axes.iter().map(|&a| shape[a]).product::<usize>();
            for kind in KINDS {
                let (mut a, mut b) = (vec![0.0; outs], vec![0.0; outs]);
                fold(kind, &x, &shape, axes, &mut a);
                reference::fold(kind, &x, &shape, axes, &mut b);
                assert_eq!(a, b, "{kind:?} {axes:?}");
            }
        }
    }

    #[test]
    fn the_reference_folds_as_the_specification_says() {
        // Oracle checks by hand: [[1, 5, -2], [0, ∞, 3]] over each axis.
        let x = [1.0, 5.0, -2.0, 0.0, f32::INFINITY, 3.0];
        let mut y = [0.0; 3];
        reference::fold(FoldKind::Prod, &x, &[2, 3], &[0], &mut y);
        assert_eq!(y, [0.0, f32::INFINITY, -6.0]);
        reference::fold(FoldKind::Max, &x, &[2, 3], &[0], &mut y);
        assert_eq!(y, [1.0, f32::INFINITY, 3.0]);
        let mut y = [0.0; 2];
        reference::fold(FoldKind::Sum, &x, &[2, 3], &[1], &mut y);
        assert_eq!(y, [4.0, f32::INFINITY]);
        reference::fold(FoldKind::Min, &x, &[2, 3], &[1], &mut y);
        assert_eq!(y, [-2.0, 0.0]);
        // −∞ alone: the maximum stays at the lowest finite value, as the reference's does.
        let mut y = [0.0; 1];
        reference::fold(FoldKind::Max, &[f32::NEG_INFINITY], &[1], &[0], &mut y);
        assert_eq!(y, [f32::MIN]);
        // No axis: each output is its one input through one step.
        let mut y = [9.0; 3];
        reference::fold(FoldKind::Prod, &[2.0, 0.0, -1.0], &[3], &[], &mut y);
        assert_eq!(y, [2.0, 0.0, -1.0]);
    }
}
