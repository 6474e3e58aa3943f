//! AVX2 QUANTIZE and DEQUANTIZE ([`crate::ukernels::quant8::U8Convert`]): 8 elements per
//! vector, a tail through a zero-padded copy on the stack, in the reference's arithmetic lane
//! by lane (see the slot's contract).

use std::arch::x86_64::*;

use crate::ukernels::quant8::U8Convert;

pub(super) const U8_CONVERT: U8Convert = U8Convert {
    dequantize: u8_dequantize_avx2,
    quantize: u8_quantize_avx2,
    name: "u8_convert_avx2",
};

/// Eight bytes (the low half of `bytes`) to float32: `scale · ((b ^ flip) − zero_point)`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn dequantize8(bytes: __m128i, flip: __m128i, zp: __m256i, scale: __m256) -> __m256 {
    let q = _mm256_cvtepu8_epi32(_mm_xor_si128(bytes, flip));
    // The wrapping int32 difference, converted with round-to-nearest-even like `as f32`.
    _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, zp)), scale)
}

/// DEQUANTIZE (see [`crate::ukernels::quant8::U8DequantizeFn`]).
///
/// # Safety
/// The contract of [`crate::ukernels::quant8::U8DequantizeFn`], with AVX2.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn u8_dequantize_avx2(
    src: *const u8,
    n: usize,
    flip: u8,
    zero_point: i32,
    scale: f32,
    out: *mut f32,
) {
    let flip = _mm_set1_epi8(flip as i8);
    let zp = _mm256_set1_epi32(zero_point);
    let scale = _mm256_set1_ps(scale);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: bytes i..i+16 ≤ n of `src`, values of `out` (caller's contract).
        unsafe {
            let b = _mm_loadu_si128(src.add(i).cast());
            _mm256_storeu_ps(out.add(i), dequantize8(b, flip, zp, scale));
            let hi = _mm_unpackhi_epi64(b, b);
            _mm256_storeu_ps(out.add(i + 8), dequantize8(hi, flip, zp, scale));
        }
        i += 16;
    }
    while i < n {
        let len = (n - i).min(8);
        let mut bytes = [0u8; 16];
        let mut vals = [0f32; 8];
        // SAFETY: bytes i..i+len ≤ n of `src` into the local copy; the vector reads and
        // writes the local arrays only; `len` values of `out` from i are written.
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(i), bytes.as_mut_ptr(), len);
            let b = _mm_loadu_si128(bytes.as_ptr().cast());
            _mm256_storeu_ps(vals.as_mut_ptr(), dequantize8(b, flip, zp, scale));
            std::ptr::copy_nonoverlapping(vals.as_ptr(), out.add(i), len);
        }
        i += len;
    }
}

/// Eight float32 values to bytes, in the low 8 bytes of the result (see
/// [`crate::ukernels::quant8::U8QuantizeFn`]).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn quantize8(x: __m256, scale: __m256, zp: __m256) -> __m128i {
    let q = _mm256_div_ps(x, scale);
    // Half away from zero: `q − trunc(q)` is exact, and a magnitude of at least one half
    // moves the truncation one unit away from zero (infinities give a NaN difference, which
    // fails the comparison and keeps them; NaN stays NaN).
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(q);
    let sign = _mm256_set1_ps(-0.0);
    let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(q, t));
    let away = _mm256_cmp_ps::<_CMP_GE_OQ>(frac, _mm256_set1_ps(0.5));
    let unit = _mm256_or_ps(_mm256_and_ps(q, sign), _mm256_set1_ps(1.0));
    let r = _mm256_add_ps(t, _mm256_and_ps(away, unit));
    // `vminps` returns its second operand when either is NaN: the reference's
    // `min(255, NaN)` is 255; `vmaxps` then keeps the first unless the bound is larger.
    let y = _mm256_max_ps(
        _mm256_min_ps(_mm256_add_ps(zp, r), _mm256_set1_ps(255.0)),
        _mm256_setzero_ps(),
    );
    // Integers in 0..=255: the saturating packs are exact.
    let v = _mm256_cvttps_epi32(y);
    let w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    _mm_packus_epi16(w, w)
}

/// QUANTIZE (see [`crate::ukernels::quant8::U8QuantizeFn`]).
///
/// # Safety
/// The contract of [`crate::ukernels::quant8::U8QuantizeFn`], with AVX2.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn u8_quantize_avx2(
    src: *const f32,
    n: usize,
    scale: f32,
    zero_point: f32,
    out: *mut u8,
) {
    let scale = _mm256_set1_ps(scale);
    let zp = _mm256_set1_ps(zero_point);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: values i..i+8 ≤ n of `src`, bytes of `out` (caller's contract).
        unsafe {
            let x = _mm256_loadu_ps(src.add(i));
            _mm_storel_epi64(out.add(i).cast(), quantize8(x, scale, zp));
        }
        i += 8;
    }
    if i < n {
        let len = n - i;
        let mut vals = [0f32; 8];
        let mut bytes = [0u8; 16];
        // SAFETY: values i..n of `src` into the local copy; the vector reads and writes the
        // local arrays only; `len` bytes of `out` from i are written.
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(i), vals.as_mut_ptr(), len);
            let x = _mm256_loadu_ps(vals.as_ptr());
            _mm_storeu_si128(bytes.as_mut_ptr().cast(), quantize8(x, scale, zp));
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.add(i), len);
        }
    }
}
