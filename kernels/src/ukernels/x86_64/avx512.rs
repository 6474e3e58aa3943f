//! AVX-512 micro-kernels (F, BW, DQ, VL), and the exact vector requantization the AVX-512 VNNI
//! kernels share.

use std::arch::x86_64::*;

use crate::ukernels::quant8::{Requant8, U8Dw, U8DwArgs, U8Gemm, U8GemmArgs, U8RowSum, DW_BLOCK};
use crate::ukernels::{F32Gemm, F32GemmArgs, F32GemmFn, Ukernels};

mod binary_u8;
mod convert_u8;
pub mod f32_small;

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.f32_gemm = F32_GEMM;
    f32_small::fill_f32_small(t);
    t.u8_binary = Some(binary_u8::U8_BINARY);
    t.u8_convert = Some(convert_u8::U8_CONVERT);
    t.u8_gemm = U8Gemm {
        mr: 4,
        nr: 32,
        weight_shift: 128,
        any_rows: false,
        kernel: u8_gemm_avx512_4x32,
        name: "u8_gemm_avx512_4x32",
    };
    t.u8_row_sum = U8RowSum {
        kernel: u8_row_sum_avx512,
        name: "u8_row_sum_avx512",
    };
    t.u8_dw = U8Dw {
        kernel: u8_dw_avx512_16c,
        name: "u8_dw_avx512_16c",
    };
}

/// Float32 GEMM tile: 7 rows × 32 columns = 14 zmm accumulators. Zen 4 retires one zmm FMA
/// per cycle with latency 4, so ≥ 4 independent accumulators keep it busy; 14 leaves room
/// for the 2 B vectors and the broadcasts within 32 registers, and 32 columns halve the
/// broadcasts per FMA compared with 16. Every MobileNet spatial size is a multiple of 7.
const F32_MR: usize = 7;
const F32_NR: usize = 32;

const F32_GEMM: F32Gemm = F32Gemm {
    name: "f32_gemm_avx512_7x32",
    mr: F32_MR,
    nr: F32_NR,
    rows: [
        gemm::<1> as F32GemmFn,
        gemm::<2>,
        gemm::<3>,
        gemm::<4>,
        gemm::<5>,
        gemm::<6>,
        f32_gemm_avx512_7x32,
        f32_gemm_avx512_7x32,
    ],
};

/// The full 7×32 tile.
///
/// # Safety
/// The contract of [`F32GemmFn`]; the processor supports AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn f32_gemm_avx512_7x32(p: &F32GemmArgs) {
    // SAFETY: forwarded contract; same target features.
    unsafe { gemm::<F32_MR>(p) }
}

/// How far ahead of its loads the one-row tile prefetches weights: 4 KiB, 32 k-steps.
const PREFETCH_FLOATS: usize = 1024;

/// `R ≤ 7` rows of the 7×32 tile.
///
/// A block whose real columns end within its first 16 (the last block of N = 16, 144, … —
/// MobileNet v2 has such layers at 112×112 and 56×56) runs without the FMAs of the missing
/// columns, one zmm per row instead of two. Every output lane still receives the same FMAs in
/// the same order, so the results are the same bits as the full tile's. (A zmm and a ymm for
/// blocks of at most 24 columns measured no faster on Zen 4 than the full tile, for N = 24.)
///
/// # Safety
/// As [`f32_gemm_avx512_7x32`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn gemm<const R: usize>(p: &F32GemmArgs) {
    let mut w = p.w;
    let mut c = p.c;
    let mut left = p.nc;
    // Each block prefetches an equal share of `next`.
    let blocks = p.nc.div_ceil(F32_NR);
    let mut i = 0;
    while left > 0 {
        let cols = left.min(F32_NR);
        let (n0, n1) = (i * p.next_len / blocks, (i + 1) * p.next_len / blocks);
        let next = (p.next.wrapping_add(n0), n1 - n0);
        // SAFETY: forwarded contract: `w` is a whole packed block, the C rows hold `cols`
        // columns at `c`.
        unsafe {
            if cols > 16 {
                block::<R, 16>(p, w, c, cols, next);
            } else {
                block::<R, 0>(p, w, c, cols, next);
            }
        }
        i += 1;
        left -= cols;
        w = w.wrapping_add(F32_NR * (p.ks * p.kc + 1));
        c = c.wrapping_add(F32_NR);
    }
}

/// One packed block of the 7×32 tile: `R` rows, the first `cols ≤ 16 + HI` of its columns,
/// with `HI` (0 or 16) columns computed past the first 16.
///
/// # Safety
/// As [`f32_gemm_avx512_7x32`], for the one block at `w` and `cols` columns of C at `c`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn block<const R: usize, const HI: usize>(
    p: &F32GemmArgs,
    w: *const f32,
    c: *mut f32,
    cols: usize,
    (mut next, next_len): (*const f32, usize),
) {
    debug_assert!(cols <= 16 + HI);
    // Lines of `next` still to prefetch, one per k-step (a 64-byte line per 14 FMAs) in a
    // loop of their own, so the k-steps past them run the plain loop.
    let mut next_lines = next_len.div_ceil(16);
    // SAFETY: the packed block holds 32 bias values then K rows of 32 weights (contract).
    let (mut lo, mut hi) = unsafe { ([_mm512_loadu_ps(w); R], [_mm512_loadu_ps(w.add(16)); R]) };
    let mut b = w.wrapping_add(F32_NR);
    for s in 0..p.ks {
        // SAFETY: the table holds ks·R pointers (contract).
        let a: [*const f32; R] = std::array::from_fn(|r| unsafe { *p.a.add(s * R + r) });
        let ahead = next_lines.min(p.kc);
        for kk in 0..ahead {
            // SAFETY: prefetches never fault; the k-step as below.
            unsafe {
                if R == 1 {
                    _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(PREFETCH_FLOATS).cast());
                    _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(PREFETCH_FLOATS + 16).cast());
                }
                _mm_prefetch::<_MM_HINT_T1>(next.cast());
                kstep::<R, HI>(&a, kk, b, &mut lo, &mut hi);
            }
            next = next.wrapping_add(16);
            b = b.wrapping_add(F32_NR);
        }
        next_lines -= ahead;
        for kk in ahead..p.kc {
            // SAFETY: `b` walks the K weight rows of this block; every segment holds kc
            // values.
            unsafe {
                if R == 1 {
                    // A single row (FULLY_CONNECTED on one vector) streams the whole weight
                    // matrix once with two FMAs per 128 bytes: nothing to hide memory latency
                    // behind, so ask for the weights well ahead. Prefetches never fault, past
                    // the end of the block or the buffer.
                    _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(PREFETCH_FLOATS).cast());
                    _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(PREFETCH_FLOATS + 16).cast());
                }
                kstep::<R, HI>(&a, kk, b, &mut lo, &mut hi);
            }
            b = b.wrapping_add(F32_NR);
        }
    }
    // `max(min, x)` / `min(max, x)` return `x` when it is NaN (the second operand wins).
    let (vmin, vmax) = (_mm512_set1_ps(p.min), _mm512_set1_ps(p.max));
    // Masked stores write only the columns below `cols` and never fault on masked-off lanes.
    let m0: __mmask16 = if cols >= 16 {
        0xffff
    } else {
        (1u16 << cols) - 1
    };
    let m1: __mmask16 = if cols >= 32 {
        0xffff
    } else if cols > 16 {
        (1u16 << (cols - 16)) - 1
    } else {
        0
    };
    for r in 0..R {
        let row = c.wrapping_add(r * p.c_stride);
        let l = _mm512_min_ps(vmax, _mm512_max_ps(vmin, lo[r]));
        // SAFETY: only lanes below `cols` are written, all inside row r of C.
        unsafe {
            if HI == 16 && cols == F32_NR {
                let h = _mm512_min_ps(vmax, _mm512_max_ps(vmin, hi[r]));
                _mm512_storeu_ps(row, l);
                _mm512_storeu_ps(row.wrapping_add(16), h);
            } else if HI == 16 {
                let h = _mm512_min_ps(vmax, _mm512_max_ps(vmin, hi[r]));
                _mm512_mask_storeu_ps(row, m0, l);
                _mm512_mask_storeu_ps(row.wrapping_add(16), m1, h);
            } else {
                _mm512_mask_storeu_ps(row, m0, l);
            }
        }
    }
}

/// One k-step of [`block`]: A column `kk` of the `R` rows times weight row `b`.
///
/// # Safety
/// As [`block`]: each `a[r]` holds more than `kk` values, `b` a whole weight row.
#[inline(always)]
unsafe fn kstep<const R: usize, const HI: usize>(
    a: &[*const f32; R],
    kk: usize,
    b: *const f32,
    lo: &mut [__m512; R],
    hi: &mut [__m512; R],
) {
    // SAFETY: the caller's contract.
    unsafe {
        let b0 = _mm512_loadu_ps(b);
        if HI == 16 {
            let b1 = _mm512_loadu_ps(b.add(16));
            for r in 0..R {
                let av = _mm512_set1_ps(*a[r].add(kk));
                lo[r] = _mm512_fmadd_ps(av, b0, lo[r]);
                hi[r] = _mm512_fmadd_ps(av, b1, hi[r]);
            }
        } else {
            for r in 0..R {
                let av = _mm512_set1_ps(*a[r].add(kk));
                lo[r] = _mm512_fmadd_ps(av, b0, lo[r]);
            }
        }
    }
}

/// [`Requant8`] broadcast into registers.
#[derive(Clone, Copy)]
pub(super) struct Rq512 {
    mult: __m512i,
    round: __m512i,
    /// `shift − 1` (unused when `shift` is 0).
    pre: __m128i,
    /// `shift`, and the remainder mask `2^shift − 1` with its half.
    shift: __m128i,
    mask: __m512i,
    half: __m512i,
    exact: bool,
    lo: __m512i,
    hi: __m512i,
    zp: __m512i,
    /// The zero point in 16-bit lanes, and the activation bounds as absolute bytes.
    zp16: __m512i,
    min8: __m512i,
    max8: __m512i,
    /// For [`requant_q512_fused`]: `2^30 + 2^(30+shift)` and `−2^30` in 64-bit lanes, and the
    /// 64-bit shifts `31 + shift` and `shift − 1`.
    fused_add: __m512i,
    fused_neg: __m512i,
    fused_even: __m128i,
    fused_odd: __m128i,
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) fn rq512(rq: &Requant8) -> Rq512 {
    let mask = ((1i64 << rq.shift) - 1) as i32;
    Rq512 {
        shift: _mm_cvtsi32_si128(rq.shift as i32),
        mask: _mm512_set1_epi32(mask),
        half: _mm512_set1_epi32(mask >> 1),
        mult: _mm512_set1_epi32(rq.multiplier),
        round: _mm512_set1_epi64(1 << 30),
        pre: _mm_cvtsi32_si128(rq.shift.saturating_sub(1) as i32),
        exact: rq.shift == 0,
        lo: _mm512_set1_epi32(rq.lo),
        hi: _mm512_set1_epi32(rq.hi),
        zp: _mm512_set1_epi32(rq.zero_point),
        zp16: _mm512_set1_epi16(rq.zero_point as i16),
        min8: _mm512_set1_epi8((rq.lo + rq.zero_point) as u8 as i8),
        max8: _mm512_set1_epi8((rq.hi + rq.zero_point) as u8 as i8),
        fused_add: _mm512_set1_epi64((1i64 << 30) + (1i64 << (30 + rq.shift))),
        fused_neg: _mm512_set1_epi64(-(1i64 << 30)),
        fused_even: _mm_cvtsi32_si128(31 + rq.shift as i32),
        fused_odd: _mm_cvtsi32_si128(rq.shift as i32 - 1),
    }
}

/// `RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, m), shift)` on 16 lanes, before
/// the zero point.
///
/// SaturatingRoundingDoublingHighMul is `floor((x·m + 2^30) / 2^31)` (the multiplier is never
/// `i32::MIN`, so it never saturates): 64-bit products of the even lanes and of the odd lanes
/// (`vpmuldq`), plus 2^30, and bits 31..62 of each sum picked out by a 64-bit shift right by
/// 31 (even lanes, low dword) or left by 1 (odd lanes, high dword).
///
/// RoundingDivideByPOT rounds half away from zero. With `h' = h − [h < 0]` that is
/// `floor((h' + 2^(s−1)) / 2^s)`, which equals `ceil(b / 2) = b − floor(b / 2)` for
/// `b = floor(h' / 2^(s−1))`: two shifts and a subtraction, none of which can overflow (`h` is
/// never `i32::MIN`, since `|h| ≤ |x|·m / 2^31 + 1/2` with `m < 2^31`).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn requant_q512(x: __m512i, c: &Rq512) -> __m512i {
    let even = _mm512_mul_epi32(x, c.mult);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x), c.mult);
    let even = _mm512_srli_epi64::<31>(_mm512_add_epi64(even, c.round));
    let odd = _mm512_slli_epi64::<1>(_mm512_add_epi64(odd, c.round));
    let h = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    if c.exact {
        return h;
    }
    let b = _mm512_sra_epi32(_mm512_add_epi32(h, _mm512_srai_epi32::<31>(h)), c.pre);
    _mm512_sub_epi32(b, _mm512_srai_epi32::<1>(b))
}

/// Two vectors of [`requant_q512`] results as 32 output bytes, `q0`'s lanes first.
///
/// The narrowing saturates (to int16, through the zero point, to 0..=255) before the clamp to
/// the activation bounds, which lie inside 0..=255: a value the saturation moved was outside
/// 0..=255 after the zero point, so it lands on the bound the reference's clamp gives it too.
/// `vpackssdw`/`vpackuswb` work per 128-bit lane; one dword permutation restores the order.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn narrow2_512(q0: __m512i, q1: __m512i, c: &Rq512) -> __m256i {
    let w = _mm512_adds_epi16(_mm512_packs_epi32(q0, q1), c.zp16);
    let b = _mm512_packus_epi16(w, w);
    // Lane L holds dwords [q0 4L.., q1 4L.., repeated]: gather q0's four, then q1's.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    let b = _mm512_permutexvar_epi32(order, b);
    let b = _mm512_min_epu8(_mm512_max_epu8(b, c.min8), c.max8);
    _mm512_castsi512_si256(b)
}

/// [`narrow2_512`] for activation bounds that span all of 0..=255: the saturating packs
/// already put every value in range, so the clamp would change nothing.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn narrow2_512_unclamped(q0: __m512i, q1: __m512i, c: &Rq512) -> __m256i {
    let w = _mm512_adds_epi16(_mm512_packs_epi32(q0, q1), c.zp16);
    let b = _mm512_packus_epi16(w, w);
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, b))
}

/// Stores the 32 bytes of `v` at `dst`, only the first `n ≤ 32`.
///
/// # Safety
/// The first `n` bytes at `dst` are writable.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) unsafe fn store32(dst: *mut u8, n: usize, v: __m256i) {
    if n >= 32 {
        // SAFETY: all 32 bytes are writable.
        unsafe { _mm256_storeu_si256(dst.cast(), v) }
    } else {
        let m = if n == 0 { 0 } else { u32::MAX >> (32 - n) };
        // SAFETY: only the first `n` bytes are written.
        unsafe { _mm256_mask_storeu_epi8(dst.cast(), m, v) }
    }
}

/// [`Requant8::apply`] on 16 lanes, narrowed to 16 bytes, for chains where latency counts
/// more than instruction count (the depthwise rows, one chain per pixel).
///
/// SaturatingRoundingDoublingHighMul as in [`requant_q512`]; RoundingDivideByPOT in the
/// reference's mask/threshold form, whose three independent arms are one step shallower than
/// [`requant_q512`]'s. The clamp to `[lo, hi]` (bounds already minus the zero point) comes
/// before the zero point is added, so the final values lie in 0..=255 and the truncating
/// `vpmovdb` is exact.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn requant512(x: __m512i, c: &Rq512) -> __m128i {
    let even = _mm512_mul_epi32(x, c.mult);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x), c.mult);
    let even = _mm512_srli_epi64::<31>(_mm512_add_epi64(even, c.round));
    let odd = _mm512_slli_epi64::<1>(_mm512_add_epi64(odd, c.round));
    let h = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    let rem = _mm512_and_si512(h, c.mask);
    let threshold = _mm512_add_epi32(c.half, _mm512_srli_epi32::<31>(h));
    let q = _mm512_sra_epi32(h, c.shift);
    // rem > threshold ⟺ threshold − rem < 0 (both in 0..2^31, no overflow): add 1 there.
    let q = _mm512_sub_epi32(q, _mm512_srai_epi32::<31>(_mm512_sub_epi32(threshold, rem)));
    let q = _mm512_min_epi32(_mm512_max_epi32(q, c.lo), c.hi);
    _mm512_cvtepi32_epi8(_mm512_add_epi32(q, c.zp))
}

/// Per-column constants ([`crate::ukernels::quant8::ColRequant`]) of 16 lanes in registers,
/// with the per-tensor zero point and bounds of a [`Requant8`].
#[derive(Clone, Copy)]
pub(super) struct RqCols512 {
    mult: __m512i,
    /// The odd lanes' multipliers moved to the even positions, for `vpmuldq`.
    mult_odd: __m512i,
    left: __m512i,
    right: __m512i,
    mask: __m512i,
    half: __m512i,
    round: __m512i,
    lo: __m512i,
    hi: __m512i,
    zp: __m512i,
}

/// Loads 16 lanes of per-column constants: multipliers at `m`, left shifts at `m + stride`,
/// right shifts at `m + 2·stride`.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and the three runs of 16 values are readable.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) unsafe fn rq512_cols(rq: &Requant8, m: *const i32, stride: usize) -> RqCols512 {
    // SAFETY: the three runs of 16 values are readable (caller contract).
    let (mult, left, right) = unsafe {
        (
            _mm512_loadu_si512(m.cast()),
            _mm512_loadu_si512(m.add(stride).cast()),
            _mm512_loadu_si512(m.add(2 * stride).cast()),
        )
    };
    let one = _mm512_set1_epi32(1);
    // 2^right − 1 per lane; right = 31 gives i32::MIN − 1 = i32::MAX, the wanted mask.
    let mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    RqCols512 {
        mult,
        mult_odd: _mm512_srli_epi64::<32>(mult),
        left,
        right,
        mask,
        half: _mm512_srli_epi32::<1>(mask),
        round: _mm512_set1_epi64(1 << 30),
        lo: _mm512_set1_epi32(rq.lo),
        hi: _mm512_set1_epi32(rq.hi),
        zp: _mm512_set1_epi32(rq.zero_point),
    }
}

/// [`Requant8::apply_col`] on 16 lanes, narrowed to 16 bytes: [`requant512`] with a per-lane
/// wrapping left shift first (`vpsllvd`) and per-lane multipliers and right shifts
/// (`vpsravd`; a right shift of 0 has mask and threshold 0, so nothing is added).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn requant512_cols(x: __m512i, c: &RqCols512) -> __m128i {
    let x = _mm512_sllv_epi32(x, c.left);
    let even = _mm512_mul_epi32(x, c.mult);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x), c.mult_odd);
    let even = _mm512_srli_epi64::<31>(_mm512_add_epi64(even, c.round));
    let odd = _mm512_slli_epi64::<1>(_mm512_add_epi64(odd, c.round));
    let h = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    let rem = _mm512_and_si512(h, c.mask);
    let threshold = _mm512_add_epi32(c.half, _mm512_srli_epi32::<31>(h));
    let q = _mm512_srav_epi32(h, c.right);
    let q = _mm512_sub_epi32(q, _mm512_srai_epi32::<31>(_mm512_sub_epi32(threshold, rem)));
    let q = _mm512_min_epi32(_mm512_max_epi32(q, c.lo), c.hi);
    _mm512_cvtepi32_epi8(_mm512_add_epi32(q, c.zp))
}

/// Four vectors of requantized int32 results (before the zero point) as 64 output bytes:
/// byte `16L + j` comes from lane `4L + j % 4` of vector `j / 4`, the order the byte and word
/// unpacks of the depthwise kernel leave ([`crate::ukernels::quant8::dw4_lane`]).
///
/// The saturating narrowing is exact for the reasons given at [`narrow2_512`]; no dword
/// permutation is needed since the packs undo the unpacks lane by lane.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn narrow4_512(q: [__m512i; 4], c: &Rq512) -> __m512i {
    let w01 = _mm512_adds_epi16(_mm512_packs_epi32(q[0], q[1]), c.zp16);
    let w23 = _mm512_adds_epi16(_mm512_packs_epi32(q[2], q[3]), c.zp16);
    let b = _mm512_packus_epi16(w01, w23);
    _mm512_min_epu8(_mm512_max_epu8(b, c.min8), c.max8)
}

/// [`requant_q512`] with its two roundings fused into one 64-bit shift, fewer shifts for the
/// depthwise kernels, where shift units are the busiest.
///
/// With `P = x·m` (64-bit), SaturatingRoundingDoublingHighMul is `h = floor((P + 2^30) / 2^31)`
/// and, for `shift = s ≥ 1`, RoundingDivideByPOT is `floor((h + 2^(s−1) − [h < 0]) / 2^s)`.
/// Nested floors of integer divisions by positive integers merge,
/// `floor((floor(A / b) + r) / c) = floor((A + r·b) / (b·c))`, so the result is
/// `(P + 2^30 + 2^(30+s) − [P < −2^30]·2^31) >> (31 + s)` (arithmetic, 64-bit; `h < 0` exactly
/// when `P + 2^30 < 0`). `|P| < 2^62` and the added terms stay below 2^62, so nothing
/// overflows, and the result fits int32. Even lanes shift by `31 + s` (result in the low
/// dword); odd lanes by `s − 1`, which puts the same bits in the high dword. `s = 0` is the
/// plain high multiply.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn requant_q512_fused(x: __m512i, c: &Rq512) -> __m512i {
    let even = _mm512_mul_epi32(x, c.mult);
    let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x), c.mult);
    if c.exact {
        let even = _mm512_srli_epi64::<31>(_mm512_add_epi64(even, c.round));
        let odd = _mm512_slli_epi64::<1>(_mm512_add_epi64(odd, c.round));
        return _mm512_mask_blend_epi32(0xAAAA, even, odd);
    }
    let two31 = _mm512_slli_epi64::<1>(c.round);
    let fuse = |p: __m512i| {
        let k = _mm512_cmplt_epi64_mask(p, c.fused_neg);
        let u = _mm512_add_epi64(p, c.fused_add);
        _mm512_mask_sub_epi64(u, k, u, two31)
    };
    let even = _mm512_sra_epi64(fuse(even), c.fused_even);
    let odd = _mm512_sra_epi64(fuse(odd), c.fused_odd);
    _mm512_mask_blend_epi32(0xAAAA, even, odd)
}

/// [`crate::ukernels::quant8::fused_col`] on the 16 lanes of `x`, one group of
/// [`crate::ukernels::quant8::ColFused`] constants at `f`: the int32 results before the
/// bounds and the zero point, for [`narrow2_512`].
///
/// The even lanes' products come from `vpmuldq` on `x`, the odd lanes' from `x` shifted down
/// a dword; each 64-bit result fits int32, so its low dword is the value, and one masked
/// dword shuffle moves the odd results into the odd lanes.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and `f` holds one group's
/// [`crate::ukernels::quant8::FUSED_GROUP_LEN`] values, 64-byte aligned.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) unsafe fn requant_q512_colfused(x: __m512i, f: *const i64) -> __m512i {
    let two31 = _mm512_set1_epi64(1 << 31);
    let run = |p: __m512i, c: *const i64| {
        // SAFETY: the four runs of 8 values at `c` lie inside the group (caller contract).
        let (m, add, thr, sh) = unsafe {
            (
                _mm512_load_si512(c.cast()),
                _mm512_load_si512(c.add(8).cast()),
                _mm512_load_si512(c.add(16).cast()),
                _mm512_load_si512(c.add(24).cast()),
            )
        };
        let p = _mm512_mul_epi32(p, m);
        let k = _mm512_cmplt_epi64_mask(p, thr);
        let u = _mm512_add_epi64(p, add);
        _mm512_srav_epi64(_mm512_mask_sub_epi64(u, k, u, two31), sh)
    };
    let even = run(x, f);
    let odd = run(_mm512_srli_epi64::<32>(x), f.wrapping_add(32));
    _mm512_mask_shuffle_epi32::<_MM_PERM_CCAA>(even, 0xAAAA, odd)
}

/// [`requant_q512_fused`] on the 8 lanes of a 256-bit vector.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn requant_q256_fused(x: __m256i, c: &Rq512) -> __m256i {
    let low = _mm512_castsi512_si256;
    let (mult, round) = (low(c.mult), low(c.round));
    let even = _mm256_mul_epi32(x, mult);
    let odd = _mm256_mul_epi32(_mm256_srli_epi64::<32>(x), mult);
    if c.exact {
        let even = _mm256_srli_epi64::<31>(_mm256_add_epi64(even, round));
        let odd = _mm256_slli_epi64::<1>(_mm256_add_epi64(odd, round));
        return _mm256_mask_blend_epi32(0xAA, even, odd);
    }
    let two31 = _mm256_slli_epi64::<1>(round);
    let fuse = |p: __m256i| {
        let k = _mm256_cmplt_epi64_mask(p, low(c.fused_neg));
        let u = _mm256_add_epi64(p, low(c.fused_add));
        _mm256_mask_sub_epi64(u, k, u, two31)
    };
    let even = _mm256_sra_epi64(fuse(even), c.fused_even);
    let odd = _mm256_sra_epi64(fuse(odd), c.fused_odd);
    _mm256_mask_blend_epi32(0xAA, even, odd)
}

/// [`narrow4_512`] on 256-bit vectors: 32 output bytes, byte `16L + j` from lane
/// `4L + j % 4` of vector `j / 4`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) fn narrow4_256(q: [__m256i; 4], c: &Rq512) -> __m256i {
    let zp16 = _mm512_castsi512_si256(c.zp16);
    let w01 = _mm256_adds_epi16(_mm256_packs_epi32(q[0], q[1]), zp16);
    let w23 = _mm256_adds_epi16(_mm256_packs_epi32(q[2], q[3]), zp16);
    let b = _mm256_packus_epi16(w01, w23);
    _mm256_min_epu8(
        _mm256_max_epu8(b, _mm512_castsi512_si256(c.min8)),
        _mm512_castsi512_si256(c.max8),
    )
}

/// Requantizes and stores the 32 columns `x` of one GEMM output row at `dst` (only the first
/// `cols`) with the per-column constants `c` of columns 0..16 and 16..32.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and the first `cols ≤ 32` bytes at `dst` are
/// writable.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) unsafe fn store_row_cols32(
    dst: *mut u8,
    cols: usize,
    x: [__m512i; 2],
    c: &[RqCols512; 2],
) {
    let masks = [mask16(cols), mask16(cols.saturating_sub(16))];
    for v in 0..2 {
        if masks[v] != 0 {
            // SAFETY: the store writes columns 16v..min(cols, 16v+16) only.
            unsafe {
                store16(
                    dst.wrapping_add(16 * v),
                    masks[v],
                    requant512_cols(x[v], &c[v]),
                )
            };
        }
    }
}

/// Stores the 32 unrequantized sums `x` of one GEMM row at `dst` (only the first `cols`).
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and the first `cols ≤ 32` values at `dst` are
/// writable.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) unsafe fn store_row_raw32(dst: *mut i32, cols: usize, x: [__m512i; 2]) {
    let masks = [mask16(cols), mask16(cols.saturating_sub(16))];
    for v in 0..2 {
        // SAFETY: the masked store writes values 16v..min(cols, 16v+16) only.
        unsafe { _mm512_mask_storeu_epi32(dst.wrapping_add(16 * v).cast(), masks[v], x[v]) };
    }
}

/// The per-column constants of a 32-column GEMM block.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and `col_rq` holds the block's 3·32 constants.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) unsafe fn rq512_cols32(rq: &Requant8, col_rq: *const i32) -> [RqCols512; 2] {
    // SAFETY: columns 0..16 and 16..32 of each of the three runs of 32 (caller contract).
    unsafe {
        [
            rq512_cols(rq, col_rq, 32),
            rq512_cols(rq, col_rq.add(16), 32),
        ]
    }
}

/// Stores the 16 bytes of `v` at `dst`, only the lanes of `m`. A full mask takes a plain
/// store (masked stores to memory are slow on some cores).
///
/// # Safety
/// The bytes of `dst` selected by `m` are writable.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
pub(super) unsafe fn store16(dst: *mut u8, m: u16, v: __m128i) {
    if m == u16::MAX {
        // SAFETY: all 16 bytes are writable (full mask).
        unsafe { _mm_storeu_si128(dst.cast(), v) }
    } else {
        // SAFETY: only the selected bytes are written.
        unsafe { _mm_mask_storeu_epi8(dst.cast(), m, v) }
    }
}

/// Lane mask of the first `n ≤ 16` lanes.
#[inline]
pub(super) fn mask16(n: usize) -> u16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

/// The depthwise row loop of [`U8DwArgs`] with a 16-channel multiply-accumulate `$mac`
/// (`acc + a·w` on int32 lanes whose upper 16 bits of `a` are zero). Channel blocks outside,
/// pixels inside, so a 3×3 block's nine weight vectors stay in registers across the row.
macro_rules! dw_row_512 {
    ($p:expr, $mac:ident) => {{
        let p: &U8DwArgs = $p;
        if p.col_rq.is_null() {
            let c = rq512(&p.rq);
            dw_row_512!(@rows p, $mac, |_blk: usize| c, |x, c: &Rq512| requant512(x, c));
        } else {
            let cols = |blk: usize| {
                // SAFETY: a non-null `col_rq` holds 3·16 constants per block of 16 channels.
                unsafe { rq512_cols(&p.rq, p.col_rq.add(blk * 3 * DW_BLOCK), DW_BLOCK) }
            };
            dw_row_512!(@rows p, $mac, cols, |x, c: &RqCols512| requant512_cols(x, c));
        }
    }};
    (@rows $p:ident, $mac:ident, $consts:expr, $requant:expr) => {{
        let p: &U8DwArgs = $p;
        let consts = $consts;
        let requant512 = $requant;
        let nt = p.ntaps;
        let per_block = (1 + nt) * DW_BLOCK;
        for blk in 0..p.channels.div_ceil(DW_BLOCK) {
            let c = consts(blk);
            let off = blk * DW_BLOCK;
            let m = mask16(p.channels - off);
            let wb = p.w.wrapping_add(blk * per_block);
            // SAFETY: the packed weights hold `1 + nt` aligned 16-lane groups per block.
            let bias = unsafe { _mm512_load_si512(wb.cast()) };
            // Input bytes of tap `t` of pixel `px`, zero-extended to int32 lanes.
            let load = |px: usize, t: usize| {
                // SAFETY: tap `t` of pixel `px` addresses `channels` readable bytes; a full
                // block reads channels off..off+16, a tail block only the masked ones.
                unsafe {
                    let src = (*p.taps.add(t)).add(px * p.pixel_step + off);
                    if m == u16::MAX {
                        _mm512_cvtepu8_epi32(_mm_loadu_si128(src.cast()))
                    } else {
                        _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src.cast()))
                    }
                }
            };
            let store = |px: usize, acc: __m512i| {
                // SAFETY: the contract allows writing `channels` bytes at each output pixel;
                // the masked store writes only channels off..off+n.
                unsafe { store16(p.out.add(px * p.out_stride + off), m, requant512(acc, &c)) }
            };
            if nt == 9 {
                // SAFETY: as for `bias`.
                let w: [__m512i; 9] = std::array::from_fn(|t| unsafe {
                    _mm512_load_si512(wb.add((1 + t) * DW_BLOCK).cast())
                });
                // Two pixels at a time, interleaved: each pixel is one long dependency chain
                // (nine multiply-accumulates, then the requantization), so independent work
                // must sit next to it for the scheduler to overlap them.
                let mut px = 0;
                while px + 2 <= p.width {
                    let mut a0 = bias;
                    let mut a1 = bias;
                    for (t, &wt) in w.iter().enumerate() {
                        a0 = $mac(a0, load(px, t), wt);
                        a1 = $mac(a1, load(px + 1, t), wt);
                    }
                    let (q0, q1) = (requant512(a0, &c), requant512(a1, &c));
                    // SAFETY: as in `store`.
                    unsafe {
                        store16(p.out.add(px * p.out_stride + off), m, q0);
                        store16(p.out.add((px + 1) * p.out_stride + off), m, q1);
                    }
                    px += 2;
                }
                if px < p.width {
                    let mut acc = bias;
                    for (t, &wt) in w.iter().enumerate() {
                        acc = $mac(acc, load(px, t), wt);
                    }
                    store(px, acc);
                }
            } else {
                for px in 0..p.width {
                    let mut acc = bias;
                    for t in 0..nt {
                        // SAFETY: as for `bias`.
                        let wt = unsafe { _mm512_load_si512(wb.add((1 + t) * DW_BLOCK).cast()) };
                        acc = $mac(acc, load(px, t), wt);
                    }
                    store(px, acc);
                }
            }
        }
    }};
}
pub(super) use dw_row_512;

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
fn mac_madd(acc: __m512i, a: __m512i, w: __m512i) -> __m512i {
    // The upper halves of `a` are zero, so the pair sum is a·w exactly.
    _mm512_add_epi32(acc, _mm512_madd_epi16(a, w))
}

/// uint8 depthwise row, 16 channels per vector (see [`U8DwArgs`]).
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and `p` satisfies the contract of [`U8DwArgs`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn u8_dw_avx512_16c(p: &U8DwArgs) {
    dw_row_512!(p, mac_madd)
}

/// Row corrections with `vpsadbw` (sums of eight bytes per 64-bit lane), 64 bytes per step
/// and a masked load for the tail (see [`crate::ukernels::quant8::U8RowSumFn`]).
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL; rows `r < rows` are `k` readable bytes at
/// `a + r·stride`; `out` holds `rows` values.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn u8_row_sum_avx512(
    a: *const u8,
    stride: usize,
    rows: usize,
    k: usize,
    scale: i32,
    out: *mut i32,
) {
    let zero = _mm512_setzero_si512();
    let (full, tail) = (k / 64, k % 64);
    let tail_mask = if tail == 0 {
        0
    } else {
        u64::MAX >> (64 - tail)
    };
    for r in 0..rows {
        let row = a.wrapping_add(r * stride);
        let mut acc = zero;
        for i in 0..full {
            // SAFETY: bytes 64i..64i+64 ≤ k of row r.
            let x = unsafe { _mm512_loadu_si512(row.add(64 * i).cast()) };
            acc = _mm512_add_epi64(acc, _mm512_sad_epu8(x, zero));
        }
        if tail != 0 {
            // SAFETY: the masked load reads bytes 64·full..k of row r only.
            let x = unsafe { _mm512_maskz_loadu_epi8(tail_mask, row.add(64 * full).cast()) };
            acc = _mm512_add_epi64(acc, _mm512_sad_epu8(x, zero));
        }
        let sum = _mm512_reduce_add_epi64(acc) as i32;
        // SAFETY: `out` has `rows` slots.
        unsafe { *out.add(r) = scale.wrapping_mul(sum).wrapping_neg() };
    }
}

/// uint8 GEMM tile without VNNI, 4 rows × 32 channels (see [`U8GemmArgs`]; weights stored as
/// `w − 128`). `vpmaddubsw` would saturate (255·128·2 > 32767), so each packed group (32
/// channels × 4 k) is sign-extended to four int16 vectors of eight channels, a row's four
/// bytes are zero-extended and broadcast as one 64-bit pattern, and `vpmaddwd` leaves two
/// exact partial sums per channel, paired up in the epilogue.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL and `p` satisfies the contract of
/// [`U8GemmArgs`] with `mr = 4`, `nr = 32`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn u8_gemm_avx512_4x32(p: &U8GemmArgs) {
    const MR: usize = 4;
    let mut a = [p.a; MR];
    for r in 1..MR {
        a[r] = if r < p.rows {
            p.a.wrapping_add(r * p.a_stride)
        } else {
            a[r - 1]
        };
    }
    let mut acc = [[_mm512_setzero_si512(); 4]; MR];
    for g in 0..p.k.div_ceil(4) {
        // SAFETY: group g of the aligned packed block (128 bytes).
        let (lo, hi) = unsafe {
            (
                _mm512_load_si512(p.w.add(128 * g).cast()),
                _mm512_load_si512(p.w.add(128 * g + 64).cast()),
            )
        };
        let w = [
            _mm512_cvtepi8_epi16(_mm512_castsi512_si256(lo)),
            _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64::<1>(lo)),
            _mm512_cvtepi8_epi16(_mm512_castsi512_si256(hi)),
            _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64::<1>(hi)),
        ];
        for r in 0..MR {
            let x = if 4 * g + 4 <= p.k {
                // SAFETY: bytes 4g..4g+4 ≤ k of row r.
                unsafe { a[r].add(4 * g).cast::<u32>().read_unaligned() }
            } else {
                let mut x = 0u32;
                for j in 0..p.k - 4 * g {
                    // SAFETY: byte 4g + j < k of row r.
                    x |= u32::from(unsafe { *a[r].add(4 * g + j) }) << (8 * j);
                }
                x
            };
            let av = _mm512_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(x as i32)));
            for (acc_v, &wv) in acc[r].iter_mut().zip(&w) {
                *acc_v = _mm512_add_epi32(*acc_v, _mm512_madd_epi16(wv, av));
            }
        }
    }
    // SAFETY: the bias block holds 32 values.
    let bias = unsafe {
        [
            _mm512_loadu_si512(p.bias.cast()),
            _mm512_loadu_si512(p.bias.add(16).cast()),
        ]
    };
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    if !p.raw.is_null() || !p.col_rq.is_null() {
        // SAFETY: a non-null `col_rq` holds the block's 3·32 constants.
        let c = (p.raw.is_null()).then(|| unsafe { rq512_cols32(&p.rq, p.col_rq) });
        for (r, acc_r) in acc.iter().enumerate().take(p.rows) {
            // SAFETY: `row_corr` holds `rows` values.
            let corr = _mm512_set1_epi32(unsafe { *p.row_corr.add(r) });
            let x: [__m512i; 2] = std::array::from_fn(|v| {
                let (x0, x1) = (acc_r[2 * v], acc_r[2 * v + 1]);
                let sums = _mm512_add_epi32(
                    _mm512_permutex2var_epi32(x0, even, x1),
                    _mm512_permutex2var_epi32(x0, odd, x1),
                );
                _mm512_add_epi32(_mm512_add_epi32(sums, bias[v]), corr)
            });
            // SAFETY: row r of the output (or of the raw sums) has `cols ≤ 32` writable values.
            unsafe {
                match &c {
                    Some(c) => store_row_cols32(p.out.wrapping_add(r * p.out_stride), p.cols, x, c),
                    None => store_row_raw32(p.raw.wrapping_add(r * p.out_stride), p.cols, x),
                }
            }
        }
        return;
    }
    let c = rq512(&p.rq);
    let masks = [mask16(p.cols), mask16(p.cols.saturating_sub(16))];
    for (r, acc_r) in acc.iter().enumerate() {
        if r >= p.rows {
            break;
        }
        // SAFETY: `row_corr` holds `rows` values.
        let corr = _mm512_set1_epi32(unsafe { *p.row_corr.add(r) });
        for v in 0..2 {
            // Lanes 2c and 2c+1 of a product vector are channel c's two partial sums.
            let (x0, x1) = (acc_r[2 * v], acc_r[2 * v + 1]);
            let sums = _mm512_add_epi32(
                _mm512_permutex2var_epi32(x0, even, x1),
                _mm512_permutex2var_epi32(x0, odd, x1),
            );
            let x = _mm512_add_epi32(_mm512_add_epi32(sums, bias[v]), corr);
            let out = p.out.wrapping_add(r * p.out_stride + 16 * v);
            // SAFETY: the store writes columns 16v..min(cols, 16v+16) of row r only.
            unsafe { store16(out, masks[v], requant512(x, &c)) };
        }
    }
}
