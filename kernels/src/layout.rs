//! The NCHW ⇄ NHWC transposes that run NNAPI 1.2's NCHW `layout` (types.hal V1_2, the image
//! operations' BOOL `layout` input) on the NHWC kernels: input 0 is transposed to NHWC, the
//! operation runs, and its output is transposed back. Moving values leaves quant8 exact.

use crate::Nhwc;

/// NCHW `[n, c, h, w]` → NHWC `[n, h, w, c]` (`shape` gives the NHWC extents): the NCHW
/// `layout` of NNAPI 1.2 image operations runs as its NHWC transpose.
pub fn nchw_to_nhwc<T: Copy>(input: &[T], shape: Nhwc, output: &mut [T]) {
    let plane = shape.h * shape.w;
    for n in 0..shape.n {
        let src = &input[n * shape.c * plane..][..shape.c * plane];
        let dst = &mut output[n * shape.c * plane..][..shape.c * plane];
        for (p, pixel) in dst.chunks_exact_mut(shape.c).enumerate() {
            for (c, v) in pixel.iter_mut().enumerate() {
                *v = src[c * plane + p];
            }
        }
    }
}

/// NHWC `[n, h, w, c]` → NCHW `[n, c, h, w]`, the inverse of [`nchw_to_nhwc`].
pub fn nhwc_to_nchw<T: Copy>(input: &[T], shape: Nhwc, output: &mut [T]) {
    let plane = shape.h * shape.w;
    for n in 0..shape.n {
        let src = &input[n * shape.c * plane..][..shape.c * plane];
        let dst = &mut output[n * shape.c * plane..][..shape.c * plane];
        for (p, pixel) in src.chunks_exact(shape.c).enumerate() {
            for (c, &v) in pixel.iter().enumerate() {
                dst[c * plane + p] = v;
            }
        }
    }
}
