//! Pooling operations of types.hal 1.0 (`OperationType`): AVERAGE_POOL_2D and MAX_POOL_2D for
//! TENSOR_FLOAT32 and TENSOR_QUANT8_ASYMM, and L2_POOL_2D for TENSOR_FLOAT32.
//!
//! Tensors are NHWC and pooling is per channel, so `window.output.c == window.input.c`.
//! Padding is explicit (the caller resolves SAME/VALID). As in the NNAPI 1.0 reference, padded
//! positions are not part of the window at all: averages divide by the number of in-bounds
//! elements, and a maximum is taken over in-bounds elements only.
//!
//! Quantized outputs keep the input's scale and zero point, so no requantization happens: the
//! fused activation is a clamp in the quantized domain.
//!
//! A window that lies entirely in the padding (possible only when a padding is at least the
//! window size, which the driver rejects) produces real 0 before the activation rather than
//! dividing by zero.
//!
//! Work is split over (batch, output row) through [`crate::parallel`].

use crate::conv::reference::{self as conv, column_taps, row_taps, Taps};
use crate::{Activation, QuantParams, Window};

fn debug_check(w: &Window, input: usize, output: usize) {
    debug_assert_eq!(input, w.input.len(), "input length");
    debug_assert_eq!(output, w.output.len(), "output length");
    debug_assert_eq!(w.input.c, w.output.c, "depth");
    debug_assert_eq!(w.input.n, w.output.n, "batch");
}

/// Runs `f(batch, row_taps, column_taps, row)` for every output row, with the clipped
/// windows already computed; rows are spread over the pool as convolution spreads them.
fn for_each_row<T: Send>(
    w: &Window,
    output: &mut [T],
    f: impl Fn(usize, Taps, &[Taps], &mut [T]) + Sync,
) {
    let cols = column_taps(w);
    conv::for_each_row(w, output, |b, oy, row| f(b, row_taps(w, oy), &cols, row));
}

/// Folds every in-bounds input pixel of one window into `acc` (one slot per channel), in
/// row-major window order, the order the reference sums in.
#[inline]
fn fold_window<T: Copy, A>(
    w: &Window,
    input: &[T],
    b: usize,
    ty: Taps,
    tx: Taps,
    acc: &mut [A],
    f: impl Fn(&mut A, T),
) {
    let c = w.input.c;
    for iy in ty.first_input..ty.first_input + ty.len {
        let start = w.input.offset(b, iy, tx.first_input, 0);
        // The in-bounds part of a window row is contiguous: tx.len pixels of c channels.
        for px in input[start..start + tx.len * c].chunks_exact(c) {
            for (a, &x) in acc.iter_mut().zip(px) {
                f(a, x);
            }
        }
    }
}

/// AVERAGE_POOL_2D, float32.
pub fn average_pool_f32(w: &Window, input: &[f32], act: Activation, output: &mut [f32]) {
    mean_pool_f32(w, input, act, output, |x| x, |mean| mean);
}

/// The mean of `term(x)` over each in-bounds window, then `finish`: AVERAGE_POOL_2D and
/// L2_POOL_2D differ only in those two steps.
fn mean_pool_f32(
    w: &Window,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
    term: impl Fn(f32) -> f32 + Sync,
    finish: impl Fn(f32) -> f32 + Sync,
) {
    debug_check(w, input.len(), output.len());
    let c = w.output.c;
    for_each_row(w, output, |b, ty, cols, row| {
        for (out_px, &tx) in row.chunks_exact_mut(c).zip(cols) {
            out_px.fill(0.0);
            let count = ty.len * tx.len;
            if count == 0 {
                out_px.iter_mut().for_each(|o| *o = act.apply_f32(0.0));
                continue;
            }
            fold_window(w, input, b, ty, tx, out_px, |a, x| *a += term(x));
            let n = count as f32;
            for o in out_px.iter_mut() {
                *o = act.apply_f32(finish(*o / n));
            }
        }
    });
}

/// AVERAGE_POOL_2D, quant8. The output shares `q` with the input.
pub fn average_pool_u8(
    w: &Window,
    input: &[u8],
    q: QuantParams,
    act: Activation,
    output: &mut [u8],
) {
    debug_check(w, input.len(), output.len());
    let c = w.output.c;
    let (lo, hi) = act.range_u8(q);
    // `max` then `min` (not `clamp`) so that an empty range from out-of-spec parameters
    // cannot panic.
    let clamp = move |v: i64| v.max(i64::from(lo)).min(i64::from(hi)) as u8;
    for_each_row(w, output, |b, ty, cols, row| {
        // Per-channel sums for one output pixel; u64 so no window size can overflow.
        let mut acc = vec![0u64; c];
        for (out_px, &tx) in row.chunks_exact_mut(c).zip(cols) {
            let count = (ty.len * tx.len) as u64;
            if count == 0 {
                out_px.fill(clamp(i64::from(q.zero_point.clamp(0, 255))));
                continue;
            }
            acc.fill(0);
            fold_window(w, input, b, ty, tx, &mut acc, |a, x| *a += u64::from(x));
            // The raw values share one zero point, so the average of the raw values is the
            // quantized average; adding count/2 before the integer division rounds half up,
            // as the reference does.
            for (o, &s) in out_px.iter_mut().zip(&acc) {
                *o = clamp(((s + count / 2) / count) as i64);
            }
        }
    });
}

/// MAX_POOL_2D, float32.
pub fn max_pool_f32(w: &Window, input: &[f32], act: Activation, output: &mut [f32]) {
    debug_check(w, input.len(), output.len());
    let c = w.output.c;
    for_each_row(w, output, |b, ty, cols, row| {
        for (out_px, &tx) in row.chunks_exact_mut(c).zip(cols) {
            if ty.len * tx.len == 0 {
                out_px.iter_mut().for_each(|o| *o = act.apply_f32(0.0));
                continue;
            }
            // The reference starts from the lowest finite float, not −∞.
            out_px.fill(f32::MIN);
            fold_window(w, input, b, ty, tx, out_px, |a, x| {
                if *a < x {
                    *a = x
                }
            });
            for o in out_px.iter_mut() {
                *o = act.apply_f32(*o);
            }
        }
    });
}

/// MAX_POOL_2D, quant8. The output shares `q` with the input.
pub fn max_pool_u8(w: &Window, input: &[u8], q: QuantParams, act: Activation, output: &mut [u8]) {
    debug_check(w, input.len(), output.len());
    let c = w.output.c;
    let (lo, hi) = act.range_u8(q);
    let clamp = move |v: i32| v.max(lo).min(hi) as u8;
    for_each_row(w, output, |b, ty, cols, row| {
        for (out_px, &tx) in row.chunks_exact_mut(c).zip(cols) {
            if ty.len * tx.len == 0 {
                out_px.fill(clamp(q.zero_point.clamp(0, 255)));
                continue;
            }
            out_px.fill(0);
            fold_window(w, input, b, ty, tx, out_px, |a, x| *a = (*a).max(x));
            for o in out_px.iter_mut() {
                *o = clamp(i32::from(*o));
            }
        }
    });
}

/// L2_POOL_2D, float32: `sqrt(Σ x² / count)` over the in-bounds window.
pub fn l2_pool_f32(w: &Window, input: &[f32], act: Activation, output: &mut [f32]) {
    mean_pool_f32(w, input, act, output, |x| x * x, f32::sqrt);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Nhwc, Padding};

    fn window(input: Nhwc, filter: usize, stride: usize, padding: Padding) -> Window {
        let oh = (input.h + padding.top + padding.bottom - filter) / stride + 1;
        let ow = (input.w + padding.left + padding.right - filter) / stride + 1;
        Window {
            input,
            output: Nhwc::new(input.n, oh, ow, input.c),
            filter_h: filter,
            filter_w: filter,
            stride_h: stride,
            stride_w: stride,
            padding,
        }
    }

    fn pad(all: usize) -> Padding {
        Padding {
            left: all,
            right: all,
            top: all,
            bottom: all,
        }
    }

    /// 1×3×3×2: channel 0 holds 1..9, channel 1 holds its negation.
    fn grid() -> (Nhwc, Vec<f32>) {
        let shape = Nhwc::new(1, 3, 3, 2);
        let data = (1..=9).flat_map(|v| [v as f32, -(v as f32)]).collect();
        (shape, data)
    }

    #[test]
    fn average_excludes_padding_from_count() {
        // 2×2 window, stride 2, pad 1: windows hold 1, 2, 2 and 4 in-bounds elements.
        let (shape, input) = grid();
        let w = window(shape, 2, 2, pad(1));
        assert_eq!(w.output, Nhwc::new(1, 2, 2, 2));
        let mut out = vec![0.0; 8];
        average_pool_f32(&w, &input, Activation::None, &mut out);
        assert_eq!(out, [1.0, -1.0, 2.5, -2.5, 5.5, -5.5, 7.0, -7.0]);
        average_pool_f32(&w, &input, Activation::Relu1, &mut out);
        assert_eq!(out, [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
    }

    #[test]
    fn average_u8_rounds_half_up() {
        // One channel, 1×1×4 row, window 2 stride 2: sums 1+2 and 4+4 → 3/2 → 2, 8/2 → 4.
        let w = Window {
            input: Nhwc::new(1, 1, 4, 1),
            output: Nhwc::new(1, 1, 2, 1),
            filter_h: 1,
            filter_w: 2,
            stride_h: 1,
            stride_w: 2,
            padding: Padding::default(),
        };
        let q = QuantParams::new(0.5, 3);
        let mut out = [0u8; 2];
        average_pool_u8(&w, &[1, 2, 4, 4], q, Activation::None, &mut out);
        assert_eq!(out, [2, 4]);
        // Relu: the floor is the zero point, 3.
        average_pool_u8(&w, &[1, 2, 4, 4], q, Activation::Relu, &mut out);
        assert_eq!(out, [3, 4]);
        // With a window of three, (1+2+2 + 1) / 3 = 2: 5/3 = 1.67 rounds to 2.
        let w3 = Window {
            input: Nhwc::new(1, 1, 3, 1),
            output: Nhwc::new(1, 1, 1, 1),
            filter_w: 3,
            ..w
        };
        let mut one = [0u8; 1];
        average_pool_u8(&w3, &[1, 2, 2], q, Activation::None, &mut one);
        assert_eq!(one, [2]);
    }

    #[test]
    fn average_u8_with_padding_and_stride() {
        // The float grid's channel 0 as raw values, zero point 0.
        let shape = Nhwc::new(1, 3, 3, 1);
        let input: Vec<u8> = (1..=9).collect();
        let w = window(shape, 2, 2, pad(1));
        let mut out = [0u8; 4];
        average_pool_u8(
            &w,
            &input,
            QuantParams::new(1.0, 0),
            Activation::None,
            &mut out,
        );
        // 1/1, (2+3)/2 = 2.5 → 3, (4+7)/2 = 5.5 → 6, 28/4 = 7.
        assert_eq!(out, [1, 3, 6, 7]);
    }

    #[test]
    fn max_ignores_padding() {
        // All-negative channel 1 would be clamped to 0 if padding counted as zeros.
        let (shape, input) = grid();
        let w = window(shape, 2, 2, pad(1));
        let mut out = vec![0.0; 8];
        max_pool_f32(&w, &input, Activation::None, &mut out);
        assert_eq!(out, [1.0, -1.0, 3.0, -2.0, 7.0, -4.0, 9.0, -5.0]);
        max_pool_f32(&w, &input, Activation::Relu6, &mut out);
        assert_eq!(out, [1.0, 0.0, 3.0, 0.0, 6.0, 0.0, 6.0, 0.0]);
    }

    #[test]
    fn max_u8_clamps_in_quantized_domain() {
        let shape = Nhwc::new(1, 3, 3, 1);
        let input: Vec<u8> = vec![90, 95, 99, 100, 101, 103, 110, 140, 200];
        let w = window(shape, 2, 1, pad(0));
        let q = QuantParams::new(0.5, 100);
        let mut out = [0u8; 4];
        max_pool_u8(&w, &input, q, Activation::None, &mut out);
        assert_eq!(out, [101, 103, 140, 200]);
        // Relu1 → 98..=102; Relu6 → 100..=112.
        max_pool_u8(&w, &input, q, Activation::Relu1, &mut out);
        assert_eq!(out, [101, 102, 102, 102]);
        max_pool_u8(&w, &input, q, Activation::Relu6, &mut out);
        assert_eq!(out, [101, 103, 112, 112]);
        // Relu floors at the zero point.
        max_pool_u8(&w, &[0; 9], q, Activation::Relu, &mut out);
        assert_eq!(out, [100; 4]);
    }

    #[test]
    fn l2_over_in_bounds_elements() {
        // Windows of 1, 2, 2 and 4 elements.
        let (shape, input) = grid();
        let w = window(shape, 2, 2, pad(1));
        let mut out = vec![0.0; 8];
        l2_pool_f32(&w, &input, Activation::None, &mut out);
        let expected = [
            1.0f32,
            ((4.0f32 + 9.0) / 2.0).sqrt(),
            ((16.0f32 + 49.0) / 2.0).sqrt(),
            ((25.0f32 + 36.0 + 64.0 + 81.0) / 4.0).sqrt(),
        ];
        for (i, e) in expected.iter().enumerate() {
            // Squares erase the sign of channel 1.
            assert_eq!(out[2 * i], *e);
            assert_eq!(out[2 * i + 1], *e);
        }
        l2_pool_f32(&w, &input, Activation::Relu1, &mut out);
        assert!(out.iter().all(|&v| v == 1.0));
    }

    #[test]
    fn window_entirely_in_padding_is_zero() {
        // Pad 3 with a 2-wide window: the first output's window never touches the input.
        let w = Window {
            input: Nhwc::new(1, 1, 1, 1),
            output: Nhwc::new(1, 1, 1, 1),
            filter_h: 2,
            filter_w: 2,
            stride_h: 1,
            stride_w: 1,
            padding: pad(3),
        };
        let mut f = [5.0f32];
        average_pool_f32(&w, &[7.0], Activation::None, &mut f);
        assert_eq!(f, [0.0]);
        max_pool_f32(&w, &[7.0], Activation::None, &mut f);
        assert_eq!(f, [0.0]);
        l2_pool_f32(&w, &[7.0], Activation::None, &mut f);
        assert_eq!(f, [0.0]);
        let mut q = [5u8];
        average_pool_u8(&w, &[7], QuantParams::new(1.0, 9), Activation::None, &mut q);
        assert_eq!(q, [9]);
        max_pool_u8(&w, &[7], QuantParams::new(1.0, 9), Activation::None, &mut q);
        assert_eq!(q, [9]);
    }
}
