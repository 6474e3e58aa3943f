//! The reduction family of NeuralNetworks.h `OperationCode`: MEAN (31, NNAPI 1.1), REDUCE_ALL
//! (75) and REDUCE_ANY (76) of NNAPI 1.2 on TENSOR_BOOL8.
//!
//! [`mod@reference`] holds the plain loop (the test oracle: every input element added into its
//! output in input order); [`mean`] the operator loop that runs, which splits a reduction over
//! one run of adjacent axes into `[outer, reduced, inner]` and accumulates whole rows of
//! `inner` (the channels of an NHWC mean over height and width) in vector registers.

pub mod mean;
pub mod reference;

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
