//! Portable micro-kernels: plain Rust, every platform, and the fallback of every table slot.
//! Written as fixed-size array loops the compiler can keep in registers and vectorise with
//! whatever the baseline target offers (SSE2 on x86_64, NEON on aarch64).

use super::{F32Gemm, F32GemmArgs, F32GemmFn};
pub mod f32_small;

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
    let mut w = p.w;
    let mut c = p.c;
    let mut left = p.nc;
    while left > 0 {
        // SAFETY: a packed block starts with F32_NR bias values (caller contract); arrays of
        // f32 need only f32 alignment.
        let bias = unsafe { *w.cast::<[f32; F32_NR]>() };
        let mut acc = [bias; R];
        for k in 0..p.k {
            // SAFETY: weight row k of the block follows the bias at (k + 1)·F32_NR.
            let b = unsafe { *w.add(F32_NR * (k + 1)).cast::<[f32; F32_NR]>() };
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row r < R of A holds at least `k` values (caller contract).
                let a = unsafe { *p.a.add(r * p.a_stride + k) };
                for j in 0..F32_NR {
                    acc[j] += a * b[j];
                }
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
        // SAFETY: both stay within (or one past) the regions the contract names: the next
        // block follows this one, and C advances by the n columns just written.
        unsafe {
            w = w.add(F32_NR * (p.k + 1));
            c = c.add(n);
        }
    }
}
