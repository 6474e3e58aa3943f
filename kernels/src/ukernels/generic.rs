//! Portable micro-kernels: plain Rust, every platform, and the fallback of every table slot.
//! Written as fixed-size array loops the compiler can keep in registers and vectorise with
//! whatever the baseline target offers (SSE2 on x86_64, NEON on aarch64).

use super::quant8::{U8Dw, U8DwArgs, U8Gemm, U8GemmArgs, U8RowSum, DW_BLOCK};
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

/// The portable uint8 GEMM slot: 4×16 tiles, weights stored as `w − 128` in signed bytes.
pub const U8_GEMM: U8Gemm = U8Gemm {
    mr: 4,
    nr: 16,
    weight_shift: 128,
    any_rows: false,
    kernel: u8_gemm_generic_4x16,
    name: "u8_gemm_generic_4x16",
};

/// The portable row-correction slot.
pub const U8_ROW_SUM: U8RowSum = U8RowSum {
    kernel: u8_row_sum_generic,
    name: "u8_row_sum_generic",
};

/// The portable uint8 depthwise slot.
pub const U8_DW: U8Dw = U8Dw {
    kernel: u8_dw_generic_16c,
    name: "u8_dw_generic_16c",
};

/// Portable uint8 GEMM tile (see [`U8GemmArgs`]).
///
/// # Safety
/// The pointers in `p` must satisfy the memory contract of [`U8GemmArgs`] with `mr = 4`,
/// `nr = 16`.
pub unsafe fn u8_gemm_generic_4x16(p: &U8GemmArgs) {
    const NR: usize = 16;
    debug_assert!(p.rows <= 4 && p.cols <= NR);
    let groups = p.k.div_ceil(4);
    // SAFETY: the contract gives `groups·NR·4` weight bytes and `NR` biases.
    let (w, bias) = unsafe {
        (
            std::slice::from_raw_parts(p.w.cast::<i8>(), groups * NR * 4),
            std::slice::from_raw_parts(p.bias, NR),
        )
    };
    for r in 0..p.rows {
        // SAFETY: row `r < rows` of A is `k` readable bytes and `row_corr` has `rows` values.
        let (a, corr) = unsafe {
            (
                std::slice::from_raw_parts(p.a.add(r * p.a_stride), p.k),
                *p.row_corr.add(r),
            )
        };
        let mut acc = [0i32; NR];
        for (n, slot) in acc.iter_mut().enumerate() {
            *slot = bias[n].wrapping_add(corr);
        }
        for (g, wg) in w.chunks_exact(NR * 4).enumerate() {
            // Four activation bytes (zeros past `k`) against the group's 16 channels × 4 k.
            let mut quad = [0u8; 4];
            let have = (p.k - 4 * g).min(4);
            quad[..have].copy_from_slice(&a[4 * g..4 * g + have]);
            let x = quad.map(i32::from);
            let wg: &[i8; NR * 4] = wg.try_into().unwrap();
            for (n, slot) in acc.iter_mut().enumerate() {
                // |Σ of four u8·s8 products| ≤ 4·255·128: exact before the wrapping add.
                let s = x[0] * i32::from(wg[4 * n])
                    + x[1] * i32::from(wg[4 * n + 1])
                    + x[2] * i32::from(wg[4 * n + 2])
                    + x[3] * i32::from(wg[4 * n + 3]);
                *slot = slot.wrapping_add(s);
            }
        }
        if !p.raw.is_null() {
            // SAFETY: the contract allows writing `cols` int32 values of raw row `r`.
            let raw =
                unsafe { std::slice::from_raw_parts_mut(p.raw.add(r * p.out_stride), p.cols) };
            raw.copy_from_slice(&acc[..p.cols]);
            continue;
        }
        // SAFETY: the contract allows writing `cols` bytes of output row `r`.
        let out = unsafe { std::slice::from_raw_parts_mut(p.out.add(r * p.out_stride), p.cols) };
        if p.col_rq.is_null() {
            for (o, &v) in out.iter_mut().zip(&acc) {
                *o = p.rq.apply(v);
            }
        } else {
            // SAFETY: a non-null `col_rq` holds this block's `3·NR` constants.
            let cq = unsafe { std::slice::from_raw_parts(p.col_rq, 3 * NR) };
            for (n, (o, &v)) in out.iter_mut().zip(&acc).enumerate() {
                *o = p.rq.apply_col(v, cq[n], cq[NR + n], cq[2 * NR + n]);
            }
        }
    }
}

/// Portable row corrections (see [`super::quant8::U8RowSumFn`]).
///
/// # Safety
/// Rows `r < rows` are `k` readable bytes at `a + r·stride`; `out` holds `rows` values.
pub unsafe fn u8_row_sum_generic(
    a: *const u8,
    stride: usize,
    rows: usize,
    k: usize,
    scale: i32,
    out: *mut i32,
) {
    for r in 0..rows {
        // SAFETY: row `r` is `k` readable bytes; `out` has `rows` slots.
        let (row, o) = unsafe {
            (
                std::slice::from_raw_parts(a.add(r * stride), k),
                &mut *out.add(r),
            )
        };
        let sum = row.iter().fold(0u32, |s, &x| s.wrapping_add(u32::from(x)));
        *o = scale.wrapping_mul(sum as i32).wrapping_neg();
    }
}

/// Portable uint8 depthwise row (see [`U8DwArgs`]).
///
/// # Safety
/// The pointers in `p` must satisfy the memory contract of [`U8DwArgs`].
pub unsafe fn u8_dw_generic_16c(p: &U8DwArgs) {
    let blocks = p.channels.div_ceil(DW_BLOCK);
    let per_block = (1 + p.ntaps) * DW_BLOCK;
    // SAFETY: the contract gives `blocks·per_block` packed values and `ntaps` pointers.
    let (w, taps) = unsafe {
        (
            std::slice::from_raw_parts(p.w, blocks * per_block),
            std::slice::from_raw_parts(p.taps, p.ntaps),
        )
    };
    for px in 0..p.width {
        // SAFETY: the contract allows writing `channels` bytes at each output pixel.
        let out =
            unsafe { std::slice::from_raw_parts_mut(p.out.add(px * p.out_stride), p.channels) };
        for (b, out_blk) in out.chunks_mut(DW_BLOCK).enumerate() {
            let wb = &w[b * per_block..(b + 1) * per_block];
            let n = out_blk.len();
            let mut acc = [0i32; DW_BLOCK];
            acc[..n].copy_from_slice(&wb[..n]);
            for (t, &tap) in taps.iter().enumerate() {
                // SAFETY: tap `t` of pixel `px` addresses `channels` readable bytes.
                let src = unsafe {
                    std::slice::from_raw_parts(tap.add(px * p.pixel_step + b * DW_BLOCK), n)
                };
                let wt = &wb[(1 + t) * DW_BLOCK..(1 + t) * DW_BLOCK + n];
                for ((a, &x), &f) in acc.iter_mut().zip(src).zip(wt) {
                    *a = a.wrapping_add(i32::from(x) * f);
                }
            }
            if p.col_rq.is_null() {
                for (o, &v) in out_blk.iter_mut().zip(&acc) {
                    *o = p.rq.apply(v);
                }
            } else {
                // SAFETY: a non-null `col_rq` holds `3·DW_BLOCK` constants per block.
                let cq = unsafe {
                    std::slice::from_raw_parts(p.col_rq.add(b * 3 * DW_BLOCK), 3 * DW_BLOCK)
                };
                for (j, (o, &v)) in out_blk.iter_mut().zip(&acc).enumerate() {
                    *o =
                        p.rq.apply_col(v, cq[j], cq[DW_BLOCK + j], cq[2 * DW_BLOCK + j]);
                }
            }
        }
    }
}
