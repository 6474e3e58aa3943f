//! AVX-512 micro-kernels (F, BW, DQ, VL).

use std::arch::x86_64::*;

use crate::ukernels::{F32Gemm, F32GemmArgs, F32GemmFn, Ukernels};

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.f32_gemm = F32_GEMM;
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

/// `R ≤ 7` rows of the 7×32 tile.
///
/// # Safety
/// As [`f32_gemm_avx512_7x32`].
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn gemm<const R: usize>(p: &F32GemmArgs) {
    let vmin = _mm512_set1_ps(p.min);
    let vmax = _mm512_set1_ps(p.max);
    let mut w = p.w;
    let mut c = p.c;
    let mut left = p.nc;
    let k = p.ks * p.kc;
    while left > 0 {
        // SAFETY: the packed block holds 32 bias values then K rows of 32 weights (contract).
        let (mut lo, mut hi) =
            unsafe { ([_mm512_loadu_ps(w); R], [_mm512_loadu_ps(w.add(16)); R]) };
        let mut b = w.wrapping_add(F32_NR);
        for s in 0..p.ks {
            // SAFETY: the table holds ks·R pointers (contract).
            let a: [*const f32; R] = std::array::from_fn(|r| unsafe { *p.a.add(s * R + r) });
            for kk in 0..p.kc {
                // SAFETY: `b` walks the K weight rows of this block; every segment holds kc
                // values.
                unsafe {
                    let b0 = _mm512_loadu_ps(b);
                    let b1 = _mm512_loadu_ps(b.add(16));
                    for r in 0..R {
                        let av = _mm512_set1_ps(*a[r].add(kk));
                        lo[r] = _mm512_fmadd_ps(av, b0, lo[r]);
                        hi[r] = _mm512_fmadd_ps(av, b1, hi[r]);
                    }
                }
                b = b.wrapping_add(F32_NR);
            }
        }
        // `max(min, x)` / `min(max, x)` return `x` when it is NaN (the second operand wins).
        for r in 0..R {
            lo[r] = _mm512_min_ps(vmax, _mm512_max_ps(vmin, lo[r]));
            hi[r] = _mm512_min_ps(vmax, _mm512_max_ps(vmin, hi[r]));
        }
        let row = |r: usize| c.wrapping_add(r * p.c_stride);
        if left >= F32_NR {
            for r in 0..R {
                // SAFETY: row r of C is writable for the `left ≥ 32` columns at `c`.
                unsafe {
                    _mm512_storeu_ps(row(r), lo[r]);
                    _mm512_storeu_ps(row(r).add(16), hi[r]);
                }
            }
            left -= F32_NR;
        } else {
            // Masked stores write only the `left` remaining columns and never fault on the
            // masked-off lanes.
            let m0: __mmask16 = if left >= 16 {
                0xffff
            } else {
                (1u16 << left) - 1
            };
            let m1: __mmask16 = if left > 16 {
                (1u16 << (left - 16)) - 1
            } else {
                0
            };
            for r in 0..R {
                // SAFETY: only lanes < left are written, all inside row r of C.
                unsafe {
                    _mm512_mask_storeu_ps(row(r), m0, lo[r]);
                    _mm512_mask_storeu_ps(row(r).wrapping_add(16), m1, hi[r]);
                }
            }
            left = 0;
        }
        w = w.wrapping_add(F32_NR * (k + 1));
        c = c.wrapping_add(F32_NR);
    }
}
