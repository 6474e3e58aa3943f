//! DEPTHWISE_CONV_2D, float32 NHWC, over the [`F32Dw`] micro-kernels.
//!
//! Each output row is cut into the left border (pixels whose window is clipped by the left
//! padding), the centre (every column tap in bounds) and the right border; border pixels are
//! one call each, the centre one run. A 3×3 filter at stride 1 or 2 goes to the 3×3 kernel
//! (which keeps a channel block's weights in registers and produces several adjacent pixels
//! per pass, and also takes rows clipped by the top or bottom padding), anything else to the
//! general window kernel. Depth multipliers other than 1 take a plain Rust loop over the
//! packed weights (correct, not tuned).
//!
//! Work is split once per call into about four tasks per pool thread: ranges of output rows
//! (batch × height), each thread's tasks one contiguous share of them, and, when there are too
//! few rows to share evenly, ranges of rows and of channel blocks.

use crate::aligned::AlignedBuf;
use crate::conv::reference::{for_each_row, taps, Taps};
use crate::persist::{self, Persist, PersistError, Source};
use crate::ukernels::f32_small::{ClampF32, DwClip, DwRun, F32Dw};
use crate::ukernels::Ukernels;
use crate::{Activation, Window};

/// Depthwise weights and bias packed for one level's [`F32Dw`] kernels: per block of
/// `lanes` channels `[bias][tap 0] … [tap kh·kw−1]`, each `lanes` wide, zero-padded.
#[derive(Clone, Debug)]
pub struct PackedDwF32 {
    kernels: F32Dw,
    kh: usize,
    kw: usize,
    out_c: usize,
    data: AlignedBuf<f32>,
}

// Prepared models share packed weights between the threads of an execution.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PackedDwF32>();
};

impl Persist for PackedDwF32 {
    fn persist(&self, out: &mut Vec<u8>) {
        for v in [self.kh, self.kw, self.out_c] {
            persist::put_usize(out, v);
        }
        persist::put_slice(out, &self.data);
    }

    fn restore(uk: &Ukernels, src: &mut Source<'_>) -> Result<Self, PersistError> {
        let (kh, kw, out_c) = (src.usize()?, src.usize()?, src.usize()?);
        let kernels = uk.f32_dw;
        let l = kernels.lanes;
        let len = (kh * kw + 1)
            .checked_mul(out_c.div_ceil(l) * l)
            .filter(|_| kh > 0 && kw > 0 && out_c > 0)
            .ok_or_else(|| PersistError(format!("depthwise filter {kh}×{kw}×{out_c}")))?;
        let data = src.buf(len)?;
        Ok(PackedDwF32 {
            kernels,
            kh,
            kw,
            out_c,
            data,
        })
    }
}

impl PackedDwF32 {
    /// filter `[1, kh, kw, out_c]` row-major, bias `[out_c]`; `out_c = in_c · multiplier`.
    pub fn pack(
        uk: &Ukernels,
        kh: usize,
        kw: usize,
        out_c: usize,
        filter: &[f32],
        bias: &[f32],
    ) -> PackedDwF32 {
        assert_eq!(filter.len(), kh * kw * out_c, "depthwise filter length");
        assert_eq!(bias.len(), out_c, "depthwise bias length");
        let kernels = uk.f32_dw;
        let l = kernels.lanes;
        let taps = kh * kw;
        let mut data = AlignedBuf::zeroed(out_c.div_ceil(l) * (taps + 1) * l);
        for (c, &b) in bias.iter().enumerate() {
            let base = c / l * (taps + 1) * l + c % l;
            data[base] = b;
            for t in 0..taps {
                data[base + (t + 1) * l] = filter[t * out_c + c];
            }
        }
        PackedDwF32 {
            kernels,
            kh,
            kw,
            out_c,
            data,
        }
    }

    /// The filter extents `(kh, kw, out_c)` this was packed for.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.kh, self.kw, self.out_c)
    }

    /// Weight of tap `t` (row-major over kh × kw) for output channel `c`.
    #[inline]
    fn weight(&self, c: usize, t: usize) -> f32 {
        let l = self.kernels.lanes;
        self.data[c / l * (self.kh * self.kw + 1) * l + (t + 1) * l + c % l]
    }

    #[inline]
    fn bias(&self, c: usize) -> f32 {
        let l = self.kernels.lanes;
        self.data[c / l * (self.kh * self.kw + 1) * l + c % l]
    }
}

/// The output pointer shared by the tasks of one call; each task writes a disjoint set of
/// (row, channel range) elements.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);

// SAFETY: tasks only write disjoint elements through it (see `depthwise_conv2d_f32`), and the
// `&mut` output slice it comes from outlives the fork-join.
unsafe impl Send for SharedOut {}
// SAFETY: as for `Send`.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// DEPTHWISE_CONV_2D float32 NHWC (explicit padding). Equals
/// [`crate::conv::reference::depthwise_conv2d_f32`] up to FMA rounding. Fast path: 3×3, stride 1 or
/// 2, multiplier 1; anything else is correct.
pub fn depthwise_conv2d_f32(
    w: &Window,
    multiplier: usize,
    packed: &PackedDwF32,
    input: &[f32],
    act: Activation,
    output: &mut [f32],
) {
    // Real asserts: the kernels read and write through raw pointers derived from these.
    assert_eq!(input.len(), w.input.len(), "input length");
    assert_eq!(output.len(), w.output.len(), "output length");
    assert_eq!(w.input.n, w.output.n, "batch");
    assert_eq!(w.output.c, w.input.c * multiplier, "output depth");
    assert_eq!(packed.out_c, w.output.c, "packed depth");
    assert_eq!(
        (packed.kh, packed.kw),
        (w.filter_h, w.filter_w),
        "packed filter size"
    );
    assert!(w.stride_h > 0 && w.stride_w > 0, "stride");
    if output.is_empty() {
        return;
    }
    let clamp = ClampF32::fused(act);
    if multiplier != 1 {
        multiplier_loop(w, multiplier, packed, input, clamp, output);
        return;
    }

    let c = w.output.c;
    let l = packed.kernels.lanes;
    let rows = w.output.n * w.output.h;
    let blocks = c.div_ceil(l);
    let threads = crate::parallel::threads();
    let out = SharedOut(output.as_mut_ptr());
    let task = |r0: usize, r1: usize, b0: usize, b1: usize| {
        let c0 = b0 * l;
        let c1 = (b1 * l).min(c);
        let mut r = r0;
        while r < r1 {
            let rows = if r + 1 < r1 && pairs_rows(w, r) { 2 } else { 1 };
            // SAFETY: `out` points at `output`, whose length was checked against the
            // window; each (row, channel range) belongs to exactly one task; a pair of rows
            // passed `pairs_rows`.
            unsafe { conv_row(w, packed, input, out.get(), r, rows, c0, c1, clamp) };
            r += rows;
        }
    };
    if threads <= 1 {
        task(0, rows, 0, blocks);
        return;
    }
    // Rows first, top to bottom, each thread's home parts covering exactly its share of the
    // rows: the row-split operators before and after deal their rows the same way, so a thread
    // reads what it wrote itself (only the window's edge rows come from the other's share).
    // Parts hold whole pairs of rows for the two-row passes.
    if let Some(part) = RowHomes::new(rows, threads) {
        crate::parallel::for_parts(part.count(), |i| {
            let (r0, r1) = part.rows(i);
            task(r0, r1, 0, blocks);
        });
        return;
    }
    // Too few rows to share evenly: rows and channel blocks, about four parts per thread.
    // Splitting small images by channel blocks alone, like the column-split GEMMs that produce
    // them, measured slower: a call over fewer blocks does as much setup for less work.
    let target = 4 * threads;
    let row_step = rows.div_ceil(target.min(rows));
    let row_tasks = rows.div_ceil(row_step);
    let block_step = blocks.div_ceil(target.div_ceil(row_tasks).min(blocks));
    let block_tasks = blocks.div_ceil(block_step);
    crate::parallel::for_parts(row_tasks * block_tasks, |t| {
        let (rt, bt) = (t / block_tasks, t % block_tasks);
        task(
            rt * row_step,
            ((rt + 1) * row_step).min(rows),
            bt * block_step,
            ((bt + 1) * block_step).min(blocks),
        );
    });
}

/// Output rows split into `threads` equal shares (to a row), each cut into the same number of
/// parts of an even number of rows (the last part of a share may be shorter or empty), so
/// that [`crate::parallel::for_parts`] deals share `t` to thread `t` as its home range.
struct RowHomes {
    rows: usize,
    threads: usize,
    per_thread: usize,
}

impl RowHomes {
    /// Parts per thread at most: enough that a late thread's share can be stolen piecewise.
    const PARTS: usize = 4;

    /// `None` when the rows cannot be shared evenly (fewer than four per thread and not a
    /// multiple of the threads) or there are more threads than home ranges.
    fn new(rows: usize, threads: usize) -> Option<RowHomes> {
        let even = rows.is_multiple_of(threads) || rows >= 4 * threads;
        if !even || threads > crate::parallel::MAX_HOMES {
            return None;
        }
        let share = rows.div_ceil(threads);
        Some(RowHomes {
            rows,
            threads,
            per_thread: share.div_ceil(2).clamp(1, Self::PARTS),
        })
    }

    fn count(&self) -> usize {
        self.threads * self.per_thread
    }

    /// Rows `r0..r1` of part `i`.
    fn rows(&self, i: usize) -> (usize, usize) {
        let (t, j) = (i / self.per_thread, i % self.per_thread);
        let (s0, s1) = (
            t * self.rows / self.threads,
            (t + 1) * self.rows / self.threads,
        );
        let step = (s1 - s0).div_ceil(self.per_thread).next_multiple_of(2);
        ((s0 + j * step).min(s1), (s0 + (j + 1) * step).min(s1))
    }
}

/// Whether output rows `r` and `r + 1` may run as one pass of the 3×3 kernel: same image, both
/// windows inside the input vertically, a 3×3 filter at equal strides of 1 or 2.
fn pairs_rows(w: &Window, r: usize) -> bool {
    let (oh, s) = (w.output.h, w.stride_h);
    let oy = r % oh;
    let full = |oy: usize| taps(oy, s, w.padding.top, 3, w.input.h).len == 3;
    (w.filter_h, w.filter_w) == (3, 3)
        && s == w.stride_w
        && s <= 2
        && oy + 1 < oh
        && full(oy)
        && full(oy + 1)
}

/// Output row `r` (batch-major) of a multiplier-1 depthwise convolution, channels `c0..c1`
/// (`c0` a multiple of the block width); with `out_rows == 2` also row `r + 1`.
///
/// # Safety
/// `output` points at the whole output tensor of `w`, `input.len() == w.input.len()`, no
/// other thread accesses these output elements meanwhile, and two rows pass [`pairs_rows`].
#[allow(clippy::too_many_arguments)]
unsafe fn conv_row(
    w: &Window,
    packed: &PackedDwF32,
    input: &[f32],
    output: *mut f32,
    r: usize,
    out_rows: usize,
    c0: usize,
    c1: usize,
    clamp: ClampF32,
) {
    let k = packed.kernels;
    let (ih, iw, c) = (w.input.h, w.input.w, w.input.c);
    let (oh, ow) = (w.output.h, w.output.w);
    let (kh, kw, sw) = (w.filter_h, w.filter_w, w.stride_w);
    let pad_l = w.padding.left;
    let (b, oy) = (r / oh, r % oh);
    let ty = taps(oy, w.stride_h, w.padding.top, kh, ih);
    let in_img = b * ih * iw * c;
    let out_row = r * ow * c;
    let weights = packed.data[c0 / k.lanes * (kh * kw + 1) * k.lanes..].as_ptr();
    let band = sweep_band(c, out_rows, sw);
    let run = |ix: usize, ox: usize, pixels: usize| DwRun {
        input: input[in_img + (ty.first_input * iw + ix) * c + c0..].as_ptr(),
        in_row: iw * c,
        in_px: c,
        weights,
        taps: kh * kw,
        channels: c1 - c0,
        // In bounds: out_row + ox·c + c0 < output length for ox < ow.
        output: output.wrapping_add(out_row + ox * c + c0),
        out_px: c,
        pixels,
        stride: sw,
        out_rows,
        out_row: ow * c,
        band,
        clamp,
    };
    let clip = |tx: Taps| DwClip {
        kw,
        ky0: ty.first_tap,
        kx0: tx.first_tap,
        rows: ty.len,
        cols: tx.len,
    };

    // Centre columns: ox·sw ≥ pad_l and ox·sw − pad_l + kw ≤ iw.
    let lo = pad_l.div_ceil(sw).min(ow);
    let hi = if iw + pad_l >= kw {
        ((iw + pad_l - kw) / sw + 1).min(ow)
    } else {
        0
    }
    .max(lo);
    let kernel = if kh == 3 && kw == 3 && sw <= 2 {
        k.conv3x3
    } else {
        k.window
    };
    for ox in (0..lo).chain(hi..ow) {
        let tx = taps(ox, sw, pad_l, kw, iw);
        // SAFETY: the clipped window lies in the input, the channel range in the pixel and
        // the packed blocks, the output pixel in `output` (caller); one pixel.
        unsafe { kernel(&run(tx.first_input, ox, 1), &clip(tx)) };
    }
    if lo < hi {
        let centre = run(lo * sw - pad_l, lo, hi - lo);
        let full = clip(Taps {
            first_tap: 0,
            first_input: 0,
            len: kw,
        });
        // SAFETY: every pixel of the run has all kw column taps and the clipped rows in the
        // input.
        unsafe { kernel(&centre, &full) };
    }
}

/// Output pixels per band of the 3×3 kernel's block-by-block sweep ([`DwRun::band`]), or 0
/// for its grouped order, for `c` channels, `out_rows` output rows per pass and stride `s`.
///
/// A band of one channel block touches `in_rows·(band·s + 2)` input lines and `out_rows·band`
/// output lines (one 64-byte line per pixel), and the next block reads the other halves of
/// the same lines, so they should stay in L1 until then. Lines `c·4` bytes apart use only
/// `64 / gcd(c·4 / 64, 64)` of the 64 sets of a 32 KiB 8-way L1: at 512 or 1024 channels two
/// or one, and no band fits. Fewer than 64 channels (a pixel of one or two lines) or bands
/// under 8 pixels run grouped, as measured faster on MobileNet v1 and v2.
fn sweep_band(c: usize, out_rows: usize, s: usize) -> usize {
    const SETS: usize = 64;
    const WAYS: usize = 8;
    const LINE: usize = 64;
    const MIN_BAND: usize = 8;
    if c < 64 {
        return 0;
    }
    let bytes = c * 4;
    let sets = if bytes.is_multiple_of(LINE) {
        SETS / gcd(bytes / LINE, SETS)
    } else {
        SETS
    };
    let in_rows = 3 + (out_rows - 1) * s;
    let lines = sets * WAYS;
    let band = lines.saturating_sub(2 * in_rows) / (in_rows * s + out_rows);
    if band < MIN_BAND {
        0
    } else {
        band
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Depth multiplier ≠ 1: output channel `ic·m + j` reads input channel `ic`. Plain Rust in the
/// reference's summation order over the packed weights.
fn multiplier_loop(
    w: &Window,
    m: usize,
    packed: &PackedDwF32,
    input: &[f32],
    clamp: ClampF32,
    output: &mut [f32],
) {
    let out_c = w.output.c;
    for_each_row(w, output, |b, oy, row| {
        let ty = taps(oy, w.stride_h, w.padding.top, w.filter_h, w.input.h);
        for (ox, px) in row.chunks_exact_mut(out_c).enumerate() {
            let tx = taps(ox, w.stride_w, w.padding.left, w.filter_w, w.input.w);
            px.fill(0.0);
            for ky in 0..ty.len {
                for kx in 0..tx.len {
                    let i0 = w
                        .input
                        .offset(b, ty.first_input + ky, tx.first_input + kx, 0);
                    let t = (ty.first_tap + ky) * w.filter_w + tx.first_tap + kx;
                    for (oc, o) in px.iter_mut().enumerate() {
                        *o += input[i0 + oc / m] * packed.weight(oc, t);
                    }
                }
            }
            for (oc, o) in px.iter_mut().enumerate() {
                *o = clamp.apply(*o + packed.bias(oc));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::RowHomes;

    #[test]
    fn row_homes_give_each_thread_its_share_in_pairs() {
        for threads in 2..=8 {
            for rows in 1..=120 {
                let Some(homes) = RowHomes::new(rows, threads) else {
                    assert!(
                        rows % threads != 0 && rows < 4 * threads,
                        "{rows}/{threads}"
                    );
                    continue;
                };
                let mut next = 0;
                for t in 0..threads {
                    let share = (t * rows / threads, (t + 1) * rows / threads);
                    let parts = t * homes.per_thread..(t + 1) * homes.per_thread;
                    for i in parts.clone() {
                        let (r0, r1) = homes.rows(i);
                        assert!(
                            share.0 <= r0 && r0 <= r1 && r1 <= share.1,
                            "{rows}/{threads}"
                        );
                        if r0 < r1 {
                            assert_eq!(r0, next, "{rows} rows on {threads}: part {i} skips rows");
                            // Only a share's last part may hold an odd number of rows.
                            assert!((r1 - r0) % 2 == 0 || r1 == share.1, "{rows}/{threads}");
                            next = r1;
                        }
                    }
                    assert_eq!(
                        next, share.1,
                        "{rows} rows on {threads}: share {t} not covered"
                    );
                }
                assert!(homes.count() <= threads * RowHomes::PARTS);
            }
        }
    }
}
