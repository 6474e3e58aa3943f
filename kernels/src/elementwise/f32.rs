//! Element-wise float32 operations (ADD, MUL, and NNAPI 1.1's SUB and DIV of same-shape tensors,
//! RELU/RELU1/RELU6, LOGISTIC, TANH) and SOFTMAX over the [`crate::ukernels::f32_small::F32Vec`] loops, with the semantics of
//! [`crate::elementwise::reference`] and [`crate::normalization::reference`]. Long tensors are
//! split once over the pool in contiguous chunks (SOFTMAX: whole rows).

use crate::parallel::{for_chunks, MIN_ELEMENTS};
use crate::ukernels::f32_small::ClampF32;
use crate::ukernels::Ukernels;
use crate::Activation;

/// Elements per parallel task: about four tasks per thread, whole cache lines.
fn chunk_len(len: usize) -> usize {
    let tasks = 4 * crate::parallel::threads();
    len.div_ceil(tasks).next_multiple_of(16).max(4096)
}

fn parallel(len: usize) -> bool {
    len >= MIN_ELEMENTS && crate::parallel::threads() > 1
}

type Binary = unsafe fn(&[f32], &[f32], &mut [f32], ClampF32);
pub(crate) type Unary = unsafe fn(&[f32], &mut [f32]);

fn binary(f: Binary, a: &[f32], b: &[f32], c: ClampF32, out: &mut [f32]) {
    assert_eq!(a.len(), out.len(), "first operand length");
    assert_eq!(b.len(), out.len(), "second operand length");
    if parallel(out.len()) {
        let n = chunk_len(out.len());
        for_chunks(out, n, |i, o| {
            let (a, b) = (&a[i * n..][..o.len()], &b[i * n..][..o.len()]);
            // SAFETY: table slots only hold kernels the processor runs.
            unsafe { f(a, b, o, c) }
        });
    } else {
        // SAFETY: table slots only hold kernels the processor runs.
        unsafe { f(a, b, out, c) }
    }
}

pub(crate) fn unary(f: Unary, input: &[f32], out: &mut [f32]) {
    assert_eq!(input.len(), out.len(), "input length");
    if parallel(out.len()) {
        let n = chunk_len(out.len());
        for_chunks(out, n, |i, o| {
            let x = &input[i * n..][..o.len()];
            // SAFETY: table slots only hold kernels the processor runs.
            unsafe { f(x, o) }
        });
    } else {
        // SAFETY: table slots only hold kernels the processor runs.
        unsafe { f(input, out) }
    }
}

/// ADD of same-shape tensors: `act(a + b)`, NaN passing the activation as in the reference.
pub fn add_f32(uk: &Ukernels, a: &[f32], b: &[f32], act: Activation, out: &mut [f32]) {
    binary(uk.f32_vec.add, a, b, ClampF32::passing_nan(act), out);
}

/// MUL of same-shape tensors: `act(a · b)`.
pub fn mul_f32(uk: &Ukernels, a: &[f32], b: &[f32], act: Activation, out: &mut [f32]) {
    binary(uk.f32_vec.mul, a, b, ClampF32::passing_nan(act), out);
}

/// SUB of same-shape tensors (NNAPI 1.1): `act(a − b)`, NaN passing the activation.
pub fn sub_f32(a: &[f32], b: &[f32], act: Activation, out: &mut [f32]) {
    let (lo, hi) = act.range_f32();
    plain_binary(a, b, out, move |x, y| clamp_passing_nan(x - y, lo, hi));
}

/// DIV of same-shape tensors (NNAPI 1.1): `act(a / b)`.
pub fn div_f32(a: &[f32], b: &[f32], act: Activation, out: &mut [f32]) {
    let (lo, hi) = act.range_f32();
    plain_binary(a, b, out, move |x, y| clamp_passing_nan(x / y, lo, hi));
}

/// The reference's `min(max(x, lo), hi)`: a NaN passes through. Written as two selects, which
/// the compiler turns into vector compare-and-blend.
#[inline(always)]
fn clamp_passing_nan(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if hi < y {
        hi
    } else {
        y
    }
}

/// `out[i] = f(a[i], b[i])` in blocks of 16 that the compiler vectorises for the build's
/// vector width, split over the pool like the micro-kernel loops above.
fn plain_binary(a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync + Copy) {
    assert_eq!(a.len(), out.len(), "first operand length");
    assert_eq!(b.len(), out.len(), "second operand length");
    let body = move |a: &[f32], b: &[f32], o: &mut [f32]| {
        let mut oc = o.chunks_exact_mut(16);
        for ((o, a), b) in (&mut oc).zip(a.chunks_exact(16)).zip(b.chunks_exact(16)) {
            for i in 0..16 {
                o[i] = f(a[i], b[i]);
            }
        }
        let done = o.len() / 16 * 16;
        for ((o, &x), &y) in o[done..].iter_mut().zip(&a[done..]).zip(&b[done..]) {
            *o = f(x, y);
        }
    };
    if parallel(out.len()) {
        let n = chunk_len(out.len());
        for_chunks(out, n, |i, o| {
            body(&a[i * n..][..o.len()], &b[i * n..][..o.len()], o)
        });
    } else {
        body(a, b, out);
    }
}

/// RELU (`Relu`), RELU1 (`Relu1`), RELU6 (`Relu6`); `None` copies.
pub fn clamp_f32(uk: &Ukernels, act: Activation, input: &[f32], out: &mut [f32]) {
    let c = ClampF32::passing_nan(act);
    let f = uk.f32_vec.clamp;
    assert_eq!(input.len(), out.len(), "input length");
    if parallel(out.len()) {
        let n = chunk_len(out.len());
        for_chunks(out, n, |i, o| {
            let x = &input[i * n..][..o.len()];
            // SAFETY: table slots only hold kernels the processor runs.
            unsafe { f(x, o, c) }
        });
    } else {
        // SAFETY: table slots only hold kernels the processor runs.
        unsafe { f(input, out, c) }
    }
}

/// LOGISTIC: `1 / (1 + exp(−x))`.
pub fn logistic_f32(uk: &Ukernels, input: &[f32], out: &mut [f32]) {
    unary(uk.f32_vec.logistic, input, out);
}

/// TANH.
pub fn tanh_f32(uk: &Ukernels, input: &[f32], out: &mut [f32]) {
    unary(uk.f32_vec.tanh, input, out);
}

/// SOFTMAX over rows of `depth`: `exp(β·(x − max)) / Σ exp(β·(x − max))`.
pub fn softmax_f32(uk: &Ukernels, beta: f32, depth: usize, input: &[f32], out: &mut [f32]) {
    assert_eq!(input.len(), out.len(), "input length");
    if depth == 0 || input.is_empty() {
        return;
    }
    assert_eq!(input.len() % depth, 0, "rows of depth");
    let v = uk.f32_vec;
    let rows = |src: &[f32], dst: &mut [f32]| {
        for (x, y) in src.chunks_exact(depth).zip(dst.chunks_exact_mut(depth)) {
            // SAFETY: table slots only hold kernels the processor runs; `x` is non-empty.
            unsafe {
                let max = (v.max)(x);
                let sum = (v.exp_sum)(x, y, max, beta);
                (v.div)(y, sum);
            }
        }
    };
    if parallel(out.len()) && input.len() > depth {
        let n = chunk_len(out.len()).div_ceil(depth) * depth;
        for_chunks(out, n, |i, y| rows(&input[i * n..][..y.len()], y));
    } else {
        rows(input, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::reference;

    #[test]
    fn fast_sub_and_div_are_the_reference_on_tails_and_long_tensors() {
        for n in [1usize, 15, 16, 17, 33, 100_003] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 9.0).collect();
            let b: Vec<f32> = (0..n)
                .map(|i| (i as f32 * 0.11).cos() * 3.0 + 0.01)
                .collect();
            for act in [
                Activation::None,
                Activation::Relu,
                Activation::Relu1,
                Activation::Relu6,
            ] {
                let (mut x, mut y) = (vec![0.0; n], vec![0.0; n]);
                sub_f32(&a, &b, act, &mut x);
                reference::sub_f32(&a, &[n], &b, &[n], act, &mut y, &[n]);
                assert_eq!(x, y);
                div_f32(&a, &b, act, &mut x);
                reference::div_f32(&a, &[n], &b, &[n], act, &mut y, &[n]);
                assert_eq!(x, y);
            }
        }
    }
}
