//! Oracles of the indexing family (NNAPI 1.2 GATHER, 1.3 FILL), written from the operations'
//! NeuralNetworks.h text one output element at a time.

use super::check_indices;
use crate::KernelError;

/// GATHER (NNAPI 1.2) along `axis`: with the input `[outer, shape[axis], inner]` (extents
/// before, on and after the axis) the output is `[outer, indices.len(), inner]`, and output
/// `(o, n, i)` is input `(o, indices[n], i)`. An index outside `0..shape[axis]` is an error,
/// found before anything is written.
pub fn gather<T: Copy>(
    input: &[T],
    shape: &[usize],
    axis: usize,
    indices: &[i32],
    out: &mut [T],
) -> Result<(), KernelError> {
    check_indices(indices, shape[axis])?;
    let inner: usize = shape[axis + 1..].iter().product();
    let count = indices.len();
    for (at, o) in out.iter_mut().enumerate() {
        let i = at % inner;
        let n = (at / inner) % count;
        let outer = at / inner / count;
        *o = input[(outer * shape[axis] + indices[n] as usize) * inner + i];
    }
    Ok(())
}

/// FILL (NNAPI 1.3): every element is `value`.
pub fn fill<T: Copy>(value: T, out: &mut [T]) {
    for o in out {
        *o = value;
    }
}
