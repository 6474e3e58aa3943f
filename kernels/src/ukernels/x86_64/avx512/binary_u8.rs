//! AVX-512 same-shape quant8 ADD, SUB and MUL ([`crate::ukernels::quant8::U8Binary`]): 32
//! elements per step, in int32 lanes, with the exact requantization of the convolutions
//! ([`super::requant_q512`]) for each input's rescale and for the output.

use std::arch::x86_64::*;

use super::{narrow2_512, requant_q512, rq512, store32, Rq512};
use crate::ukernels::quant8::{Requant8, U8Binary, U8BinaryKernel, U8BinaryOp};

pub(super) const U8_BINARY: U8BinaryKernel = U8BinaryKernel {
    kernel: u8_binary_avx512,
    name: "u8_binary_avx512",
};

/// The constants of one operation in registers.
struct Consts {
    op: U8BinaryOp,
    a_zp: __m512i,
    b_zp: __m512i,
    a: Rq512,
    b: Rq512,
    out: Rq512,
}

/// An input rescale as a requantizer: multiplier and shift only (the zero point and bounds
/// are unused by [`requant_q512`]).
fn input_rq(mult: i32, shift: u32) -> Requant8 {
    Requant8 {
        multiplier: mult,
        shift,
        zero_point: 0,
        lo: 0,
        hi: 0,
    }
}

/// 16 elements, `x` and `y` zero-extended to int32 lanes: the int32 value
/// [`Requant8::apply`] takes.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
fn acc16(x: __m512i, y: __m512i, c: &Consts) -> __m512i {
    let dx = _mm512_sub_epi32(x, c.a_zp);
    let dy = _mm512_sub_epi32(y, c.b_zp);
    match c.op {
        // |dx|, |dy| ≤ 255, so the shifted values and the product are exact in int32.
        U8BinaryOp::AddSub => _mm512_add_epi32(
            requant_q512(_mm512_slli_epi32::<20>(dx), &c.a),
            requant_q512(_mm512_slli_epi32::<20>(dy), &c.b),
        ),
        U8BinaryOp::Mul => _mm512_mullo_epi32(dx, dy),
    }
}

/// `n ≤ 32` elements at `a`, `b` to `out`.
///
/// # Safety
/// As [`u8_binary_avx512`] for `n` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
unsafe fn step(a: *const u8, b: *const u8, out: *mut u8, n: usize, c: &Consts) {
    let m = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
    // SAFETY: masked loads read only the first `n` bytes, which are readable.
    let (x, y) = unsafe {
        (
            _mm256_maskz_loadu_epi8(m, a.cast()),
            _mm256_maskz_loadu_epi8(m, b.cast()),
        )
    };
    let lo = acc16(
        _mm512_cvtepu8_epi32(_mm256_castsi256_si128(x)),
        _mm512_cvtepu8_epi32(_mm256_castsi256_si128(y)),
        c,
    );
    let hi = acc16(
        _mm512_cvtepu8_epi32(_mm256_extracti128_si256::<1>(x)),
        _mm512_cvtepu8_epi32(_mm256_extracti128_si256::<1>(y)),
        c,
    );
    let q = narrow2_512(requant_q512(lo, &c.out), requant_q512(hi, &c.out), &c.out);
    // SAFETY: the first `n` bytes at `out` are writable.
    unsafe { store32(out, n, q) }
}

/// [`crate::ukernels::quant8::U8BinaryFn`] for AVX-512.
///
/// # Safety
/// The processor supports AVX-512 F/BW/DQ/VL; `a`, `b` are readable and `out` writable for
/// `n` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn u8_binary_avx512(a: *const u8, b: *const u8, out: *mut u8, n: usize, p: &U8Binary) {
    let c = Consts {
        op: p.op,
        a_zp: _mm512_set1_epi32(p.a_zp),
        b_zp: _mm512_set1_epi32(p.b_zp),
        a: rq512(&input_rq(p.a_mult, p.a_shift)),
        b: rq512(&input_rq(p.b_mult, p.b_shift)),
        out: rq512(&p.out),
    };
    let mut i = 0;
    while i < n {
        let len = (n - i).min(32);
        // SAFETY: elements i..i + len lie inside the `n` the caller vouches for.
        unsafe { step(a.add(i), b.add(i), out.add(i), len, &c) };
        i += len;
    }
}
