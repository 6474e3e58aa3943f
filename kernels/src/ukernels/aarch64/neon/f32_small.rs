//! NEON float32 depthwise, pooling and vector kernels: the shared algorithms of
//! [`crate::ukernels::f32_small`] over 4-lane q vectors. NEON has no masked memory access, so
//! tails go through a small stack buffer.

use std::arch::aarch64::*;

use crate::ukernels::f32_small::f32_small_entries;
use crate::ukernels::simd::F32Simd;

/// 4 float32 lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Q(float32x4_t);

// SAFETY: every method uses Advanced SIMD only; the trait's contract restricts their use to
// processors with the NEON level, for which this file's entry points are compiled.
unsafe impl F32Simd for Q {
    const LANES: usize = 4;

    #[inline(always)]
    fn splat(x: f32) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vdupq_n_f32(x) })
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: p..p+4 readable (caller); ld1 has no alignment requirement.
        Q(unsafe { vld1q_f32(p) })
    }

    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize) -> Self {
        let mut buf = [0.0f32; 4];
        // SAFETY: p..p+n readable (caller), n < 4 fits `buf`.
        unsafe {
            std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
            Q(vld1q_f32(buf.as_ptr()))
        }
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: p..p+4 writable (caller).
        unsafe { vst1q_f32(p, self.0) }
    }

    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        let mut buf = [0.0f32; 4];
        // SAFETY: `buf` holds 4 floats; p..p+n writable (caller), n < 4.
        unsafe {
            vst1q_f32(buf.as_mut_ptr(), self.0);
            std::ptr::copy_nonoverlapping(buf.as_ptr(), p, n);
        }
    }

    #[inline(always)]
    fn add(self, b: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vaddq_f32(self.0, b.0) })
    }

    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vsubq_f32(self.0, b.0) })
    }

    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vmulq_f32(self.0, b.0) })
    }

    #[inline(always)]
    fn div(self, b: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vdivq_f32(self.0, b.0) })
    }

    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vfmaq_f32(c.0, self.0, b.0) })
    }

    #[inline(always)]
    fn sel_max(self, b: Self) -> Self {
        // fmax would propagate a NaN from either side: compare and select instead.
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vbslq_f32(vcltq_f32(self.0, b.0), b.0, self.0) })
    }

    #[inline(always)]
    fn sel_min(self, b: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vbslq_f32(vcltq_f32(b.0, self.0), b.0, self.0) })
    }

    #[inline(always)]
    fn round(self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vrndnq_f32(self.0) })
    }

    #[inline(always)]
    fn pow2(self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe {
            let n = vcvtq_s32_f32(self.0);
            vreinterpretq_f32_s32(vshlq_n_s32::<23>(vaddq_s32(n, vdupq_n_s32(127))))
        })
    }

    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vabsq_f32(self.0) })
    }

    #[inline(always)]
    fn with_sign_of(self, sign: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe {
            let s = vandq_u32(vreinterpretq_u32_f32(sign.0), vdupq_n_u32(0x8000_0000));
            vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(self.0), s))
        })
    }

    #[inline(always)]
    fn lt_select(self, b: Self, then: Self, other: Self) -> Self {
        // SAFETY: NEON is available (trait contract).
        Q(unsafe { vbslq_f32(vcltq_f32(self.0, b.0), then.0, other.0) })
    }

    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        // SAFETY: NEON is available (trait contract).
        unsafe {
            let bits = vreinterpretq_u32_f32(self.0);
            let e = vsubq_s32(
                vreinterpretq_s32_u32(vshrq_n_u32::<23>(bits)),
                vdupq_n_s32(127),
            );
            let m = vorrq_u32(
                vandq_u32(bits, vdupq_n_u32(0x007f_ffff)),
                vdupq_n_u32(0x3f80_0000),
            );
            (Q(vcvtq_f32_s32(e)), Q(vreinterpretq_f32_u32(m)))
        }
    }

    #[inline(always)]
    fn hsum(self) -> f32 {
        // SAFETY: NEON is available (trait contract).
        unsafe { vaddvq_f32(self.0) }
    }

    #[inline(always)]
    fn hmax(self) -> f32 {
        let mut lanes = [0.0f32; 4];
        // SAFETY: `lanes` holds 4 floats.
        unsafe { vst1q_f32(lanes.as_mut_ptr(), self.0) };
        lanes[1..]
            .iter()
            .fold(lanes[0], |m, &v| if m < v { v } else { m })
    }
}

f32_small_entries! {
    #[target_feature(enable = "neon")]
    vector = Q, tile = 8, tile_s2 = 4,
    dw = f32_dwconv_neon_4c, dw3x3 = f32_dwconv3x3_neon_4cx8,
    avgpool = f32_avgpool_neon_4c, maxpool = f32_maxpool_neon_4c,
    add = f32_add_neon_4, mul = f32_mul_neon_4, clamp = f32_clamp_neon_4,
    logistic = f32_logistic_neon_4, tanh = f32_tanh_neon_4,
    exp = f32_exp_neon_4, log = f32_log_neon_4, rmax = f32_rmax_neon_4,
    expsum = f32_expsum_neon_4, div = f32_div_neon_4,
}
