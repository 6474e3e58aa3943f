//! uint8 AVERAGE_POOL_2D and MAX_POOL_2D, bit-exact with
//! [`crate::pool::reference::average_pool_u8`] and [`crate::pool::reference::max_pool_u8`].
//!
//! Per output pixel the in-bounds window is folded channel-wise into a per-thread accumulator
//! row (u32 sums: a window of up to 2^24 pixels cannot overflow; larger ones go to the
//! reference), in loops the compiler vectorises. A global 7×7 average is one such window per
//! image. Output rows are split over the pool once per call.

use std::cell::RefCell;

use crate::conv::reference::taps;
use crate::conv::u8::{split_units, OutPtr};
use crate::ukernels::Ukernels;
use crate::{Activation, QuantParams, Window};

thread_local! {
    /// Per-thread channel accumulators, reused.
    static ACC: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// The largest window whose u32 sums cannot overflow.
const MAX_WINDOW: usize = 1 << 24;

fn check(w: &Window, input: &[u8], output: &[u8]) {
    assert_eq!(input.len(), w.input.len(), "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    assert_eq!(w.input.c, w.output.c, "depth");
    assert_eq!(w.input.n, w.output.n, "batch");
}

/// Runs `pixel(b, oy, ox, out_px)` for every output pixel, rows split over the pool.
fn for_each_pixel(
    w: &Window,
    output: &mut [u8],
    pixel: impl Fn(usize, usize, usize, &mut [u8]) + Sync,
) {
    let c = w.output.c;
    let row_len = w.output.w * c;
    let units = w.output.n * w.output.h;
    if row_len == 0 || units == 0 {
        return;
    }
    let out = OutPtr(output.as_mut_ptr(), std::ptr::null_mut());
    // Each window element costs about as much as ten GEMM multiply-adds.
    let work = w.output.len() * w.filter_h * w.filter_w * 10;
    split_units(units, work, |rows| {
        for r in rows {
            // SAFETY: `r < n·out_h`, so the row lies inside `output`, and this task is the
            // only one given row `r`.
            let row = unsafe { std::slice::from_raw_parts_mut(out.at(r * row_len), row_len) };
            let (b, oy) = (r / w.output.h, r % w.output.h);
            for (ox, px) in row.chunks_exact_mut(c).enumerate() {
                pixel(b, oy, ox, px);
            }
        }
    });
}

/// AVERAGE_POOL_2D, uint8 (output shares `q` with the input).
pub fn average_pool_u8(
    uk: &Ukernels,
    w: &Window,
    input: &[u8],
    q: QuantParams,
    act: Activation,
    output: &mut [u8],
) {
    let _ = uk;
    check(w, input, output);
    if w.filter_h.saturating_mul(w.filter_w) > MAX_WINDOW || w.stride_h == 0 || w.stride_w == 0 {
        crate::pool::reference::average_pool_u8(w, input, q, act, output);
        return;
    }
    let (lo, hi) = act.range_u8(q);
    // `max` then `min`, as the reference, so an empty range cannot panic.
    let clamp = move |v: u32| (v as i64).max(i64::from(lo)).min(i64::from(hi)) as u8;
    let empty = (i64::from(q.zero_point.clamp(0, 255)))
        .max(i64::from(lo))
        .min(i64::from(hi)) as u8;
    let c = w.input.c;
    for_each_pixel(w, output, |b, oy, ox, px| {
        let ty = taps(oy, w.stride_h, w.padding.top, w.filter_h, w.input.h);
        let tx = taps(ox, w.stride_w, w.padding.left, w.filter_w, w.input.w);
        let count = (ty.len * tx.len) as u32;
        if count == 0 {
            px.fill(empty);
            return;
        }
        ACC.with(|acc| {
            let mut acc = acc.borrow_mut();
            acc.clear();
            acc.resize(c, 0);
            for iy in ty.first_input..ty.first_input + ty.len {
                let start = w.input.offset(b, iy, tx.first_input, 0);
                for src in input[start..start + tx.len * c].chunks_exact(c) {
                    for (a, &x) in acc.iter_mut().zip(src) {
                        *a += u32::from(x);
                    }
                }
            }
            // Round half up, as the reference: (sum + count/2) / count.
            for (o, &s) in px.iter_mut().zip(acc.iter()) {
                *o = clamp((s + count / 2) / count);
            }
        });
    });
}

/// MAX_POOL_2D, uint8 (output shares `q` with the input).
pub fn max_pool_u8(
    uk: &Ukernels,
    w: &Window,
    input: &[u8],
    q: QuantParams,
    act: Activation,
    output: &mut [u8],
) {
    let _ = uk;
    check(w, input, output);
    if w.stride_h == 0 || w.stride_w == 0 {
        crate::pool::reference::max_pool_u8(w, input, q, act, output);
        return;
    }
    let (lo, hi) = act.range_u8(q);
    let clamp = move |v: i32| v.max(lo).min(hi) as u8;
    let empty = clamp(q.zero_point.clamp(0, 255));
    let c = w.input.c;
    for_each_pixel(w, output, |b, oy, ox, px| {
        let ty = taps(oy, w.stride_h, w.padding.top, w.filter_h, w.input.h);
        let tx = taps(ox, w.stride_w, w.padding.left, w.filter_w, w.input.w);
        if ty.len * tx.len == 0 {
            px.fill(empty);
            return;
        }
        px.fill(0);
        for iy in ty.first_input..ty.first_input + ty.len {
            let start = w.input.offset(b, iy, tx.first_input, 0);
            for src in input[start..start + tx.len * c].chunks_exact(c) {
                for (o, &x) in px.iter_mut().zip(src) {
                    *o = (*o).max(x);
                }
            }
        }
        for o in px.iter_mut() {
            *o = clamp(i32::from(*o));
        }
    });
}
