//! AVX-512 QUANTIZE and DEQUANTIZE ([`crate::ukernels::quant8::U8Convert`]): 16 elements per
//! vector, the tails through masked loads and stores, in the reference's arithmetic lane by
//! lane (see the slot's contract).

use std::arch::x86_64::*;

use crate::ukernels::quant8::U8Convert;

pub(super) const U8_CONVERT: U8Convert = U8Convert {
    dequantize: u8_dequantize_avx512,
    quantize: u8_quantize_avx512,
    name: "u8_convert_avx512",
};

/// The lanes `0..n` (`n ≤ 16`).
#[inline(always)]
fn lanes(n: usize) -> __mmask16 {
    debug_assert!(n <= 16);
    ((1u32 << n) - 1) as __mmask16
}

/// Sixteen bytes to float32: `scale · ((b ^ flip) − zero_point)`.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
fn dequantize16(bytes: __m128i, flip: __m128i, zp: __m512i, scale: __m512) -> __m512 {
    let q = _mm512_cvtepu8_epi32(_mm_xor_si128(bytes, flip));
    // The wrapping int32 difference, converted with round-to-nearest-even like `as f32`.
    _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zp)), scale)
}

/// DEQUANTIZE (see [`crate::ukernels::quant8::U8DequantizeFn`]).
///
/// # Safety
/// The contract of [`crate::ukernels::quant8::U8DequantizeFn`], with AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn u8_dequantize_avx512(
    src: *const u8,
    n: usize,
    flip: u8,
    zero_point: i32,
    scale: f32,
    out: *mut f32,
) {
    let flip = _mm_set1_epi8(flip as i8);
    let zp = _mm512_set1_epi32(zero_point);
    let scale = _mm512_set1_ps(scale);
    let mut i = 0;
    while i + 64 <= n {
        for j in (0..64).step_by(16) {
            // SAFETY: bytes i+j..i+j+16 < n of `src`, values of `out` (caller's contract).
            unsafe {
                let b = _mm_loadu_si128(src.add(i + j).cast());
                _mm512_storeu_ps(out.add(i + j), dequantize16(b, flip, zp, scale));
            }
        }
        i += 64;
    }
    while i < n {
        let m = lanes((n - i).min(16));
        // SAFETY: the masked lanes are elements i.. < n; masked-off lanes are neither read
        // nor written.
        unsafe {
            let b = _mm_maskz_loadu_epi8(m, src.add(i).cast());
            _mm512_mask_storeu_ps(out.add(i), m, dequantize16(b, flip, zp, scale));
        }
        i += 16;
    }
}

/// Sixteen float32 values to bytes (see [`crate::ukernels::quant8::U8QuantizeFn`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
#[inline]
fn quantize16(x: __m512, scale: __m512, zp: __m512) -> __m128i {
    let q = _mm512_div_ps(x, scale);
    // Half away from zero: `q − trunc(q)` is exact, and a magnitude of at least one half
    // moves the truncation one unit away from zero (infinities give a NaN difference, which
    // fails the comparison and keeps them; NaN stays NaN).
    let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(q);
    let away =
        _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(_mm512_sub_ps(q, t)), _mm512_set1_ps(0.5));
    let unit = _mm512_or_ps(_mm512_and_ps(q, _mm512_set1_ps(-0.0)), _mm512_set1_ps(1.0));
    let r = _mm512_mask_add_ps(t, away, t, unit);
    // `vminps` returns its second operand when either is NaN: the reference's
    // `min(255, NaN)` is 255; `vmaxps` then keeps the first unless the bound is larger.
    let y = _mm512_max_ps(
        _mm512_min_ps(_mm512_add_ps(zp, r), _mm512_set1_ps(255.0)),
        _mm512_setzero_ps(),
    );
    _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(y))
}

/// QUANTIZE (see [`crate::ukernels::quant8::U8QuantizeFn`]).
///
/// # Safety
/// The contract of [`crate::ukernels::quant8::U8QuantizeFn`], with AVX-512 F/BW/DQ/VL.
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub unsafe fn u8_quantize_avx512(
    src: *const f32,
    n: usize,
    scale: f32,
    zero_point: f32,
    out: *mut u8,
) {
    let scale = _mm512_set1_ps(scale);
    let zp = _mm512_set1_ps(zero_point);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: values i..i+16 ≤ n of `src`, bytes of `out` (caller's contract).
        unsafe {
            let x = _mm512_loadu_ps(src.add(i));
            _mm_storeu_si128(out.add(i).cast(), quantize16(x, scale, zp));
        }
        i += 16;
    }
    if i < n {
        let m = lanes(n - i);
        // SAFETY: the masked lanes are elements i.. < n; masked-off lanes are neither read
        // nor written.
        unsafe {
            let x = _mm512_maskz_loadu_ps(m, src.add(i));
            _mm_mask_storeu_epi8(out.add(i).cast(), m, quantize16(x, scale, zp));
        }
    }
}
