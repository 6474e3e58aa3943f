//! AVX2 (+FMA3) micro-kernels.

use std::arch::x86_64::*;

use crate::ukernels::{F32Gemm, F32GemmArgs, F32GemmFn, Ukernels};

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.f32_gemm = F32_GEMM;
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
    while left > 0 {
        // SAFETY: the packed block holds 16 bias values then K rows of 16 weights (contract).
        let (mut lo, mut hi) = unsafe { ([_mm256_loadu_ps(w); R], [_mm256_loadu_ps(w.add(8)); R]) };
        let mut b = w.wrapping_add(F32_NR);
        for s in 0..p.ks {
            // SAFETY: the table holds ks·R pointers (contract).
            let a: [*const f32; R] = std::array::from_fn(|r| unsafe { *p.a.add(s * R + r) });
            for kk in 0..p.kc {
                // SAFETY: `b` walks the K weight rows of this block; every segment holds kc
                // values.
                unsafe {
                    let b0 = _mm256_loadu_ps(b);
                    let b1 = _mm256_loadu_ps(b.add(8));
                    for r in 0..R {
                        let av = _mm256_broadcast_ss(&*a[r].add(kk));
                        lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
                        hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
                    }
                }
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
        w = w.wrapping_add(F32_NR * (k + 1));
        c = c.wrapping_add(F32_NR);
    }
}
