//! The banded pointwise → depthwise pair (`conv::fused`) against the two operators run one
//! after the other on the same micro-kernels, bit for bit, on every level this processor runs:
//! strides 1 and 2, every padding of a 3×3 window (SAME before and after, VALID, asymmetric),
//! batches of one and three, every pair of activations, rows wide enough for bands of one and
//! of several output rows, and thread pools of two and three against one thread.

mod support;

use nnhal_kernels::conv::dw_f32::{depthwise_conv2d_f32, PackedDwF32};
use nnhal_kernels::conv::f32::{fully_connected_f32, PackedConvF32};
use nnhal_kernels::conv::fused::{fusable, pointwise_depthwise_f32};
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::ukernels::Ukernels;
use nnhal_kernels::{Activation, Nhwc, Padding, Window};
use support::{tables, Rng, ACTIVATIONS};

impl Rng {
    fn f32(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

struct Pair {
    w: Window,
    ci: usize,
    input: Vec<f32>,
    pw_filter: Vec<f32>,
    pw_bias: Vec<f32>,
    dw_filter: Vec<f32>,
    dw_bias: Vec<f32>,
}

fn pair(
    rng: &mut Rng,
    n: usize,
    (h, wd, ci, cm): (usize, usize, usize, usize),
    s: usize,
    p: Padding,
) -> Pair {
    let oh = (h + p.top + p.bottom - 3) / s + 1;
    let ow = (wd + p.left + p.right - 3) / s + 1;
    Pair {
        w: Window {
            input: Nhwc::new(n, h, wd, cm),
            output: Nhwc::new(n, oh, ow, cm),
            filter_h: 3,
            filter_w: 3,
            stride_h: s,
            stride_w: s,
            padding: p,
        },
        ci,
        input: rng.vec(n * h * wd * ci),
        pw_filter: rng.vec(cm * ci),
        pw_bias: rng.vec(cm),
        dw_filter: rng.vec(9 * cm),
        dw_bias: rng.vec(cm),
    }
}

/// (separate, fused) outputs.
fn run(uk: &Ukernels, p: &Pair, acts: (Activation, Activation)) -> (Vec<f32>, Vec<f32>) {
    let cm = p.w.input.c;
    let shape = FilterShape {
        out_c: cm,
        kh: 1,
        kw: 1,
        in_c: p.ci,
    };
    let pw = PackedConvF32::pack(uk, shape, &p.pw_filter, &p.pw_bias);
    let dw = PackedDwF32::pack(uk, 3, 3, cm, &p.dw_filter, &p.dw_bias);
    assert!(fusable(&pw, &dw, &p.w));
    let mut mid = vec![0.0; p.w.input.len()];
    let pixels = p.w.input.n * p.w.input.h * p.w.input.w;
    fully_connected_f32(&pw, pixels, &p.input, acts.0, &mut mid);
    let mut separate = vec![0.0; p.w.output.len()];
    depthwise_conv2d_f32(&p.w, 1, &dw, &mid, acts.1, &mut separate);
    let mut fused = vec![f32::NAN; p.w.output.len()];
    pointwise_depthwise_f32(&pw, acts.0, &p.w, &dw, acts.1, &p.input, &mut fused);
    (separate, fused)
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn pad(top: usize, bottom: usize, left: usize, right: usize) -> Padding {
    Padding {
        top,
        bottom,
        left,
        right,
    }
}

/// Shapes: narrow rows (one band holds the whole image), rows of 64 KiB and more (bands of one
/// or two output rows), MobileNet v2's 56×56×24 → 144 expansion, odd widths and channel tails.
const SHAPES: [(usize, usize, usize, usize); 6] = [
    (9, 7, 5, 13),
    (12, 11, 8, 40),
    (17, 64, 6, 256),
    (11, 130, 3, 200),
    (56, 56, 24, 144),
    (5, 3, 4, 17),
];

fn paddings() -> Vec<Padding> {
    vec![
        pad(1, 1, 1, 1),
        pad(0, 1, 0, 1),
        pad(0, 0, 0, 0),
        pad(2, 0, 1, 2),
        pad(0, 2, 2, 0),
    ]
}

#[test]
fn fused_pair_equals_the_two_operators() {
    let mut rng = Rng(0x5eed);
    for &shape in &SHAPES {
        for s in [1, 2] {
            for p in paddings() {
                if shape.0 + p.top + p.bottom < 3 || shape.1 + p.left + p.right < 3 {
                    continue;
                }
                let n = if shape.0 < 20 { 3 } else { 1 };
                let c = pair(&mut rng, n, shape, s, p);
                let acts = (ACTIVATIONS[rng.below(4)], ACTIVATIONS[rng.below(4)]);
                for uk in tables() {
                    let (separate, fused) = run(uk, &c, acts);
                    assert!(
                        same_bits(&separate, &fused),
                        "{}: {shape:?} stride {s} {p:?} {acts:?}",
                        uk.isa
                    );
                }
            }
        }
    }
}

#[test]
fn every_activation_pair_and_nan_inputs() {
    let mut rng = Rng(0xacdc);
    for a in ACTIVATIONS {
        for b in ACTIVATIONS {
            let mut c = pair(&mut rng, 2, (10, 64, 5, 256), 2, pad(0, 1, 0, 1));
            c.input[3 * 5 + 1] = f32::NAN;
            c.input[7 * 64 * 5 + 2] = f32::INFINITY;
            for uk in tables() {
                let (separate, fused) = run(uk, &c, (a, b));
                assert!(same_bits(&separate, &fused), "{}: {a:?} {b:?}", uk.isa);
            }
        }
    }
}

#[test]
fn thread_pools_match_one_thread() {
    let mut rng = Rng(0xbeef);
    for threads in [2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        // Shares that end inside an image and run across image boundaries (batch 3 of 7 rows
        // on 2 and 3 threads), bands cut by a share's end (64 KiB rows), one output row.
        for (n, shape, s, p) in [
            (3, (13, 20, 6, 40), 2, pad(0, 1, 0, 1)),
            (1, (30, 64, 6, 256), 1, pad(1, 1, 1, 1)),
            (2, (21, 130, 3, 200), 2, pad(1, 1, 1, 1)),
            (1, (3, 9, 4, 24), 1, pad(0, 0, 1, 1)),
        ] {
            let c = pair(&mut rng, n, shape, s, p);
            for uk in tables() {
                let acts = (Activation::Relu6, Activation::Relu);
                let (separate, one) = run(uk, &c, acts);
                let (_, many) = pool.install(|| run(uk, &c, acts));
                assert!(same_bits(&separate, &one), "{}: one thread", uk.isa);
                assert!(same_bits(&one, &many), "{}: {threads} threads", uk.isa);
            }
        }
    }
}

#[test]
fn what_does_not_fuse() {
    let uk = tables()[0];
    let mut rng = Rng(1);
    let c = pair(&mut rng, 1, (6, 6, 4, 8), 1, pad(1, 1, 1, 1));
    let pw = PackedConvF32::pack(
        uk,
        FilterShape {
            out_c: 8,
            kh: 1,
            kw: 1,
            in_c: 4,
        },
        &c.pw_filter,
        &c.pw_bias,
    );
    let dw = PackedDwF32::pack(uk, 3, 3, 8, &c.dw_filter, &c.dw_bias);
    assert!(fusable(&pw, &dw, &c.w));
    // A 3×3 first layer, a 5×5 depthwise, stride 3, a channel count that does not match.
    let conv3 = PackedConvF32::pack(
        uk,
        FilterShape {
            out_c: 8,
            kh: 3,
            kw: 3,
            in_c: 4,
        },
        &rng.vec(8 * 9 * 4),
        &c.pw_bias,
    );
    assert!(!fusable(&conv3, &dw, &c.w));
    let dw5 = PackedDwF32::pack(uk, 5, 5, 8, &rng.vec(25 * 8), &c.dw_bias);
    assert!(!fusable(&pw, &dw5, &c.w));
    assert!(!fusable(
        &pw,
        &dw,
        &Window {
            stride_h: 3,
            stride_w: 3,
            ..c.w
        }
    ));
    let narrow = PackedConvF32::pack(
        uk,
        FilterShape {
            out_c: 6,
            kh: 1,
            kw: 1,
            in_c: 4,
        },
        &rng.vec(24),
        &rng.vec(6),
    );
    assert!(!fusable(&narrow, &dw, &c.w));
}
