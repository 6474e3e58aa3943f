//! AVX2 same-shape quant8 ADD, SUB and MUL ([`crate::ukernels::quant8::U8Binary`]): 16
//! elements per step, in int32 lanes, with the exact requantization of the convolutions
//! ([`super::requant256_q`]) for the output and an exact 32-bit form of each input's rescale
//! ([`rescale8`]); a tail shorter than a step goes through zero-padded copies on the stack, so
//! nothing past `n` is read or written.

use std::arch::x86_64::*;

use super::{narrow16, narrow16_consts, requant256_q, rq256, store16, Narrow16, Rq256};
use crate::ukernels::quant8::{U8Binary, U8BinaryKernel, U8BinaryOp};

pub(super) const U8_BINARY: U8BinaryKernel = U8BinaryKernel {
    kernel: u8_binary_avx2,
    name: "u8_binary_avx2",
};

/// Elements per step.
const STEP: usize = 16;

/// The constants of one operation in registers.
struct Consts {
    op: U8BinaryOp,
    a_zp: __m256i,
    b_zp: __m256i,
    a: Rescale,
    b: Rescale,
    out: Rq256,
    narrow: Narrow16,
}

/// One input's rescale ([`U8Binary::rescale`]) in registers: the multiplier `m` split as
/// `mh · 2^11 + ml` (`ml` in 0..2^11), and the rounding of the right shift `s`.
struct Rescale {
    mh: __m256i,
    /// `ml` and 2^10 as the int16 pair each int32 lane of `(dx, 1)` is multiplied with.
    ml_round: __m256i,
    /// 2^(s−1), or 0 when `s` is 0.
    half: __m256i,
    /// All ones when `s ≥ 1` (a negative value then rounds its ties down), else 0.
    neg: __m256i,
    shift: __m128i,
}

#[target_feature(enable = "avx2,fma")]
fn rescale_consts(mult: i32, shift: u32) -> Rescale {
    let ml = mult & 0x7FF;
    Rescale {
        mh: _mm256_set1_epi32(mult >> 11),
        ml_round: _mm256_set1_epi32(1 << 26 | ml),
        half: _mm256_set1_epi32(if shift == 0 { 0 } else { 1 << (shift - 1) }),
        neg: _mm256_set1_epi32(if shift == 0 { 0 } else { -1 }),
        shift: _mm_cvtsi32_si128(shift as i32),
    }
}

/// [`U8Binary::rescale`] of 8 centred inputs `dx` (|dx| ≤ 255), exactly, in 32-bit lanes.
///
/// SaturatingRoundingDoublingHighMul of `dx · 2^20` is `floor((dx · m + 2^10) / 2^11)` (it
/// never saturates: `dx · 2^20` is not `i32::MIN`), which the split of `m` makes
/// `dx · mh + floor((dx · ml + 2^10) / 2^11)`: `|dx · mh| ≤ 255 · 2^20` and `dx · ml + 2^10`
/// (one `vpmaddwd` of `(dx, 1)` with `(ml, 2^10)`) are exact in int32. RoundingDivideByPOT
/// of that `h` by `s ≥ 1` rounds half away from zero, `floor((h + 2^(s−1) − [h < 0]) / 2^s)`,
/// an arithmetic shift right; `h` is below 2^28 in magnitude, so nothing overflows.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn rescale8(dx: __m256i, c: &Rescale) -> __m256i {
    let pair = _mm256_blend_epi16::<0xAA>(dx, _mm256_set1_epi32(1 << 16));
    let low = _mm256_srai_epi32::<11>(_mm256_madd_epi16(pair, c.ml_round));
    let h = _mm256_add_epi32(_mm256_mullo_epi32(dx, c.mh), low);
    let sign = _mm256_and_si256(_mm256_srai_epi32::<31>(h), c.neg);
    _mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(h, c.half), sign), c.shift)
}

/// 8 elements, `x` and `y` zero-extended to int32 lanes: the output's rounded quotient
/// before its clamp and zero point.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn quotient8(x: __m256i, y: __m256i, c: &Consts) -> __m256i {
    let dx = _mm256_sub_epi32(x, c.a_zp);
    let dy = _mm256_sub_epi32(y, c.b_zp);
    let acc = match c.op {
        // Each rescaled input is below 2^28 in magnitude, so their sum does not overflow;
        // |dx|, |dy| ≤ 255, so the product is exact in int32.
        U8BinaryOp::AddSub => _mm256_add_epi32(rescale8(dx, &c.a), rescale8(dy, &c.b)),
        U8BinaryOp::Mul => _mm256_mullo_epi32(dx, dy),
    };
    requant256_q(acc, &c.out)
}

/// The 16 output bytes of the 16 input bytes in `x` and `y`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn step(x: __m128i, y: __m128i, c: &Consts) -> __m128i {
    let lo = quotient8(_mm256_cvtepu8_epi32(x), _mm256_cvtepu8_epi32(y), c);
    let hi = quotient8(
        _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(x)),
        _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(y)),
        c,
    );
    narrow16(lo, hi, &c.narrow)
}

/// [`crate::ukernels::quant8::U8BinaryFn`] for AVX2.
///
/// # Safety
/// The processor supports AVX2 and FMA; `a`, `b` are readable and `out` writable for `n`
/// bytes.
#[target_feature(enable = "avx2,fma")]
unsafe fn u8_binary_avx2(a: *const u8, b: *const u8, out: *mut u8, n: usize, p: &U8Binary) {
    let c = Consts {
        op: p.op,
        a_zp: _mm256_set1_epi32(p.a_zp),
        b_zp: _mm256_set1_epi32(p.b_zp),
        a: rescale_consts(p.a_mult, p.a_shift),
        b: rescale_consts(p.b_mult, p.b_shift),
        out: rq256(&p.out),
        narrow: narrow16_consts(&p.out),
    };
    let mut i = 0;
    while i + STEP <= n {
        // SAFETY: elements i..i + 16 lie inside the `n` the caller vouches for.
        unsafe {
            let x = _mm_loadu_si128(a.add(i).cast());
            let y = _mm_loadu_si128(b.add(i).cast());
            _mm_storeu_si128(out.add(i).cast(), step(x, y, &c));
        }
        i += STEP;
    }
    if i < n {
        let len = n - i;
        let (mut x, mut y) = ([0u8; STEP], [0u8; STEP]);
        // SAFETY: elements i..n are readable and writable (caller contract), `len < 16` fits
        // the stack copies, which are 16 bytes each.
        unsafe {
            std::ptr::copy_nonoverlapping(a.add(i), x.as_mut_ptr(), len);
            std::ptr::copy_nonoverlapping(b.add(i), y.as_mut_ptr(), len);
            let q = step(
                _mm_loadu_si128(x.as_ptr().cast()),
                _mm_loadu_si128(y.as_ptr().cast()),
                &c,
            );
            store16(out.add(i), len, q);
        }
    }
}
