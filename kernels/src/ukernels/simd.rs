//! A float32 vector abstraction for the micro-kernels that are the same algorithm on every
//! instruction set (depthwise convolution, pooling, element-wise maths): the algorithm is
//! written once over [`F32Simd`] in [`super::f32_small`], and each level implements the trait
//! with its own intrinsics (under `x86_64/` and `aarch64/`) or portable Rust ([`super::generic`])
//! and instantiates the algorithm inside its `#[target_feature]` entry points.
//!
//! Every method is `#[inline(always)]` in the implementations, so once an entry point of a
//! level inlines the algorithm, the intrinsics inline into it and compile with that level's
//! features. The exponential and tanh defined here are a few ULP accurate over the whole
//! float32 range; the portable implementation overrides them with the standard library's, so
//! the generic table reproduces the reference kernels exactly.

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

/// `x = n·ln2 + r` with integral `n` and |r| ≤ ln2/2, and `p = expm1(r)`. ln2 is split in a
/// part with 15 significant bits (so `n·LN2_HI` is exact for |n| < 512) and the rest.
#[inline(always)]
fn exp_reduce<V: F32Simd>(x: V) -> (V, V) {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 0.693145751953125 exactly (0x3F317200), and ln2 minus that, rounded to float32.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
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
