//! The float32 micro-kernels besides the GEMM: depthwise convolution, pooling, and the
//! element-wise and softmax vector loops. Their table slots ([`F32Dw`], [`F32Pool`],
//! [`F32Vec`]), their arguments, and the algorithms, written once over the crate's `F32Simd`
//! vector trait and instantiated by each level with the `f32_small_entries!` macro.
//!
//! Depthwise weights are packed per block of `LANES` channels (the vector width of the level):
//! `[bias × LANES][tap 0 × LANES] … [tap kh·kw−1 × LANES]`, taps in row-major (ky, kx) order,
//! the last block zero-padded. Depthwise sums run in the reference's order (taps row-major
//! from 0, then the bias), so the only difference from the reference is FMA rounding.

use super::simd::F32Simd;
use crate::Activation;

/// A clamp to `lo..=hi` with one of the two NaN behaviours of the reference kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClampF32 {
    pub lo: f32,
    pub hi: f32,
    /// `true`: `x.max(lo).min(hi)` (a NaN becomes `lo`), as [`Activation::apply_f32`] does for
    /// RELU. `false`: `if x < lo {lo} else if hi < x {hi} else {x}`, NaN passes through.
    pub nan_to_lo: bool,
}

impl ClampF32 {
    /// The fused activation as [`Activation::apply_f32`] applies it (convolutions, pooling).
    pub fn fused(act: Activation) -> ClampF32 {
        let (lo, hi) = act.range_f32();
        ClampF32 {
            lo,
            hi,
            nan_to_lo: act == Activation::Relu,
        }
    }

    /// The activation as the element-wise reference applies it (ADD, MUL, RELU ops): NaN
    /// passes through.
    pub fn passing_nan(act: Activation) -> ClampF32 {
        let (lo, hi) = act.range_f32();
        ClampF32 {
            lo,
            hi,
            nan_to_lo: false,
        }
    }

    /// The scalar clamp, for the few outputs the operator loops compute themselves.
    pub fn apply(&self, x: f32) -> f32 {
        if self.nan_to_lo {
            x.max(self.lo).min(self.hi)
        } else {
            let y = if x < self.lo { self.lo } else { x };
            if self.hi < y {
                self.hi
            } else {
                y
            }
        }
    }
}

#[inline(always)]
fn clamp<V: F32Simd>(x: V, lo: V, hi: V, nan_to_lo: bool) -> V {
    if nan_to_lo {
        lo.sel_max(x).sel_min(hi)
    } else {
        x.sel_max(lo).sel_min(hi)
    }
}

/// A run of output pixels of one depthwise output row, over one range of channels.
#[derive(Clone, Copy, Debug)]
pub struct DwRun {
    /// Input element of the first in-bounds tap of the first pixel, at the first channel.
    pub input: *const f32,
    /// Elements between input rows.
    pub in_row: usize,
    /// Elements between input pixels (the channel count).
    pub in_px: usize,
    /// The packed block holding the first channel (which starts a block).
    pub weights: *const f32,
    /// Taps per packed block (`kh · kw`).
    pub taps: usize,
    /// Channels to compute.
    pub channels: usize,
    /// Output element of the first pixel, at the first channel.
    pub output: *mut f32,
    /// Elements between output pixels.
    pub out_px: usize,
    /// Output pixels in the run.
    pub pixels: usize,
    /// Horizontal stride: the input advances `stride · in_px` per output pixel.
    pub stride: usize,
    /// Output rows (1 or 2). With 2, the run also covers the same pixels of the next output
    /// row, `out_row` elements further, whose window starts `stride` input rows lower (the
    /// vertical stride equals the horizontal one) and is clipped the same way.
    pub out_rows: usize,
    /// Elements between output rows (read when `out_rows == 2`).
    pub out_row: usize,
    /// Output pixels per band of the 3×3 kernel's block-by-block sweep (rounded down to its
    /// tile, at least one tile); 0 for the grouped order. The caller sizes it so that a band's
    /// input and output lines of one channel block stay in L1.
    pub band: usize,
    pub clamp: ClampF32,
}

/// The in-bounds part of the window shared by every pixel of a [`DwRun`]: `rows × cols` taps
/// starting at tap `(ky0, kx0)` of a filter `kw` wide.
#[derive(Clone, Copy, Debug)]
pub struct DwClip {
    pub kw: usize,
    pub ky0: usize,
    pub kx0: usize,
    pub rows: usize,
    pub cols: usize,
}

/// Depthwise convolution (depth multiplier 1) kernels of one level.
#[derive(Clone, Copy, Debug)]
pub struct F32Dw {
    /// Channels per packed weight block.
    pub lanes: usize,
    /// Any clipped window, any stride; the fallback and the border pixels.
    ///
    /// Safety: every tap of every pixel of the run and the packed blocks of its channels must
    /// be readable, the output pixels writable.
    pub window: unsafe fn(&DwRun, &DwClip),
    /// A 3×3 filter (`kw == 3`): full-width runs at stride 1 or 2 several pixels per pass
    /// with the block's weights in registers, single border pixels unrolled, other clips
    /// through the general kernel. Safety as for `window`.
    pub conv3x3: unsafe fn(&DwRun, &DwClip),
}

/// One output pixel of a pooling operation, over all channels.
#[derive(Clone, Copy, Debug)]
pub struct PoolPixel {
    /// Input element of the first in-bounds tap, channel 0.
    pub input: *const f32,
    pub in_row: usize,
    pub in_px: usize,
    /// In-bounds window rows and columns (at least one each).
    pub rows: usize,
    pub cols: usize,
    pub channels: usize,
    pub output: *mut f32,
    pub clamp: ClampF32,
}

/// Pooling kernels of one level: one output pixel per call.
#[derive(Clone, Copy, Debug)]
pub struct F32Pool {
    /// Window sum divided by `rows · cols`. Safety: the window's pixels readable, the output
    /// pixel writable.
    pub avg: unsafe fn(&PoolPixel),
    /// Window maximum, starting from `f32::MIN`. Safety as for `avg`.
    pub max: unsafe fn(&PoolPixel),
}

/// Element-wise and softmax vector loops of one level. Each works on `out.len()` elements and
/// reads at most as many from each input (shorter inputs shorten the run). Safety of every
/// entry: only that the processor runs the level, which the table guarantees.
#[derive(Clone, Copy, Debug)]
pub struct F32Vec {
    /// `clamp(a + b)`.
    pub add: unsafe fn(&[f32], &[f32], &mut [f32], ClampF32),
    /// `clamp(a · b)`.
    pub mul: unsafe fn(&[f32], &[f32], &mut [f32], ClampF32),
    pub clamp: unsafe fn(&[f32], &mut [f32], ClampF32),
    /// `1 / (1 + exp(−x))`.
    pub logistic: unsafe fn(&[f32], &mut [f32]),
    pub tanh: unsafe fn(&[f32], &mut [f32]),
    /// `exp(x)`.
    pub exp: unsafe fn(&[f32], &mut [f32]),
    /// `ln(x)`.
    pub log: unsafe fn(&[f32], &mut [f32]),
    /// The maximum of a non-empty slice, NaNs ignored (−∞ when all are NaN).
    pub max: unsafe fn(&[f32]) -> f32,
    /// `out = exp((x − shift) · beta)`; returns the sum of `out`.
    pub exp_sum: unsafe fn(&[f32], &mut [f32], f32, f32) -> f32,
    /// `out /= d`.
    pub div: unsafe fn(&mut [f32], f32),
}

/// Loads `n ≤ LANES` values, the whole vector when `n == LANES`.
#[inline(always)]
unsafe fn load_n<V: F32Simd>(p: *const f32, n: usize) -> V {
    // SAFETY: the caller makes `p..p + n` readable.
    unsafe {
        if n == V::LANES {
            V::load(p)
        } else {
            V::load_part(p, n)
        }
    }
}

#[inline(always)]
unsafe fn store_n<V: F32Simd>(v: V, p: *mut f32, n: usize) {
    // SAFETY: the caller makes `p..p + n` writable.
    unsafe {
        if n == V::LANES {
            v.store(p)
        } else {
            v.store_part(p, n)
        }
    }
}

/// [`F32Dw::window`]. Pixel-major: all channels of a pixel are contiguous, so walking them
/// streams through memory, whatever the channel count.
///
/// # Safety
/// The processor runs `V`'s level; the memory contract of [`F32Dw::window`].
#[inline(always)]
pub(crate) unsafe fn dw_window<V: F32Simd>(a: &DwRun, c: &DwClip) {
    let l = V::LANES;
    let block = (a.taps + 1) * l;
    let (lo, hi) = (V::splat(a.clamp.lo), V::splat(a.clamp.hi));
    // SAFETY: every pointer below stays inside the run's taps, its channels' packed blocks
    // and its output pixels, which the caller makes accessible.
    unsafe {
        for p in 0..a.pixels {
            let src = a.input.add(p * a.stride * a.in_px);
            let dst = a.output.add(p * a.out_px);
            for c0 in (0..a.channels).step_by(l) {
                let n = l.min(a.channels - c0);
                let wb = a.weights.add(c0 / l * block);
                let mut acc = V::splat(0.0);
                for ky in 0..c.rows {
                    let row = src.add(ky * a.in_row + c0);
                    let wrow = wb.add((1 + (c.ky0 + ky) * c.kw + c.kx0) * l);
                    for kx in 0..c.cols {
                        let x = load_n::<V>(row.add(kx * a.in_px), n);
                        acc = x.mul_add(V::load(wrow.add(kx * l)), acc);
                    }
                }
                let y = clamp(acc.add(V::load(wb)), lo, hi, a.clamp.nan_to_lo);
                store_n(y, dst.add(c0), n);
            }
        }
    }
}

/// Channel blocks whose packed weights stay in L1 while a run sweeps its pixel tiles over them
/// (8 blocks of 16 lanes: 5 KiB).
const DW_GROUP_BLOCKS: usize = 8;

/// A clipped 3×3 window as one const parameter: filter rows `r0..r0 + r` and columns
/// `c0..c0 + c` are in bounds (two bits each).
const fn win(r0: usize, r: usize, c0: usize, c: usize) -> usize {
    r0 | r << 2 | c0 << 4 | c << 6
}

/// [`F32Dw::conv3x3`]: picks the instantiation for the run's stride and clip. Full-width
/// runs (all three columns) at stride 1 or 2 with all three rows or two adjacent rows go
/// through `P`-pixel tiles at stride 1 and `P2`-pixel tiles at stride 2; single border
/// pixels with two columns through one-pixel tiles; anything else through [`dw_window`].
///
/// # Safety
/// The processor runs `V`'s level; the memory contract of [`F32Dw::conv3x3`].
#[inline(always)]
pub(crate) unsafe fn dw3x3<V: F32Simd, const P: usize, const P2: usize>(a: &DwRun, c: &DwClip) {
    debug_assert_eq!(c.kw, 3);
    if a.out_rows == 2 {
        // SAFETY: the caller's contract covers both rows.
        unsafe {
            match (a.stride, c.ky0, c.rows, c.kx0, c.cols) {
                (1, 0, 3, 0, 3) => dw_conv3x3_rows2::<V, 1, P>(a),
                (2, 0, 3, 0, 3) => dw_conv3x3_rows2::<V, 2, P2>(a),
                _ => {
                    dw3x3_row::<V, P, P2>(a, c);
                    let next = DwRun {
                        input: a.input.add(a.stride * a.in_row),
                        output: a.output.add(a.out_row),
                        ..*a
                    };
                    dw3x3_row::<V, P, P2>(&next, c);
                }
            }
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { dw3x3_row::<V, P, P2>(a, c) }
    }
}

/// One output row of [`dw3x3`].
///
/// # Safety
/// As for [`dw3x3`], for the run's first output row.
#[inline(always)]
unsafe fn dw3x3_row<V: F32Simd, const P: usize, const P2: usize>(a: &DwRun, c: &DwClip) {
    let single = a.pixels == 1;
    // SAFETY: each instantiation reads exactly the taps the clip puts in bounds, which the
    // caller makes readable.
    unsafe {
        match (a.stride, c.ky0, c.rows, c.kx0, c.cols) {
            (1, 0, 3, 0, 3) => dw_conv3x3::<V, 1, P, { win(0, 3, 0, 3) }>(a),
            (1, 1, 2, 0, 3) => dw_conv3x3::<V, 1, P, { win(1, 2, 0, 3) }>(a),
            (1, 0, 2, 0, 3) => dw_conv3x3::<V, 1, P, { win(0, 2, 0, 3) }>(a),
            (2, 0, 3, 0, 3) => dw_conv3x3::<V, 2, P2, { win(0, 3, 0, 3) }>(a),
            (2, 1, 2, 0, 3) => dw_conv3x3::<V, 2, P2, { win(1, 2, 0, 3) }>(a),
            (2, 0, 2, 0, 3) => dw_conv3x3::<V, 2, P2, { win(0, 2, 0, 3) }>(a),
            (_, 0, 3, 1, 2) if single => dw_conv3x3::<V, 1, 1, { win(0, 3, 1, 2) }>(a),
            (_, 1, 2, 1, 2) if single => dw_conv3x3::<V, 1, 1, { win(1, 2, 1, 2) }>(a),
            (_, 0, 2, 1, 2) if single => dw_conv3x3::<V, 1, 1, { win(0, 2, 1, 2) }>(a),
            (_, 0, 3, 0, 2) if single => dw_conv3x3::<V, 1, 1, { win(0, 3, 0, 2) }>(a),
            (_, 1, 2, 0, 2) if single => dw_conv3x3::<V, 1, 1, { win(1, 2, 0, 2) }>(a),
            (_, 0, 2, 0, 2) if single => dw_conv3x3::<V, 1, 1, { win(0, 2, 0, 2) }>(a),
            _ => dw_window::<V>(a, c),
        }
    }
}

/// Stride `S`, window `W` (see [`win`]; the input points at its first in-bounds tap), tiles
/// of `P`, then 4, 2 and 1 pixels.
///
/// Loop order: bands of [`DwRun::band`] pixels, channel blocks, the block's pixel tiles left
/// to right. A block's weights and bias are loaded once per band and held in registers while
/// it sweeps the band, so a tile loads only its input vectors, `rows·((Q−1)·S + cols)` for
/// `rows·cols·Q` FMAs. The band keeps the lines a block reads in L1 for the next block, which
/// reads the rest of the same lines. With `band == 0` the grouped order instead
/// ([`dw_conv3x3_grouped`]), for pixel strides that map a row onto a few L1 sets.
///
/// # Safety
/// As for [`dw3x3`], and the run's clip is `W`, its stride `S` (or it has one pixel).
#[inline(always)]
unsafe fn dw_conv3x3<V: F32Simd, const S: usize, const P: usize, const W: usize>(a: &DwRun) {
    if a.band == 0 {
        // SAFETY: the caller's contract.
        return unsafe { dw_conv3x3_grouped::<V, S, P, W>(a) };
    }
    let l = V::LANES;
    let blocks = a.channels.div_ceil(l);
    // SAFETY: blocks hold channels of the run (the last possibly partial, its packed block
    // zero-padded); the caller's contract, passed on block by block.
    unsafe {
        let step = (a.band / P).max(1) * P;
        for s0 in (0..a.pixels).step_by(step) {
            let span = (s0, (s0 + step).min(a.pixels));
            for j in 0..blocks {
                let c0 = j * l;
                let n = l.min(a.channels - c0);
                if n == l {
                    dw3x3_sweep::<V, S, P, W, false>(a, c0, n, span);
                } else {
                    dw3x3_sweep::<V, S, P, W, true>(a, c0, n, span);
                }
            }
        }
    }
}

/// The clipped 3×3 window's filter taps of one packed block, `[ky][kx]` counted from the
/// clip's first row and column (taps outside the clip are zero and unused).
#[inline(always)]
unsafe fn dw3x3_weights<V: F32Simd, const W: usize>(wb: *const f32) -> [[V; 3]; 3] {
    let (r0, rows, k0, cols) = (W & 3, (W >> 2) & 3, (W >> 4) & 3, (W >> 6) & 3);
    let l = V::LANES;
    let mut wk = [[V::splat(0.0); 3]; 3];
    // SAFETY: the block's ten vectors are readable (caller).
    unsafe {
        for (ky, wrow) in wk.iter_mut().enumerate().take(rows) {
            for (kx, w) in wrow.iter_mut().enumerate().take(cols) {
                *w = V::load(wb.add((1 + (r0 + ky) * 3 + k0 + kx) * l));
            }
        }
    }
    wk
}

/// Pixels `p0..p1` of the run for the block at channel `c0` (`n` channels), the weights in
/// registers.
#[inline(always)]
unsafe fn dw3x3_sweep<
    V: F32Simd,
    const S: usize,
    const P: usize,
    const W: usize,
    const TAIL: bool,
>(
    a: &DwRun,
    c0: usize,
    n: usize,
    (p0, p1): (usize, usize),
) {
    let l = V::LANES;
    // SAFETY: the block's packed taps and bias are readable, the pixels in the run (caller).
    unsafe {
        let wb = a.weights.add(c0 / l * 10 * l);
        let wk = dw3x3_weights::<V, W>(wb);
        let bias = V::load(wb);
        let mut p = p0;
        while p + P <= p1 {
            dw3x3_tile::<V, S, P, W, TAIL>(a, &wk, bias, c0, p, n);
            p += P;
        }
        if P > 4 && p + 4 <= p1 {
            dw3x3_tile::<V, S, 4, W, TAIL>(a, &wk, bias, c0, p, n);
            p += 4;
        }
        if P > 2 && p + 2 <= p1 {
            dw3x3_tile::<V, S, 2, W, TAIL>(a, &wk, bias, c0, p, n);
            p += 2;
        }
        while P > 1 && p < p1 {
            dw3x3_tile::<V, S, 1, W, TAIL>(a, &wk, bias, c0, p, n);
            p += 1;
        }
    }
}

/// Two output rows of a full-window run at stride `S`, tiles of `P`, then 4, 2 and 1 pixels.
/// Each input row loaded feeds both output rows where their windows overlap (one row at
/// stride 2, two at stride 1), so a tile loads `(S + 3)·((Q−1)·S + 3)` input vectors for `18·Q`
/// FMAs instead of `6·((Q−1)·S + 3)`. Loop order as in [`dw_conv3x3`]: bands, blocks, each
/// sweeping the band of both rows with its weights in registers.
///
/// # Safety
/// As for [`dw3x3`], with two output rows, full 3×3 windows and stride `S` both ways.
#[inline(always)]
unsafe fn dw_conv3x3_rows2<V: F32Simd, const S: usize, const P: usize>(a: &DwRun) {
    if a.band == 0 {
        // SAFETY: the caller's contract.
        return unsafe { dw_conv3x3_rows2_grouped::<V, S, P>(a) };
    }
    let l = V::LANES;
    let blocks = a.channels.div_ceil(l);
    // SAFETY: as for `dw_conv3x3`, for both rows.
    unsafe {
        let step = (a.band / P).max(1) * P;
        for s0 in (0..a.pixels).step_by(step) {
            let span = (s0, (s0 + step).min(a.pixels));
            for j in 0..blocks {
                let c0 = j * l;
                let n = l.min(a.channels - c0);
                if n == l {
                    dw3x3_sweep2::<V, S, P, false>(a, c0, n, span);
                } else {
                    dw3x3_sweep2::<V, S, P, true>(a, c0, n, span);
                }
            }
        }
    }
}

/// Pixels `p0..p1` of both rows of the run for the block at channel `c0` (`n` channels), the
/// weights in registers.
#[inline(always)]
unsafe fn dw3x3_sweep2<V: F32Simd, const S: usize, const P: usize, const TAIL: bool>(
    a: &DwRun,
    c0: usize,
    n: usize,
    (p0, p1): (usize, usize),
) {
    let l = V::LANES;
    // SAFETY: the block's packed taps and bias are readable, the pixels in the run (caller).
    unsafe {
        let wb = a.weights.add(c0 / l * 10 * l);
        let wk = dw3x3_weights::<V, { win(0, 3, 0, 3) }>(wb);
        let bias = V::load(wb);
        let mut p = p0;
        while p + P <= p1 {
            dw3x3_tile2::<V, S, P, TAIL>(a, &wk, bias, c0, p, n);
            p += P;
        }
        if P > 4 && p + 4 <= p1 {
            dw3x3_tile2::<V, S, 4, TAIL>(a, &wk, bias, c0, p, n);
            p += 4;
        }
        if P > 2 && p + 2 <= p1 {
            dw3x3_tile2::<V, S, 2, TAIL>(a, &wk, bias, c0, p, n);
            p += 2;
        }
        while P > 1 && p < p1 {
            dw3x3_tile2::<V, S, 1, TAIL>(a, &wk, bias, c0, p, n);
            p += 1;
        }
    }
}

/// One input row's contribution to `Q` pixels: to the upper output row's accumulators with
/// filter row `w0` when `UP`, to the lower one's with `w1` when `DOWN`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn dw3x3_row2<
    V: F32Simd,
    const S: usize,
    const Q: usize,
    const TAIL: bool,
    const UP: bool,
    const DOWN: bool,
>(
    row: *const f32,
    in_px: usize,
    n: usize,
    wk0: &[V; 3],
    wk1: &[V; 3],
    acc0: &mut [V; Q],
    acc1: &mut [V; Q],
) {
    // SAFETY: the row's (Q − 1)·S + 3 pixels are readable (caller).
    unsafe {
        for col in 0..(Q - 1) * S + 3 {
            let ptr = row.add(col * in_px);
            let x = if TAIL {
                V::load_part(ptr, n)
            } else {
                V::load(ptr)
            };
            for q in 0..Q {
                if col >= q * S && col - q * S < 3 {
                    if UP {
                        acc0[q] = x.mul_add(wk0[col - q * S], acc0[q]);
                    }
                    if DOWN {
                        acc1[q] = x.mul_add(wk1[col - q * S], acc1[q]);
                    }
                }
            }
        }
    }
}

/// `Q` adjacent pixels of two output rows of one channel block, its taps `wk` and bias in
/// registers. Input row `i` (from the upper row's first) is filter row `i` of the upper output
/// row and filter row `i − S` of the lower one; each pixel still sums its taps in row-major
/// order.
#[inline(always)]
unsafe fn dw3x3_tile2<V: F32Simd, const S: usize, const Q: usize, const TAIL: bool>(
    a: &DwRun,
    wk: &[[V; 3]; 3],
    bias: V,
    c0: usize,
    p: usize,
    n: usize,
) {
    // SAFETY: both rows' pixels p..p+Q and their full windows are in bounds (caller).
    unsafe {
        let src = a.input.add(p * S * a.in_px + c0);
        let row = |i: usize| src.add(i * a.in_row);
        let mut acc0 = [V::splat(0.0); Q];
        let mut acc1 = [V::splat(0.0); Q];
        // Rows only the upper output row reads, then the shared ones, then the lower row's
        // own.
        for i in 0..S {
            dw3x3_row2::<V, S, Q, TAIL, true, false>(
                row(i),
                a.in_px,
                n,
                &wk[i],
                &wk[0],
                &mut acc0,
                &mut acc1,
            );
        }
        for i in S..3 {
            dw3x3_row2::<V, S, Q, TAIL, true, true>(
                row(i),
                a.in_px,
                n,
                &wk[i],
                &wk[i - S],
                &mut acc0,
                &mut acc1,
            );
        }
        for i in 3..3 + S {
            dw3x3_row2::<V, S, Q, TAIL, false, true>(
                row(i),
                a.in_px,
                n,
                &wk[0],
                &wk[i - S],
                &mut acc0,
                &mut acc1,
            );
        }
        let out = a.output.add(p * a.out_px + c0);
        dw_store_pixels::<V, Q, TAIL>(a, &acc0, bias, out, n);
        dw_store_pixels::<V, Q, TAIL>(a, &acc1, bias, out.add(a.out_row), n);
    }
}

/// `Q` adjacent output pixels of one channel block, its clipped filter taps `wk` and bias
/// in registers. Each loaded input vector feeds every pixel whose window covers it (up to 3 at
/// stride 1), so a full-window pass loads `3·((Q−1)·S + 3)` input vectors for `9·Q` FMAs. Per
/// pixel the taps are still summed in row-major order, then the bias.
#[inline(always)]
unsafe fn dw3x3_tile<
    V: F32Simd,
    const S: usize,
    const Q: usize,
    const W: usize,
    const TAIL: bool,
>(
    a: &DwRun,
    wk: &[[V; 3]; 3],
    bias: V,
    c0: usize,
    p: usize,
    n: usize,
) {
    let (rows, cols) = ((W >> 2) & 3, (W >> 6) & 3);
    // SAFETY: the pixels p..p+Q of the run and their clipped windows are in bounds (caller).
    unsafe {
        let src = a.input.add(p * S * a.in_px + c0);
        let mut acc = [V::splat(0.0); Q];
        for (ky, wk) in wk.iter().enumerate().take(rows) {
            dw_row_taps::<V, S, Q, TAIL>(src.add(ky * a.in_row), a.in_px, n, cols, wk, &mut acc);
        }
        dw_store_pixels::<V, Q, TAIL>(a, &acc, bias, a.output.add(p * a.out_px + c0), n);
    }
}

/// One input row's contribution to `Q` pixels through its `cols ≤ 3` filter taps `wk`: each
/// loaded input vector feeds every pixel whose window covers it.
///
/// # Safety
/// The row's `(Q − 1)·S + cols` pixels are readable (`n` lanes when `TAIL`).
#[inline(always)]
unsafe fn dw_row_taps<V: F32Simd, const S: usize, const Q: usize, const TAIL: bool>(
    row: *const f32,
    in_px: usize,
    n: usize,
    cols: usize,
    wk: &[V; 3],
    acc: &mut [V; Q],
) {
    // SAFETY: the caller's contract.
    unsafe {
        for col in 0..(Q - 1) * S + cols {
            let ptr = row.add(col * in_px);
            let x = if TAIL {
                V::load_part(ptr, n)
            } else {
                V::load(ptr)
            };
            for (q, acc) in acc.iter_mut().enumerate() {
                if col >= q * S && col - q * S < cols {
                    *acc = x.mul_add(wk[col - q * S], *acc);
                }
            }
        }
    }
}

/// `Q` adjacent output pixels from their sums: bias, activation, stored at `dst`, one pixel
/// every `a.out_px` values (`n` lanes when `TAIL`).
///
/// # Safety
/// The `Q` pixels at `dst` are writable.
#[inline(always)]
unsafe fn dw_store_pixels<V: F32Simd, const Q: usize, const TAIL: bool>(
    a: &DwRun,
    acc: &[V; Q],
    bias: V,
    dst: *mut f32,
    n: usize,
) {
    let (lo, hi) = (V::splat(a.clamp.lo), V::splat(a.clamp.hi));
    for (q, acc) in acc.iter().enumerate() {
        let y = clamp(acc.add(bias), lo, hi, a.clamp.nan_to_lo);
        // SAFETY: the caller's contract.
        unsafe {
            let dst = dst.add(q * a.out_px);
            if TAIL {
                y.store_part(dst, n)
            } else {
                y.store(dst)
            }
        }
    }
}

/// The grouped order of [`dw_conv3x3`], for runs without a band ([`DwRun::band`] 0): stride
/// `S`, window `W`, tiles of `P`, then 4, 2 and 1 pixels.
///
/// Loop order: groups of [`DW_GROUP_BLOCKS`] channel blocks, pixel tiles, blocks. A tile's
/// input of one group is a few contiguous lines per pixel (sweeping one block across a whole
/// row instead would stride by the pixel size, which for 512 or 1024 channels is 2 or 4 KiB
/// and maps every access to the same few L1 sets). Each block's nine weights and bias are
/// reloaded per tile from L1 and then held in registers for the tile's FMAs.
///
/// # Safety
/// As for [`dw3x3`], and the run's clip is `W`, its stride `S` (or it has one pixel).
#[inline(always)]
unsafe fn dw_conv3x3_grouped<V: F32Simd, const S: usize, const P: usize, const W: usize>(
    a: &DwRun,
) {
    let blocks = a.channels.div_ceil(V::LANES);
    // SAFETY: the caller's contract, passed on tile by tile.
    unsafe {
        for g0 in (0..blocks).step_by(DW_GROUP_BLOCKS) {
            let g1 = (g0 + DW_GROUP_BLOCKS).min(blocks);
            let mut p = 0;
            while p + P <= a.pixels {
                dw3x3_group::<V, S, P, W>(a, g0, g1, p);
                p += P;
            }
            if P > 4 && p + 4 <= a.pixels {
                dw3x3_group::<V, S, 4, W>(a, g0, g1, p);
                p += 4;
            }
            if P > 2 && p + 2 <= a.pixels {
                dw3x3_group::<V, S, 2, W>(a, g0, g1, p);
                p += 2;
            }
            while P > 1 && p < a.pixels {
                dw3x3_group::<V, S, 1, W>(a, g0, g1, p);
                p += 1;
            }
        }
    }
}

/// The grouped order of [`dw_conv3x3_rows2`]: two output rows of a full-window run at stride
/// `S`, tiles of `P`, then 4, 2 and 1 pixels.
/// Each input row loaded feeds both output rows where their windows overlap (one row at
/// stride 2, two at stride 1), so a tile loads `(S + 3)·((Q−1)·S + 3)` input vectors for `18·Q`
/// FMAs instead of `6·((Q−1)·S + 3)`: on the 512- and 1024-channel layers, whose pixel stride
/// maps a tile's lines onto a few L1 sets, those loads come from L2 and set the pace.
///
/// # Safety
/// As for [`dw3x3`], with two output rows, full 3×3 windows and stride `S` both ways.
#[inline(always)]
unsafe fn dw_conv3x3_rows2_grouped<V: F32Simd, const S: usize, const P: usize>(a: &DwRun) {
    let blocks = a.channels.div_ceil(V::LANES);
    // SAFETY: the caller's contract, passed on tile by tile.
    unsafe {
        for g0 in (0..blocks).step_by(DW_GROUP_BLOCKS) {
            let g1 = (g0 + DW_GROUP_BLOCKS).min(blocks);
            let mut p = 0;
            while p + P <= a.pixels {
                dw3x3_group2::<V, S, P>(a, g0, g1, p);
                p += P;
            }
            if P > 4 && p + 4 <= a.pixels {
                dw3x3_group2::<V, S, 4>(a, g0, g1, p);
                p += 4;
            }
            if P > 2 && p + 2 <= a.pixels {
                dw3x3_group2::<V, S, 2>(a, g0, g1, p);
                p += 2;
            }
            while P > 1 && p < a.pixels {
                dw3x3_group2::<V, S, 1>(a, g0, g1, p);
                p += 1;
            }
        }
    }
}

/// Pixels `p..p+Q` of two output rows, channel blocks `g0..g1`.
#[inline(always)]
unsafe fn dw3x3_group2<V: F32Simd, const S: usize, const Q: usize>(
    a: &DwRun,
    g0: usize,
    g1: usize,
    p: usize,
) {
    let l = V::LANES;
    // SAFETY: as for `dw3x3_group`, for both rows.
    unsafe {
        for j in g0..g1 {
            let c0 = j * l;
            let n = l.min(a.channels - c0);
            let wb = a.weights.add(j * 10 * l);
            if n == l {
                dw3x3_tile2_grouped::<V, S, Q, false>(a, wb, c0, p, n);
            } else {
                dw3x3_tile2_grouped::<V, S, Q, true>(a, wb, c0, p, n);
            }
        }
    }
}

/// One input row's contribution to `Q` pixels: to the upper output row's accumulators with
/// filter row `w0` when `UP`, to the lower one's with `w1` when `DOWN`.
#[inline(always)]
unsafe fn dw3x3_row2_grouped<
    V: F32Simd,
    const S: usize,
    const Q: usize,
    const TAIL: bool,
    const UP: bool,
    const DOWN: bool,
>(
    row: *const f32,
    in_px: usize,
    n: usize,
    w0: *const f32,
    w1: *const f32,
    acc0: &mut [V; Q],
    acc1: &mut [V; Q],
) {
    let l = V::LANES;
    // SAFETY: the row's (Q − 1)·S + 3 pixels and the filter rows are readable (caller).
    unsafe {
        let mut wk0 = [V::splat(0.0); 3];
        let mut wk1 = [V::splat(0.0); 3];
        for kx in 0..3 {
            if UP {
                wk0[kx] = V::load(w0.add(kx * l));
            }
            if DOWN {
                wk1[kx] = V::load(w1.add(kx * l));
            }
        }
        dw3x3_row2::<V, S, Q, TAIL, UP, DOWN>(row, in_px, n, &wk0, &wk1, acc0, acc1);
    }
}

/// `Q` adjacent pixels of two output rows of one channel block. Input row `i` (from the upper
/// row's first) is filter row `i` of the upper output row and filter row `i − S` of the lower
/// one; each pixel still sums its taps in row-major order.
#[inline(always)]
unsafe fn dw3x3_tile2_grouped<V: F32Simd, const S: usize, const Q: usize, const TAIL: bool>(
    a: &DwRun,
    wb: *const f32,
    c0: usize,
    p: usize,
    n: usize,
) {
    let l = V::LANES;
    // SAFETY: both rows' pixels p..p+Q and their full windows are in bounds, the block's
    // packed taps and bias readable (caller).
    unsafe {
        let src = a.input.add(p * S * a.in_px + c0);
        let w = |ky: usize| wb.add((1 + ky * 3) * l);
        let row = |i: usize| src.add(i * a.in_row);
        let mut acc0 = [V::splat(0.0); Q];
        let mut acc1 = [V::splat(0.0); Q];
        // Rows only the upper output row reads, then the shared ones, then the lower row's
        // own; counts behind `black_box` keep each group a loop (see `dw3x3_tile_grouped`).
        let upper_only = std::hint::black_box(S);
        for i in 0..upper_only {
            dw3x3_row2_grouped::<V, S, Q, TAIL, true, false>(
                row(i),
                a.in_px,
                n,
                w(i),
                w(0),
                &mut acc0,
                &mut acc1,
            );
        }
        let shared = std::hint::black_box(3 - S);
        for i in S..S + shared {
            dw3x3_row2_grouped::<V, S, Q, TAIL, true, true>(
                row(i),
                a.in_px,
                n,
                w(i),
                w(i - S),
                &mut acc0,
                &mut acc1,
            );
        }
        let lower_only = std::hint::black_box(S);
        for i in 3..3 + lower_only {
            dw3x3_row2_grouped::<V, S, Q, TAIL, false, true>(
                row(i),
                a.in_px,
                n,
                w(0),
                w(i - S),
                &mut acc0,
                &mut acc1,
            );
        }
        let bias = V::load(wb);
        let out = a.output.add(p * a.out_px + c0);
        dw_store_pixels::<V, Q, TAIL>(a, &acc0, bias, out, n);
        dw_store_pixels::<V, Q, TAIL>(a, &acc1, bias, out.add(a.out_row), n);
    }
}

/// Pixels `p..p+Q` of channel blocks `g0..g1`.
#[inline(always)]
unsafe fn dw3x3_group<V: F32Simd, const S: usize, const Q: usize, const W: usize>(
    a: &DwRun,
    g0: usize,
    g1: usize,
    p: usize,
) {
    let l = V::LANES;
    // SAFETY: blocks g0..g1 hold channels of the run (the last possibly partial, its packed
    // block zero-padded); the pixels are in the run (caller).
    unsafe {
        for j in g0..g1 {
            let c0 = j * l;
            let n = l.min(a.channels - c0);
            let wb = a.weights.add(j * 10 * l);
            if n == l {
                dw3x3_tile_grouped::<V, S, Q, W, false>(a, wb, c0, p, n);
            } else {
                dw3x3_tile_grouped::<V, S, Q, W, true>(a, wb, c0, p, n);
            }
        }
    }
}

/// `Q` adjacent output pixels of one channel block. Each loaded input vector feeds every
/// pixel whose window covers it (up to 3 at stride 1), so a full-window pass loads
/// `3·((Q−1)·S + 3)` input vectors for `9·Q` FMAs. Per pixel the taps are still summed in
/// row-major order.
#[inline(always)]
unsafe fn dw3x3_tile_grouped<
    V: F32Simd,
    const S: usize,
    const Q: usize,
    const W: usize,
    const TAIL: bool,
>(
    a: &DwRun,
    wb: *const f32,
    c0: usize,
    p: usize,
    n: usize,
) {
    let (r0, rows, k0, cols) = (W & 3, (W >> 2) & 3, (W >> 4) & 3, (W >> 6) & 3);
    let l = V::LANES;
    // The filter rows as a loop the compiler cannot unroll: unrolled, every one of the
    // 3·((Q−1)·S + 3) input addresses of a tile becomes its own loop-invariant pointer, which
    // do not fit in the general registers and are spilled and reloaded for every load.
    let rows = std::hint::black_box(rows);
    // SAFETY: the pixels p..p+Q of the run and their clipped windows are in bounds, the
    // block's packed taps and bias readable (caller).
    unsafe {
        let src = a.input.add(p * S * a.in_px + c0);
        let mut acc = [V::splat(0.0); Q];
        for ky in 0..rows {
            let row = src.add(ky * a.in_row);
            let wrow = wb.add((1 + (r0 + ky) * 3 + k0) * l);
            let mut wk = [V::splat(0.0); 3];
            for (kx, wk) in wk.iter_mut().enumerate().take(cols) {
                *wk = V::load(wrow.add(kx * l));
            }
            dw_row_taps::<V, S, Q, TAIL>(row, a.in_px, n, cols, &wk, &mut acc);
        }
        let out = a.output.add(p * a.out_px + c0);
        dw_store_pixels::<V, Q, TAIL>(a, &acc, V::load(wb), out, n);
    }
}

/// [`F32Pool::avg`].
///
/// # Safety
/// The processor runs `V`'s level; the memory contract of [`F32Pool::avg`].
#[inline(always)]
pub(crate) unsafe fn avg_pool<V: F32Simd>(a: &PoolPixel) {
    let count = V::splat((a.rows * a.cols) as f32);
    let (lo, hi) = (V::splat(a.clamp.lo), V::splat(a.clamp.hi));
    // SAFETY: the window's pixels and the output pixel are accessible (caller).
    unsafe {
        for c0 in (0..a.channels).step_by(V::LANES) {
            let n = V::LANES.min(a.channels - c0);
            let mut acc = V::splat(0.0);
            for ky in 0..a.rows {
                let row = a.input.add(ky * a.in_row + c0);
                for kx in 0..a.cols {
                    acc = acc.add(load_n(row.add(kx * a.in_px), n));
                }
            }
            let y = clamp(acc.div(count), lo, hi, a.clamp.nan_to_lo);
            store_n(y, a.output.add(c0), n);
        }
    }
}

/// [`F32Pool::max`].
///
/// # Safety
/// The processor runs `V`'s level; the memory contract of [`F32Pool::max`].
#[inline(always)]
pub(crate) unsafe fn max_pool<V: F32Simd>(a: &PoolPixel) {
    let (lo, hi) = (V::splat(a.clamp.lo), V::splat(a.clamp.hi));
    // SAFETY: the window's pixels and the output pixel are accessible (caller).
    unsafe {
        for c0 in (0..a.channels).step_by(V::LANES) {
            let n = V::LANES.min(a.channels - c0);
            let mut acc = V::splat(f32::MIN);
            for ky in 0..a.rows {
                let row = a.input.add(ky * a.in_row + c0);
                for kx in 0..a.cols {
                    acc = acc.sel_max(load_n(row.add(kx * a.in_px), n));
                }
            }
            let y = clamp(acc, lo, hi, a.clamp.nan_to_lo);
            store_n(y, a.output.add(c0), n);
        }
    }
}

/// `out[i] = f(x[i])` over `min(len)` elements, whole vectors then one partial one.
#[inline(always)]
unsafe fn map1<V: F32Simd>(x: &[f32], out: &mut [f32], f: impl Fn(V) -> V) {
    let len = out.len().min(x.len());
    let (xp, op) = (x.as_ptr(), out.as_mut_ptr());
    // SAFETY: every access is below `len`, within both slices.
    unsafe {
        let mut i = 0;
        while i + V::LANES <= len {
            f(V::load(xp.add(i))).store(op.add(i));
            i += V::LANES;
        }
        if i < len {
            f(V::load_part(xp.add(i), len - i)).store_part(op.add(i), len - i);
        }
    }
}

/// `out[i] = f(a[i], b[i])` over `min(len)` elements.
#[inline(always)]
unsafe fn map2<V: F32Simd>(a: &[f32], b: &[f32], out: &mut [f32], f: impl Fn(V, V) -> V) {
    let len = out.len().min(a.len()).min(b.len());
    let (ap, bp, op) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    // SAFETY: every access is below `len`, within all three slices.
    unsafe {
        let mut i = 0;
        while i + V::LANES <= len {
            f(V::load(ap.add(i)), V::load(bp.add(i))).store(op.add(i));
            i += V::LANES;
        }
        if i < len {
            let n = len - i;
            f(V::load_part(ap.add(i), n), V::load_part(bp.add(i), n)).store_part(op.add(i), n);
        }
    }
}

/// [`F32Vec::add`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vadd<V: F32Simd>(a: &[f32], b: &[f32], out: &mut [f32], c: ClampF32) {
    let (lo, hi) = (V::splat(c.lo), V::splat(c.hi));
    // SAFETY: the caller's level guarantee is all `map2` needs.
    unsafe { map2::<V>(a, b, out, |x, y| clamp(x.add(y), lo, hi, c.nan_to_lo)) }
}

/// [`F32Vec::mul`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vmul<V: F32Simd>(a: &[f32], b: &[f32], out: &mut [f32], c: ClampF32) {
    let (lo, hi) = (V::splat(c.lo), V::splat(c.hi));
    // SAFETY: the caller's level guarantee is all `map2` needs.
    unsafe { map2::<V>(a, b, out, |x, y| clamp(x.mul(y), lo, hi, c.nan_to_lo)) }
}

/// [`F32Vec::clamp`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vclamp<V: F32Simd>(x: &[f32], out: &mut [f32], c: ClampF32) {
    let (lo, hi) = (V::splat(c.lo), V::splat(c.hi));
    // SAFETY: the caller's level guarantee is all `map1` needs.
    unsafe { map1::<V>(x, out, |v| clamp(v, lo, hi, c.nan_to_lo)) }
}

/// [`F32Vec::logistic`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vlogistic<V: F32Simd>(x: &[f32], out: &mut [f32]) {
    let one = V::splat(1.0);
    // SAFETY: the caller's level guarantee is all `map1` needs.
    unsafe { map1::<V>(x, out, |v| one.div(one.add(V::splat(0.0).sub(v).exp()))) }
}

/// [`F32Vec::tanh`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vtanh<V: F32Simd>(x: &[f32], out: &mut [f32]) {
    // SAFETY: the caller's level guarantee is all `map1` needs.
    unsafe { map1::<V>(x, out, |v| v.tanh()) }
}

/// [`F32Vec::exp`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vexp<V: F32Simd>(x: &[f32], out: &mut [f32]) {
    // SAFETY: the caller's level guarantee is all `map1` needs.
    unsafe { map1::<V>(x, out, |v| v.exp()) }
}

/// [`F32Vec::log`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vlog<V: F32Simd>(x: &[f32], out: &mut [f32]) {
    // SAFETY: the caller's level guarantee is all `map1` needs.
    unsafe { map1::<V>(x, out, |v| v.ln()) }
}

/// [`F32Vec::max`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vmax<V: F32Simd>(x: &[f32]) -> f32 {
    let p = x.as_ptr();
    // SAFETY: every access is below `x.len()`. Partial lanes load as 0 and are not folded.
    unsafe {
        let mut acc = V::splat(f32::NEG_INFINITY);
        let mut i = 0;
        while i + V::LANES <= x.len() {
            acc = acc.sel_max(V::load(p.add(i)));
            i += V::LANES;
        }
        let mut m = acc.hmax();
        for &v in &x[i..] {
            if m < v {
                m = v;
            }
        }
        m
    }
}

/// [`F32Vec::exp_sum`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vexp_sum<V: F32Simd>(
    x: &[f32],
    out: &mut [f32],
    shift: f32,
    beta: f32,
) -> f32 {
    let len = out.len().min(x.len());
    let (xp, op) = (x.as_ptr(), out.as_mut_ptr());
    let (s, b) = (V::splat(shift), V::splat(beta));
    // SAFETY: every access is below `len`, within both slices. The partial vector's unused
    // lanes are zero, so they are masked out of the sum by the partial store and by summing
    // only the stored values.
    unsafe {
        let mut sum = V::splat(0.0);
        let mut i = 0;
        while i + V::LANES <= len {
            let e = V::load(xp.add(i)).sub(s).mul(b).exp();
            e.store(op.add(i));
            sum = sum.add(e);
            i += V::LANES;
        }
        let mut total = sum.hsum();
        if i < len {
            let n = len - i;
            V::load_part(xp.add(i), n)
                .sub(s)
                .mul(b)
                .exp()
                .store_part(op.add(i), n);
            for &e in &out[i..len] {
                total += e;
            }
        }
        total
    }
}

/// [`F32Vec::div`]. # Safety: the processor runs `V`'s level.
#[inline(always)]
pub(crate) unsafe fn vdiv<V: F32Simd>(out: &mut [f32], d: f32) {
    let dv = V::splat(d);
    let len = out.len();
    let op = out.as_mut_ptr();
    // SAFETY: every access is below `len`.
    unsafe {
        let mut i = 0;
        while i + V::LANES <= len {
            V::load(op.add(i)).div(dv).store(op.add(i));
            i += V::LANES;
        }
        if i < len {
            V::load_part(op.add(i), len - i)
                .div(dv)
                .store_part(op.add(i), len - i);
        }
    }
}

/// Defines a level's entry points (each `unsafe fn` compiled with the level's features and
/// instantiating one algorithm above with the level's vector type) and a `fill_f32_small`
/// that puts them into the table.
macro_rules! f32_small_entries {
    (
        $(#[$feat:meta])*
        vector = $v:ty, tile = $p:literal, tile_s2 = $p2:literal,
        dw = $dw:ident, dw3x3 = $dw3:ident, avgpool = $avg:ident, maxpool = $maxp:ident,
        add = $add:ident, mul = $mul:ident, clamp = $clamp:ident, logistic = $logistic:ident,
        tanh = $tanh:ident, exp = $exp:ident, log = $log:ident, rmax = $rmax:ident, expsum = $expsum:ident, div = $div:ident $(,)?
    ) => {
        use $crate::ukernels::f32_small as fs;

        /// General depthwise window.
        ///
        /// # Safety
        /// The processor runs this level; the memory contract of [`fs::F32Dw::window`].
        $(#[$feat])*
        pub unsafe fn $dw(a: &fs::DwRun, c: &fs::DwClip) {
            // SAFETY: this level is supported (table) and the caller keeps the memory contract.
            unsafe { fs::dw_window::<$v>(a, c) }
        }

        /// Full 3×3 depthwise windows, stride 1 or 2.
        ///
        /// # Safety
        /// The processor runs this level; the memory contract of [`fs::F32Dw::conv3x3`].
        $(#[$feat])*
        pub unsafe fn $dw3(a: &fs::DwRun, c: &fs::DwClip) {
            // SAFETY: this level is supported (table) and the caller keeps the memory contract.
            unsafe { fs::dw3x3::<$v, $p, $p2>(a, c) }
        }

        /// AVERAGE_POOL_2D pixel.
        ///
        /// # Safety
        /// The processor runs this level; the memory contract of [`fs::F32Pool::avg`].
        $(#[$feat])*
        pub unsafe fn $avg(a: &fs::PoolPixel) {
            // SAFETY: this level is supported (table) and the caller keeps the memory contract.
            unsafe { fs::avg_pool::<$v>(a) }
        }

        /// MAX_POOL_2D pixel.
        ///
        /// # Safety
        /// The processor runs this level; the memory contract of [`fs::F32Pool::max`].
        $(#[$feat])*
        pub unsafe fn $maxp(a: &fs::PoolPixel) {
            // SAFETY: this level is supported (table) and the caller keeps the memory contract.
            unsafe { fs::max_pool::<$v>(a) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $add(a: &[f32], b: &[f32], out: &mut [f32], c: fs::ClampF32) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vadd::<$v>(a, b, out, c) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $mul(a: &[f32], b: &[f32], out: &mut [f32], c: fs::ClampF32) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vmul::<$v>(a, b, out, c) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $clamp(x: &[f32], out: &mut [f32], c: fs::ClampF32) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vclamp::<$v>(x, out, c) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $logistic(x: &[f32], out: &mut [f32]) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vlogistic::<$v>(x, out) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $tanh(x: &[f32], out: &mut [f32]) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vtanh::<$v>(x, out) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $exp(x: &[f32], out: &mut [f32]) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vexp::<$v>(x, out) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $log(x: &[f32], out: &mut [f32]) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vlog::<$v>(x, out) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $rmax(x: &[f32]) -> f32 {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vmax::<$v>(x) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $expsum(x: &[f32], out: &mut [f32], shift: f32, beta: f32) -> f32 {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vexp_sum::<$v>(x, out, shift, beta) }
        }

        /// One [`fs::F32Vec`] loop.
        ///
        /// # Safety
        /// The processor runs this level.
        $(#[$feat])*
        pub unsafe fn $div(out: &mut [f32], d: f32) {
            // SAFETY: this level is supported (caller).
            unsafe { fs::vdiv::<$v>(out, d) }
        }

        /// This level's depthwise kernels.
        pub(crate) const F32_DW: fs::F32Dw = fs::F32Dw {
            lanes: <$v as $crate::ukernels::simd::F32Simd>::LANES,
            window: $dw,
            conv3x3: $dw3,
        };

        /// This level's pooling kernels.
        pub(crate) const F32_POOL: fs::F32Pool = fs::F32Pool {
            avg: $avg,
            max: $maxp,
        };

        /// This level's element-wise and softmax loops.
        pub(crate) const F32_VEC: fs::F32Vec = fs::F32Vec {
            add: $add,
            mul: $mul,
            clamp: $clamp,
            logistic: $logistic,
            tanh: $tanh,
            exp: $exp,
            log: $log,
            max: $rmax,
            exp_sum: $expsum,
            div: $div,
        };

        /// Puts this level's float32 depthwise, pooling and vector kernels into `t`.
        #[allow(dead_code)]
        pub(crate) fn fill_f32_small(t: &mut $crate::ukernels::Ukernels) {
            t.f32_dw = F32_DW;
            t.f32_pool = F32_POOL;
            t.f32_vec = F32_VEC;
        }
    };
}
pub(crate) use f32_small_entries;
