//! NEON dot-product (`UDOT`) micro-kernels. The dot-product intrinsics are not stable in this
//! toolchain, so `UDOT` is emitted with `asm!` inside functions compiled for `dotprod`.

use std::arch::aarch64::*;
use std::arch::asm;

use super::neon::{gemm_epilogue, group_word};
use crate::ukernels::quant8::{U8Gemm, U8GemmArgs};
use crate::ukernels::Ukernels;

/// Puts this level's kernels into `t`.
pub(crate) fn fill(t: &mut Ukernels) {
    t.u8_gemm = U8Gemm {
        mr: 4,
        nr: 16,
        weight_shift: 0,
        any_rows: false,
        kernel: u8_gemm_dotprod_4x16,
        name: "u8_gemm_dotprod_4x16",
    };
}

/// `acc + Σ_{j<4} a[4i+j]·b[4i+j]` per 32-bit lane, unsigned bytes (wrapping).
#[target_feature(enable = "neon,dotprod")]
#[inline]
fn udot(acc: uint32x4_t, a: uint8x16_t, b: uint8x16_t) -> uint32x4_t {
    let mut acc = acc;
    // SAFETY: UDOT only reads and writes the three vector registers; the function is compiled
    // for (and only called on) processors with the dot-product extension.
    unsafe {
        asm!(
            "udot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// uint8 GEMM tile, 4 rows × 16 channels with `UDOT` on unshifted weights (see
/// [`U8GemmArgs`]): each packed group is four registers of four channels × four k, and each
/// row's four bytes are broadcast to every lane. Wrapping u32 sums equal the reference's int32
/// wrapping.
///
/// # Safety
/// The processor supports the dot-product extension and `p` satisfies the contract of
/// [`U8GemmArgs`] with `mr = 4`, `nr = 16`.
#[target_feature(enable = "neon,dotprod")]
pub unsafe fn u8_gemm_dotprod_4x16(p: &U8GemmArgs) {
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
        let w: [uint8x16_t; 4] =
            std::array::from_fn(|i| unsafe { vld1q_u8(p.w.add(64 * g + 16 * i)) });
        for r in 0..MR {
            // SAFETY: row r of A is `k` readable bytes.
            let x = unsafe { group_word(a[r], g, p.k) };
            let av = vreinterpretq_u8_u32(vdupq_n_u32(x));
            for i in 0..4 {
                acc[r][i] = udot(acc[r][i], av, w[i]);
            }
        }
    }
    // SAFETY: the contract holds for the epilogue's reads and writes.
    unsafe { gemm_epilogue(p, acc.map(|r| r.map(|v| vreinterpretq_s32_u32(v)))) };
}
