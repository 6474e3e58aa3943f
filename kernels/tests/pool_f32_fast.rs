//! The fast float32 AVERAGE_POOL_2D and MAX_POOL_2D (`ops::pool_f32`) against the reference
//! (`pool`) on every instruction-set level this processor runs. Both sum / compare per
//! channel in the reference's order, so results must be identical: random windows, strides,
//! paddings (including windows partly or wholly in the padding), channel tails, every
//! activation, NaN inputs, the global 7×7 pool, and a 2-thread pool.

mod support;

use nnhal_kernels::pool::f32 as pool_f32;
use nnhal_kernels::pool::reference as pool;
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::{Activation, Nhwc, Padding, Window};
use support::{tables, Rng};

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu1,
    Activation::Relu6,
];

impl Rng {
    fn f32(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

type Reference = fn(&Window, &[f32], Activation, &mut [f32]);
type Fast = fn(&Ukernels, &Window, &[f32], Activation, &mut [f32]);

const OPS: [(&str, Reference, Fast); 2] = [
    ("avg", pool::average_pool_f32, pool_f32::average_pool_f32),
    ("max", pool::max_pool_f32, pool_f32::max_pool_f32),
];

fn check(w: &Window, input: &[f32], act: Activation) {
    for (name, r, f) in OPS {
        let mut want = vec![0.0; w.output.len()];
        r(w, input, act, &mut want);
        for uk in tables() {
            let mut got = vec![f32::from_bits(0x7fc0_dead); w.output.len()];
            f(uk, w, input, act, &mut got);
            for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g == e || (g.is_nan() && e.is_nan()),
                    "{} {name} {act:?} [{i}]: got {g}, want {e}; {w:?}",
                    uk.isa
                );
            }
        }
    }
}

fn window(
    rng: &mut Rng,
    n: usize,
    (ih, iw, c): (usize, usize, usize),
    k: (usize, usize),
    s: (usize, usize),
    padding: Padding,
) -> Window {
    let _ = rng;
    Window {
        input: Nhwc::new(n, ih, iw, c),
        output: Nhwc::new(
            n,
            (ih + padding.top + padding.bottom - k.0) / s.0 + 1,
            (iw + padding.left + padding.right - k.1) / s.1 + 1,
            c,
        ),
        filter_h: k.0,
        filter_w: k.1,
        stride_h: s.0,
        stride_w: s.1,
        padding,
    }
}

#[test]
fn random_windows_match_reference() {
    let mut rng = Rng(11);
    for i in 0..200 {
        let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
        let padding = Padding {
            top: rng.below(kh + 1),
            bottom: rng.below(kh),
            left: rng.below(kw + 1),
            right: rng.below(kw),
        };
        let c = [1, 3, 4, 8, 16, 17, 33, 40][rng.below(8)];
        let ih = rng.range(kh.saturating_sub(padding.top + padding.bottom).max(1), 9);
        let iw = rng.range(kw.saturating_sub(padding.left + padding.right).max(1), 9);
        let s = (rng.range(1, 3), rng.range(1, 3));
        let n = rng.range(1, 2);
        let w = window(&mut rng, n, (ih, iw, c), (kh, kw), s, padding);
        let mut input: Vec<f32> = (0..w.input.len()).map(|_| rng.f32() * 8.0).collect();
        if i % 10 == 0 {
            let k = rng.below(input.len());
            input[k] = f32::NAN;
        }
        check(&w, &input, ACTS[i % 4]);
    }
}

#[test]
fn global_pool_and_two_threads() {
    let mut rng = Rng(12);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let w = window(
        &mut rng,
        1,
        (7, 7, 1024),
        (7, 7),
        (2, 2),
        Padding::default(),
    );
    let input: Vec<f32> = (0..w.input.len()).map(|_| rng.f32() * 8.0).collect();
    for act in ACTS {
        check(&w, &input, act);
    }
    let w = window(
        &mut rng,
        2,
        (20, 20, 35),
        (3, 3),
        (2, 2),
        Padding {
            top: 1,
            bottom: 1,
            left: 1,
            right: 1,
        },
    );
    let input: Vec<f32> = (0..w.input.len()).map(|_| rng.f32() * 8.0).collect();
    for uk in tables() {
        for (name, _, f) in OPS {
            let mut seq = vec![0.0; w.output.len()];
            let mut par = vec![0.0; w.output.len()];
            f(uk, &w, &input, Activation::Relu, &mut seq);
            pool.install(|| f(uk, &w, &input, Activation::Relu, &mut par));
            assert_eq!(seq, par, "{} {name}", uk.isa);
        }
    }
}
