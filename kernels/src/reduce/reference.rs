//! Reference loops of the reduce family (see [`crate::reduce`]).

/// Reduces `input` (shape `dims`) over the axes marked in `reduced` with `f`, starting every
/// output element at `init`; `out` holds the product of the kept extents (reduced axes
/// dropped or kept as 1: the layout is the same).
pub fn reduce<T: Copy>(
    input: &[T],
    dims: &[usize],
    reduced: &[bool],
    init: T,
    out: &mut [T],
    f: impl Fn(T, T) -> T,
) {
    out.fill(init);
    if input.is_empty() {
        return;
    }
    // Output strides of the input axes: 0 along a reduced axis.
    let mut strides = vec![0; dims.len()];
    let mut s = 1;
    for axis in (0..dims.len()).rev() {
        if !reduced[axis] {
            strides[axis] = s;
            s *= dims[axis];
        }
    }
    let mut index = vec![0usize; dims.len()];
    for &x in input {
        let o: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out[o] = f(out[o], x);
        for axis in (0..dims.len()).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// REDUCE_ALL of TENSOR_BOOL8 bytes (nonzero is true), writing 0 or 1.
pub fn all(input: &[u8], dims: &[usize], reduced: &[bool], out: &mut [u8]) {
    reduce(input, dims, reduced, 1, out, |a, x| {
        u8::from(a != 0 && x != 0)
    });
}

/// REDUCE_ANY of TENSOR_BOOL8 bytes, writing 0 or 1.
pub fn any(input: &[u8], dims: &[usize], reduced: &[bool], out: &mut [u8]) {
    reduce(input, dims, reduced, 0, out, |a, x| {
        u8::from(a != 0 || x != 0)
    });
}
