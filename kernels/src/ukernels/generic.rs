//! Portable micro-kernels: plain Rust, every platform, and the fallback of every table slot.
//! Written as fixed-size array loops the compiler can keep in registers and vectorise with
//! whatever the baseline target offers (SSE2 on x86_64, NEON on aarch64).

use super::{F32Gemm, F32GemmArgs, F32GemmFn};

/// Float32 GEMM tile: 4 rows × 8 columns is 8 baseline 128-bit accumulators, which fits the
/// 16 SSE registers with room for the B row and the broadcast A value.
const F32_MR: usize = 4;
const F32_NR: usize = 8;

/// The generic float32 GEMM family.
pub const F32_GEMM: F32Gemm = F32Gemm {
    name: "f32_gemm_generic_4x8",
    mr: F32_MR,
    nr: F32_NR,
    rows: [
        f32_gemm_rows::<1> as F32GemmFn,
        f32_gemm_rows::<2>,
        f32_gemm_rows::<3>,
        f32_gemm_generic_4x8,
        f32_gemm_generic_4x8,
        f32_gemm_generic_4x8,
        f32_gemm_generic_4x8,
        f32_gemm_generic_4x8,
    ],
};

/// The full 4×8 tile.
///
/// # Safety
/// The contract of [`F32GemmFn`].
pub unsafe fn f32_gemm_generic_4x8(p: &F32GemmArgs) {
    // SAFETY: forwarded contract.
    unsafe { f32_gemm_rows::<F32_MR>(p) }
}

/// Clamp that lets NaN through, like the vector kernels (`max(min, x)` keeps `x` when it is
/// NaN), so every table level gives the same bits.
#[inline(always)]
fn clamp(x: f32, min: f32, max: f32) -> f32 {
    if x < min {
        min
    } else if x > max {
        max
    } else {
        x
    }
}

/// `R` rows of the 4×8 tile.
///
/// # Safety
/// The contract of [`F32GemmFn`].
unsafe fn f32_gemm_rows<const R: usize>(p: &F32GemmArgs) {
    let k = p.ks * p.kc;
    let mut w = p.w;
    let mut c = p.c;
    let mut left = p.nc;
    while left > 0 {
        // SAFETY: a packed block starts with F32_NR bias values (caller contract); arrays of
        // f32 need only f32 alignment.
        let bias = unsafe { *w.cast::<[f32; F32_NR]>() };
        let mut acc = [bias; R];
        let mut b = w.wrapping_add(F32_NR);
        for s in 0..p.ks {
            // SAFETY: the table holds ks·R pointers (caller contract).
            let a: [*const f32; R] = std::array::from_fn(|r| unsafe { *p.a.add(s * R + r) });
            for kk in 0..p.kc {
                // SAFETY: `b` walks the K weight rows of this block.
                let bv = unsafe { *b.cast::<[f32; F32_NR]>() };
                for (acc, a) in acc.iter_mut().zip(&a) {
                    // SAFETY: every segment holds kc values (caller contract).
                    let av = unsafe { *a.add(kk) };
                    for j in 0..F32_NR {
                        acc[j] += av * bv[j];
                    }
                }
                b = b.wrapping_add(F32_NR);
            }
        }
        let n = left.min(F32_NR);
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: row r of C is writable for the remaining `left ≥ n` columns at `c` and
            // does not overlap A or the weights (caller contract).
            let out = unsafe { std::slice::from_raw_parts_mut(c.add(r * p.c_stride), n) };
            for (o, &v) in out.iter_mut().zip(acc) {
                *o = clamp(v, p.min, p.max);
            }
        }
        left -= n;
        w = w.wrapping_add(F32_NR * (k + 1));
        c = c.wrapping_add(n);
    }
}
