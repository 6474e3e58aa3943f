//! The reduction family of NeuralNetworks.h `OperationCode`: MEAN (31, NNAPI 1.1), REDUCE_ALL
//! (75) and REDUCE_ANY (76) of NNAPI 1.2 on TENSOR_BOOL8, REDUCE_MAX (77), REDUCE_MIN (78),
//! REDUCE_PROD (79) and REDUCE_SUM (80), and the index reductions ARGMAX (39), ARGMIN (40) and
//! TOPK_V2 (90) of NNAPI 1.2.
//!
//! [`mod@reference`] holds the plain loops (the test oracles: every input element folded into
//! its output in input order); [`mean`] and [`fold`] the operator loops that run, which split a
//! reduction over one run of adjacent axes into `[outer, reduced, inner]` and accumulate whole
//! rows of `inner` (the channels of an NHWC mean over height and width) in vector registers;
//! [`index`] those of ARGMAX, ARGMIN and TOPK_V2.

pub mod fold;
pub mod index;
pub mod mean;
pub mod reference;

use std::cmp::Ordering;

/// Which of the folding reductions (NNAPI 1.2) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoldKind {
    Max,
    Min,
    Prod,
    Sum,
}

/// An element the folding reductions take: float32, or quant8 bytes (REDUCE_MAX / REDUCE_MIN
/// only; the stored values compare as the real ones do, so no requantization is needed).
pub trait Fold: Copy + Send + Sync {
    /// What an output starts at: the lowest value for a maximum, the largest for a minimum.
    fn identity(kind: FoldKind) -> Self;
    /// One step of the fold, `acc` the result so far.
    fn step(kind: FoldKind, acc: Self, x: Self) -> Self;
}

impl Fold for f32 {
    fn identity(kind: FoldKind) -> f32 {
        match kind {
            FoldKind::Max => f32::MIN,
            FoldKind::Min => f32::MAX,
            FoldKind::Prod => 1.0,
            FoldKind::Sum => 0.0,
        }
    }
    #[inline(always)]
    fn step(kind: FoldKind, acc: f32, x: f32) -> f32 {
        match kind {
            // The reference's max(acc, x) keeps acc unless acc < x (so a NaN input is
            // skipped), its min(acc, x) unless x < acc.
            FoldKind::Max => {
                if acc < x {
                    x
                } else {
                    acc
                }
            }
            FoldKind::Min => {
                if x < acc {
                    x
                } else {
                    acc
                }
            }
            // 0 · ∞ would be NaN; the reference makes any product with a zero factor 0.
            FoldKind::Prod => {
                if acc == 0.0 || x == 0.0 {
                    0.0
                } else {
                    acc * x
                }
            }
            FoldKind::Sum => acc + x,
        }
    }
}

impl Fold for u8 {
    fn identity(kind: FoldKind) -> u8 {
        match kind {
            FoldKind::Max => 0,
            FoldKind::Min => 255,
            // Not run on quant8 (the specification allows float only); the stored values'
            // own identities.
            FoldKind::Prod => 1,
            FoldKind::Sum => 0,
        }
    }
    #[inline(always)]
    fn step(kind: FoldKind, acc: u8, x: u8) -> u8 {
        match kind {
            FoldKind::Max => acc.max(x),
            FoldKind::Min => acc.min(x),
            FoldKind::Prod => acc.wrapping_mul(x),
            FoldKind::Sum => acc.wrapping_add(x),
        }
    }
}

/// An element TOPK_V2 orders: float32 by value with −0 equal to +0 (as `<` has them; a NaN
/// sorts above or below every number by its sign, where the reference leaves the order
/// unspecified), int32 and quant8 bytes by value.
pub trait TopKey: Copy + Send + Sync {
    fn order(a: Self, b: Self) -> Ordering;
}

impl TopKey for f32 {
    #[inline]
    fn order(a: f32, b: f32) -> Ordering {
        // Adding +0 turns −0 into +0 and leaves every other value as it is.
        (a + 0.0).total_cmp(&(b + 0.0))
    }
}

impl TopKey for i32 {
    #[inline]
    fn order(a: i32, b: i32) -> Ordering {
        a.cmp(&b)
    }
}

impl TopKey for u8 {
    #[inline]
    fn order(a: u8, b: u8) -> Ordering {
        a.cmp(&b)
    }
}

/// A shape with its reduced axes merged: `[outer, reduced, inner]` when the reduced axes (extent-1
/// axes aside) are adjacent, else `None`.
pub fn split_reduction(shape: &[usize], axes: &[usize]) -> Option<[usize; 3]> {
    let reduced = |k: usize| axes.contains(&k);
    let wide: Vec<usize> = (0..shape.len()).filter(|&k| shape[k] != 1).collect();
    let Some(f) = wide.iter().position(|&k| reduced(k)) else {
        // Nothing of extent above 1 is reduced: every output is one input.
        return Some([1, 1, shape.iter().product()]);
    };
    let mut k = f;
    let mut r = 1;
    while k < wide.len() && reduced(wide[k]) {
        r *= shape[wide[k]];
        k += 1;
    }
    if wide[k..].iter().any(|&a| reduced(a)) {
        return None;
    }
    let outer = wide[..f].iter().map(|&a| shape[a]).product();
    let inner = wide[k..].iter().map(|&a| shape[a]).product();
    Some([outer, r, inner])
}
