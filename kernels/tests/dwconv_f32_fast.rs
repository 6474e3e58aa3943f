//! The fast float32 DEPTHWISE_CONV_2D (`ops::dwconv_f32`) against the reference
//! (`conv::depthwise_conv2d_f32`) on every instruction-set level this processor runs: random
//! shapes with channel tails, 3×3 / 5×5 / 3×2 / 1×1 filters, strides 1–3, symmetric and
//! asymmetric padding, depth multipliers 1–3, batch 2, every activation, NaN inputs, the
//! MobileNet v1 geometries, every row width and channel tail of the swept 3×3 kernels, and a
//! 2-thread pool against the sequential result.

mod support;

use nnhal_kernels::conv::dw_f32::{depthwise_conv2d_f32, PackedDwF32};
use nnhal_kernels::conv::reference::depthwise_conv2d_f32 as reference;
use nnhal_kernels::ukernels::{table, Isa, Ukernels};
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
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32() * scale).collect()
    }
}

struct Case {
    w: Window,
    m: usize,
    input: Vec<f32>,
    filter: Vec<f32>,
    bias: Vec<f32>,
    act: Activation,
}

#[allow(clippy::too_many_arguments)]
fn case(
    rng: &mut Rng,
    n: usize,
    (ih, iw, ic): (usize, usize, usize),
    (kh, kw): (usize, usize),
    (sh, sw): (usize, usize),
    padding: Padding,
    m: usize,
    act: Activation,
) -> Case {
    let oh = (ih + padding.top + padding.bottom - kh) / sh + 1;
    let ow = (iw + padding.left + padding.right - kw) / sw + 1;
    let oc = ic * m;
    let w = Window {
        input: Nhwc::new(n, ih, iw, ic),
        output: Nhwc::new(n, oh, ow, oc),
        filter_h: kh,
        filter_w: kw,
        stride_h: sh,
        stride_w: sw,
        padding,
    };
    Case {
        w,
        m,
        input: rng.vec(w.input.len(), 4.0),
        filter: rng.vec(kh * kw * oc, 1.0),
        bias: rng.vec(oc, 1.0),
        act,
    }
}

fn expected(c: &Case) -> Vec<f32> {
    let mut out = vec![0.0; c.w.output.len()];
    reference(&c.w, c.m, &c.input, &c.filter, &c.bias, c.act, &mut out);
    out
}

fn fast(uk: &Ukernels, c: &Case) -> Vec<f32> {
    let packed = PackedDwF32::pack(
        uk,
        c.w.filter_h,
        c.w.filter_w,
        c.w.output.c,
        &c.filter,
        &c.bias,
    );
    let mut out = vec![f32::from_bits(0x7fc0_dead); c.w.output.len()];
    depthwise_conv2d_f32(&c.w, c.m, &packed, &c.input, c.act, &mut out);
    out
}

/// Within 1e-5 relative (of max(1, |expected|)); NaN only where the reference has NaN.
fn check(uk: &Ukernels, c: &Case, got: &[f32], want: &[f32]) {
    for (i, (&g, &e)) in got.iter().zip(want).enumerate() {
        let ok = if e.is_nan() {
            g.is_nan()
        } else {
            g == e || (g - e).abs() <= 1e-5 * e.abs().max(1.0)
        };
        assert!(
            ok,
            "{}: element {i}: got {g}, want {e}; window {:?}, multiplier {}, {:?}",
            uk.isa, c.w, c.m, c.act
        );
    }
}

fn random_case(rng: &mut Rng) -> Case {
    let (kh, kw) = [(3, 3), (3, 3), (3, 3), (5, 5), (3, 2), (1, 1), (2, 3)][rng.below(7)];
    let (sh, sw) = (rng.range(1, 3), rng.range(1, 3));
    let channels = [1, 3, 4, 7, 8, 16, 17, 24, 33, 40, 64];
    let ic = channels[rng.below(channels.len())];
    let m = [1, 1, 1, 2, 3][rng.below(5)];
    let padding = Padding {
        top: rng.below(kh),
        bottom: rng.below(kh),
        left: rng.below(kw),
        right: rng.below(kw),
    };
    let ih = rng.range(kh.saturating_sub(padding.top + padding.bottom).max(1), 13);
    let iw = rng.range(kw.saturating_sub(padding.left + padding.right).max(1), 21);
    let n = rng.range(1, 2);
    let act = ACTS[rng.below(4)];
    case(rng, n, (ih, iw, ic), (kh, kw), (sh, sw), padding, m, act)
}

#[test]
fn random_shapes_match_reference() {
    let mut rng = Rng(0x5eed_d00d);
    for _ in 0..300 {
        let c = random_case(&mut rng);
        let want = expected(&c);
        for uk in tables() {
            check(uk, &c, &fast(uk, &c), &want);
        }
    }
}

#[test]
fn mobilenet_geometries_and_wide_channels() {
    let mut rng = Rng(42);
    let same1 = Padding {
        top: 1,
        bottom: 1,
        left: 1,
        right: 1,
    };
    let same2 = Padding {
        top: 0,
        bottom: 1,
        left: 0,
        right: 1,
    };
    // Narrow images with the real strides and paddings; channel counts around the vector widths
    // and MobileNet's, plus 1001 (many blocks and a 9-channel tail at every width).
    for &(hw, c) in &[(9, 32), (14, 64), (7, 1001), (8, 17), (15, 33), (5, 3)] {
        for act in ACTS {
            for (stride, pad) in [(1, same1), (2, same2)] {
                let k = case(
                    &mut rng,
                    2,
                    (hw, hw + 3, c),
                    (3, 3),
                    (stride, stride),
                    pad,
                    1,
                    act,
                );
                let want = expected(&k);
                for uk in tables() {
                    check(uk, &k, &fast(uk, &k), &want);
                }
            }
        }
    }
}

#[test]
fn nan_and_infinity_follow_the_reference() {
    let mut rng = Rng(7);
    for act in ACTS {
        let mut c = case(
            &mut rng,
            1,
            (6, 9, 19),
            (3, 3),
            (1, 1),
            Padding {
                top: 1,
                bottom: 1,
                left: 1,
                right: 1,
            },
            1,
            act,
        );
        c.input[5 * 19 + 3] = f32::NAN;
        c.input[2 * 9 * 19 + 4 * 19 + 18] = f32::INFINITY;
        c.input[4 * 9 * 19 + 19 + 7] = f32::NEG_INFINITY;
        let want = expected(&c);
        for uk in tables() {
            check(uk, &c, &fast(uk, &c), &want);
        }
    }
}

#[test]
fn two_and_three_threads_match_one() {
    for threads in [2, 3] {
        several_threads_match_one(threads);
    }
}

fn several_threads_match_one(threads: usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rng = Rng(99);
    let same1 = Padding {
        top: 1,
        bottom: 1,
        left: 1,
        right: 1,
    };
    // Rows shared evenly (24, 14; two images of 13, whose rows run across the image
    // boundary), odd shares (13 rows on two or three threads), 7 rows (row and channel split
    // on two threads), one row (channel split).
    for &(n, h, w, c, m) in &[
        (1, 24, 20, 40, 1),
        (1, 14, 14, 96, 1),
        (2, 13, 9, 24, 1),
        (1, 13, 9, 24, 1),
        (1, 7, 7, 1024, 1),
        (1, 1, 5, 300, 1),
        (1, 9, 6, 10, 2),
    ] {
        let k = case(
            &mut rng,
            n,
            (h, w, c),
            (3, 3),
            (1, 1),
            same1,
            m,
            Activation::Relu6,
        );
        let want = expected(&k);
        for uk in tables() {
            let seq = fast(uk, &k);
            let par = pool.install(|| fast(uk, &k));
            assert!(
                seq.iter()
                    .zip(&par)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{}: parallel differs from sequential",
                uk.isa
            );
            check(uk, &k, &par, &want);
        }
    }
}

#[test]
fn generic_table_is_exact() {
    // The portable kernels sum unfused in the reference's order, so they agree bit for bit.
    let mut rng = Rng(3);
    let uk = table(Isa::Generic).unwrap();
    for _ in 0..50 {
        let c = random_case(&mut rng);
        let want = expected(&c);
        let got = fast(uk, &c);
        for (g, e) in got.iter().zip(&want) {
            assert!(
                g.to_bits() == e.to_bits() || (*g == 0.0 && *e == 0.0),
                "{g} vs {e}"
            );
        }
    }
}

#[test]
fn swept_rows_cover_every_border_width_and_channel_tail() {
    // The 3×3 kernels sweep one channel block at a time across bands of a row (or of two
    // rows): narrow rows (all border), widths around the tile sizes, rows wider than a band
    // (33, 70 at stride 1; 70 at stride 2), heights 1–5 (top and bottom rows clipped, odd row
    // counts for the two-row passes), channels around the 8- and 4-lane blocks and
    // MobileNet's, every kind of padding and every activation.
    let mut rng = Rng(0xd3_5eed);
    let pad = |top, bottom, left, right| Padding {
        top,
        bottom,
        left,
        right,
    };
    let paddings = [
        pad(1, 1, 1, 1),
        pad(0, 1, 0, 1),
        pad(0, 0, 0, 0),
        pad(2, 0, 1, 2),
        pad(0, 2, 2, 0),
    ];
    let mut k = 0;
    for ch in [1, 7, 8, 9, 16, 17, 96, 144, 960] {
        let widths: &[usize] = match ch {
            ..=17 => &[1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33, 70],
            96 => &[1, 2, 3, 5, 8, 9, 13, 70],
            _ => &[1, 2, 4, 7, 9, 14],
        };
        for stride in [1, 2] {
            for padding in paddings {
                for ih in 1..=5 {
                    for &iw in widths {
                        if ih + padding.top + padding.bottom < 3
                            || iw + padding.left + padding.right < 3
                        {
                            continue;
                        }
                        let act = ACTS[k % ACTS.len()];
                        k += 1;
                        let c = case(
                            &mut rng,
                            1,
                            (ih, iw, ch),
                            (3, 3),
                            (stride, stride),
                            padding,
                            1,
                            act,
                        );
                        let want = expected(&c);
                        for uk in tables() {
                            let got = fast(uk, &c);
                            check(uk, &c, &got, &want);
                            // The portable kernels sum unfused in the reference's order.
                            if uk.isa == Isa::Generic {
                                for (g, e) in got.iter().zip(&want) {
                                    assert!(
                                        g.to_bits() == e.to_bits() || (*g == 0.0 && *e == 0.0),
                                        "generic: {g} vs {e}; window {:?}",
                                        c.w
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(k > 1000, "{k} cases");
}
