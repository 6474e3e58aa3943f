//! NEON micro-kernels (every aarch64 core), and the exact vector requantization the dotprod
//! kernels share.

use std::arch::aarch64::*;

use crate::ukernels::quant8::{Requant8, U8Dw, U8DwArgs, U8Gemm, U8GemmArgs, DW_BLOCK};
use crate::ukernels::{F32Gemm, F32GemmArgs, F32GemmFn, Ukernels};

pub mod f32_small;

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.f32_gemm = F32_GEMM;
    f32_small::fill_f32_small(t);
    t.u8_gemm = U8Gemm {
        mr: 4,
        nr: 16,
        weight_shift: 0,
        any_rows: false,
        kernel: u8_gemm_neon_4x16,
        name: "u8_gemm_neon_4x16",
    };
    t.u8_dw = U8Dw {
        kernel: u8_dw_neon_16c,
        name: "u8_dw_neon_16c",
    };
}

/// Float32 GEMM tile: 8 rows × 8 columns = 16 q accumulators, 8 q holding four k-steps of
/// each A row (used lane by lane with `fmla v.4s, b.4s, a.s[lane]`, so no broadcasts) and
/// 2 q of B: 26 of the 32 vector registers.
const F32_MR: usize = 8;
const F32_NR: usize = 8;

const F32_GEMM: F32Gemm = F32Gemm {
    name: "f32_gemm_neon_8x8",
    mr: F32_MR,
    nr: F32_NR,
    rows: [
        gemm::<1> as F32GemmFn,
        gemm::<2>,
        gemm::<3>,
        gemm::<4>,
        gemm::<5>,
        gemm::<6>,
        gemm::<7>,
        f32_gemm_neon_8x8,
    ],
};

/// The full 8×8 tile.
///
/// # Safety
/// The contract of [`F32GemmFn`].
#[target_feature(enable = "neon")]
pub unsafe fn f32_gemm_neon_8x8(p: &F32GemmArgs) {
    // SAFETY: forwarded contract; same target features.
    unsafe { gemm::<F32_MR>(p) }
}

/// `R ≤ 8` rows of the 8×8 tile.
///
/// # Safety
/// As [`f32_gemm_neon_8x8`].
#[inline]
#[target_feature(enable = "neon")]
unsafe fn gemm<const R: usize>(p: &F32GemmArgs) {
    let vmin = vdupq_n_f32(p.min);
    let vmax = vdupq_n_f32(p.max);
    let mut w = p.w;
    let mut c = p.c;
    let mut left = p.nc;
    let kt = p.ks * p.kc;
    while left > 0 {
        // SAFETY: the packed block holds 8 bias values then K rows of 8 weights (contract).
        let (mut lo, mut hi) = unsafe { ([vld1q_f32(w); R], [vld1q_f32(w.add(4)); R]) };
        let mut b = w.wrapping_add(F32_NR);
        for s in 0..p.ks {
            // SAFETY: the table holds ks·R pointers (contract).
            let a: [*const f32; R] = std::array::from_fn(|r| unsafe { *p.a.add(s * R + r) });
            let mut k = 0;
            while k + 4 <= p.kc {
                // SAFETY: every segment holds kc values, so a[r] + k .. + 4 is readable; `b`
                // walks the K weight rows of this block.
                unsafe {
                    let mut av = [vdupq_n_f32(0.0); R];
                    for r in 0..R {
                        av[r] = vld1q_f32(a[r].add(k));
                    }
                    macro_rules! step {
                        ($lane:literal) => {
                            let b0 = vld1q_f32(b);
                            let b1 = vld1q_f32(b.add(4));
                            for r in 0..R {
                                lo[r] = vfmaq_laneq_f32::<$lane>(lo[r], b0, av[r]);
                                hi[r] = vfmaq_laneq_f32::<$lane>(hi[r], b1, av[r]);
                            }
                            b = b.add(F32_NR);
                        };
                    }
                    step!(0);
                    step!(1);
                    step!(2);
                    step!(3);
                }
                k += 4;
            }
            while k < p.kc {
                // SAFETY: as above, one k-step at a time for the kc % 4 tail.
                unsafe {
                    let b0 = vld1q_f32(b);
                    let b1 = vld1q_f32(b.add(4));
                    for r in 0..R {
                        let s = *a[r].add(k);
                        lo[r] = vfmaq_n_f32(lo[r], b0, s);
                        hi[r] = vfmaq_n_f32(hi[r], b1, s);
                    }
                }
                b = b.wrapping_add(F32_NR);
                k += 1;
            }
        }
        // FMAX/FMIN propagate NaN, as the other levels do.
        for r in 0..R {
            lo[r] = vminq_f32(vmax, vmaxq_f32(vmin, lo[r]));
            hi[r] = vminq_f32(vmax, vmaxq_f32(vmin, hi[r]));
        }
        let row = |r: usize| c.wrapping_add(r * p.c_stride);
        let n = left.min(F32_NR);
        for r in 0..R {
            if n == F32_NR {
                // SAFETY: row r of C is writable for the `left ≥ 8` columns at `c`.
                unsafe {
                    vst1q_f32(row(r), lo[r]);
                    vst1q_f32(row(r).add(4), hi[r]);
                }
            } else {
                let mut tmp = [0.0f32; F32_NR];
                // SAFETY: `tmp` holds 8 values; then only `n = left` columns go to row r.
                unsafe {
                    vst1q_f32(tmp.as_mut_ptr(), lo[r]);
                    vst1q_f32(tmp.as_mut_ptr().add(4), hi[r]);
                    std::ptr::copy_nonoverlapping(tmp.as_ptr(), row(r), n);
                }
            }
        }
        left -= n;
        w = w.wrapping_add(F32_NR * (kt + 1));
        c = c.wrapping_add(F32_NR);
    }
}

/// [`Requant8`] broadcast into registers.
#[derive(Clone, Copy)]
pub(super) struct RqNeon {
    mult: int32x4_t,
    neg_shift: int32x4_t,
    lo: int32x4_t,
    hi: int32x4_t,
    zp: int32x4_t,
}

#[target_feature(enable = "neon")]
pub(super) fn rq_neon(rq: &Requant8) -> RqNeon {
    RqNeon {
        mult: vdupq_n_s32(rq.multiplier),
        neg_shift: vdupq_n_s32(-(rq.shift as i32)),
        lo: vdupq_n_s32(rq.lo),
        hi: vdupq_n_s32(rq.hi),
        zp: vdupq_n_s32(rq.zero_point),
    }
}

/// [`Requant8::apply`] on 4 lanes (result in 0..=255, still int32).
///
/// `SQRDMULH` is gemmlowp's SaturatingRoundingDoublingHighMul exactly. `SRSHL` by `−e`
/// rounds ties up; subtracting 1 from negative values first (only when `e > 0`: the sign bit
/// of `x & −e`) turns that into RoundingDivideByPOT's ties away from zero, and the rounding
/// shift itself cannot overflow.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn requant4(x: int32x4_t, c: &RqNeon) -> int32x4_t {
    let x = vqrdmulhq_s32(x, c.mult);
    let fix = vshrq_n_s32::<31>(vandq_s32(x, c.neg_shift));
    let x = vrshlq_s32(vqaddq_s32(x, fix), c.neg_shift);
    vaddq_s32(vminq_s32(vmaxq_s32(x, c.lo), c.hi), c.zp)
}

/// Requantizes 16 lanes and narrows them to 16 bytes.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn requant16(acc: [int32x4_t; 4], c: &RqNeon) -> uint8x16_t {
    let q: [int32x4_t; 4] = std::array::from_fn(|i| requant4(acc[i], c));
    let lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
    let hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    // Values are in 0..=255, so truncating to the low byte is exact.
    vreinterpretq_u8_s8(vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)))
}

/// Per-column constants ([`crate::ukernels::quant8::ColRequant`]) of 16 lanes in registers,
/// with the per-tensor zero point and bounds of a [`Requant8`].
#[derive(Clone, Copy)]
pub(super) struct RqColsNeon {
    mult: [int32x4_t; 4],
    left: [int32x4_t; 4],
    neg_right: [int32x4_t; 4],
    lo: int32x4_t,
    hi: int32x4_t,
    zp: int32x4_t,
}

/// Loads 16 lanes of per-column constants: multipliers at `m`, left shifts at `m + stride`,
/// right shifts at `m + 2·stride`.
///
/// # Safety
/// The three runs of 16 values are readable.
#[target_feature(enable = "neon")]
pub(super) unsafe fn rq_neon_cols(rq: &Requant8, m: *const i32, stride: usize) -> RqColsNeon {
    let load = |o: usize| -> [int32x4_t; 4] {
        // SAFETY: the three runs of 16 values are readable (caller contract).
        std::array::from_fn(|i| unsafe { vld1q_s32(m.add(o + 4 * i)) })
    };
    RqColsNeon {
        mult: load(0),
        left: load(stride),
        neg_right: load(2 * stride).map(|v| vnegq_s32(v)),
        lo: vdupq_n_s32(rq.lo),
        hi: vdupq_n_s32(rq.hi),
        zp: vdupq_n_s32(rq.zero_point),
    }
}

/// [`Requant8::apply_col`] on 16 lanes, narrowed to 16 bytes: [`requant4`] per quarter with a
/// per-lane wrapping left shift first (`SSHL` by a non-negative count does not saturate) and
/// per-lane multipliers and right shifts.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn requant16_cols(acc: [int32x4_t; 4], c: &RqColsNeon) -> uint8x16_t {
    let q: [int32x4_t; 4] = std::array::from_fn(|i| {
        let x = vqrdmulhq_s32(vshlq_s32(acc[i], c.left[i]), c.mult[i]);
        let fix = vshrq_n_s32::<31>(vandq_s32(x, c.neg_right[i]));
        let x = vrshlq_s32(vqaddq_s32(x, fix), c.neg_right[i]);
        vaddq_s32(vminq_s32(vmaxq_s32(x, c.lo), c.hi), c.zp)
    });
    let lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
    let hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    vreinterpretq_u8_s8(vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)))
}

/// Stores the first `n ≤ 16` bytes of `v` at `dst`.
///
/// # Safety
/// `n` bytes at `dst` are writable.
#[target_feature(enable = "neon")]
#[inline]
pub(super) unsafe fn store_n(dst: *mut u8, n: usize, v: uint8x16_t) {
    if n == 16 {
        // SAFETY: 16 writable bytes.
        unsafe { vst1q_u8(dst, v) };
    } else {
        let mut tmp = [0u8; 16];
        // SAFETY: `tmp` is 16 bytes.
        unsafe { vst1q_u8(tmp.as_mut_ptr(), v) };
        // SAFETY: `n` writable bytes at `dst`.
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, n) };
    }
}

/// Loads the first `n ≤ 16` bytes at `src` (the rest zero).
///
/// # Safety
/// `n` bytes at `src` are readable.
#[target_feature(enable = "neon")]
#[inline]
pub(super) unsafe fn load_n(src: *const u8, n: usize) -> uint8x16_t {
    if n == 16 {
        // SAFETY: 16 readable bytes.
        unsafe { vld1q_u8(src) }
    } else {
        let mut tmp = [0u8; 16];
        // SAFETY: `n` readable bytes at `src`.
        unsafe { std::ptr::copy_nonoverlapping(src, tmp.as_mut_ptr(), n) };
        // SAFETY: `tmp` is 16 bytes.
        unsafe { vld1q_u8(tmp.as_ptr()) }
    }
}

/// Bytes `4g .. 4g + 4` of a row of `k` bytes as a little-endian word (zeros past `k`).
///
/// # Safety
/// The `k` bytes at `row` are readable.
#[inline]
pub(super) unsafe fn group_word(row: *const u8, g: usize, k: usize) -> u32 {
    if 4 * g + 4 <= k {
        // SAFETY: bytes 4g..4g+4 ≤ k.
        unsafe { row.add(4 * g).cast::<u32>().read_unaligned() }
    } else {
        let mut x = 0u32;
        for j in 0..k - 4 * g {
            // SAFETY: byte 4g + j < k.
            x |= u32::from(unsafe { *row.add(4 * g + j) }) << (8 * j);
        }
        x
    }
}

/// uint8 GEMM tile, 4 rows × 16 channels with widening multiply-accumulates (see
/// [`U8GemmArgs`]; weights unshifted). `vld4q_u8` splits each packed group into the four
/// k-planes; products of two bytes fit u16 and are accumulated in u32 (`UMLAL`), whose
/// wrapping equals the reference's int32 wrapping.
///
/// # Safety
/// `p` satisfies the contract of [`U8GemmArgs`] with `mr = 4`, `nr = 16`.
#[target_feature(enable = "neon")]
pub unsafe fn u8_gemm_neon_4x16(p: &U8GemmArgs) {
    const MR: usize = 4;
    let mut a = [p.a; MR];
    for r in 1..MR {
        a[r] = if r < p.rows {
            p.a.wrapping_add(r * p.a_stride)
        } else {
            a[r - 1]
        };
    }
    let mut acc = [[vdupq_n_u32(0); 4]; MR];
    for g in 0..p.k.div_ceil(4) {
        // SAFETY: group g of the packed block (64 bytes).
        let planes = unsafe { vld4q_u8(p.w.add(64 * g)) };
        let planes = [planes.0, planes.1, planes.2, planes.3];
        let wide: [[uint16x8_t; 2]; 4] = std::array::from_fn(|j| {
            [
                vmovl_u8(vget_low_u8(planes[j])),
                vmovl_u8(vget_high_u8(planes[j])),
            ]
        });
        for r in 0..MR {
            // SAFETY: row r of A is `k` readable bytes.
            let x = unsafe { group_word(a[r], g, p.k) };
            let av = vget_low_u16(vmovl_u8(vcreate_u8(u64::from(x))));
            macro_rules! plane {
                ($j:literal) => {
                    acc[r][0] = vmlal_lane_u16::<$j>(acc[r][0], vget_low_u16(wide[$j][0]), av);
                    acc[r][1] = vmlal_lane_u16::<$j>(acc[r][1], vget_high_u16(wide[$j][0]), av);
                    acc[r][2] = vmlal_lane_u16::<$j>(acc[r][2], vget_low_u16(wide[$j][1]), av);
                    acc[r][3] = vmlal_lane_u16::<$j>(acc[r][3], vget_high_u16(wide[$j][1]), av);
                };
            }
            plane!(0);
            plane!(1);
            plane!(2);
            plane!(3);
        }
    }
    // SAFETY: the contract holds for the epilogue's reads and writes.
    unsafe { gemm_epilogue(p, acc.map(|r| r.map(|v| vreinterpretq_s32_u32(v)))) };
}

/// Adds bias and row corrections to a 4×16 tile of raw sums, requantizes and stores it.
///
/// # Safety
/// `p` satisfies the contract of [`U8GemmArgs`] with `nr = 16` and `rows ≤ 4`.
#[target_feature(enable = "neon")]
pub(super) unsafe fn gemm_epilogue(p: &U8GemmArgs, acc: [[int32x4_t; 4]; 4]) {
    // SAFETY: the bias block holds 16 values.
    let bias: [int32x4_t; 4] = std::array::from_fn(|i| unsafe { vld1q_s32(p.bias.add(4 * i)) });
    let sums = |r: usize| -> [int32x4_t; 4] {
        // SAFETY: `row_corr` holds `rows` values.
        let corr = vdupq_n_s32(unsafe { *p.row_corr.add(r) });
        std::array::from_fn(|i| vaddq_s32(vaddq_s32(acc[r][i], bias[i]), corr))
    };
    if !p.raw.is_null() {
        for r in 0..p.rows.min(4) {
            let x = sums(r);
            let mut v = [0i32; 16];
            for (i, &q) in x.iter().enumerate() {
                // SAFETY: `v` has room for four values at 4i.
                unsafe { vst1q_s32(v.as_mut_ptr().add(4 * i), q) };
            }
            // SAFETY: raw row r has `cols ≤ 16` writable values.
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr(), p.raw.add(r * p.out_stride), p.cols)
            };
        }
    } else if p.col_rq.is_null() {
        let c = rq_neon(&p.rq);
        for r in 0..p.rows.min(4) {
            // SAFETY: row r of the output has `cols` writable bytes.
            unsafe { store_n(p.out.add(r * p.out_stride), p.cols, requant16(sums(r), &c)) };
        }
    } else {
        // SAFETY: a non-null `col_rq` holds the block's 3·16 constants.
        let c = unsafe { rq_neon_cols(&p.rq, p.col_rq, 16) };
        for r in 0..p.rows.min(4) {
            let q = requant16_cols(sums(r), &c);
            // SAFETY: row r of the output has `cols` writable bytes.
            unsafe { store_n(p.out.add(r * p.out_stride), p.cols, q) };
        }
    }
}

/// uint8 depthwise run, 16 channels per block (see [`U8DwArgs`]).
///
/// # Safety
/// `p` satisfies the contract of [`U8DwArgs`].
#[target_feature(enable = "neon")]
pub unsafe fn u8_dw_neon_16c(p: &U8DwArgs) {
    if p.col_rq.is_null() {
        let c = rq_neon(&p.rq);
        // SAFETY: the caller's contract.
        unsafe { dw_neon(p, |_| c, |x, c: &RqNeon| requant16(x, c)) }
    } else {
        let cols = |blk: usize| {
            // SAFETY: a non-null `col_rq` holds 3·16 constants per block of 16 channels.
            unsafe { rq_neon_cols(&p.rq, p.col_rq.add(blk * 3 * DW_BLOCK), DW_BLOCK) }
        };
        // SAFETY: the caller's contract.
        unsafe { dw_neon(p, cols, |x, c: &RqColsNeon| requant16_cols(x, c)) }
    }
}

/// The depthwise run of [`u8_dw_neon_16c`] with the requantization constants `consts(block)`
/// of each 16-channel block applied by `requant`.
///
/// # Safety
/// As for [`u8_dw_neon_16c`].
#[target_feature(enable = "neon")]
#[inline]
unsafe fn dw_neon<C: Copy>(
    p: &U8DwArgs,
    consts: impl Fn(usize) -> C,
    requant: impl Fn([int32x4_t; 4], &C) -> uint8x16_t,
) {
    let per_block = (1 + p.ntaps) * DW_BLOCK;
    for blk in 0..p.channels.div_ceil(DW_BLOCK) {
        let c = consts(blk);
        let off = blk * DW_BLOCK;
        let n = (p.channels - off).min(DW_BLOCK);
        let wb = p.w.wrapping_add(blk * per_block);
        for px in 0..p.width {
            // SAFETY: the packed block starts with 16 biases.
            let mut acc: [int32x4_t; 4] =
                std::array::from_fn(|i| unsafe { vld1q_s32(wb.add(4 * i)) });
            for t in 0..p.ntaps {
                // SAFETY: tap t of pixel px addresses `channels` bytes; `n` are read.
                let x = unsafe { load_n((*p.taps.add(t)).add(px * p.pixel_step + off), n) };
                let lo = vmovl_u8(vget_low_u8(x));
                let hi = vmovl_u8(vget_high_u8(x));
                let xs = [
                    vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))),
                    vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(lo))),
                    vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))),
                    vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(hi))),
                ];
                for i in 0..4 {
                    // SAFETY: tap t's weight block holds 16 values.
                    let wt = unsafe { vld1q_s32(wb.add((1 + t) * DW_BLOCK + 4 * i)) };
                    acc[i] = vmlaq_s32(acc[i], xs[i], wt);
                }
            }
            // SAFETY: `channels` writable bytes at each output pixel; `n` are written.
            unsafe { store_n(p.out.add(px * p.out_stride + off), n, requant(acc, &c)) };
        }
    }
}
