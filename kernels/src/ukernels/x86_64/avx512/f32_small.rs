//! AVX-512 float32 depthwise, pooling and vector kernels: the shared algorithms of
//! [`crate::ukernels::f32_small`] over 16-lane zmm vectors. Channel and element tails use
//! masked loads and stores, which never touch the masked-off memory.

use std::arch::x86_64::*;

use crate::ukernels::f32_small::f32_small_entries;
use crate::ukernels::simd::F32Simd;

/// 16 float32 lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zmm(__m512);

#[inline(always)]
fn mask(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as __mmask16
}

// SAFETY: every method uses AVX-512F only; the trait's contract restricts their use to
// processors with the AVX-512 level, for which this file's entry points are compiled.
unsafe impl F32Simd for Zmm {
    const LANES: usize = 16;

    #[inline(always)]
    fn splat(x: f32) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_set1_ps(x) })
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: p..p+16 readable (caller); unaligned load.
        Zmm(unsafe { _mm512_loadu_ps(p) })
    }

    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize) -> Self {
        // SAFETY: p..p+n readable (caller); masked-off lanes are not accessed and do not fault.
        Zmm(unsafe { _mm512_maskz_loadu_ps(mask(n), p) })
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: p..p+16 writable (caller).
        unsafe { _mm512_storeu_ps(p, self.0) }
    }

    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        // SAFETY: p..p+n writable (caller); masked-off lanes are not written.
        unsafe { _mm512_mask_storeu_ps(p, mask(n), self.0) }
    }

    #[inline(always)]
    fn add(self, b: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_add_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_sub_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_mul_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn div(self, b: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_div_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
    }

    #[inline(always)]
    fn sel_max(self, b: Self) -> Self {
        // vmaxps returns its second operand when the comparison is unordered.
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_max_ps(b.0, self.0) })
    }

    #[inline(always)]
    fn sel_min(self, b: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_min_ps(b.0, self.0) })
    }

    #[inline(always)]
    fn round(self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe {
            _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0)
        })
    }

    #[inline(always)]
    fn pow2(self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe {
            let n = _mm512_cvtps_epi32(self.0);
            _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(
                n,
                _mm512_set1_epi32(127),
            )))
        })
    }

    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe { _mm512_abs_ps(self.0) })
    }

    #[inline(always)]
    fn with_sign_of(self, sign: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe {
            let s = _mm512_and_epi32(_mm512_castps_si512(sign.0), _mm512_set1_epi32(i32::MIN));
            _mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(self.0), s))
        })
    }

    #[inline(always)]
    fn lt_select(self, b: Self, then: Self, other: Self) -> Self {
        // SAFETY: AVX-512F is available (trait contract).
        Zmm(unsafe {
            _mm512_mask_blend_ps(
                _mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, b.0),
                other.0,
                then.0,
            )
        })
    }

    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        // SAFETY: AVX-512F is available (trait contract).
        unsafe {
            let bits = _mm512_castps_si512(self.0);
            let e = _mm512_sub_epi32(_mm512_srli_epi32::<23>(bits), _mm512_set1_epi32(127));
            let m = _mm512_or_epi32(
                _mm512_and_epi32(bits, _mm512_set1_epi32(0x007f_ffff)),
                _mm512_set1_epi32(0x3f80_0000),
            );
            (Zmm(_mm512_cvtepi32_ps(e)), Zmm(_mm512_castsi512_ps(m)))
        }
    }

    #[inline(always)]
    fn hsum(self) -> f32 {
        // SAFETY: AVX-512F is available (trait contract).
        unsafe { _mm512_reduce_add_ps(self.0) }
    }

    #[inline(always)]
    fn hmax(self) -> f32 {
        let mut lanes = [0.0f32; 16];
        // SAFETY: `lanes` holds 16 floats.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), self.0) };
        lanes[1..]
            .iter()
            .fold(lanes[0], |m, &v| if m < v { v } else { m })
    }
}

f32_small_entries! {
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
    vector = Zmm, tile = 8, tile_s2 = 3,
    dw = f32_dwconv_avx512_16c, dw3x3 = f32_dwconv3x3_avx512_16cx8,
    avgpool = f32_avgpool_avx512_16c, maxpool = f32_maxpool_avx512_16c,
    add = f32_add_avx512_16, mul = f32_mul_avx512_16, clamp = f32_clamp_avx512_16,
    logistic = f32_logistic_avx512_16, tanh = f32_tanh_avx512_16,
    exp = f32_exp_avx512_16, log = f32_log_avx512_16, rmax = f32_rmax_avx512_16,
    expsum = f32_expsum_avx512_16, div = f32_div_avx512_16,
}
