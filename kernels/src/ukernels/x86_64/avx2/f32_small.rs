//! AVX2 + FMA float32 depthwise, pooling and vector kernels: the shared algorithms of
//! [`crate::ukernels::f32_small`] over 8-lane ymm vectors. Tails use `vmaskmovps`, which
//! neither reads nor writes the masked-off memory.

use std::arch::x86_64::*;

use crate::ukernels::f32_small::f32_small_entries;
use crate::ukernels::simd::F32Simd;

/// 8 float32 lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ymm(__m256);

/// All-ones in lanes `0..n`, the mask operand of `vmaskmovps`.
#[inline(always)]
fn mask(n: usize) -> __m256i {
    // SAFETY: AVX2 is available (trait contract of the only callers).
    unsafe {
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(n as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }
}

// SAFETY: every method uses AVX, AVX2 or FMA only; the trait's contract restricts their use
// to processors with the AVX2 level, for which this file's entry points are compiled.
unsafe impl F32Simd for Ymm {
    const LANES: usize = 8;

    #[inline(always)]
    fn splat(x: f32) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_set1_ps(x) })
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: p..p+8 readable (caller); unaligned load.
        Ymm(unsafe { _mm256_loadu_ps(p) })
    }

    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize) -> Self {
        // SAFETY: p..p+n readable (caller); vmaskmovps does not access masked-off lanes.
        Ymm(unsafe { _mm256_maskload_ps(p, mask(n)) })
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: p..p+8 writable (caller).
        unsafe { _mm256_storeu_ps(p, self.0) }
    }

    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        // SAFETY: p..p+n writable (caller); masked-off lanes are not written.
        unsafe { _mm256_maskstore_ps(p, mask(n), self.0) }
    }

    #[inline(always)]
    fn add(self, b: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_add_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_sub_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_mul_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn div(self, b: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_div_ps(self.0, b.0) })
    }

    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: FMA is available (trait contract).
        Ymm(unsafe { _mm256_fmadd_ps(self.0, b.0, c.0) })
    }

    #[inline(always)]
    fn sel_max(self, b: Self) -> Self {
        // vmaxps returns its second operand when the comparison is unordered.
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_max_ps(b.0, self.0) })
    }

    #[inline(always)]
    fn sel_min(self, b: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_min_ps(b.0, self.0) })
    }

    #[inline(always)]
    fn round(self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0) })
    }

    #[inline(always)]
    fn pow2(self) -> Self {
        // SAFETY: AVX2 is available (trait contract).
        Ymm(unsafe {
            let n = _mm256_cvtps_epi32(self.0);
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
                n,
                _mm256_set1_epi32(127),
            )))
        })
    }

    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0) })
    }

    #[inline(always)]
    fn with_sign_of(self, sign: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_or_ps(self.0, _mm256_and_ps(sign.0, _mm256_set1_ps(-0.0))) })
    }

    #[inline(always)]
    fn lt_select(self, b: Self, then: Self, other: Self) -> Self {
        // SAFETY: AVX is available (trait contract).
        Ymm(unsafe { _mm256_blendv_ps(other.0, then.0, _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, b.0)) })
    }

    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        // SAFETY: AVX2 is available (trait contract).
        unsafe {
            let bits = _mm256_castps_si256(self.0);
            let e = _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(127));
            let m = _mm256_or_si256(
                _mm256_and_si256(bits, _mm256_set1_epi32(0x007f_ffff)),
                _mm256_set1_epi32(0x3f80_0000),
            );
            (Ymm(_mm256_cvtepi32_ps(e)), Ymm(_mm256_castsi256_ps(m)))
        }
    }

    #[inline(always)]
    fn hsum(self) -> f32 {
        // SAFETY: AVX is available (trait contract).
        unsafe {
            let q = _mm_add_ps(
                _mm256_castps256_ps128(self.0),
                _mm256_extractf128_ps::<1>(self.0),
            );
            let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
            _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps::<1>(d, d)))
        }
    }

    #[inline(always)]
    fn hmax(self) -> f32 {
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), self.0) };
        lanes[1..]
            .iter()
            .fold(lanes[0], |m, &v| if m < v { v } else { m })
    }
}

f32_small_entries! {
    #[target_feature(enable = "avx2,fma")]
    vector = Ymm, tile = 4, tile_s2 = 2,
    dw = f32_dwconv_avx2_8c, dw3x3 = f32_dwconv3x3_avx2_8cx4,
    avgpool = f32_avgpool_avx2_8c, maxpool = f32_maxpool_avx2_8c,
    add = f32_add_avx2_8, mul = f32_mul_avx2_8, clamp = f32_clamp_avx2_8,
    logistic = f32_logistic_avx2_8, tanh = f32_tanh_avx2_8,
    exp = f32_exp_avx2_8, log = f32_log_avx2_8, rmax = f32_rmax_avx2_8,
    expsum = f32_expsum_avx2_8, div = f32_div_avx2_8,
}
