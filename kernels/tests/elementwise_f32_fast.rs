//! The fast float32 element-wise operations and SOFTMAX (`ops::elementwise_f32`) against the
//! reference (`elementwise`, `normalization`) on every instruction-set level this processor
//! runs: lengths around the vector widths, every activation, NaN/±∞/±0/subnormal inputs,
//! exp/tanh edges (overflow, underflow to subnormals and 0), and a 2-thread pool.

mod support;

use nnhal_kernels::elementwise::f32 as fast;
use nnhal_kernels::elementwise::reference as elementwise;
use nnhal_kernels::normalization::reference as normalization;
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::Activation;
use support::{tables, Rng};

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu1,
    Activation::Relu6,
];

const LENS: [usize; 12] = [0, 1, 3, 4, 7, 8, 15, 16, 17, 33, 100, 1001];

impl Rng {
    fn unit(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    /// Mostly ordinary values of mixed magnitude, sometimes a special one.
    fn value(&mut self, scale: f32) -> f32 {
        const SPECIAL: [f32; 12] = [
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -1e-40,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            6.0,
            -1.0,
        ];
        match self.next() % 16 {
            0 => SPECIAL[(self.next() % 12) as usize],
            1 => self.unit() * 10f32.powi((self.next() % 60) as i32 - 30),
            _ => self.unit() * scale,
        }
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.value(scale)).collect()
    }
}

fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Distance in representable floats (same-sign ordering; ±0 are one value).
fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        i64::from(if i < 0 { i32::MIN.wrapping_sub(i) } else { i })
    };
    (key(a) - key(b)).unsigned_abs()
}

#[test]
fn add_mul_clamp_are_exact() {
    let mut rng = Rng(1);
    for uk in tables() {
        for &n in &LENS {
            let a = rng.vec(n, 8.0);
            let b = rng.vec(n, 8.0);
            for act in ACTS {
                let shape = [n];
                let mut want = vec![0.0; n];
                let mut got = vec![1.5; n];
                elementwise::add_f32(&a, &shape, &b, &shape, act, &mut want, &shape);
                fast::add_f32(uk, &a, &b, act, &mut got);
                for i in 0..n {
                    assert!(
                        same_bits(got[i], want[i]),
                        "{} add {act:?} [{i}]: {} + {} = {} not {}",
                        uk.isa,
                        a[i],
                        b[i],
                        got[i],
                        want[i]
                    );
                }
                elementwise::mul_f32(&a, &shape, &b, &shape, act, &mut want, &shape);
                fast::mul_f32(uk, &a, &b, act, &mut got);
                for i in 0..n {
                    assert!(
                        same_bits(got[i], want[i]),
                        "{} mul {act:?} [{i}]: {} · {} = {} not {}",
                        uk.isa,
                        a[i],
                        b[i],
                        got[i],
                        want[i]
                    );
                }
                elementwise::clamp_f32(act, &a, &mut want);
                fast::clamp_f32(uk, act, &a, &mut got);
                for i in 0..n {
                    assert!(
                        same_bits(got[i], want[i]),
                        "{} clamp {act:?} [{i}]: {} → {} not {}",
                        uk.isa,
                        a[i],
                        got[i],
                        want[i]
                    );
                }
            }
        }
    }
}

/// Inputs for the transcendental functions: a dense sweep of the interesting range, both
/// edges of exp's range, tiny and subnormal magnitudes, and the specials.
fn transcendental_inputs(rng: &mut Rng) -> Vec<f32> {
    let mut v: Vec<f32> = (-2400..=2400).map(|i| i as f32 * 0.05).collect();
    for e in -45..=2 {
        let m = 10f32.powi(e);
        v.extend([m, -m, m * 3.7, -m * 1.3]);
    }
    v.extend([
        88.0, 88.7, 88.72, 88.73, 89.0, 100.0, 103.9, 104.0, 110.0, 200.0, 1e30,
    ]);
    v.extend([
        -88.0, -88.7, -88.72, -88.73, -89.0, -100.0, -103.9, -104.0, -110.0, -1e30,
    ]);
    v.extend([
        0.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        1e-45,
    ]);
    v.extend((0..3000).map(|_| rng.value(30.0)));
    v
}

#[test]
fn logistic_and_tanh_are_within_a_few_ulps() {
    let mut rng = Rng(2);
    let x = transcendental_inputs(&mut rng);
    let n = x.len();
    let mut want = vec![0.0; n];
    let mut got = vec![0.0; n];
    for uk in tables() {
        for (name, r, f) in [
            (
                "logistic",
                elementwise::logistic_f32 as fn(&[f32], &mut [f32]),
                fast::logistic_f32 as fn(&Ukernels, &[f32], &mut [f32]),
            ),
            ("tanh", elementwise::tanh_f32, fast::tanh_f32),
        ] {
            r(&x, &mut want);
            f(uk, &x, &mut got);
            let mut worst = 0;
            for i in 0..n {
                let (g, e) = (got[i], want[i]);
                let ok = if e.is_nan() {
                    g.is_nan()
                } else {
                    let d = ulps(g, e);
                    worst = worst.max(d);
                    d <= 4 && (g - e).abs() <= 1e-5 * e.abs() + 1e-38
                };
                assert!(ok, "{} {name}({}) = {g:e}, want {e:e}", uk.isa, x[i]);
            }
            println!("{} {name}: worst {worst} ulp", uk.isa);
        }
    }
}

#[test]
fn exp_and_log_are_within_a_few_ulps_of_the_standard_library() {
    use nnhal_kernels::math::fast as math;
    let mut rng = Rng(3);
    let mut x = transcendental_inputs(&mut rng);
    // LOG's own edges: around 1 (where log(m) must not cancel against e·ln2), around √2 (the
    // fold), the whole exponent range, subnormals down to the smallest.
    x.extend((-2000..=2000).map(|i| 1.0 + i as f32 * 1e-6));
    x.extend((-2000..=2000).map(|i| std::f32::consts::SQRT_2 + i as f32 * 1e-6));
    x.extend((-149..=127).map(|e| 2f32.powi(e) * 1.234_567));
    x.extend([
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::MIN_POSITIVE,
        f32::MAX,
    ]);
    let n = x.len();
    let mut got = vec![0.0; n];
    for uk in tables() {
        for (name, f, r) in [
            (
                "exp",
                math::exp_f32 as fn(&Ukernels, &[f32], &mut [f32]),
                f32::exp as fn(f32) -> f32,
            ),
            ("log", math::log_f32, f32::ln),
        ] {
            f(uk, &x, &mut got);
            let mut worst = 0;
            for i in 0..n {
                let (g, e) = (got[i], r(x[i]));
                let ok = if e.is_nan() {
                    g.is_nan()
                } else if e.is_infinite() || e == 0.0 {
                    g == e
                } else {
                    let d = ulps(g, e);
                    worst = worst.max(d);
                    d <= 4 || (g - e).abs() <= 1e-38
                };
                assert!(ok, "{} {name}({:e}) = {g:e}, want {e:e}", uk.isa, x[i]);
            }
            println!("{} {name}: worst {worst} ulp", uk.isa);
        }
    }
}

/// Within 1e-5 relative (the sums run in different orders) and, where given, `max_ulps`.
fn check_softmax(uk: &Ukernels, beta: f32, depth: usize, x: &[f32], max_ulps: u64) {
    let mut want = vec![0.0; x.len()];
    let mut got = vec![0.0; x.len()];
    normalization::softmax_f32(x, depth, beta, &mut want);
    fast::softmax_f32(uk, beta, depth, x, &mut got);
    for i in 0..x.len() {
        let (g, e) = (got[i], want[i]);
        let ok = if e.is_nan() {
            g.is_nan()
        } else {
            (g - e).abs() <= 1e-5 * e.abs() + 1e-38 && ulps(g, e) <= max_ulps
        };
        assert!(
            ok,
            "{} softmax depth {depth} beta {beta} [{i}]: x {} got {g:e} want {e:e}",
            uk.isa, x[i]
        );
    }
}

#[test]
fn softmax_matches_reference() {
    let mut rng = Rng(3);
    for uk in tables() {
        for &depth in &[1, 2, 3, 8, 16, 17, 33, 1001] {
            for beta in [1.0, 0.5, 2.5] {
                let x: Vec<f32> = (0..depth * 3).map(|_| rng.unit() * 20.0).collect();
                check_softmax(uk, beta, depth, &x, u64::MAX);
            }
        }
        // exp((x − max)·β) down through the subnormals to 0, row by row: [0, x]; the sum is
        // 1 + e, so the output is the exponential itself and is held to a few ULP.
        let x: Vec<f32> = (0..=2600).flat_map(|i| [0.0, i as f32 * -0.05]).collect();
        check_softmax(uk, 1.0, 2, &x, 4);
        // Rows with −∞, NaN, +∞, all −∞.
        let inf = f32::INFINITY;
        let nan = f32::NAN;
        let rows = [
            1.0, -inf, 3.0, 0.5, //
            nan, 1.0, 2.0, 3.0, //
            1.0, 2.0, nan, 0.0, //
            1.0, inf, 2.0, 0.0, //
            -inf, -inf, -inf, -inf, //
            nan, nan, nan, nan,
        ];
        check_softmax(uk, 1.0, 4, &rows, u64::MAX);
    }
}

#[test]
fn two_threads_match_one() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let mut rng = Rng(4);
    let n = 100_100;
    let a = rng.vec(n, 8.0);
    let b = rng.vec(n, 8.0);
    for uk in tables() {
        type Op = fn(&Ukernels, &[f32], &[f32], &mut [f32]);
        let ops: [Op; 5] = [
            |uk, a, b, o| fast::add_f32(uk, a, b, Activation::Relu6, o),
            |uk, a, b, o| fast::mul_f32(uk, a, b, Activation::None, o),
            |uk, a, _, o| fast::tanh_f32(uk, a, o),
            |uk, a, _, o| fast::logistic_f32(uk, a, o),
            |uk, a, _, o| fast::softmax_f32(uk, 1.0, 1001, a, o),
        ];
        for (k, op) in ops.iter().enumerate() {
            let mut seq = vec![0.0; n];
            let mut par = vec![0.0; n];
            op(uk, &a, &b, &mut seq);
            pool.install(|| op(uk, &a, &b, &mut par));
            assert!(
                seq.iter().zip(&par).all(|(x, y)| same_bits(*x, *y)),
                "{} op {k}: parallel differs",
                uk.isa
            );
        }
    }
}
