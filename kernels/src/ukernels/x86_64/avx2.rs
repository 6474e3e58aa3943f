//! AVX2 (+FMA3) micro-kernels: the table of processors without AVX-512, which the AVX-512
//! levels start from and override where they have their own (the GEMMs, the depthwise).
//!
//! No 8-bit dot product here: `vpmaddubsw` saturates its int16 pair sums (255·127·2 > 32767),
//! so the uint8 kernels widen both operands to int16 and use `vpmaddwd`, whose pair sums of two
//! products (|·| ≤ 2·255·128) are exact in int32.

use std::arch::x86_64::*;

use crate::ukernels::quant8::{
    Requant8, U8Dw, U8Dw2, U8Dw2Args, U8Dw2ColsArgs, U8DwArgs, U8Gemm, U8GemmArgs, DW_BLOCK,
};
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
        mr: U8_MR,
        nr: 8,
        weight_shift: 128,
        any_rows: true,
        kernel: u8_gemm_avx2_6x8,
        name: "u8_gemm_avx2_6x8",
    };
    t.u8_dw = U8Dw {
        kernel: u8_dw_avx2_16c,
        name: "u8_dw_avx2_16c",
    };
    t.u8_dw2 = Some(U8Dw2 {
        kernel: u8_dw2_avx2_16c,
        cols3: u8_dw2_cols3_avx2,
        name: "u8_dw2_avx2_16c",
    });
}

/// Float32 GEMM tile: 6 rows × 16 columns = 12 ymm accumulators (FMA latency 4 × 2 pipes
/// needs ≥ 8), plus 2 B vectors and a broadcast within the 16 ymm registers.
const F32_MR: usize = 6;
const F32_NR: usize = 16;

const F32_GEMM: F32Gemm = F32Gemm {
    name: "f32_gemm_avx2_6x16",
    mr: F32_MR,
    nr: F32_NR,
    rows: [
        gemm::<1> as F32GemmFn,
        gemm::<2>,
        gemm::<3>,
        gemm::<4>,
        gemm::<5>,
        f32_gemm_avx2_6x16,
        f32_gemm_avx2_6x16,
        f32_gemm_avx2_6x16,
    ],
};

/// The full 6×16 tile.
///
/// # Safety
/// The contract of [`F32GemmFn`]; the processor supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn f32_gemm_avx2_6x16(p: &F32GemmArgs) {
    // SAFETY: forwarded contract; same target features.
    unsafe { gemm::<F32_MR>(p) }
}

/// Lane-enable masks for `_mm256_maskstore_ps`: the first `n` lanes of row `n`.
const MASKS: [[i32; 8]; 9] = {
    let mut m = [[0i32; 8]; 9];
    let mut n = 0;
    while n <= 8 {
        let mut j = 0;
        while j < n {
            m[n][j] = -1;
            j += 1;
        }
        n += 1;
    }
    m
};

/// `R ≤ 6` rows of the 6×16 tile.
///
/// Prefetching changes no arithmetic: every output lane receives the same FMAs in the same
/// order whatever is prefetched. With two rows or more, each block prefetches an equal share
/// of `next` into L2, one 64-byte line per k-step (the rate at which the block itself streams
/// its weights), so a panel's first row tile does not wait on weights arriving from L3 or
/// memory (the 7×7 layers, with 9 row tiles per panel: 0.92× the time on the 49×320×1280
/// GEMM, alternated in one process). A single row prefetches nothing: FULLY_CONNECTED on one
/// vector streams its weights once, the next panel's right after this one's, and both
/// `next` and a prefetch 4 KiB ahead of its own loads measured slower in MobileNet v2's
/// logits layer (about 540 against 460 µs), the hardware prefetchers alone keeping up better.
///
/// # Safety
/// As [`f32_gemm_avx2_6x16`].
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm<const R: usize>(p: &F32GemmArgs) {
    let vmin = _mm256_set1_ps(p.min);
    let vmax = _mm256_set1_ps(p.max);
    let mut w = p.w;
    let mut c = p.c;
    let mut left = p.nc;
    let k = p.ks * p.kc;
    let blocks = p.nc.div_ceil(F32_NR);
    let mut i = 0;
    while left > 0 {
        let (n0, n1) = (i * p.next_len / blocks, (i + 1) * p.next_len / blocks);
        let mut next = p.next.wrapping_add(n0);
        // Lines of `next` still to prefetch, one per k-step, in a loop of their own so the
        // k-steps past them run the plain loop.
        let mut next_lines = if R > 1 { (n1 - n0).div_ceil(F32_NR) } else { 0 };
        // SAFETY: the packed block holds 16 bias values then K rows of 16 weights (contract).
        let (mut lo, mut hi) = unsafe { ([_mm256_loadu_ps(w); R], [_mm256_loadu_ps(w.add(8)); R]) };
        let mut b = w.wrapping_add(F32_NR);
        for s in 0..p.ks {
            // SAFETY: the table holds ks·R pointers (contract).
            let a: [*const f32; R] = std::array::from_fn(|r| unsafe { *p.a.add(s * R + r) });
            let ahead = next_lines.min(p.kc);
            for kk in 0..ahead {
                prefetch_t1(next);
                // SAFETY: as in the loop below.
                unsafe { f32_kstep::<R>(&a, kk, b, &mut lo, &mut hi) };
                next = next.wrapping_add(F32_NR);
                b = b.wrapping_add(F32_NR);
            }
            next_lines -= ahead;
            for kk in ahead..p.kc {
                // SAFETY: `b` walks the K weight rows of this block; every segment holds kc
                // values.
                unsafe { f32_kstep::<R>(&a, kk, b, &mut lo, &mut hi) };
                b = b.wrapping_add(F32_NR);
            }
        }
        // `max(min, x)` / `min(max, x)` return `x` when it is NaN (the second operand wins).
        for r in 0..R {
            lo[r] = _mm256_min_ps(vmax, _mm256_max_ps(vmin, lo[r]));
            hi[r] = _mm256_min_ps(vmax, _mm256_max_ps(vmin, hi[r]));
        }
        let row = |r: usize| c.wrapping_add(r * p.c_stride);
        if left >= F32_NR {
            for r in 0..R {
                // SAFETY: row r of C is writable for the `left ≥ 16` columns at `c`.
                unsafe {
                    _mm256_storeu_ps(row(r), lo[r]);
                    _mm256_storeu_ps(row(r).add(8), hi[r]);
                }
            }
            left -= F32_NR;
        } else {
            // `vmaskmovps` writes only the enabled lanes and does not fault on the others.
            // SAFETY: MASKS rows are 8 i32 values.
            let (m0, m1) = unsafe {
                (
                    _mm256_loadu_si256(MASKS[left.min(8)].as_ptr().cast()),
                    _mm256_loadu_si256(MASKS[left.saturating_sub(8)].as_ptr().cast()),
                )
            };
            for r in 0..R {
                // SAFETY: only lanes < left are written, all inside row r of C.
                unsafe {
                    _mm256_maskstore_ps(row(r), m0, lo[r]);
                    _mm256_maskstore_ps(row(r).wrapping_add(8), m1, hi[r]);
                }
            }
            left = 0;
        }
        i += 1;
        w = w.wrapping_add(F32_NR * (k + 1));
        c = c.wrapping_add(F32_NR);
    }
}

/// One k-step of the 6×16 tile: `R` broadcasts of A times one row of 16 weights.
///
/// # Safety
/// `a[r] + kk` readable for every row, `b..b + 16` readable; AVX2 and FMA supported.
#[inline(always)]
unsafe fn f32_kstep<const R: usize>(
    a: &[*const f32; R],
    kk: usize,
    b: *const f32,
    lo: &mut [__m256; R],
    hi: &mut [__m256; R],
) {
    // SAFETY: the caller's contract.
    unsafe {
        let b0 = _mm256_loadu_ps(b);
        let b1 = _mm256_loadu_ps(b.add(8));
        for r in 0..R {
            let av = _mm256_broadcast_ss(&*a[r].add(kk));
            lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
            hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
        }
    }
}

/// A prefetch of the line holding `p` into L2 and below; never faults.
#[target_feature(enable = "avx2,fma")]
#[inline]
// As for `prefetch`: unsafe on the oldest supported toolchain, safe on later ones.
#[allow(unused_unsafe)]
fn prefetch_t1(p: *const f32) {
    // SAFETY: a prefetch never faults, wherever the address points.
    unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast()) }
}

/// [`Requant8`] broadcast into registers.
#[derive(Clone, Copy)]
struct Rq256 {
    mult: __m256i,
    round: __m256i,
    mask: __m256i,
    half: __m256i,
    shift: __m128i,
    lo: __m256i,
    hi: __m256i,
    zp: __m256i,
}

#[target_feature(enable = "avx2,fma")]
fn rq256(rq: &Requant8) -> Rq256 {
    let mask = ((1i64 << rq.shift) - 1) as i32;
    Rq256 {
        mult: _mm256_set1_epi32(rq.multiplier),
        round: _mm256_set1_epi64x(1 << 30),
        mask: _mm256_set1_epi32(mask),
        half: _mm256_set1_epi32(mask >> 1),
        shift: _mm_cvtsi32_si128(rq.shift as i32),
        lo: _mm256_set1_epi32(rq.lo),
        hi: _mm256_set1_epi32(rq.hi),
        zp: _mm256_set1_epi32(rq.zero_point),
    }
}

/// [`Requant8::apply`] on 8 lanes, narrowed to the low 8 bytes. Same sequence as the AVX-512
/// version (`vpmuldq` on even and odd lanes, bits 31..62 of `x·m + 2^30`, mask/threshold
/// rounding division, clamp before the zero point); the compare's −1 is subtracted to round up.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn requant256(x: __m256i, c: &Rq256) -> __m128i {
    narrow256(requant256_i32(x, c))
}

/// [`Requant8::apply`] on 8 lanes, each result (0..=255) in its int32 lane.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn requant256_i32(x: __m256i, c: &Rq256) -> __m256i {
    let q = requant256_q(x, c);
    let q = _mm256_min_epi32(_mm256_max_epi32(q, c.lo), c.hi);
    _mm256_add_epi32(q, c.zp)
}

/// The 8 int32 lanes of `q`, each in 0..=255, narrowed to the low 8 bytes.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn narrow256(q: __m256i) -> __m128i {
    // Values are in 0..=255: the saturating packs are exact.
    let w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
    _mm_packus_epi16(w, w)
}

/// The rounded quotient of [`requant256`] before its clamp and zero point.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn requant256_q(x: __m256i, c: &Rq256) -> __m256i {
    let even = _mm256_mul_epi32(x, c.mult);
    let odd = _mm256_mul_epi32(_mm256_srli_epi64::<32>(x), c.mult);
    let even = _mm256_srli_epi64::<31>(_mm256_add_epi64(even, c.round));
    let odd = _mm256_slli_epi64::<1>(_mm256_add_epi64(odd, c.round));
    let h = _mm256_blend_epi32::<0xAA>(even, odd);
    let rem = _mm256_and_si256(h, c.mask);
    let threshold = _mm256_add_epi32(c.half, _mm256_srli_epi32::<31>(h));
    let q = _mm256_sra_epi32(h, c.shift);
    _mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, threshold))
}

/// Per-column constants ([`crate::ukernels::quant8::ColRequant`]) of 8 lanes in registers,
/// with the per-tensor zero point and bounds of a [`Requant8`].
#[derive(Clone, Copy)]
struct RqCols256 {
    mult: __m256i,
    /// The odd lanes' multipliers moved to the even positions, for `vpmuldq`.
    mult_odd: __m256i,
    left: __m256i,
    right: __m256i,
    mask: __m256i,
    half: __m256i,
    round: __m256i,
    lo: __m256i,
    hi: __m256i,
    zp: __m256i,
}

/// Loads 8 lanes of per-column constants: multipliers at `m`, left shifts at `m + stride`,
/// right shifts at `m + 2·stride`.
///
/// # Safety
/// The processor supports AVX2 and the three runs of 8 values are readable.
#[target_feature(enable = "avx2,fma")]
unsafe fn rq256_cols(rq: &Requant8, m: *const i32, stride: usize) -> RqCols256 {
    // SAFETY: the three runs of 8 values are readable (caller contract).
    let (mult, left, right) = unsafe {
        (
            _mm256_loadu_si256(m.cast()),
            _mm256_loadu_si256(m.add(stride).cast()),
            _mm256_loadu_si256(m.add(2 * stride).cast()),
        )
    };
    rq256_cols_of(rq, mult, left, right)
}

/// The per-column constants of 8 lanes from their multipliers, left and right shifts.
#[target_feature(enable = "avx2,fma")]
fn rq256_cols_of(rq: &Requant8, mult: __m256i, left: __m256i, right: __m256i) -> RqCols256 {
    let one = _mm256_set1_epi32(1);
    // 2^right − 1 per lane; right = 31 gives i32::MIN − 1 = i32::MAX, the wanted mask.
    let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    RqCols256 {
        mult,
        mult_odd: _mm256_srli_epi64::<32>(mult),
        left,
        right,
        mask,
        half: _mm256_srli_epi32::<1>(mask),
        round: _mm256_set1_epi64x(1 << 30),
        lo: _mm256_set1_epi32(rq.lo),
        hi: _mm256_set1_epi32(rq.hi),
        zp: _mm256_set1_epi32(rq.zero_point),
    }
}

/// [`Requant8::apply_col`] on 8 lanes, narrowed to the low 8 bytes: [`requant256`] with a
/// per-lane wrapping left shift first (`vpsllvd`) and per-lane multipliers and right shifts
/// (`vpsravd`; a right shift of 0 has mask and threshold 0, so nothing is added).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn requant256_cols(x: __m256i, c: &RqCols256) -> __m128i {
    narrow256(requant256_cols_i32(x, c))
}

/// [`Requant8::apply_col`] on 8 lanes, each result (0..=255) in its int32 lane.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn requant256_cols_i32(x: __m256i, c: &RqCols256) -> __m256i {
    let q = requant256_cols_q(x, c);
    let q = _mm256_min_epi32(_mm256_max_epi32(q, c.lo), c.hi);
    _mm256_add_epi32(q, c.zp)
}

/// The rounded quotient of [`requant256_cols`] before its clamp and zero point.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn requant256_cols_q(x: __m256i, c: &RqCols256) -> __m256i {
    let x = _mm256_sllv_epi32(x, c.left);
    let even = _mm256_mul_epi32(x, c.mult);
    let odd = _mm256_mul_epi32(_mm256_srli_epi64::<32>(x), c.mult_odd);
    let even = _mm256_srli_epi64::<31>(_mm256_add_epi64(even, c.round));
    let odd = _mm256_slli_epi64::<1>(_mm256_add_epi64(odd, c.round));
    let h = _mm256_blend_epi32::<0xAA>(even, odd);
    let rem = _mm256_and_si256(h, c.mask);
    let threshold = _mm256_add_epi32(c.half, _mm256_srli_epi32::<31>(h));
    let q = _mm256_srav_epi32(h, c.right);
    _mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, threshold))
}

/// The zero point and output bounds of a [`Requant8`] as int16 lanes, for [`narrow16`].
#[derive(Clone, Copy)]
struct Narrow16 {
    zp: __m256i,
    lo: __m256i,
    hi: __m256i,
}

#[target_feature(enable = "avx2,fma")]
fn narrow16_consts(rq: &Requant8) -> Narrow16 {
    // The bounds plus the zero point are output bytes, in 0..=255.
    Narrow16 {
        zp: _mm256_set1_epi16(rq.zero_point as i16),
        lo: _mm256_set1_epi16((rq.lo + rq.zero_point) as i16),
        hi: _mm256_set1_epi16((rq.hi + rq.zero_point) as i16),
    }
}

/// The output bytes of 16 channels from their rounded quotients (`q0` channels 0..8, `q1`
/// 8..16, before clamp and zero point): `clamp(q, lo, hi) + zp`, in int16 lanes. Saturating
/// the quotients to int16 keeps every value inside `lo..=hi` (both within ±255) and moves the
/// others only further out, and the saturating add of the zero point (0..=255) cannot
/// saturate below, and above only past `hi + zp`, so the clamp gives the same bytes.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn narrow16(q0: __m256i, q1: __m256i, c: &Narrow16) -> __m128i {
    // Channels 0..4, 8..12 | 4..8, 12..16.
    let v = _mm256_adds_epi16(_mm256_packs_epi32(q0, q1), c.zp);
    let v = _mm256_min_epi16(_mm256_max_epi16(v, c.lo), c.hi);
    let v = _mm256_permute4x64_epi64::<0xD8>(v);
    _mm_packus_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v))
}

/// Stores the low `n ≤ 16` bytes of `v` at `dst`.
///
/// # Safety
/// `n` bytes at `dst` are writable.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store16(dst: *mut u8, n: usize, v: __m128i) {
    if n == 16 {
        // SAFETY: 16 writable bytes.
        unsafe { _mm_storeu_si128(dst.cast(), v) };
    } else {
        let mut bytes = [0u8; 16];
        // SAFETY: `bytes` is 16 bytes; `n ≤ 16` writable bytes at `dst`.
        unsafe {
            _mm_storeu_si128(bytes.as_mut_ptr().cast(), v);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n);
        }
    }
}

/// Stores the low `n ≤ 8` bytes of `v` at `dst`.
///
/// # Safety
/// `n` bytes at `dst` are writable.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store8(dst: *mut u8, n: usize, v: __m128i) {
    if n == 8 {
        // SAFETY: 8 writable bytes.
        unsafe { _mm_storel_epi64(dst.cast(), v) };
    } else {
        let bytes = _mm_cvtsi128_si64(v).to_le_bytes();
        // SAFETY: `n ≤ 8` writable bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, n) };
    }
}

/// Rows of the uint8 GEMM tile: 6 rows × 2 vectors = 12 accumulators, plus the two
/// widened weight vectors and one broadcast row within the 16 ymm registers.
const U8_MR: usize = 6;

/// How far ahead of its loads the single-row tile prefetches weights, in bytes.
const U8_PREFETCH: usize = 1024;

/// uint8 GEMM over any number of rows × 8 channels (see [`U8GemmArgs`]; weights stored as
/// `w − 128`): the block's bias and requantization constants are set up once, then the rows
/// run in tiles of 6, the last partial tile in a kernel compiled for its exact row count (the
/// single row of FULLY_CONNECTED does no work for absent rows).
///
/// # Safety
/// The processor supports AVX2 and `p` satisfies the contract of [`U8GemmArgs`] with
/// `nr = 8` (any `rows`: the slot's `any_rows`).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn u8_gemm_avx2_6x8(p: &U8GemmArgs) {
    // SAFETY: the bias block holds 8 values and a non-null `col_rq` the block's 3·8.
    let e = unsafe { gemm_epilogue(p) };
    // SAFETY: forwarded contract; same target features.
    unsafe {
        if e.shifts_left {
            gemm_tiles::<true>(p, &e)
        } else {
            gemm_tiles::<false>(p, &e)
        }
    }
}

/// The row tiles of [`u8_gemm_avx2_6x8`]; `LEFT` when a column has a nonzero left shift.
///
/// # Safety
/// As for [`u8_gemm_avx2_6x8`], with `e` built from `p`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn gemm_tiles<const LEFT: bool>(p: &U8GemmArgs, e: &GemmEpilogue) {
    let mut t = 0;
    // SAFETY: every call gets rows `t..t + R ≤ rows` (the caller's contract).
    unsafe {
        while p.rows - t >= U8_MR {
            u8_gemm_rows::<U8_MR, LEFT>(p, t, e);
            t += U8_MR;
        }
        match p.rows - t {
            0 => {}
            1 => u8_gemm_rows::<1, LEFT>(p, t, e),
            2 => u8_gemm_rows::<2, LEFT>(p, t, e),
            3 => u8_gemm_rows::<3, LEFT>(p, t, e),
            4 => u8_gemm_rows::<4, LEFT>(p, t, e),
            _ => u8_gemm_rows::<5, LEFT>(p, t, e),
        }
    }
}

/// The order of the channels in the epilogue's int32 lanes, `(0, 4, 1, 5, 2, 6, 3, 7)`: the
/// even lanes are channels 0..4, the odd lanes 4..8 (see [`u8_gemm_rows`]). Also the
/// `vpermd` index that puts a block's natural-order constants in this order.
const EPI_ORDER: [i32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// The epilogue constants of one block of 8 channels, set up once per kernel call. The
/// per-tensor requantization is the per-column one with every column equal (left shift 0).
#[derive(Clone, Copy)]
struct GemmEpilogue {
    /// The initial accumulators: the bias of channels 0..4 (first vector) or 4..8 (second)
    /// in the even int32 lanes, in channel order, 0 in the odd lanes.
    bias: [__m256i; 2],
    /// Multipliers in [`EPI_ORDER`], then moved to the even lanes for the channels 4..8
    /// (`vpmuldq` reads the even lanes).
    mult: [__m256i; 2],
    /// Left shifts in [`EPI_ORDER`].
    left: __m256i,
    /// Right shift, `2^right − 1` and half of that, in [`EPI_ORDER`].
    right: __m256i,
    mask: __m256i,
    half: __m256i,
    /// Whether any left shift is nonzero.
    shifts_left: bool,
    /// The output zero point as int16 lanes and the bounds plus the zero point as bytes.
    zp: __m256i,
    lo: __m256i,
    hi: __m256i,
}

/// The [`GemmEpilogue`] of `p`'s block.
///
/// # Safety
/// The processor supports AVX2; `p.bias` holds 8 values and `p.col_rq` is null or holds 3·8.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn gemm_epilogue(p: &U8GemmArgs) -> GemmEpilogue {
    // SAFETY: `EPI_ORDER` is 8 int32 values.
    let order = unsafe { _mm256_loadu_si256(EPI_ORDER.as_ptr().cast()) };
    let perm = |v| _mm256_permutevar8x32_epi32(v, order);
    let odd = |v| _mm256_shuffle_epi32::<0xB1>(v);
    // SAFETY: the bias block holds 8 values.
    let bias = perm(unsafe { _mm256_loadu_si256(p.bias.cast()) });
    let zero = _mm256_setzero_si256();
    let (mult, left, right) = if p.col_rq.is_null() {
        (
            _mm256_set1_epi32(p.rq.multiplier),
            zero,
            _mm256_set1_epi32(p.rq.shift as i32),
        )
    } else {
        // SAFETY: a non-null `col_rq` holds the block's 3·8 constants.
        unsafe {
            (
                perm(_mm256_loadu_si256(p.col_rq.cast())),
                perm(_mm256_loadu_si256(p.col_rq.add(8).cast())),
                perm(_mm256_loadu_si256(p.col_rq.add(16).cast())),
            )
        }
    };
    let one = _mm256_set1_epi32(1);
    // 2^right − 1 per lane; right = 31 gives i32::MIN − 1 = i32::MAX, the wanted mask.
    let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
    GemmEpilogue {
        bias: [
            _mm256_blend_epi32::<0xAA>(bias, zero),
            _mm256_blend_epi32::<0xAA>(odd(bias), zero),
        ],
        mult: [mult, odd(mult)],
        left,
        right,
        mask,
        half: _mm256_srli_epi32::<1>(mask),
        shifts_left: _mm256_testz_si256(left, left) == 0,
        // The bounds plus the zero point are output bytes, in 0..=255.
        zp: _mm256_set1_epi16(p.rq.zero_point as i16),
        lo: _mm256_set1_epi8((p.rq.lo + p.rq.zero_point) as u8 as i8),
        hi: _mm256_set1_epi8((p.rq.hi + p.rq.zero_point) as u8 as i8),
    }
}

/// Rows `t..t + R` of the uint8 GEMM. Each packed group (8 channels × 4 k) is sign-extended
/// to two int16 vectors of four channels; a row's four bytes are broadcast as a dword and
/// zero-extended to words (the pattern `a0 a1 a2 a3` in both halves of each 128-bit lane);
/// `vpmaddwd` leaves two partial sums per channel in the two int32 lanes of a qword (each a
/// sum of two products of magnitude at most 255·128, exact in int32). The whole groups run in
/// the loop; the last `k mod 4` bytes of each row are read once after it.
///
/// The accumulators start from the bias (in the even lanes): channels 0..4 in the qwords of
/// the first vector, 4..8 in those of the second, two partial sums each. Two blends, one
/// shuffle and one add leave a row's channel sums in one vector in [`EPI_ORDER`] (channels
/// 0..4 in the even lanes, where `vpmuldq` reads them, 4..8 in the odd ones, one shift away).
/// The two products' bits 31..62 (the doubling high multiply, exact as an int32) interleave
/// back into [`EPI_ORDER`] for the rounding division and the clamp, and the bytes of four rows
/// are put back in channel order together.
///
/// # Safety
/// As for [`u8_gemm_avx2_6x8`], with `t + R ≤ rows`, `e` built from `p` and `LEFT` set
/// when `e.shifts_left` is.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn u8_gemm_rows<const R: usize, const LEFT: bool>(
    p: &U8GemmArgs,
    t: usize,
    e: &GemmEpilogue,
) {
    let a: [*const u8; R] = std::array::from_fn(|r| p.a.wrapping_add((t + r) * p.a_stride));
    let mut acc = [e.bias; R];
    let full = p.k / 4;
    let mac = |acc: &mut [[__m256i; 2]; R], g: usize, x: [__m128i; R]| {
        // SAFETY: group g < ceil(k/4) of the packed block (32 bytes).
        let (w0, w1) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(p.w.add(32 * g).cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(p.w.add(32 * g + 16).cast())),
            )
        };
        for r in 0..R {
            let av = _mm256_cvtepu8_epi16(x[r]);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(w0, av));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(w1, av));
        }
    };
    for g in 0..full {
        if R == 1 {
            // A single row does 2 multiply-adds per 32 weight bytes: the stream of weights
            // (most of them from beyond the core's caches) is the limit, so it is requested
            // ahead.
            prefetch(p.w.wrapping_add(32 * g + U8_PREFETCH));
        }
        // SAFETY: bytes 4g..4g+4 ≤ k of each row.
        let x = std::array::from_fn(|r| unsafe {
            _mm_set1_epi32(a[r].add(4 * g).cast::<i32>().read_unaligned())
        });
        mac(&mut acc, g, x);
    }
    let tail = p.k % 4;
    if tail != 0 {
        let x = std::array::from_fn(|r| {
            let mut v = 0u32;
            for j in 0..tail {
                // SAFETY: byte 4·full + j < k of row r.
                v |= u32::from(unsafe { *a[r].add(4 * full + j) }) << (8 * j);
            }
            _mm_set1_epi32(v as i32)
        });
        mac(&mut acc, full, x);
    }
    // The channel sums of row r plus its row correction, in one vector in EPI_ORDER: the two
    // accumulators' partial sums are blended so that one add pairs them (channel c of the
    // first vector with its second partial sum moved beside it, and likewise for the second
    // vector's channel 4 + c in the odd lanes).
    // (`array::map` is not used here: its closure would not be inlined into this function's
    // target features.)
    let sums = |r: usize| {
        let [v0, v1] = acc[r];
        let pair = _mm256_blend_epi32::<0xAA>(v0, v1);
        let u = _mm256_shuffle_epi32::<0xB1>(_mm256_blend_epi32::<0xAA>(v1, v0));
        let s = _mm256_add_epi32(pair, u);
        if p.corr_zero {
            s
        } else {
            // SAFETY: `row_corr` holds `rows ≥ t + R` values.
            _mm256_add_epi32(s, _mm256_set1_epi32(unsafe { *p.row_corr.add(t + r) }))
        }
    };
    if !p.raw.is_null() {
        // The inverse of EPI_ORDER: lane 2i holds channel i, lane 2i + 1 channel 4 + i.
        let natural = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        for r in 0..R {
            let s = _mm256_permutevar8x32_epi32(sums(r), natural);
            let mut v = [0i32; 8];
            // SAFETY: `v` is 8 int32 values.
            unsafe { _mm256_storeu_si256(v.as_mut_ptr().cast(), s) };
            // SAFETY: raw row t + r has `cols ≤ 8` writable values.
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), p.raw.add((t + r) * p.out_stride), p.cols)
            };
        }
        return;
    }
    let round = _mm256_set1_epi64x(1 << 30);
    // The rounded quotient of row r before clamp and zero point, in EPI_ORDER.
    let quotient = |r: usize| {
        let x = sums(r);
        let x = if LEFT {
            _mm256_sllv_epi32(x, e.left)
        } else {
            x
        };
        // Channels 0..4 in the even lanes, 4..8 moved there.
        let p0 = _mm256_add_epi64(_mm256_mul_epi32(x, e.mult[0]), round);
        let p1 = _mm256_add_epi64(
            _mm256_mul_epi32(_mm256_srli_epi64::<32>(x), e.mult[1]),
            round,
        );
        let h = _mm256_blend_epi32::<0xAA>(_mm256_srli_epi64::<31>(p0), _mm256_slli_epi64::<1>(p1));
        let rem = _mm256_and_si256(h, e.mask);
        let threshold = _mm256_add_epi32(e.half, _mm256_srli_epi32::<31>(h));
        let q = _mm256_srav_epi32(h, e.right);
        _mm256_sub_epi32(q, _mm256_cmpgt_epi32(rem, threshold))
    };
    // Up to 4 rows' quotients at a time, with constant row indices only (an indexed pass over
    // the accumulators would keep them on the stack): rows 0..4, then rows 4..R.
    let zero = _mm256_setzero_si256();
    let q = |r: usize| if r < R { quotient(r) } else { zero };
    let first = [q(0), q(1), q(2), q(3)];
    // SAFETY: rows t..t + min(R, 4) < rows have `cols ≤ 8` writable bytes.
    unsafe { store_rows4(p, t, R.min(4), first, e) };
    if R > 4 {
        let second = [q(4), q(5), zero, zero];
        // SAFETY: rows t + 4..t + R have `cols ≤ 8` writable bytes.
        unsafe { store_rows4(p, t + 4, R - 4, second, e) };
    }
}

/// The output bytes of rows `t..t + n` (`n ≤ 4`) of the block from their rounded quotients
/// `q` (in [`EPI_ORDER`], before clamp and zero point; `q[i]` for `i ≥ n` is ignored).
///
/// Saturating the quotients to int16 keeps every value inside `lo..=hi` (both within ±255)
/// and moves the others only further out; the saturating add of the zero point (0..=255) and
/// the unsigned saturation to bytes are monotonic and exact inside the bounds plus the zero
/// point (output bytes), so clamping the bytes to them gives `clamp(q, lo, hi) + zp`.
///
/// # Safety
/// Called from a function with AVX2 enabled; rows `t..t + n` of `p.out` have `p.cols ≤ 8`
/// writable bytes.
#[inline(always)]
unsafe fn store_rows4(p: &U8GemmArgs, t: usize, n: usize, q: [__m256i; 4], e: &GemmEpilogue) {
    // SAFETY: AVX2 is enabled in the caller (contract); the stores are inside rows t..t + n.
    unsafe {
        // After the packs, dword `i` (low lane) and `4 + i` (high lane) are the channels
        // (0, 4, 1, 5) and (2, 6, 3, 7) of row `i` of the pass.
        let gather = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        #[rustfmt::skip]
        let fix = _mm256_setr_epi8(
            0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15,
            0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15,
        );
        let b = _mm256_packus_epi16(
            _mm256_adds_epi16(_mm256_packs_epi32(q[0], q[1]), e.zp),
            _mm256_adds_epi16(_mm256_packs_epi32(q[2], q[3]), e.zp),
        );
        let b = _mm256_min_epu8(_mm256_max_epu8(b, e.lo), e.hi);
        // Row i in bytes 8i..8i + 8.
        let b = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(b, gather), fix);
        let dst = |i: usize| p.out.wrapping_add((t + i) * p.out_stride);
        if p.cols == 8 {
            let (lo, hi) = (_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
            _mm_storel_epi64(dst(0).cast(), lo);
            if n > 1 {
                _mm_storeh_pd(dst(1).cast(), _mm_castsi128_pd(lo));
            }
            if n > 2 {
                _mm_storel_epi64(dst(2).cast(), hi);
            }
            if n > 3 {
                _mm_storeh_pd(dst(3).cast(), _mm_castsi128_pd(hi));
            }
        } else {
            let mut v = [0u8; 32];
            _mm256_storeu_si256(v.as_mut_ptr().cast(), b);
            for i in 0..n {
                std::ptr::copy_nonoverlapping(v[8 * i..].as_ptr(), dst(i), p.cols);
            }
        }
    }
}

/// Asks for the cache line at `p` ahead of its use.
#[target_feature(enable = "avx2,fma")]
#[inline]
// `_mm_prefetch` is an unsafe function on the oldest supported toolchain (1.88), a safe one
// on later ones.
#[allow(unused_unsafe)]
fn prefetch(p: *const u8) {
    // SAFETY: a prefetch never faults, wherever the address points.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
}

/// uint8 depthwise run, 16 channels per block as two 8-lane halves (see [`U8DwArgs`]).
///
/// # Safety
/// The processor supports AVX2 and `p` satisfies the contract of [`U8DwArgs`].
#[target_feature(enable = "avx2,fma")]
pub unsafe fn u8_dw_avx2_16c(p: &U8DwArgs) {
    if p.col_rq.is_null() {
        let c = rq256(&p.rq);
        // SAFETY: the caller's contract.
        unsafe { dw_avx2(p, |_| c, |x, c: &Rq256| requant256(x, c)) }
    } else {
        let cols = |half: usize| {
            let (blk, lane) = (half / 2, (half % 2) * 8);
            // SAFETY: a non-null `col_rq` holds 3·16 constants per block of 16 channels.
            unsafe { rq256_cols(&p.rq, p.col_rq.add(blk * 3 * DW_BLOCK + lane), DW_BLOCK) }
        };
        // SAFETY: the caller's contract.
        unsafe { dw_avx2(p, cols, |x, c: &RqCols256| requant256_cols(x, c)) }
    }
}

/// The depthwise run of [`u8_dw_avx2_16c`] with the requantization constants `consts(half)`
/// of each 8-channel half applied by `requant`.
///
/// # Safety
/// As for [`u8_dw_avx2_16c`].
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dw_avx2<C: Copy>(
    p: &U8DwArgs,
    consts: impl Fn(usize) -> C,
    requant: impl Fn(__m256i, &C) -> __m128i,
) {
    let per_block = (1 + p.ntaps) * DW_BLOCK;
    for half in 0..p.channels.div_ceil(8) {
        let off = half * 8;
        let n = (p.channels - off).min(8);
        let c = consts(half);
        let (blk, lane) = (half / 2, (half % 2) * 8);
        let wb = p.w.wrapping_add(blk * per_block + lane);
        // Input bytes of tap `t` of pixel `px`, zero-extended to int32 lanes.
        let load = |px: usize, t: usize| {
            // SAFETY: tap t of pixel px addresses `channels` bytes; `n ≤ 8` are read.
            let x = unsafe {
                let src = (*p.taps.add(t)).add(px * p.pixel_step + off);
                if n == 8 {
                    src.cast::<u64>().read_unaligned()
                } else {
                    let mut b = [0u8; 8];
                    std::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), n);
                    u64::from_le_bytes(b)
                }
            };
            _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(x as i64))
        };
        // SAFETY: tap t's weight block holds 16 values, aligned.
        let weight = |t: usize| unsafe { _mm256_load_si256(wb.add((1 + t) * DW_BLOCK).cast()) };
        // SAFETY: the packed block starts with 16 biases.
        let bias = unsafe { _mm256_load_si256(wb.cast()) };
        // The upper halves of the loaded lanes are zero, so each pair sum is x·w exactly.
        let mac =
            |acc: __m256i, x: __m256i, w: __m256i| _mm256_add_epi32(acc, _mm256_madd_epi16(x, w));
        // Two pixels at a time, interleaved, so their dependency chains overlap.
        let mut px = 0;
        while px + 2 <= p.width {
            let (mut a0, mut a1) = (bias, bias);
            for t in 0..p.ntaps {
                let wt = weight(t);
                a0 = mac(a0, load(px, t), wt);
                a1 = mac(a1, load(px + 1, t), wt);
            }
            // SAFETY: `channels` writable bytes at each output pixel; `n` are written.
            unsafe {
                store8(p.out.add(px * p.out_stride + off), n, requant(a0, &c));
                store8(p.out.add((px + 1) * p.out_stride + off), n, requant(a1, &c));
            }
            px += 2;
        }
        if px < p.width {
            let mut acc = bias;
            for t in 0..p.ntaps {
                acc = mac(acc, load(px, t), weight(t));
            }
            // SAFETY: as above.
            unsafe { store8(p.out.add(px * p.out_stride + off), n, requant(acc, &c)) };
        }
    }
}

/// uint8 depthwise run on tap pairs, 16 channels per block (see [`U8Dw2Args`]).
///
/// Per pair of taps the two 16-byte inputs are interleaved byte by byte and zero-extended to
/// int16, so one `vpmaddwd` against the packed `(w_a, w_b)` int16 pairs yields
/// `x_a·w_a + x_b·w_b` for 8 channels (exact: below 2^17 in magnitude), twice the work of the
/// one-tap form. Four output pixels are in flight per block, sharing each pair's weight loads;
/// the block's requantization constants are set up once per call and block.
///
/// # Safety
/// The processor supports AVX2 and `p` satisfies the contract of [`U8Dw2Args`].
#[target_feature(enable = "avx2,fma")]
pub unsafe fn u8_dw2_avx2_16c(p: &U8Dw2Args) {
    if p.col_rq.is_null() {
        let c = rq256(&p.rq);
        // SAFETY: the caller's contract.
        unsafe { dw2_avx2(p, |_| [c, c], |x, c: &Rq256| requant256_q(x, c)) }
    } else {
        // SAFETY: a non-null `col_rq` holds 3·16 constants per block of 16 channels.
        let cols = |blk: usize| unsafe { block_cols(&p.rq, p.col_rq, blk) };
        // SAFETY: the caller's contract.
        unsafe { dw2_avx2(p, cols, |x, c: &RqCols256| requant256_cols_q(x, c)) }
    }
}

/// The per-column constants of both 8-channel halves of depthwise block `blk`.
///
/// # Safety
/// The processor supports AVX2 and `col_rq` holds 3·16 constants per block of 16 channels
/// for blocks `0..=blk`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block_cols(rq: &Requant8, col_rq: *const i32, blk: usize) -> [RqCols256; 2] {
    let m = col_rq.wrapping_add(blk * 3 * DW_BLOCK);
    // SAFETY: block `blk`'s 3·16 constants are readable (caller contract).
    unsafe {
        [
            rq256_cols(rq, m, DW_BLOCK),
            rq256_cols(rq, m.add(8), DW_BLOCK),
        ]
    }
}

/// The blocks of [`u8_dw2_avx2_16c`] with the requantization constants `consts(block)` of each
/// 8-channel half applied by `requant`.
///
/// # Safety
/// As for [`u8_dw2_avx2_16c`].
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dw2_avx2<C: Copy>(
    p: &U8Dw2Args,
    consts: impl Fn(usize) -> [C; 2],
    requant: impl Fn(__m256i, &C) -> __m256i,
) {
    let nc = narrow16_consts(&p.rq);
    let block_bytes = 64 * (1 + p.pairs);
    let full = p.channels / DW_BLOCK;
    for blk in 0..p.channels.div_ceil(DW_BLOCK) {
        let c = consts(blk);
        let wb = p.w.wrapping_add(blk * block_bytes);
        let off = blk * DW_BLOCK;
        let mut px = 0;
        // SAFETY: every call gets pixels `px..px + P ≤ width` and block `blk` of the packing
        // and of the channels (the caller's contract).
        unsafe {
            if blk < full {
                while px + 4 <= p.width {
                    dw2_pixels::<4, true, C>(p, wb, off, px, &c, &requant, &nc);
                    px += 4;
                }
                if px + 2 <= p.width {
                    dw2_pixels::<2, true, C>(p, wb, off, px, &c, &requant, &nc);
                    px += 2;
                }
                if px < p.width {
                    dw2_pixels::<1, true, C>(p, wb, off, px, &c, &requant, &nc);
                }
            } else {
                while px < p.width {
                    dw2_pixels::<1, false, C>(p, wb, off, px, &c, &requant, &nc);
                    px += 1;
                }
            }
        }
    }
}

/// Pixels `px..px + P` of the 16-channel block at channel `off` whose packing starts at `wb`;
/// `FULL` when the block has 16 channels (otherwise the `channels − off < 16` bytes of each
/// tap are copied to a zero-padded buffer and only those are stored).
///
/// # Safety
/// As for [`u8_dw2_avx2_16c`], with `px + P ≤ width` and `off` a block start below `channels`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dw2_pixels<const P: usize, const FULL: bool, C>(
    p: &U8Dw2Args,
    wb: *const u8,
    off: usize,
    px: usize,
    c: &[C; 2],
    requant: &impl Fn(__m256i, &C) -> __m256i,
    nc: &Narrow16,
) {
    let n = if FULL { DW_BLOCK } else { p.channels - off };
    let load = |src: *const u8| {
        if FULL {
            // SAFETY: 16 readable bytes (a full block of the tap's `channels`).
            unsafe { _mm_loadu_si128(src.cast()) }
        } else {
            let mut b = [0u8; 16];
            // SAFETY: `n < 16` readable bytes (the block's channels of the tap).
            unsafe { std::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), n) };
            // SAFETY: `b` is 16 bytes.
            unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
        }
    };
    // SAFETY: the block starts with 16 biases, 64-byte aligned.
    let bias = unsafe {
        [
            _mm256_load_si256(wb.cast()),
            _mm256_load_si256(wb.add(32).cast()),
        ]
    };
    let mut acc = [bias; P];
    for j in 0..p.pairs {
        // SAFETY: `taps` holds `2·pairs` pointers; pair `j`'s weights are the 64 aligned bytes
        // after the bias and the `j` pairs before it.
        let (ta, tb, w0, w1) = unsafe {
            let wj = wb.add(64 * (1 + j));
            (
                (*p.taps.add(2 * j)).wrapping_add(px * p.pixel_step + off),
                (*p.taps.add(2 * j + 1)).wrapping_add(px * p.pixel_step + off),
                _mm256_load_si256(wj.cast()),
                _mm256_load_si256(wj.add(32).cast()),
            )
        };
        for (q, a) in acc.iter_mut().enumerate() {
            let xa = load(ta.wrapping_add(q * p.pixel_step));
            let xb = load(tb.wrapping_add(q * p.pixel_step));
            // (x_a[c], x_b[c]) as int16 pairs: channels 0..8, then 8..16.
            let lo = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(xa, xb));
            let hi = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(xa, xb));
            a[0] = _mm256_add_epi32(a[0], _mm256_madd_epi16(lo, w0));
            a[1] = _mm256_add_epi32(a[1], _mm256_madd_epi16(hi, w1));
        }
    }
    for (q, a) in acc.iter().enumerate() {
        let v = narrow16(requant(a[0], &c[0]), requant(a[1], &c[1]), nc);
        let dst = p.out.wrapping_add((px + q) * p.out_stride + off);
        // SAFETY: `channels` writable bytes at each output pixel; `n` from `off` are written.
        unsafe { store16(dst, n, v) };
    }
}

/// The 3×3 stride-1 interior run on tap pairs shared between pixels (see [`U8Dw2ColsArgs`]):
/// per output pixel, one new input column's rows 0 and 1 are interleaved (read by the three
/// pixels over the column) and one new pair of row-2 columns (read by two pixels), a third of
/// the per-pixel kernel's loads and unpacks for the same five `vpmaddwd` per 8 channels.
///
/// # Safety
/// The processor supports AVX2 and `p` satisfies the contract of [`U8Dw2ColsArgs`].
#[target_feature(enable = "avx2,fma")]
pub unsafe fn u8_dw2_cols3_avx2(p: &U8Dw2ColsArgs) {
    if p.col_rq.is_null() {
        let c = rq256(&p.rq);
        // SAFETY: the caller's contract.
        unsafe { cols3_avx2(p, |_| [c, c], |x, c: &Rq256| requant256_q(x, c)) }
    } else {
        // SAFETY: a non-null `col_rq` holds 3·16 constants per block of 16 channels.
        let cols = |blk: usize| unsafe { block_cols(&p.rq, p.col_rq, blk) };
        // SAFETY: the caller's contract.
        unsafe { cols3_avx2(p, cols, |x, c: &RqCols256| requant256_cols_q(x, c)) }
    }
}

/// The blocks of [`u8_dw2_cols3_avx2`] with the constants `consts(block)` of each 8-channel
/// half applied by `requant`.
///
/// # Safety
/// As for [`u8_dw2_cols3_avx2`].
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn cols3_avx2<C: Copy>(
    p: &U8Dw2ColsArgs,
    consts: impl Fn(usize) -> [C; 2],
    requant: impl Fn(__m256i, &C) -> __m256i,
) {
    let nc = narrow16_consts(&p.rq);
    let full = p.channels / DW_BLOCK;
    for blk in 0..p.channels.div_ceil(DW_BLOCK) {
        let c = consts(blk);
        let wb = p.w.wrapping_add(blk * 6 * 64);
        // SAFETY: block `blk` of the channels and of the packing (the caller's contract).
        unsafe {
            if blk < full {
                cols3_block::<true, C>(p, wb, blk * DW_BLOCK, &c, &requant, &nc);
            } else {
                cols3_block::<false, C>(p, wb, blk * DW_BLOCK, &c, &requant, &nc);
            }
        }
    }
}

/// The run of [`u8_dw2_cols3_avx2`] for the 16-channel block at channel `off` whose packing
/// starts at `wb`; `FULL` when the block has 16 channels (otherwise the `channels − off < 16`
/// bytes of each column are copied to a zero-padded buffer and only those are stored).
///
/// # Safety
/// As for [`u8_dw2_cols3_avx2`], with `off` a block start below `channels`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn cols3_block<const FULL: bool, C>(
    p: &U8Dw2ColsArgs,
    wb: *const u8,
    off: usize,
    c: &[C; 2],
    requant: &impl Fn(__m256i, &C) -> __m256i,
    nc: &Narrow16,
) {
    let n = if FULL { DW_BLOCK } else { p.channels - off };
    // The 16 (or `n`) bytes of input column `col` of row `r`.
    let load = |r: usize, col: usize| {
        let src = p.rows[r].wrapping_add(col * p.pixel_bytes + off);
        if FULL {
            // SAFETY: column `col < width + 2` of a row holds `channels ≥ off + 16` bytes.
            unsafe { _mm_loadu_si128(src.cast()) }
        } else {
            let mut b = [0u8; 16];
            // SAFETY: `n` readable bytes (the block's channels of the column).
            unsafe { std::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), n) };
            // SAFETY: `b` is 16 bytes.
            unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
        }
    };
    // (a[ch], b[ch]) as int16 pairs: channels 0..8, then 8..16.
    let pairs = |a: __m128i, b: __m128i| {
        [
            _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)),
            _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b)),
        ]
    };
    // SAFETY: the block is 6 aligned slots of 64 bytes: biases, then 5 weight slots.
    let (bias, wt) = unsafe {
        let at = |i: usize| {
            [
                _mm256_load_si256(wb.add(64 * i).cast()),
                _mm256_load_si256(wb.add(64 * i + 32).cast()),
            ]
        };
        (at(0), [at(1), at(2), at(3), at(4), at(5)])
    };
    let vert = |col: usize| pairs(load(0, col), load(1, col));
    let mut v0 = vert(0);
    let mut v1 = vert(1);
    let mut r2 = load(2, 1);
    let mut h0 = pairs(load(2, 0), r2);
    for px in 0..p.width {
        let v2 = vert(px + 2);
        let r2n = load(2, px + 2);
        let h1 = pairs(r2, r2n);
        let mut acc = bias;
        for (k, a) in acc.iter_mut().enumerate() {
            let mac = |acc: __m256i, x: __m256i, w: __m256i| {
                _mm256_add_epi32(acc, _mm256_madd_epi16(x, w))
            };
            *a = mac(*a, v0[k], wt[0][k]);
            *a = mac(*a, v1[k], wt[1][k]);
            *a = mac(*a, v2[k], wt[2][k]);
            *a = mac(*a, h0[k], wt[3][k]);
            *a = mac(*a, h1[k], wt[4][k]);
        }
        let v = narrow16(requant(acc[0], &c[0]), requant(acc[1], &c[1]), nc);
        let dst = p.out.wrapping_add(px * p.out_stride + off);
        // SAFETY: `channels` writable bytes at each output pixel; `n` from `off` are written.
        unsafe { store16(dst, n, v) };
        (v0, v1, h0, r2) = (v1, v2, h1, r2n);
    }
}
