//! MEAN (NNAPI 1.1) as the reference computes it: each output is the sum of its inputs, added
//! in input order, divided by their count. Float32 sums and divides in float32; quant8 sums the
//! stored values exactly and divides in integers, truncating towards zero — for
//! TENSOR_QUANT8_ASYMM_SIGNED the sum is of the signed values, so a negative mean truncates
//! upwards, which the unsigned image (values + 128) must reproduce. The output keeps the
//! input's quantization. REDUCE_ALL and REDUCE_ANY (NNAPI 1.2) fold TENSOR_BOOL8 bytes
//! (nonzero is true) with AND and OR into 0 or 1.

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
