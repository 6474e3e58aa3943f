//! AVX2 same-shape quant8 ADD, SUB and MUL ([`crate::ukernels::quant8::U8Binary`]): 16
//! elements per step, in int32 lanes, with the exact requantization of the convolutions
//! ([`super::requant256_q`]) for each input's rescale and for the output; a tail shorter than
//! a step goes through zero-padded copies on the stack, so nothing past `n` is read or written.

use std::arch::x86_64::*;

use super::{narrow16, narrow16_consts, requant256_q, rq256, store16, Narrow16, Rq256};
use crate::ukernels::quant8::{Requant8, U8Binary, U8BinaryKernel, U8BinaryOp};

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
    a: Rq256,
    b: Rq256,
    out: Rq256,
    narrow: Narrow16,
}

/// An input rescale as a requantizer: multiplier and shift only (the zero point and bounds
/// are unused by [`requant256_q`]).
fn input_rq(mult: i32, shift: u32) -> Requant8 {
    Requant8 {
        multiplier: mult,
        shift,
        zero_point: 0,
        lo: 0,
        hi: 0,
    }
}

/// 8 elements, `x` and `y` zero-extended to int32 lanes: the output's rounded quotient
/// before its clamp and zero point.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn quotient8(x: __m256i, y: __m256i, c: &Consts) -> __m256i {
    let dx = _mm256_sub_epi32(x, c.a_zp);
    let dy = _mm256_sub_epi32(y, c.b_zp);
    let acc = match c.op {
        // |dx|, |dy| ≤ 255, so the shifted values and the product are exact in int32; each
        // rescaled input is below 2^28 in magnitude, so their sum does not overflow.
        U8BinaryOp::AddSub => _mm256_add_epi32(
            requant256_q(_mm256_slli_epi32::<20>(dx), &c.a),
            requant256_q(_mm256_slli_epi32::<20>(dy), &c.b),
        ),
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
        a: rq256(&input_rq(p.a_mult, p.a_shift)),
        b: rq256(&input_rq(p.b_mult, p.b_shift)),
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
