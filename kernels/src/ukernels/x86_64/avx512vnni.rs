//! AVX-512 VNNI micro-kernels: `vpdpbusd` (u8 × s8, four products per int32 lane) for the
//! uint8 GEMM, `vpdpwssd` for the depthwise multiply-accumulate.

use std::arch::x86_64::*;

use super::avx512::{
    dw_row_512, mask16, narrow2_512, narrow2_512_unclamped, narrow4_256, narrow4_512, requant512,
    requant512_cols, requant_q256_fused, requant_q512_colfused, requant_q512_fused, rq512,
    rq512_cols, rq512_cols32, store16, store32, store_row_cols32, store_row_raw32, Rq512,
    RqCols512,
};
use crate::ukernels::quant8::{
    dw4_quad_bytes, U8Dw, U8Dw4, U8Dw4Args, U8Dw4QuadsArgs, U8Dw4RowArgs, U8DwArgs, U8Gemm,
    U8GemmArgs, DW4_BLOCK, DW4_COL_ADD, DW4_COL_LEFT, DW4_COL_MULT, DW4_COL_SHIFT, DW4_HEAD_SLOTS,
    DW_BLOCK, FUSED_GROUP_LEN,
};
use crate::ukernels::Ukernels;

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.u8_gemm = U8Gemm {
        mr: 7,
        nr: 32,
        weight_shift: 128,
        any_rows: false,
        kernel: u8_gemm_avx512vnni_7x32,
        name: "u8_gemm_avx512vnni_7x32",
    };
    t.u8_dw = U8Dw {
        kernel: u8_dw_avx512vnni_16c,
        name: "u8_dw_avx512vnni_16c",
    };
    t.u8_dw4 = Some(U8Dw4 {
        kernel: u8_dw4_avx512vnni_64c,
        name: "u8_dw4_avx512vnni_64c",
        quads: u8_dw4_quads_avx512vnni,
        row: u8_dw4_row_avx512vnni,
        cols3: u8_dw4_cols3_avx512vnni,
    });
}

/// uint8 GEMM tile, 7 rows × 32 channels (see [`U8GemmArgs`]): 14 accumulators, two weight
/// vectors and one broadcast per k-step of four. The accumulation wraps (`vpdpbusd`, not the
/// saturating `vpdpbusds`), matching the reference's int32 arithmetic in any order.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL/VNNI and `p` satisfies the contract of
/// [`U8GemmArgs`] with `mr = 7`, `nr = 32`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub unsafe fn u8_gemm_avx512vnni_7x32(p: &U8GemmArgs) {
    const MR: usize = 7;
    debug_assert!((1..=MR).contains(&p.rows) && p.cols <= 32);
    // SAFETY: the bias block holds 32 values.
    let bias = unsafe {
        [
            _mm512_loadu_si512(p.bias.cast()),
            _mm512_loadu_si512(p.bias.add(16).cast()),
        ]
    };
    // The accumulators start at the bias (wrapping adds in any order).
    let acc = if p.rows == 1 {
        let mut acc = [[_mm512_setzero_si512(); 2]; MR];
        // SAFETY: the caller's contract.
        acc[0] = unsafe { one_row(p, bias) };
        acc
    } else if p.cols <= 16 {
        // Only the block's first 16 channels are stored (a 16-channel layer, a last block):
        // their products alone, half the `vpdpbusd` of the full width. The second half
        // repeats the first, so everything downstream sees defined values it never stores.
        // SAFETY: the caller's contract.
        let half = unsafe { seven_rows::<1>(p, [bias[0]]) };
        std::array::from_fn(|r| [half[r][0]; 2])
    } else if p.cols <= 24 {
        // A 24-channel layer: the second half's eight channels on 256-bit products, which
        // issue at twice the rate of the 512-bit ones; their upper lanes are zero, computed
        // downstream and never stored.
        // SAFETY: the caller's contract.
        let (lo, hi) = unsafe { seven_rows_24(p, bias[0], _mm512_castsi512_si256(bias[1])) };
        std::array::from_fn(|r| [lo[r], _mm512_zextsi256_si512(hi[r])])
    } else {
        // SAFETY: the caller's contract.
        unsafe { seven_rows::<2>(p, bias) }
    };
    let halves = if p.cols <= 16 { 1 } else { 2 };
    // Whether the activation bounds are the whole byte range: the saturating narrowing then
    // lands every value on its bound already, and the clamp is skipped.
    let (lo, hi, zp) = (
        i64::from(p.rq.lo),
        i64::from(p.rq.hi),
        i64::from(p.rq.zero_point),
    );
    let clamp = lo + zp > 0 || hi + zp < 255;
    let narrow = |q0: __m512i, q1: __m512i, c: &Rq512| {
        if clamp {
            narrow2_512(q0, q1, c)
        } else {
            narrow2_512_unclamped(q0, q1, c)
        }
    };
    if p.raw.is_null() && !p.col_fused.is_null() {
        let c = rq512(&p.rq);
        each_row(p.rows, &acc, |r, acc_r| {
            let x = with_corr(p, r, acc_r);
            // SAFETY: `col_fused` holds the block's two groups of fused constants.
            let q = |v: usize| unsafe {
                requant_q512_colfused(x[v], p.col_fused.add(v * FUSED_GROUP_LEN))
            };
            let q0 = q(0);
            let q1 = if halves == 2 { q(1) } else { q0 };
            let bytes = narrow(q0, q1, &c);
            // SAFETY: the store writes columns 0..cols (≤ 32) of row r only.
            unsafe { store32(p.out.wrapping_add(r * p.out_stride), p.cols, bytes) };
        });
        return;
    }
    if !p.raw.is_null() || !p.col_rq.is_null() {
        // SAFETY: a non-null `col_rq` holds the block's 3·32 constants.
        let c = (p.raw.is_null()).then(|| unsafe { rq512_cols32(&p.rq, p.col_rq) });
        each_row(p.rows, &acc, |r, acc_r| {
            // SAFETY: `row_corr` holds `rows` values.
            let corr = _mm512_set1_epi32(unsafe { *p.row_corr.add(r) });
            let x = std::array::from_fn(|v| _mm512_add_epi32(acc_r[v], corr));
            // SAFETY: row r of the output (or of the raw sums) has `cols ≤ 32` writable values.
            unsafe {
                match &c {
                    Some(c) => store_row_cols32(p.out.wrapping_add(r * p.out_stride), p.cols, x, c),
                    None => store_row_raw32(p.raw.wrapping_add(r * p.out_stride), p.cols, x),
                }
            }
        });
        return;
    }
    let c = rq512(&p.rq);
    each_row(p.rows, &acc, |r, acc_r| {
        let x = with_corr(p, r, acc_r);
        // Both roundings in one 64-bit shift: fewer operations per 16 outputs than the
        // two-step form, the same values (`requant_q512_fused`).
        let q = |v: usize| requant_q512_fused(x[v], &c);
        let q0 = q(0);
        let q1 = if halves == 2 { q(1) } else { q0 };
        let bytes = narrow(q0, q1, &c);
        // SAFETY: the store writes columns 0..cols (≤ 32) of row r only.
        unsafe { store32(p.out.wrapping_add(r * p.out_stride), p.cols, bytes) };
    });
}

/// Row `r` of the accumulators plus its row correction (none to add when they are all 0, as
/// in every layer whose filter is signed: one operation less per 16 outputs).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[inline]
fn with_corr(p: &U8GemmArgs, r: usize, acc_r: [__m512i; 2]) -> [__m512i; 2] {
    if p.corr_zero {
        return acc_r;
    }
    // SAFETY: `row_corr` holds `rows` values and `r < rows`.
    let corr = _mm512_set1_epi32(unsafe { *p.row_corr.add(r) });
    [
        _mm512_add_epi32(acc_r[0], corr),
        _mm512_add_epi32(acc_r[1], corr),
    ]
}

/// Calls `f` on the first `rows` (1..=7) accumulator rows, each with a constant index: the
/// rows then stay in registers from the products to the epilogue (a loop over a runtime count
/// indexes the array, which puts all 14 vectors on the stack and back).
#[inline(always)]
fn each_row<T: Copy>(rows: usize, acc: &[T; 7], mut f: impl FnMut(usize, T)) {
    f(0, acc[0]);
    if rows > 1 {
        f(1, acc[1]);
    }
    if rows > 2 {
        f(2, acc[2]);
    }
    if rows > 3 {
        f(3, acc[3]);
    }
    if rows > 4 {
        f(4, acc[4]);
    }
    if rows > 5 {
        f(5, acc[5]);
    }
    if rows > 6 {
        f(6, acc[6]);
    }
}

/// The raw sums of a 7 × 16·V tile plus `init` (rows past `rows` repeat the last real row).
///
/// # Safety
/// As for [`u8_gemm_avx512vnni_7x32`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[inline]
unsafe fn seven_rows<const V: usize>(p: &U8GemmArgs, init: [__m512i; V]) -> [[__m512i; V]; 7] {
    const MR: usize = 7;
    // Rows past `rows` repeat the last real row: computed, never stored.
    let mut a = [p.a; MR];
    for r in 1..MR {
        a[r] = if r < p.rows {
            p.a.wrapping_add(r * p.a_stride)
        } else {
            a[r - 1]
        };
    }
    let mut acc = [init; MR];
    let groups = p.k / 4;
    let mut w = p.w;
    for g in 0..groups {
        // SAFETY: group g < ceil(k/4) of the aligned packed block (128 bytes per group).
        let wv: [__m512i; V] =
            std::array::from_fn(|v| unsafe { _mm512_load_si512(w.add(64 * v).cast()) });
        for r in 0..MR {
            // SAFETY: bytes 4g..4g+4 ≤ k of a row of A.
            let x = unsafe { a[r].add(4 * g).cast::<i32>().read_unaligned() };
            let av = _mm512_set1_epi32(x);
            for v in 0..V {
                acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, wv[v]);
            }
        }
        w = w.wrapping_add(128);
    }
    let tail = p.k % 4;
    if tail != 0 {
        // SAFETY: the last, zero-padded group of the packed block.
        let wv: [__m512i; V] =
            std::array::from_fn(|v| unsafe { _mm512_load_si512(w.add(64 * v).cast()) });
        for r in 0..MR {
            let mut x = 0u32;
            for j in 0..tail {
                // SAFETY: byte 4·groups + j < k of a row of A.
                x |= u32::from(unsafe { *a[r].add(4 * groups + j) }) << (8 * j);
            }
            let av = _mm512_set1_epi32(x as i32);
            for v in 0..V {
                acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, wv[v]);
            }
        }
    }
    acc
}

/// The raw sums of a 7 × 24 tile: channels 0..16 plus `init0` in 512-bit vectors, channels
/// 16..24 plus `init1` in 256-bit ones (rows past `rows` repeat the last real row).
///
/// # Safety
/// As for [`u8_gemm_avx512vnni_7x32`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[inline]
unsafe fn seven_rows_24(
    p: &U8GemmArgs,
    init0: __m512i,
    init1: __m256i,
) -> ([__m512i; 7], [__m256i; 7]) {
    const MR: usize = 7;
    let mut a = [p.a; MR];
    for r in 1..MR {
        a[r] = if r < p.rows {
            p.a.wrapping_add(r * p.a_stride)
        } else {
            a[r - 1]
        };
    }
    let (mut lo, mut hi) = ([init0; MR], [init1; MR]);
    let groups = p.k.div_ceil(4);
    let tail = p.k % 4;
    let mut w = p.w;
    for g in 0..groups {
        // SAFETY: group g < ceil(k/4) of the aligned packed block (128 bytes per group; the
        // 256-bit load is the first half of its second vector).
        let (w0, w1) = unsafe {
            (
                _mm512_load_si512(w.cast()),
                _mm256_load_si256(w.add(64).cast()),
            )
        };
        for r in 0..MR {
            let x = if g + 1 < groups || tail == 0 {
                // SAFETY: bytes 4g..4g+4 ≤ k of a row of A.
                unsafe { a[r].add(4 * g).cast::<u32>().read_unaligned() }
            } else {
                let mut x = 0u32;
                for j in 0..tail {
                    // SAFETY: byte 4g + j < k of a row of A.
                    x |= u32::from(unsafe { *a[r].add(4 * g + j) }) << (8 * j);
                }
                x
            };
            let av = _mm512_set1_epi32(x as i32);
            lo[r] = _mm512_dpbusd_epi32(lo[r], av, w0);
            hi[r] = _mm256_dpbusd_epi32(hi[r], _mm512_castsi512_si256(av), w1);
        }
        w = w.wrapping_add(128);
    }
    (lo, hi)
}

/// The raw sums of a single row plus `init`: with one broadcast per step there is no reuse to exploit,
/// so the k-steps are spread over four accumulator pairs to hide the `vpdpbusd` latency.
///
/// # Safety
/// As for [`u8_gemm_avx512vnni_7x32`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[inline]
unsafe fn one_row(p: &U8GemmArgs, init: [__m512i; 2]) -> [__m512i; 2] {
    let mut acc = [[_mm512_setzero_si512(); 2]; 4];
    acc[0] = init;
    let step = |acc: &mut [__m512i; 2], g: usize, x: u32| {
        // SAFETY: group g < ceil(k/4) of the aligned packed block (128 bytes per group).
        let (w0, w1) = unsafe {
            (
                _mm512_load_si512(p.w.add(128 * g).cast()),
                _mm512_load_si512(p.w.add(128 * g + 64).cast()),
            )
        };
        let av = _mm512_set1_epi32(x as i32);
        acc[0] = _mm512_dpbusd_epi32(acc[0], av, w0);
        acc[1] = _mm512_dpbusd_epi32(acc[1], av, w1);
    };
    let groups = p.k / 4;
    // SAFETY: bytes 4g..4g+4 ≤ k of the row for g < groups.
    let word = |g: usize| unsafe { p.a.add(4 * g).cast::<u32>().read_unaligned() };
    let mut g = 0;
    while g + 4 <= groups {
        for (j, acc_j) in acc.iter_mut().enumerate() {
            step(acc_j, g + j, word(g + j));
        }
        g += 4;
    }
    while g < groups {
        step(&mut acc[0], g, word(g));
        g += 1;
    }
    let tail = p.k % 4;
    if tail != 0 {
        let mut x = 0u32;
        for j in 0..tail {
            // SAFETY: byte 4·groups + j < k of the row.
            x |= u32::from(unsafe { *p.a.add(4 * groups + j) }) << (8 * j);
        }
        step(&mut acc[1], groups, x);
    }
    // Wrapping adds: the order of the partial sums does not matter.
    let half = |v: usize| {
        _mm512_add_epi32(
            _mm512_add_epi32(acc[0][v], acc[1][v]),
            _mm512_add_epi32(acc[2][v], acc[3][v]),
        )
    };
    [half(0), half(1)]
}

#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[inline]
fn mac_dpwssd(acc: __m512i, a: __m512i, w: __m512i) -> __m512i {
    // The upper halves of `a` are zero, so the pair sum is a·w exactly.
    _mm512_dpwssd_epi32(acc, a, w)
}

/// uint8 depthwise row with `vpdpwssd`, 16 channels per vector (see [`U8DwArgs`]).
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL/VNNI and `p` satisfies the contract of
/// [`U8DwArgs`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub unsafe fn u8_dw_avx512vnni_16c(p: &U8DwArgs) {
    dw_row_512!(p, mac_dpwssd)
}

/// uint8 depthwise row with `vpdpbusd`, four taps × 64 channels per group (see
/// [`U8Dw4Args`]).
///
/// The four taps' 64-byte rows are interleaved into (tap 0, tap 1, tap 2, tap 3) byte quads per
/// channel by two rounds of unpacks, so each `vpdpbusd` does four multiply-adds per channel
/// where the int32 form does one, and each input byte is loaded once per tap use without a
/// widening. A group past the last tap repeats a loaded row: its weights are zero.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL/VNNI and `p` satisfies the contract of
/// [`U8Dw4Args`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub unsafe fn u8_dw4_avx512vnni_64c(p: &U8Dw4Args) {
    let groups = p.ntaps.div_ceil(4);
    let block_len = (DW4_HEAD_SLOTS + 4 * groups) * 64;
    let c = rq512(&p.rq);
    for blk in 0..p.channels.div_ceil(DW4_BLOCK) {
        let off = blk * DW4_BLOCK;
        let n = (p.channels - off).min(DW4_BLOCK);
        let m = if n == DW4_BLOCK {
            u64::MAX
        } else {
            (1u64 << n) - 1
        };
        let base = p.w.wrapping_add(blk * block_len);
        if n <= DW4_BLOCK / 2 {
            // SAFETY: the caller's contract, for this block's `n` channels.
            unsafe { dw4_half_block(p, base, off, n, &c) };
            continue;
        }
        // SAFETY: the block holds `DW4_HEAD_SLOTS + 4·groups` aligned 64-byte slots.
        let slot = |s: usize| unsafe { _mm512_load_si512(base.add(64 * s).cast()) };
        let bias: [__m512i; 4] = std::array::from_fn(slot);
        let sign: [__m512i; 4] = std::array::from_fn(|k| slot(4 + k));
        let col = |j: usize, k: usize| slot(8 + 4 * j + k);
        // Input row of tap `t` of pixel `px`, channels off..off+64 (the tail block reads only
        // its `n` channels, the rest are zero).
        let load = |px: usize, t: usize| {
            // SAFETY: tap `t` of pixel `px` addresses `channels` readable bytes.
            unsafe {
                let src = (*p.taps.add(t)).add(px * p.pixel_step + off);
                if n == DW4_BLOCK {
                    _mm512_loadu_si512(src.cast())
                } else {
                    _mm512_maskz_loadu_epi8(m, src.cast())
                }
            }
        };
        for px in 0..p.width {
            let mut acc = bias;
            for g in 0..groups {
                let t = 4 * g;
                let r0 = load(px, t);
                let r1 = if t + 1 < p.ntaps { load(px, t + 1) } else { r0 };
                let r2 = if t + 2 < p.ntaps { load(px, t + 2) } else { r0 };
                let r3 = if t + 3 < p.ntaps { load(px, t + 3) } else { r1 };
                let lo01 = _mm512_unpacklo_epi8(r0, r1);
                let hi01 = _mm512_unpackhi_epi8(r0, r1);
                let lo23 = _mm512_unpacklo_epi8(r2, r3);
                let hi23 = _mm512_unpackhi_epi8(r2, r3);
                let x = [
                    _mm512_unpacklo_epi16(lo01, lo23),
                    _mm512_unpackhi_epi16(lo01, lo23),
                    _mm512_unpacklo_epi16(hi01, hi23),
                    _mm512_unpackhi_epi16(hi01, hi23),
                ];
                for k in 0..4 {
                    // Wrapping accumulation (not the saturating `vpdpbusds`), as the
                    // reference's int32 arithmetic.
                    acc[k] = _mm512_dpbusd_epi32(acc[k], x[k], slot(DW4_HEAD_SLOTS + 4 * g + k));
                }
            }
            let bytes = dw4_epilogue(
                acc,
                &sign,
                col,
                Dw4Flags {
                    negate: p.negate,
                    per_channel: p.per_channel,
                    left_shift: p.left_shift,
                },
                &c,
            );
            let dst = p.out.wrapping_add(px * p.out_stride + off);
            // SAFETY: the contract allows writing `channels` bytes at each output pixel; the
            // masked store writes only channels off..off+n.
            unsafe {
                if n == DW4_BLOCK {
                    _mm512_storeu_si512(dst.cast(), bytes)
                } else {
                    _mm512_mask_storeu_epi8(dst.cast(), m, bytes)
                }
            }
        }
    }
}

/// What the epilogue of a byte depthwise block applies beyond the per-tensor requantization.
#[derive(Clone, Copy)]
struct Dw4Flags {
    /// Some sign slot is −1.
    negate: bool,
    /// The per-channel slots replace the requantizer's multiplier and shift.
    per_channel: bool,
    /// Some per-channel left shift is nonzero.
    left_shift: bool,
}

/// The epilogue of one 64-channel pixel of the byte depthwise kernels: the filter signs, then
/// the per-channel roundings fused at pack (`dw4_col_constants`, per 64-bit lane: one
/// multiply, a compare, an add, a masked subtract and an arithmetic shift) or the per-tensor
/// requantization, narrowed to 64 bytes. `col(j, k)` is slot `j` of vector `k` of the block's
/// per-channel constants.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[inline]
fn dw4_epilogue(
    mut acc: [__m512i; 4],
    sign: &[__m512i; 4],
    col: impl Fn(usize, usize) -> __m512i,
    flags: Dw4Flags,
    c: &Rq512,
) -> __m512i {
    if flags.negate {
        // −acc where the sign is −1: (acc ⊕ −1) − (−1); unchanged where it is 0.
        for k in 0..4 {
            acc[k] = _mm512_sub_epi32(_mm512_xor_si512(acc[k], sign[k]), sign[k]);
        }
    }
    let q: [__m512i; 4] = if flags.per_channel {
        let fused_neg = _mm512_set1_epi64(-(1i64 << 30));
        let (two31, thirty_one) = (_mm512_set1_epi64(1 << 31), _mm512_set1_epi64(31));
        std::array::from_fn(|k| {
            let x = if flags.left_shift {
                _mm512_sllv_epi32(acc[k], col(DW4_COL_LEFT, k))
            } else {
                acc[k]
            };
            let mult = col(DW4_COL_MULT, k);
            let even = _mm512_mul_epi32(x, mult);
            let odd = _mm512_mul_epi32(_mm512_srli_epi64::<32>(x), _mm512_srli_epi64::<32>(mult));
            let fuse = |prod: __m512i, j: usize| {
                let shift = col(DW4_COL_SHIFT + j, k);
                let rounds = _mm512_cmpgt_epi64_mask(shift, thirty_one);
                let neg = _mm512_mask_cmplt_epi64_mask(rounds, prod, fused_neg);
                let u = _mm512_add_epi64(prod, col(DW4_COL_ADD + j, k));
                _mm512_srav_epi64(_mm512_mask_sub_epi64(u, neg, u, two31), shift)
            };
            // Both results sit in the low dwords (they fit int32); the odd lanes' move up
            // by a dword swap into the odd positions.
            _mm512_mask_shuffle_epi32::<_MM_PERM_CDAB>(fuse(even, 0), 0xAAAA, fuse(odd, 1))
        })
    } else {
        std::array::from_fn(|k| requant_q512_fused(acc[k], c))
    };
    narrow4_512(q, c)
}

/// The last block of [`u8_dw4_avx512vnni_64c`] when it has at most 32 channels: the same
/// steps on 256-bit vectors (the low two 128-bit lanes of the 512-bit layout, so the packing
/// is the same), at half the cost of a full block.
///
/// # Safety
/// As for [`u8_dw4_avx512vnni_64c`]; `base` is the block's packing, `off` its first channel
/// and `n ≤ 32` its channel count.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
unsafe fn dw4_half_block(p: &U8Dw4Args, base: *const u8, off: usize, n: usize, c: &Rq512) {
    let groups = p.ntaps.div_ceil(4);
    let m = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
    // SAFETY: the block holds `DW4_HEAD_SLOTS + 4·groups` aligned 64-byte slots; this reads
    // the first 32 bytes of one.
    let slot = |s: usize| unsafe { _mm256_load_si256(base.add(64 * s).cast()) };
    let bias: [__m256i; 4] = std::array::from_fn(slot);
    let sign: [__m256i; 4] = std::array::from_fn(|k| slot(4 + k));
    let col = |j: usize, k: usize| slot(8 + 4 * j + k);
    let fused_neg = _mm256_set1_epi64x(-(1i64 << 30));
    let (two31, thirty_one) = (_mm256_set1_epi64x(1 << 31), _mm256_set1_epi64x(31));
    let load = |px: usize, t: usize| {
        // SAFETY: tap `t` of pixel `px` addresses `channels` readable bytes; only channels
        // off..off+n are read.
        unsafe {
            let src = (*p.taps.add(t)).add(px * p.pixel_step + off);
            _mm256_maskz_loadu_epi8(m, src.cast())
        }
    };
    for px in 0..p.width {
        let mut acc = bias;
        for g in 0..groups {
            let t = 4 * g;
            let r0 = load(px, t);
            let r1 = if t + 1 < p.ntaps { load(px, t + 1) } else { r0 };
            let r2 = if t + 2 < p.ntaps { load(px, t + 2) } else { r0 };
            let r3 = if t + 3 < p.ntaps { load(px, t + 3) } else { r1 };
            let lo01 = _mm256_unpacklo_epi8(r0, r1);
            let hi01 = _mm256_unpackhi_epi8(r0, r1);
            let lo23 = _mm256_unpacklo_epi8(r2, r3);
            let hi23 = _mm256_unpackhi_epi8(r2, r3);
            let x = [
                _mm256_unpacklo_epi16(lo01, lo23),
                _mm256_unpackhi_epi16(lo01, lo23),
                _mm256_unpacklo_epi16(hi01, hi23),
                _mm256_unpackhi_epi16(hi01, hi23),
            ];
            for k in 0..4 {
                acc[k] = _mm256_dpbusd_epi32(acc[k], x[k], slot(DW4_HEAD_SLOTS + 4 * g + k));
            }
        }
        if p.negate {
            for k in 0..4 {
                acc[k] = _mm256_sub_epi32(_mm256_xor_si256(acc[k], sign[k]), sign[k]);
            }
        }
        let q: [__m256i; 4] = if p.per_channel {
            std::array::from_fn(|k| {
                let x = if p.left_shift {
                    _mm256_sllv_epi32(acc[k], col(DW4_COL_LEFT, k))
                } else {
                    acc[k]
                };
                let mult = col(DW4_COL_MULT, k);
                let even = _mm256_mul_epi32(x, mult);
                let odd =
                    _mm256_mul_epi32(_mm256_srli_epi64::<32>(x), _mm256_srli_epi64::<32>(mult));
                let fuse = |prod: __m256i, j: usize| {
                    let shift = col(DW4_COL_SHIFT + j, k);
                    let rounds = _mm256_cmpgt_epi64_mask(shift, thirty_one);
                    let neg = _mm256_mask_cmplt_epi64_mask(rounds, prod, fused_neg);
                    let u = _mm256_add_epi64(prod, col(DW4_COL_ADD + j, k));
                    _mm256_srav_epi64(_mm256_mask_sub_epi64(u, neg, u, two31), shift)
                };
                _mm256_mask_shuffle_epi32::<_MM_PERM_CDAB>(fuse(even, 0), 0xAA, fuse(odd, 1))
            })
        } else {
            std::array::from_fn(|k| requant_q256_fused(acc[k], c))
        };
        let bytes = narrow4_256(q, c);
        let dst = p.out.wrapping_add(px * p.out_stride + off);
        // SAFETY: the masked store writes only channels off..off+n of this pixel.
        unsafe { _mm256_mask_storeu_epi8(dst.cast(), m, bytes) }
    }
}

/// The tap quads of one row group of one channel block (see [`U8Dw4QuadsArgs`]): each padded
/// input column's four rows interleaved by the unpacks of [`u8_dw4_avx512vnni_64c`], once per
/// output row instead of once per output pixel and filter tap.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL/VNNI and `p` satisfies the contract of
/// [`U8Dw4QuadsArgs`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub unsafe fn u8_dw4_quads_avx512vnni(p: &U8Dw4QuadsArgs) {
    let m = if p.n >= DW4_BLOCK {
        u64::MAX
    } else {
        (1u64 << p.n) - 1
    };
    let e = dw4_quad_bytes(p.n);
    let za = _mm512_set1_epi8(p.za as i8);
    for ph in 0..p.stride {
        for j in 0..p.per_phase {
            let pc = j * p.stride + ph;
            let ic = pc.wrapping_sub(p.pad_left);
            let inside = pc >= p.pad_left && ic < p.in_w;
            let r: [__m512i; 4] = std::array::from_fn(|i| {
                if inside && !p.rows[i].is_null() {
                    // SAFETY: a non-null row holds `in_w` pixels of at least `n` readable
                    // bytes each, and `ic < in_w`.
                    unsafe { _mm512_maskz_loadu_epi8(m, p.rows[i].add(ic * p.pixel_bytes).cast()) }
                } else {
                    za
                }
            });
            let lo01 = _mm512_unpacklo_epi8(r[0], r[1]);
            let hi01 = _mm512_unpackhi_epi8(r[0], r[1]);
            let lo23 = _mm512_unpacklo_epi8(r[2], r[3]);
            let hi23 = _mm512_unpackhi_epi8(r[2], r[3]);
            let x = [
                _mm512_unpacklo_epi16(lo01, lo23),
                _mm512_unpackhi_epi16(lo01, lo23),
                _mm512_unpacklo_epi16(hi01, hi23),
                _mm512_unpackhi_epi16(hi01, hi23),
            ];
            let dst = p.out.wrapping_add((ph * p.per_phase + j) * e);
            for (k, &v) in x.iter().enumerate() {
                // SAFETY: the contract gives `E` writable bytes at every column of each `k`.
                unsafe {
                    let d = dst.add(k * p.k_step);
                    if e == 64 {
                        _mm512_storeu_si512(d.cast(), v);
                    } else {
                        _mm256_storeu_si256(d.cast(), _mm512_castsi512_si256(v));
                    }
                }
            }
        }
    }
}

/// One channel block of an output row from its tap quads (see [`U8Dw4RowArgs`]): one load
/// and one `vpdpbusd` per four taps of 64 channels, no unpacks. A block of at most 32 channels
/// runs two output pixels per vector (their quads are neighbours, and the packing repeats the
/// channels' constants in the high half), so the narrow tails of 32, 96 or 144 channels cost
/// half a block per pixel.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL/VNNI and `p` satisfies the contract of
/// [`U8Dw4RowArgs`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub unsafe fn u8_dw4_row_avx512vnni(p: &U8Dw4RowArgs) {
    let c = rq512(&p.rq);
    let e = dw4_quad_bytes(p.n);
    // SAFETY: the packing holds `DW4_HEAD_SLOTS + 4·groups` aligned 64-byte slots.
    let slot = |s: usize| unsafe { _mm512_load_si512(p.w.add(64 * s).cast()) };
    let bias: [__m512i; 4] = std::array::from_fn(slot);
    let sign: [__m512i; 4] = std::array::from_fn(|k| slot(4 + k));
    let col = |j: usize, k: usize| slot(8 + 4 * j + k);
    let mut px = 0;
    while px < p.width {
        let mut acc = bias;
        for g in 0..p.groups {
            // SAFETY: group `g` of pixel `px` has 64 readable bytes at each `k` (the last
            // pixel's second half included, by the contract's 32 bytes of slack).
            let q = unsafe { (*p.quads.add(g)).add(px * e) };
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: as above.
                let x = unsafe { _mm512_loadu_si512(q.add(k * p.k_step).cast()) };
                // Wrapping accumulation, as the reference's int32 arithmetic.
                *a = _mm512_dpbusd_epi32(*a, x, slot(DW4_HEAD_SLOTS + 4 * g + k));
            }
        }
        let flags = Dw4Flags {
            negate: p.negate,
            per_channel: p.per_channel,
            left_shift: p.left_shift,
        };
        let bytes = dw4_epilogue(acc, &sign, col, flags, &c);
        let dst = p.out.wrapping_add(px * p.out_stride);
        if e == 64 {
            let m = if p.n >= DW4_BLOCK {
                u64::MAX
            } else {
                (1u64 << p.n) - 1
            };
            // SAFETY: the contract allows writing `n` bytes at each output pixel.
            unsafe { _mm512_mask_storeu_epi8(dst.cast(), m, bytes) };
            px += 1;
        } else {
            // Channels 0..32 of pixel `px` in the low half, of pixel `px + 1` in the high.
            let m = if p.n >= 32 {
                u32::MAX
            } else {
                (1u32 << p.n) - 1
            };
            // SAFETY: as above, for pixel `px` and, when it exists, `px + 1`.
            unsafe {
                _mm256_mask_storeu_epi8(dst.cast(), m, _mm512_castsi512_si256(bytes));
                if px + 1 < p.width {
                    let next = dst.add(p.out_stride);
                    _mm256_mask_storeu_epi8(next.cast(), m, _mm512_extracti64x4_epi64::<1>(bytes));
                }
            }
            px += 2;
        }
    }
}

/// A run of output pixels of a 3-column depthwise filter (see
/// [`crate::ukernels::quant8::U8Dw4ColsArgs`]): each input column's rows are loaded and
/// interleaved into tap quads once, in registers, and multiplied into the three pixels that
/// read the column, so a pixel costs one column's loads and unpacks instead of three. The
/// accumulators of the next two pixels, still reading, roll along the row.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL/VNNI and `p` satisfies the contract of
/// [`crate::ukernels::quant8::U8Dw4ColsArgs`].
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub unsafe fn u8_dw4_cols3_avx512vnni(p: &crate::ukernels::quant8::U8Dw4ColsArgs) {
    let block_len = (DW4_HEAD_SLOTS + 4 * 3) * 64;
    let c = rq512(&p.rq);
    let flags = Dw4Flags {
        negate: p.negate,
        per_channel: p.per_channel,
        left_shift: p.left_shift,
    };
    for blk in 0..p.channels.div_ceil(DW4_BLOCK) {
        let off = blk * DW4_BLOCK;
        let n = (p.channels - off).min(DW4_BLOCK);
        let m = if n == DW4_BLOCK {
            u64::MAX
        } else {
            (1u64 << n) - 1
        };
        let base = p.w.wrapping_add(blk * block_len);
        // SAFETY: the block holds `DW4_HEAD_SLOTS + 4·3` aligned 64-byte slots.
        let slot = |s: usize| unsafe { _mm512_load_si512(base.add(64 * s).cast()) };
        let bias: [__m512i; 4] = std::array::from_fn(slot);
        let sign: [__m512i; 4] = std::array::from_fn(|k| slot(4 + k));
        let col = |j: usize, k: usize| slot(8 + 4 * j + k);
        // Input column `x` (0 = the first pixel's first tap) of filter row `fy`.
        let load = |fy: usize, x: usize| {
            // SAFETY: the contract makes `channels` bytes readable at every column the
            // run's pixels read; only channels off..off+n are read.
            unsafe {
                let src = p.rows[fy].add(x * p.pixel_bytes + off);
                if n == DW4_BLOCK {
                    _mm512_loadu_si512(src.cast())
                } else {
                    _mm512_maskz_loadu_epi8(m, src.cast())
                }
            }
        };
        // The quads of column `x`; rows past `kh` repeat a loaded one (their weights are 0).
        let quads = |x: usize| -> [__m512i; 4] {
            let r0 = load(0, x);
            let r1 = if p.kh > 1 { load(1, x) } else { r0 };
            let r2 = if p.kh > 2 { load(2, x) } else { r0 };
            let r3 = if p.kh > 3 { load(3, x) } else { r1 };
            let lo01 = _mm512_unpacklo_epi8(r0, r1);
            let hi01 = _mm512_unpackhi_epi8(r0, r1);
            let lo23 = _mm512_unpacklo_epi8(r2, r3);
            let hi23 = _mm512_unpackhi_epi8(r2, r3);
            [
                _mm512_unpacklo_epi16(lo01, lo23),
                _mm512_unpackhi_epi16(lo01, lo23),
                _mm512_unpacklo_epi16(hi01, hi23),
                _mm512_unpackhi_epi16(hi01, hi23),
            ]
        };
        // Wrapping accumulation (not the saturating `vpdpbusds`), as the reference's int32
        // arithmetic; `fx` picks the filter column's weight group.
        let mac = |mut acc: [__m512i; 4], q: &[__m512i; 4], fx: usize| {
            for k in 0..4 {
                acc[k] = _mm512_dpbusd_epi32(acc[k], q[k], slot(DW4_HEAD_SLOTS + 4 * fx + k));
            }
            acc
        };
        // Entering pixel `px`, `a` holds its sums over its first two columns and `b` pixel
        // px+1's over its first.
        let q1 = quads(1);
        let mut a = mac(mac(bias, &quads(0), 0), &q1, 1);
        let mut b = mac(bias, &q1, 0);
        for px in 0..p.width {
            let q = quads(px + 2);
            let done = mac(a, &q, 2);
            a = mac(b, &q, 1);
            b = mac(bias, &q, 0);
            let bytes = dw4_epilogue(done, &sign, col, flags, &c);
            let dst = p.out.wrapping_add(px * p.out_stride + off);
            // SAFETY: the contract allows writing `channels` bytes at each output pixel;
            // the masked store writes only channels off..off+n.
            unsafe {
                if n == DW4_BLOCK {
                    _mm512_storeu_si512(dst.cast(), bytes)
                } else {
                    _mm512_mask_storeu_epi8(dst.cast(), m, bytes)
                }
            }
        }
    }
}
