//! AVERAGE_POOL_2D and MAX_POOL_2D, float32 NHWC, over the [`crate::ukernels::f32_small::F32Pool`]
//! kernels: one kernel call per output pixel, vectorised over channels, so a global pool (one
//! window over the whole input) is a single call. Semantics as [`crate::pool::reference`]: padding
//! is not part of the window (averages divide by the in-bounds count), a window entirely in the
//! padding gives the activation of 0. Output rows are spread over the pool as the reference spreads
//! them.

use crate::conv::reference::{for_each_row, taps};
use crate::ukernels::f32_small::{ClampF32, PoolPixel};
use crate::ukernels::Ukernels;
use crate::{Activation, Window};

/// AVERAGE_POOL_2D, float32; same results as [`crate::pool::reference::average_pool_f32`].
pub fn average_pool_f32(
    uk: &Ukernels,
    w: &Window,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    pool(uk.f32_pool.avg, w, input, act, output);
}

/// MAX_POOL_2D, float32; same results as [`crate::pool::reference::max_pool_f32`].
pub fn max_pool_f32(uk: &Ukernels, w: &Window, input: &[f32], act: Activation, output: &mut [f32]) {
    pool(uk.f32_pool.max, w, input, act, output);
}

fn pool(
    kernel: unsafe fn(&PoolPixel),
    w: &Window,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    assert_eq!(input.len(), w.input.len(), "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    assert_eq!(w.input.c, w.output.c, "depth");
    assert_eq!(w.input.n, w.output.n, "batch");
    assert!(w.stride_h > 0 && w.stride_w > 0, "stride");
    let c = w.output.c;
    if c == 0 {
        return;
    }
    let clamp = ClampF32::fused(act);
    for_each_row(w, output, |b, oy, row| {
        let ty = taps(oy, w.stride_h, w.padding.top, w.filter_h, w.input.h);
        for (ox, px) in row.chunks_exact_mut(c).enumerate() {
            let tx = taps(ox, w.stride_w, w.padding.left, w.filter_w, w.input.w);
            if ty.len == 0 || tx.len == 0 {
                px.fill(clamp.apply(0.0));
                continue;
            }
            let start = w.input.offset(b, ty.first_input, tx.first_input, 0);
            let a = PoolPixel {
                input: input[start..].as_ptr(),
                in_row: w.input.w * c,
                in_px: c,
                rows: ty.len,
                cols: tx.len,
                channels: c,
                output: px.as_mut_ptr(),
                clamp,
            };
            // SAFETY: the clipped window lies inside `input` (the taps are clipped to its
            // extent), `px` is one whole output pixel, and the table holds only kernels the
            // processor runs.
            unsafe { kernel(&a) };
        }
    });
}
