//! A pointwise CONV_2D feeding a 3×3 DEPTHWISE_CONV_2D, computed in bands of output rows
//! (float32; the pair at the head of MobileNet v2's inverted residual blocks).
//!
//! Run one after the other, the pointwise layer writes its whole output before the depthwise
//! reads it back: 4.8 MB for v2's 112×112×96 expansion, which leaves the caches on its way and
//! returns from memory. Here the depthwise's output rows are walked in bands; each band's input
//! rows are computed by the pointwise GEMM into a scratch of a few rows, where the depthwise
//! reads them while they are still in L2. Rows a band shares with the next one (the 3×3
//! window overlaps at stride 1 and 2) are kept, moved to the scratch's head, not computed
//! again, so each intermediate row is computed once per thread's share.
//!
//! The arithmetic is that of the two operators run separately, row for row: the GEMM computes
//! every row alone (its tiles group rows, never sums across them) and the depthwise's result for
//! a pixel does not depend on which rows are passed with it; the tests compare bit for bit.

use std::cell::RefCell;

use super::dw_f32::{depthwise_conv2d_f32, PackedDwF32};
use super::f32::{fully_connected_f32, PackedConvF32};
use crate::{Activation, Nhwc, Padding, Window};

/// Bytes of intermediate rows one band may hold: half of a 512 KiB L2, leaving room for the
/// packed weights of both operators and the band's output.
const BAND_BYTES: usize = 256 << 10;

thread_local! {
    /// The intermediate rows of the current band, per thread.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Whether [`pointwise_depthwise_f32`] computes this pair: a 3×3 depthwise window of
/// multiplier 1 at stride 1 or 2 over the pointwise output `[n, h, w, pw.out_c]`.
pub fn fusable(pw: &PackedConvF32, dw: &PackedDwF32, w: &Window) -> bool {
    let s = pw.shape();
    (s.kh, s.kw) == (1, 1)
        && dw.dims() == (3, 3, s.out_c)
        && (w.filter_h, w.filter_w) == (3, 3)
        && w.input.c == s.out_c
        && w.output.c == s.out_c
        && w.input.n == w.output.n
        && matches!(w.stride_h, 1 | 2)
        && matches!(w.stride_w, 1 | 2)
        && w.padding.top <= 2
        && w.padding.bottom <= 2
}

/// The intermediate rows of one band `r0..r1` of output rows: the first input row the
/// window needs, that row clipped to the image, the end clipped to it, and the padding rows
/// above and below that the clipping cut off.
struct BandRows {
    i0: usize,
    i1: usize,
    top: usize,
    bottom: usize,
}

fn band_rows(w: &Window, r0: usize, r1: usize) -> BandRows {
    let first = (r0 * w.stride_h) as isize - w.padding.top as isize;
    let end = ((r1 - 1) * w.stride_h) as isize - w.padding.top as isize + w.filter_h as isize;
    let i0 = first.max(0) as usize;
    let i1 = (end.max(0) as usize).min(w.input.h);
    BandRows {
        i0,
        i1,
        top: (i0 as isize - first) as usize,
        bottom: (end - i1 as isize) as usize,
    }
}

/// `output = depthwise(pointwise(input))`: the pointwise CONV_2D `pw` (activation `pw_act`)
/// of the NHWC `input` `[n, h, w, pw.in_c]`, then the depthwise `dw` over window `w`
/// (activation `dw_act`), whose input is that `[n, h, w, pw.out_c]` intermediate. Requires
/// [`fusable`]. Called on a pool worker, the output rows are shared between the threads,
/// each computing the intermediate rows its share reads.
#[allow(clippy::too_many_arguments)]
pub fn pointwise_depthwise_f32(
    pw: &PackedConvF32,
    pw_act: Activation,
    w: &Window,
    dw: &PackedDwF32,
    dw_act: Activation,
    input: &[f32],
    output: &mut [f32],
) {
    assert!(fusable(pw, dw, w), "pointwise and depthwise do not fuse");
    let ci = pw.shape().in_c;
    let (n, h, wd, cm) = (w.input.n, w.input.h, w.input.w, w.input.c);
    assert_eq!(input.len(), n * h * wd * ci, "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    if output.is_empty() {
        return;
    }
    let row_in = wd * ci;
    let row_mid = wd * cm;
    let row_out = w.output.w * cm;
    let (oh, s) = (w.output.h, w.stride_h);
    // The largest band whose intermediate rows fit BAND_BYTES: (band − 1)·s + 3 rows.
    let fit = (BAND_BYTES / (row_mid * std::mem::size_of::<f32>())).max(w.filter_h);
    let band = ((fit - w.filter_h) / s + 1).min(oh);
    let rows = n * oh;
    let threads = crate::parallel::threads();
    let parts = threads.min(rows);
    let out = SharedOut(output.as_mut_ptr());
    let share = |p: usize| {
        let (g0, g1) = (p * rows / parts, (p + 1) * rows / parts);
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            let need = ((band - 1) * s + w.filter_h) * row_mid;
            if scratch.len() < need {
                scratch.resize(need, 0.0);
            }
            let mut g = g0;
            // Intermediate rows held in the scratch: image `held.0`, rows `held.1..held.2`.
            let mut held = (usize::MAX, 0, 0);
            while g < g1 {
                let (b, r0) = (g / oh, g % oh);
                let r1 = (r0 + band).min(oh).min(r0 + (g1 - g));
                let br = band_rows(w, r0, r1);
                let mut from = br.i0;
                if held.0 == b && held.2 > br.i0 && held.1 <= br.i0 {
                    scratch.copy_within((br.i0 - held.1) * row_mid..(held.2 - held.1) * row_mid, 0);
                    from = held.2;
                }
                if br.i1 > from {
                    let at = b * h + from;
                    let end = b * h + br.i1;
                    fully_connected_f32(
                        pw,
                        (br.i1 - from) * wd,
                        &input[at * row_in..end * row_in],
                        pw_act,
                        &mut scratch[(from - br.i0) * row_mid..(br.i1 - br.i0) * row_mid],
                    );
                }
                held = (b, br.i0, br.i1.max(from));
                let band_window = Window {
                    input: Nhwc::new(1, br.i1 - br.i0, wd, cm),
                    output: Nhwc::new(1, r1 - r0, w.output.w, cm),
                    padding: Padding {
                        top: br.top,
                        bottom: br.bottom,
                        ..w.padding
                    },
                    ..*w
                };
                let o0 = (b * oh + r0) * row_out;
                let len = (r1 - r0) * row_out;
                // SAFETY: rows g0..g1 of the output belong to this share alone, and
                // o0 + len ≤ rows · row_out = output.len(); the `&mut` output outlives the
                // fork-join below.
                let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(o0), len) };
                depthwise_conv2d_f32(
                    &band_window,
                    1,
                    dw,
                    &scratch[..(br.i1 - br.i0) * row_mid],
                    dw_act,
                    dst,
                );
                g += r1 - r0;
            }
        });
    };
    if parts <= 1 {
        share(0);
    } else {
        crate::parallel::for_parts(parts, share);
    }
}

/// The output pointer shared by the shares of one call; each writes its own rows.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);

// SAFETY: shares only write disjoint rows through it, and the `&mut` output it comes from
// outlives the fork-join.
unsafe impl Send for SharedOut {}
// SAFETY: as for `Send`.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    fn get(self) -> *mut f32 {
        self.0
    }
}
