//! MEAN (NNAPI 1.1) as the reference computes it: each output is the sum of its inputs, added
//! in input order, divided by their count. Float32 sums and divides in float32; quant8 sums the
//! stored values exactly and divides in integers, truncating towards zero — for
//! TENSOR_QUANT8_ASYMM_SIGNED the sum is of the signed values, so a negative mean truncates
//! upwards, which the unsigned image (values + 128) must reproduce. The output keeps the
//! input's quantization. REDUCE_ALL and REDUCE_ANY (NNAPI 1.2) fold TENSOR_BOOL8 bytes
//! (nonzero is true) with AND and OR into 0 or 1. REDUCE_MAX, REDUCE_MIN, REDUCE_PROD and
//! REDUCE_SUM (NNAPI 1.2) fold the same way ([`fold`]): each output starts at the operation's
//! identity and takes its inputs in input order, as the reference's generic reduction does —
//! so a float32 sum rounds in that order, and a product with a zero factor is 0 even beside an
//! infinity. ARGMAX / ARGMIN keep the first index of the extreme value; TOPK_V2 orders a row by
//! value and then by index, both descending.

use super::{Fold, FoldKind, TopKey};

/// The output index of every input element: input strides mapped to output strides, 0 along
/// reduced axes.
fn for_each_output_index(shape: &[usize], axes: &[usize], mut f: impl FnMut(usize, usize)) {
    let rank = shape.len();
    let mut out_stride = vec![0usize; rank];
    let mut s = 1;
    for k in (0..rank).rev() {
        if !axes.contains(&k) {
            out_stride[k] = s;
            s *= shape[k];
        }
    }
    let total: usize = shape.iter().product();
    let mut idx = vec![0usize; rank];
    for i in 0..total {
        let o: usize = idx.iter().zip(&out_stride).map(|(a, b)| a * b).sum();
        f(i, o);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// REDUCE_MAX / REDUCE_MIN / REDUCE_PROD / REDUCE_SUM over `axes` (each once, in range):
/// every output starts at `kind`'s identity and takes its inputs in input order.
pub fn fold<T: Fold>(kind: FoldKind, input: &[T], shape: &[usize], axes: &[usize], out: &mut [T]) {
    out.fill(T::identity(kind));
    for_each_output_index(shape, axes, |i, o| out[o] = T::step(kind, out[o], input[i]));
}

/// ARGMAX (`min` false) or ARGMIN along `axis`: the index of the first largest (smallest)
/// value, by a strict comparison with the best so far.
pub fn arg_min_max<T: PartialOrd + Copy>(
    input: &[T],
    shape: &[usize],
    axis: usize,
    min: bool,
    out: &mut [i32],
) {
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| input[(o * n + k) * inner + i];
            let (mut best, mut index) = (at(0), 0);
            for k in 1..n {
                let v = at(k);
                if (min && v < best) || (!min && v > best) {
                    best = v;
                    index = k;
                }
            }
            out[o * inner + i] = index as i32;
        }
    }
}

/// TOPK_V2 of the rows of `row` elements: each row's `k` largest values, ordered by
/// (value, index) descending — of equal values the later one comes first, and is the one
/// kept at the cut.
pub fn top_k<T: TopKey>(input: &[T], row: usize, k: usize, values: &mut [T], indices: &mut [i32]) {
    for (r, x) in input.chunks_exact(row).enumerate() {
        let mut pairs: Vec<(T, usize)> = x.iter().copied().zip(0..).collect();
        pairs.sort_by(|a, b| T::order(b.0, a.0).then(b.1.cmp(&a.1)));
        for (j, &(v, i)) in pairs[..k].iter().enumerate() {
            values[r * k + j] = v;
            indices[r * k + j] = i as i32;
        }
    }
}

fn count(shape: &[usize], axes: &[usize]) -> usize {
    axes.iter().map(|&a| shape[a]).product()
}

/// MEAN on float32 over `axes` (each once, in range) of `input` of `shape`.
pub fn mean_f32(input: &[f32], shape: &[usize], axes: &[usize], out: &mut [f32]) {
    out.fill(0.0);
    for_each_output_index(shape, axes, |i, o| out[o] += input[i]);
    let n = count(shape, axes) as f32;
    for v in out {
        *v /= n;
    }
}

/// MEAN on quant8 stored as bytes; `signed`: the bytes are the +128 image of int8 values.
pub fn mean_u8(input: &[u8], shape: &[usize], axes: &[usize], signed: bool, out: &mut [u8]) {
    let mut sums = vec![0i64; out.len()];
    let bias = if signed { 128 } else { 0 };
    for_each_output_index(shape, axes, |i, o| sums[o] += i64::from(input[i]) - bias);
    let n = count(shape, axes) as i64;
    for (v, s) in out.iter_mut().zip(sums) {
        *v = (s / n + bias).clamp(0, 255) as u8;
    }
}

/// REDUCE_ALL of TENSOR_BOOL8 bytes over `axes` (each once, in range), writing 0 or 1.
pub fn all(input: &[u8], shape: &[usize], axes: &[usize], out: &mut [u8]) {
    out.fill(1);
    for_each_output_index(shape, axes, |i, o| out[o] &= u8::from(input[i] != 0));
}

/// REDUCE_ANY of TENSOR_BOOL8 bytes over `axes` (each once, in range), writing 0 or 1.
pub fn any(input: &[u8], shape: &[usize], axes: &[usize], out: &mut [u8]) {
    out.fill(0);
    for_each_output_index(shape, axes, |i, o| out[o] |= u8::from(input[i] != 0));
}
