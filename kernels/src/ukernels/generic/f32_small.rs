//! Portable float32 depthwise, pooling and vector kernels: the shared algorithms of
//! [`crate::ukernels::f32_small`] over four plain `f32` lanes. Multiply-adds are unfused and
//! exp/tanh are the standard library's, so these reproduce the reference kernels exactly.

use crate::ukernels::f32_small::f32_small_entries;
use crate::ukernels::simd::F32Simd;

/// Four lanes in plain Rust; the compiler may map them to whatever vector unit it targets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lanes4([f32; 4]);

impl Lanes4 {
    #[inline(always)]
    fn map(self, f: impl Fn(f32) -> f32) -> Self {
        Lanes4(self.0.map(f))
    }

    #[inline(always)]
    fn zip(self, b: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        Lanes4(std::array::from_fn(|i| f(self.0[i], b.0[i])))
    }
}

// SAFETY: plain Rust, valid on every processor.
unsafe impl F32Simd for Lanes4 {
    const LANES: usize = 4;

    #[inline(always)]
    fn splat(x: f32) -> Self {
        Lanes4([x; 4])
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller makes p..p+4 readable; no alignment is assumed.
        Lanes4(unsafe { p.cast::<[f32; 4]>().read_unaligned() })
    }

    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize) -> Self {
        let mut v = [0.0; 4];
        for (i, v) in v.iter_mut().enumerate().take(n) {
            // SAFETY: i < n and the caller makes p..p+n readable.
            *v = unsafe { *p.add(i) };
        }
        Lanes4(v)
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller makes p..p+4 writable; no alignment is assumed.
        unsafe { p.cast::<[f32; 4]>().write_unaligned(self.0) }
    }

    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        for (i, &v) in self.0.iter().enumerate().take(n) {
            // SAFETY: i < n and the caller makes p..p+n writable.
            unsafe { *p.add(i) = v };
        }
    }

    #[inline(always)]
    fn add(self, b: Self) -> Self {
        self.zip(b, |x, y| x + y)
    }

    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        self.zip(b, |x, y| x - y)
    }

    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        self.zip(b, |x, y| x * y)
    }

    #[inline(always)]
    fn div(self, b: Self) -> Self {
        self.zip(b, |x, y| x / y)
    }

    /// Unfused, as the reference sums; a fused multiply-add would be a library call on
    /// processors without FMA.
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        Lanes4(std::array::from_fn(|i| self.0[i] * b.0[i] + c.0[i]))
    }

    #[inline(always)]
    fn sel_max(self, b: Self) -> Self {
        self.zip(b, |x, y| if x < y { y } else { x })
    }

    #[inline(always)]
    fn sel_min(self, b: Self) -> Self {
        self.zip(b, |x, y| if y < x { y } else { x })
    }

    #[inline(always)]
    fn round(self) -> Self {
        self.map(f32::round_ties_even)
    }

    #[inline(always)]
    fn pow2(self) -> Self {
        self.map(|n| f32::from_bits((((n as i32) + 127) as u32) << 23))
    }

    #[inline(always)]
    fn abs(self) -> Self {
        self.map(f32::abs)
    }

    #[inline(always)]
    fn with_sign_of(self, sign: Self) -> Self {
        self.zip(sign, |x, s| {
            f32::from_bits(x.to_bits() | (s.to_bits() & 0x8000_0000))
        })
    }

    #[inline(always)]
    fn lt_select(self, b: Self, then: Self, other: Self) -> Self {
        let mut out = other;
        for i in 0..4 {
            if self.0[i] < b.0[i] {
                out.0[i] = then.0[i];
            }
        }
        out
    }

    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        let e = self.map(|x| ((x.to_bits() >> 23) as i32 - 127) as f32);
        let m = self.map(|x| f32::from_bits((x.to_bits() & 0x007f_ffff) | 0x3f80_0000));
        (e, m)
    }

    #[inline(always)]
    fn hsum(self) -> f32 {
        (self.0[0] + self.0[2]) + (self.0[1] + self.0[3])
    }

    #[inline(always)]
    fn hmax(self) -> f32 {
        let mut m = self.0[0];
        for &v in &self.0[1..] {
            if m < v {
                m = v;
            }
        }
        m
    }

    #[inline(always)]
    fn exp(self) -> Self {
        self.map(f32::exp)
    }

    #[inline(always)]
    fn tanh(self) -> Self {
        self.map(f32::tanh)
    }

    #[inline(always)]
    fn ln(self) -> Self {
        self.map(f32::ln)
    }
}

f32_small_entries! {
    vector = Lanes4, tile = 2, tile_s2 = 2,
    dw = f32_dwconv_generic_4c, dw3x3 = f32_dwconv3x3_generic_4cx2,
    avgpool = f32_avgpool_generic_4c, maxpool = f32_maxpool_generic_4c,
    add = f32_add_generic_4, mul = f32_mul_generic_4, clamp = f32_clamp_generic_4,
    logistic = f32_logistic_generic_4, tanh = f32_tanh_generic_4,
    exp = f32_exp_generic_4, log = f32_log_generic_4, rmax = f32_rmax_generic_4,
    expsum = f32_expsum_generic_4, div = f32_div_generic_4,
}
