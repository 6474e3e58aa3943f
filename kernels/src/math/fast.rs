//! Operator loops of the math family for same-shape operands (see [`crate::math`]): EXP and LOG
//! on the float32 vector loops of the micro-kernel table (the exponential and logarithm of
//! `ukernels::simd`, a few ULP from the exact values, at every level), and the reference's
//! other scalar functions over contiguous chunks, which the compiler vectorises for the ISA level
//! the crate is built for; all split once over the pool for long tensors.

use crate::elementwise::f32::unary;
use crate::parallel::{for_chunks, threads, MIN_ELEMENTS};
use crate::ukernels::Ukernels;

/// EXP: `out[i] = exp(x[i])`.
pub fn exp_f32(uk: &Ukernels, x: &[f32], out: &mut [f32]) {
    unary(uk.f32_vec.exp, x, out);
}

/// LOG: `out[i] = ln(x[i])` (−∞ at ±0, NaN below 0).
pub fn log_f32(uk: &Ukernels, x: &[f32], out: &mut [f32]) {
    unary(uk.f32_vec.log, x, out);
}

/// Elements per parallel task: about four tasks per thread, whole cache lines.
fn chunk_len(len: usize) -> usize {
    len.div_ceil(4 * threads()).next_multiple_of(64).max(4096)
}

/// `out[i] = f(input[i])`, split over the pool for long tensors.
pub fn map<T: Copy + Sync, U: Send>(input: &[T], out: &mut [U], f: impl Fn(T) -> U + Sync + Send) {
    assert_eq!(input.len(), out.len(), "input length");
    let body = |x: &[T], o: &mut [U]| {
        for (o, &x) in o.iter_mut().zip(x) {
            *o = f(x);
        }
    };
    if out.len() >= MIN_ELEMENTS && threads() > 1 {
        let n = chunk_len(out.len());
        for_chunks(out, n, |i, o| body(&input[i * n..][..o.len()], o));
    } else {
        body(input, out);
    }
}

/// `out[i] = f(a[i], b[i])`, split over the pool for long tensors.
pub fn zip<A: Copy + Sync, B: Copy + Sync, U: Send>(
    a: &[A],
    b: &[B],
    out: &mut [U],
    f: impl Fn(A, B) -> U + Sync + Send,
) {
    assert_eq!(a.len(), out.len(), "first operand length");
    assert_eq!(b.len(), out.len(), "second operand length");
    let body = |a: &[A], b: &[B], o: &mut [U]| {
        for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
    };
    if out.len() >= MIN_ELEMENTS && threads() > 1 {
        let n = chunk_len(out.len());
        for_chunks(out, n, |i, o| {
            body(&a[i * n..][..o.len()], &b[i * n..][..o.len()], o)
        });
    } else {
        body(a, b, out);
    }
}
