//! A float32 vector abstraction for the micro-kernels that are the same algorithm on every
//! instruction set (depthwise convolution, pooling, element-wise maths): the algorithm is
//! written once over [`F32Simd`] in [`super::f32_small`], and each level implements the trait
//! with its own intrinsics (under `x86_64/` and `aarch64/`) or portable Rust ([`super::generic`])
//! and instantiates the algorithm inside its `#[target_feature]` entry points.
//!
//! Every method is `#[inline(always)]` in the implementations, so once an entry point of a
//! level inlines the algorithm, the intrinsics inline into it and compile with that level's
//! features. The exponential, logarithm and tanh defined here are a few ULP accurate over the
//! whole float32 range; the portable implementation overrides them with the standard library's,
//! so the generic table reproduces the reference kernels exactly.

/// One vector of `LANES` float32 values.
///
/// # Safety
///
/// Implementations may use instructions of one instruction-set level in every method, so the
/// methods may only run on a processor that supports that level. The algorithms in
/// [`super::f32_small`] are `unsafe fn`s that state this requirement, and only entry points
/// compiled for the level (held by the dispatch table only when the level is supported) call
/// them.
pub(crate) unsafe trait F32Simd: Copy {
    /// Lanes per vector; also the channel block width of the packed depthwise weights.
    const LANES: usize;

    fn splat(x: f32) -> Self;

    /// `LANES` values from `p`.
    ///
    /// # Safety
    /// `p..p + LANES` must be readable.
    unsafe fn load(p: *const f32) -> Self;

    /// `n < LANES` values from `p`, the other lanes zero. Reads nothing past `p + n`.
    ///
    /// # Safety
    /// `p..p + n` must be readable.
    unsafe fn load_part(p: *const f32, n: usize) -> Self;

    /// # Safety
    /// `p..p + LANES` must be writable.
    unsafe fn store(self, p: *mut f32);

    /// The first `n < LANES` lanes to `p`; writes nothing past `p + n`.
    ///
    /// # Safety
    /// `p..p + n` must be writable.
    unsafe fn store_part(self, p: *mut f32, n: usize);

    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    /// Correctly rounded division.
    fn div(self, b: Self) -> Self;
    /// `self · b + c`, fused (one rounding) where the level has FMA.
    fn mul_add(self, b: Self, c: Self) -> Self;

    /// Per lane `if self < b { b } else { self }`: a NaN in `b` is ignored, one in `self` kept.
    fn sel_max(self, b: Self) -> Self;
    /// Per lane `if b < self { b } else { self }`: a NaN in `b` is ignored, one in `self` kept.
    fn sel_min(self, b: Self) -> Self;

    /// Rounds to the nearest integer, ties to even.
    fn round(self) -> Self;
    /// `2^n` for lanes holding integers `n` in −126..=127 (anything for other lanes).
    fn pow2(self) -> Self;
    /// `|self|` (clears the sign bit).
    fn abs(self) -> Self;
    /// `self` (non-negative, sign bit clear) with the sign bit of `sign`.
    fn with_sign_of(self, sign: Self) -> Self;

    /// Per lane `if self < b { then } else { other }` (`other` where either side is NaN).
    fn lt_select(self, b: Self, then: Self, other: Self) -> Self;
    /// For lanes holding a positive normal float `x`: `(e, m)` with `x = m · 2^e`, `e` an
    /// integer and `m` in [1, 2) (anything for other lanes).
    fn exponent_mantissa(self) -> (Self, Self);

    /// Sum of the lanes (any order).
    fn hsum(self) -> f32;
    /// The lanes folded with `sel_max`, lane 0 first.
    fn hmax(self) -> f32;

    /// `exp(self)`, a few ULP from the exact value, +∞ above ~88.72, 0 (through subnormals)
    /// below ~−103.97, NaN for NaN.
    #[inline(always)]
    fn exp(self) -> Self {
        // Clamping keeps n in −159..=128, so both halves of the 2^n scale stay normal; the
        // clamps keep NaN (`sel_*` keep `self`) and saturate ±∞.
        let x = self.sel_max(Self::splat(-110.0)).sel_min(Self::splat(89.0));
        let (n, p) = exp_reduce(x);
        // 2^n applied in two steps: (1 + p) · 2^n1 is exact, so the result is rounded once,
        // also when it is subnormal.
        let n1 = n.mul(Self::splat(0.5)).round();
        let n2 = n.sub(n1);
        p.add(Self::splat(1.0)).mul(n1.pow2()).mul(n2.pow2())
    }

    /// `ln(self)`: [`ln`] here; the portable implementation uses the standard library's.
    #[inline(always)]
    fn ln(self) -> Self {
        ln(self)
    }

    /// `tanh(self)`, a few ULP from the exact value, odd, ±1 beyond |x| ≈ 9, NaN for NaN.
    #[inline(always)]
    fn tanh(self) -> Self {
        // tanh|x| = −e / (2 + e) with e = expm1(−2|x|) ∈ (−1, 0]: no cancellation for small
        // |x| (e ≈ −2|x|), and beyond |x| = 10 the float32 result is exactly 1.
        let a = self.abs().sel_min(Self::splat(10.0));
        let y = a.mul(Self::splat(-2.0));
        let (n, p) = exp_reduce(y);
        // expm1(y) = 2^n · expm1(r) + (2^n − 1); n ≥ −29 so 2^n is normal.
        let s = n.pow2();
        let e = s.mul_add(p, s.sub(Self::splat(1.0)));
        let t = e.div(e.add(Self::splat(2.0)));
        t.abs().with_sign_of(self)
    }
}

/// Natural logarithm, a few ULP from the exact value over the whole float32 range: −∞ for ±0,
/// NaN below 0 and for NaN, +∞ for +∞, subnormals exact in their exponent.
#[inline(always)]
pub(crate) fn ln<V: F32Simd>(x: V) -> V {
    // Subnormals are scaled by 2^25 into the normal range (exact) and the exponent corrected.
    let tiny = V::splat(f32::MIN_POSITIVE);
    let y = x.lt_select(tiny, x.mul(V::splat(33_554_432.0)), x);
    let bias = x.lt_select(tiny, V::splat(-25.0), V::splat(0.0));
    let (e, m) = y.exponent_mantissa();
    // m in [1, 2) folded to [√½, √2), so f = m − 1 is at most 0.415 in size and log(m) never
    // cancels against e·ln2 near x = 1.
    let root2 = V::splat(std::f32::consts::SQRT_2);
    let e = root2.lt_select(m, e.add(V::splat(1.0)), e).add(bias);
    let m = root2.lt_select(m, m.mul(V::splat(0.5)), m);
    // log(1 + f) = 2·atanh(s) with s = f / (2 + f), |s| ≤ 0.1716: 2s + 2s³/3 + … + 2s¹¹/11,
    // the first omitted term below 2e-11 of the result.
    let f = m.sub(V::splat(1.0));
    let s = f.div(f.add(V::splat(2.0)));
    let z = s.mul(s);
    const C: [f32; 5] = [2.0 / 11.0, 2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0];
    let mut q = V::splat(C[0]);
    for &c in &C[1..] {
        q = q.mul_add(z, V::splat(c));
    }
    let log1p = s.mul_add(z.mul(q), s.add(s));
    // e·ln2 with ln2 split as in `exp_reduce`, so e·LN2_HI is exact for |e| < 512.
    let r = e.mul_add(V::splat(LN2_HI), e.mul_add(V::splat(LN2_LO), log1p));
    // NaN and ±∞ make x·0 NaN; then the edges in the order that leaves each its value.
    let r = r.add(x.mul(V::splat(0.0)));
    let r = x.lt_select(V::splat(f32::from_bits(1)), V::splat(f32::NEG_INFINITY), r);
    let r = x.lt_select(V::splat(0.0), V::splat(f32::NAN), r);
    V::splat(f32::MAX).lt_select(x, V::splat(f32::INFINITY), r)
}

/// 0.693145751953125 exactly (0x3F317200: 15 significant bits), and ln2 minus that, rounded to
/// float32.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;

/// `x = n·ln2 + r` with integral `n` and |r| ≤ ln2/2, and `p = expm1(r)`. ln2 is split in a
/// part with 15 significant bits (so `n·LN2_HI` is exact for |n| < 512) and the rest.
#[inline(always)]
fn exp_reduce<V: F32Simd>(x: V) -> (V, V) {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    let n = x.mul(V::splat(LOG2E)).round();
    let r = n.mul_add(V::splat(-LN2_HI), x);
    let r = n.mul_add(V::splat(-LN2_LO), r);
    // expm1(r) = r + r²·(1/2! + r/3! + … + r⁶/8!): the first omitted term, r⁹/9!, is below
    // 3e-10·|r| relative for |r| ≤ 0.347.
    const C: [f32; 7] = [
        1.0 / 40320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
    ];
    let mut q = V::splat(C[0]);
    for &c in &C[1..] {
        q = q.mul_add(r, V::splat(c));
    }
    let p = r.mul(r).mul_add(q, r);
    (n, p)
}
