//! NEON micro-kernels.

use std::arch::aarch64::*;

use crate::ukernels::{F32Gemm, F32GemmArgs, F32GemmFn, Ukernels};

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.f32_gemm = F32_GEMM;
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
