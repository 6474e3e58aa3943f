//! The uint8 fast operators (`ops::conv_u8`, `ops::dwconv_u8`, `ops::pool_u8`) against the
//! reference kernels, byte for byte, on every instruction-set level this processor runs:
//! random shapes with tails, zero points 0, 128, 255 and others, multipliers from tiny to just
//! below one, every activation, strides, paddings, depth multipliers, batch 2, accumulators
//! near and past the int32 bounds, and the parallel split inside a 2-thread pool.

mod support;

use nnhal_kernels::conv::dw_u8::{self as dwconv_u8, PackedDwU8};
use nnhal_kernels::conv::reference as conv;
use nnhal_kernels::conv::u8::{self as conv_u8, ConvQuant, PackedConvU8};
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::pool::reference as pool;
use nnhal_kernels::pool::u8 as pool_u8;
use nnhal_kernels::ukernels::{self, Isa, Ukernels};
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};
use support::Rng;

impl Rng {
    /// A stream per test and level; `NNHAL_TEST_SEED` shifts every stream (for soak runs).
    fn seeded(seed: u64, isa: Isa) -> Rng {
        let extra = std::env::var("NNHAL_TEST_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        Rng(seed ^ (isa as u64) << 32 ^ extra.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        match self.below(6) {
            // Extremes only: the largest products and the most lopsided sums.
            0 => (0..n).map(|_| self.pick(&[0u8, 255])).collect(),
            1 => vec![self.pick(&[0u8, 255, 128]); n],
            _ => (0..n).map(|_| self.next() as u8).collect(),
        }
    }
    fn zero_point(&mut self) -> i32 {
        self.pick(&[0, 128, 255, 1, 127, 129, 3, 250])
            .max(self.below(256) as i32 * (self.below(3) == 0) as i32)
    }
}

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu1,
    Activation::Relu6,
];

fn tables() -> Vec<&'static Ukernels> {
    Isa::levels()
        .iter()
        .filter(|l| l.is_supported())
        .map(|&l| {
            let t = ukernels::table(l).unwrap();
            eprintln!(
                "{l}: {} {} {}",
                t.u8_gemm.name, t.u8_row_sum.name, t.u8_dw.name
            );
            t
        })
        .collect()
}

/// Scales whose real multiplier is about `m` (< 1).
fn quant(rng: &mut Rng) -> ConvQuant {
    let m = rng.pick(&[
        3e-10f32, 1e-6, 1e-4, 0.001, 0.003, 0.005, 0.02, 0.3, 0.5, 0.75, 0.9999,
    ]);
    let si = rng.pick(&[0.007843138f32, 0.02, 0.5, 1.0]);
    let sf = rng.pick(&[0.001f32, 0.0123, 0.25]);
    let so = si * sf / m;
    ConvQuant {
        input: QuantParams::new(si, rng.zero_point()),
        filter: QuantParams::new(sf, rng.zero_point()),
        output: QuantParams::new(so, rng.zero_point()),
        act: rng.pick(&ACTS),
    }
}

fn bias(rng: &mut Rng, n: usize) -> Vec<i32> {
    let big = rng.below(4) == 0;
    (0..n)
        .map(|_| {
            if big {
                rng.next() as i32
            } else {
                (rng.next() % 20001) as i32 - 10000
            }
        })
        .collect()
}

fn out_extent(input: usize, pad: usize, k: usize, s: usize) -> usize {
    (input + pad - k) / s + 1
}

fn window(input: Nhwc, out_c: usize, k: (usize, usize), s: (usize, usize), p: Padding) -> Window {
    Window {
        input,
        output: Nhwc::new(
            input.n,
            out_extent(input.h, p.top + p.bottom, k.0, s.0),
            out_extent(input.w, p.left + p.right, k.1, s.1),
            out_c,
        ),
        filter_h: k.0,
        filter_w: k.1,
        stride_h: s.0,
        stride_w: s.1,
        padding: p,
    }
}

fn pool2() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
}

fn random_window(rng: &mut Rng, in_c: usize, out_c: usize, pointwise: bool) -> Window {
    let n = rng.range(1, 2);
    if pointwise {
        let (h, w) = (rng.range(1, 9), rng.range(1, 9));
        return window(
            Nhwc::new(n, h, w, in_c),
            out_c,
            (1, 1),
            (1, 1),
            Padding::default(),
        );
    }
    let (kh, kw) = (rng.range(1, 4), rng.range(1, 4));
    let (sh, sw) = (rng.range(1, 3), rng.range(1, 3));
    let p = Padding {
        top: rng.below(kh),
        bottom: rng.below(kh),
        left: rng.below(kw),
        right: rng.below(kw),
    };
    let h = rng.range(kh.saturating_sub(p.top + p.bottom).max(1), 11);
    let w = rng.range(kw.saturating_sub(p.left + p.right).max(1), 11);
    window(Nhwc::new(n, h, w, in_c), out_c, (kh, kw), (sh, sw), p)
}

/// Checks one random convolution against the reference; the kernel that ran, or `None` when
/// packing failed (exactly as the reference did).
fn check_conv(
    uk: &Ukernels,
    rng: &mut Rng,
    w: &Window,
    q: ConvQuant,
    parallel: bool,
) -> Option<&'static str> {
    let shape = FilterShape {
        out_c: w.output.c,
        kh: w.filter_h,
        kw: w.filter_w,
        in_c: w.input.c,
    };
    let input = rng.bytes(w.input.len());
    let filter = rng.bytes(shape.out_c * shape.taps());
    let b = bias(rng, shape.out_c);
    let mut expected = vec![0u8; w.output.len()];
    let r = conv::conv2d_u8(
        w,
        &input,
        q.input,
        &filter,
        q.filter,
        &b,
        q.output,
        q.act,
        &mut expected,
    );
    let packed = PackedConvU8::pack(uk, shape, &filter, &b, q);
    assert_eq!(r.is_ok(), packed.is_ok(), "{q:?}");
    let Ok(packed) = packed else { return None };
    let mut got = vec![0x5au8; w.output.len()];
    if parallel {
        pool2().install(|| conv_u8::conv2d_u8(w, &packed, &input, &mut got));
    } else {
        conv_u8::conv2d_u8(w, &packed, &input, &mut got);
    }
    assert!(
        got == expected,
        "{} {}: {w:?} {q:?} first diff at {:?}",
        uk.isa,
        packed.kernel_name(),
        got.iter().zip(&expected).position(|(a, b)| a != b)
    );
    Some(packed.kernel_name())
}

#[test]
fn conv_matches_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0xC0FFEE, uk.isa);
        for case in 0..300 {
            let in_c = rng.pick(&[1, 3, 4, 5, 8, 13, 16, 31, 32, 33, 64, 67]);
            let out_c = rng.pick(&[1, 2, 7, 15, 16, 17, 31, 32, 33, 48, 64, 65, 100]);
            let w = random_window(&mut rng, in_c, out_c, case % 3 == 0);
            let q = quant(&mut rng);
            check_conv(uk, &mut rng, &w, q, case % 5 == 0);
        }
    }
}

#[test]
fn mobilenet_like_shapes_match_reference() {
    let same3 = |s: usize| Padding {
        top: if s == 1 { 1 } else { 0 },
        left: if s == 1 { 1 } else { 0 },
        bottom: 1,
        right: 1,
    };
    for uk in tables() {
        let mut rng = Rng::seeded(7, uk.isa);
        let q = ConvQuant {
            input: QuantParams::new(0.007843138, 128),
            filter: QuantParams::new(0.02, 120),
            output: QuantParams::new(0.05, 0),
            act: Activation::Relu6,
        };
        // conv0 on a smaller image, a pointwise layer, and the logits.
        let w0 = window(Nhwc::new(1, 30, 30, 3), 32, (3, 3), (2, 2), same3(2));
        check_conv(uk, &mut rng, &w0, q, true);
        let w1 = window(
            Nhwc::new(1, 7, 7, 256),
            128,
            (1, 1),
            (1, 1),
            Padding::default(),
        );
        check_conv(uk, &mut rng, &w1, q, true);
        let w2 = window(
            Nhwc::new(1, 1, 1, 1024),
            1001,
            (1, 1),
            (1, 1),
            Padding::default(),
        );
        check_conv(
            uk,
            &mut rng,
            &w2,
            ConvQuant {
                act: Activation::None,
                ..q
            },
            true,
        );
    }
}

#[test]
fn accumulators_near_and_past_int32_bounds() {
    // (a − za)(w − zw) = ±65025 per tap: K = 33025 reaches the int32 limits, K = 40000 wraps;
    // a multiplier of 3e−10 (right shift 31) rounds those extremes to ±1 or 0.
    for uk in tables() {
        for &(k, out_scale) in &[(33_025usize, 1e7f32), (40_000, 1e7), (33_025, 3.3e9)] {
            for &(a, za, f, zw) in &[(255u8, 0, 0u8, 255), (255, 0, 255, 0), (0, 255, 0, 255)] {
                let w = window(Nhwc::new(1, 1, 3, k), 5, (1, 1), (1, 1), Padding::default());
                let input = vec![a; w.input.len()];
                let filter = vec![f; 5 * k];
                let b = [0, 1, -1, i32::MAX, i32::MIN];
                let q = ConvQuant {
                    input: QuantParams::new(1.0, za),
                    filter: QuantParams::new(1.0, zw),
                    output: QuantParams::new(out_scale, 100),
                    act: Activation::None,
                };
                let mut expected = vec![0u8; w.output.len()];
                conv::conv2d_u8(
                    &w,
                    &input,
                    q.input,
                    &filter,
                    q.filter,
                    &b,
                    q.output,
                    q.act,
                    &mut expected,
                )
                .unwrap();
                let packed = PackedConvU8::pack(
                    uk,
                    FilterShape {
                        out_c: 5,
                        kh: 1,
                        kw: 1,
                        in_c: k,
                    },
                    &filter,
                    &b,
                    q,
                )
                .unwrap();
                let mut got = vec![0u8; w.output.len()];
                assert_ne!(packed.kernel_name(), "reference");
                conv_u8::conv2d_u8(&w, &packed, &input, &mut got);
                assert_eq!(
                    got, expected,
                    "{} k={k} a={a} za={za} f={f} zw={zw}",
                    uk.isa
                );
                // The case must not be trivial: outputs differ across the biases.
                assert!(expected.iter().any(|&v| v != expected[0]) || k == 40_000);
            }
        }
    }
}

#[test]
fn fully_connected_matches_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0xFC, uk.isa);
        for case in 0..200 {
            let rows = rng.range(1, 9);
            let k = rng.range(1, 300);
            let n = rng.range(1, 100);
            let q = quant(&mut rng);
            let input = rng.bytes(rows * k);
            let filter = rng.bytes(n * k);
            let b = bias(&mut rng, n);
            let mut expected = vec![0u8; rows * n];
            let r = conv::fully_connected_u8(
                rows,
                k,
                n,
                &input,
                q.input,
                &filter,
                q.filter,
                &b,
                q.output,
                q.act,
                &mut expected,
            );
            let shape = FilterShape {
                out_c: n,
                kh: 1,
                kw: 1,
                in_c: k,
            };
            let packed = PackedConvU8::pack(uk, shape, &filter, &b, q);
            assert_eq!(r.is_ok(), packed.is_ok());
            let Ok(packed) = packed else { continue };
            let mut got = vec![0u8; rows * n];
            if case % 4 == 0 {
                pool2().install(|| conv_u8::fully_connected_u8(&packed, rows, &input, &mut got));
            } else {
                conv_u8::fully_connected_u8(&packed, rows, &input, &mut got);
            }
            assert_eq!(got, expected, "{} rows {rows} k {k} n {n} {q:?}", uk.isa);
        }
    }
}

#[test]
fn few_row_products_split_over_two_threads_match_reference() {
    // Products of fewer row tiles than the threads can share evenly are divided in cells of
    // one row tile × one channel block, channel block by channel block; a FULLY_CONNECTED of
    // one row splits by channel blocks once its weights take long enough to stream. Ranges of
    // cells start and end inside a block here (7 tiles × 5 blocks over 4 parts), cover whole
    // blocks, and end on a partial last block.
    let q = ConvQuant {
        input: QuantParams::new(0.02, 128),
        filter: QuantParams::new(0.004, 0),
        output: QuantParams::new(0.3, 255),
        act: Activation::None,
    };
    for uk in tables() {
        let mut rng = Rng::seeded(0xCE11, uk.isa);
        for (rows, k, n) in [
            (1, 1280, 1000),
            (1, 1024, 1001),
            (1, 37, 3000),
            (2, 1280, 250),
            (7, 960, 160),
            (13, 960, 160),
            (49, 960, 160),
            (49, 320, 1280),
            (20, 333, 70),
        ] {
            let input = rng.bytes(rows * k);
            let filter = rng.bytes(n * k);
            let b = bias(&mut rng, n);
            for q in [
                q,
                ConvQuant {
                    input: QuantParams::new(0.02, 0),
                    filter: QuantParams::new(0.004, 255),
                    output: QuantParams::new(0.3, 0),
                    act: Activation::Relu6,
                },
            ] {
                let mut expected = vec![0u8; rows * n];
                conv::fully_connected_u8(
                    rows,
                    k,
                    n,
                    &input,
                    q.input,
                    &filter,
                    q.filter,
                    &b,
                    q.output,
                    q.act,
                    &mut expected,
                )
                .unwrap();
                let shape = FilterShape {
                    out_c: n,
                    kh: 1,
                    kw: 1,
                    in_c: k,
                };
                let packed = PackedConvU8::pack(uk, shape, &filter, &b, q).unwrap();
                let mut got = vec![0x5au8; rows * n];
                pool2().install(|| {
                    nnhal_kernels::parallel::with_team(|| {
                        conv_u8::fully_connected_u8(&packed, rows, &input, &mut got)
                    })
                });
                assert!(got == expected, "{} rows {rows} k {k} n {n}", uk.isa);
                let mut alone = vec![0xa5u8; rows * n];
                conv_u8::fully_connected_u8(&packed, rows, &input, &mut alone);
                assert!(alone == expected, "{} rows {rows} k {k} n {n}", uk.isa);
            }
        }
    }
}

#[test]
fn pack_fails_exactly_when_the_reference_does() {
    let uk = ukernels::best();
    let shape = FilterShape {
        out_c: 1,
        kh: 1,
        kw: 1,
        in_c: 1,
    };
    let one = QuantParams::new(1.0, 0);
    // Multiplier 1: not representable.
    let q = ConvQuant {
        input: one,
        filter: one,
        output: one,
        act: Activation::None,
    };
    assert!(PackedConvU8::pack(uk, shape, &[1], &[0], q).is_err());
    assert!(PackedDwU8::pack(uk, 1, 1, 1, &[1], &[0], q).is_err());
    // Empty activation range: Relu with the zero point above 255.
    let q = ConvQuant {
        output: QuantParams::new(2.0, 300),
        act: Activation::Relu,
        ..q
    };
    assert!(PackedConvU8::pack(uk, shape, &[1], &[0], q).is_err());
    // Zero points outside 0..=255 are accepted (by the reference path).
    let q = ConvQuant {
        input: QuantParams::new(1.0, -3),
        filter: QuantParams::new(1.0, 300),
        output: QuantParams::new(2.0, -20),
        act: Activation::None,
    };
    let p = PackedConvU8::pack(uk, shape, &[1], &[0], q).unwrap();
    assert_eq!(p.kernel_name(), "reference");
    let w = window(Nhwc::new(1, 2, 2, 1), 1, (1, 1), (1, 1), Padding::default());
    let mut got = [0u8; 4];
    let mut expected = [0u8; 4];
    conv_u8::conv2d_u8(&w, &p, &[0, 100, 200, 255], &mut got);
    conv::conv2d_u8(
        &w,
        &[0, 100, 200, 255],
        q.input,
        &[1],
        q.filter,
        &[0],
        q.output,
        q.act,
        &mut expected,
    )
    .unwrap();
    assert_eq!(got, expected);
}

#[test]
fn depthwise_matches_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0xD3, uk.isa);
        for case in 0..300 {
            let in_c = rng.pick(&[1, 3, 8, 15, 16, 17, 32, 33, 64, 70]);
            let m = if case % 4 == 0 { rng.range(2, 3) } else { 1 };
            let mut w = random_window(&mut rng, in_c, in_c * m, false);
            if case % 3 == 0 {
                // The MobileNet geometry: 3×3, stride 1 or 2, SAME.
                let s = rng.range(1, 2);
                let (h, wd) = (rng.range(2, 12), rng.range(2, 12));
                let p = Padding {
                    top: (s == 1) as usize,
                    left: (s == 1) as usize,
                    bottom: 1,
                    right: 1,
                };
                w = window(
                    Nhwc::new(rng.range(1, 2), h, wd, in_c),
                    in_c * m,
                    (3, 3),
                    (s, s),
                    p,
                );
            }
            let q = quant(&mut rng);
            let input = rng.bytes(w.input.len());
            let filter = rng.bytes(w.filter_h * w.filter_w * w.output.c);
            let b = bias(&mut rng, w.output.c);
            let mut expected = vec![0u8; w.output.len()];
            let r = conv::depthwise_conv2d_u8(
                &w,
                m,
                &input,
                q.input,
                &filter,
                q.filter,
                &b,
                q.output,
                q.act,
                &mut expected,
            );
            let packed = PackedDwU8::pack(uk, w.filter_h, w.filter_w, w.output.c, &filter, &b, q);
            assert_eq!(r.is_ok(), packed.is_ok());
            let Ok(packed) = packed else { continue };
            let mut got = vec![0xa5u8; w.output.len()];
            if case % 5 == 0 {
                pool2()
                    .install(|| dwconv_u8::depthwise_conv2d_u8(&w, m, &packed, &input, &mut got));
            } else {
                dwconv_u8::depthwise_conv2d_u8(&w, m, &packed, &input, &mut got);
            }
            assert!(
                got == expected,
                "{} {}: {w:?} m {m} {q:?} first diff at {:?}",
                uk.isa,
                packed.kernel_name(),
                got.iter().zip(&expected).position(|(a, b)| a != b)
            );
        }
    }
}

/// The byte dot-product depthwise kernel (four taps per `vpdpbusd`) where the table has one:
/// 64-channel blocks with tails, kernel sizes whose tap count leaves 0..3 taps in the last
/// group of four, strides 1 and 2, padding, filter zero points whose weights fit signed bytes
/// as they are (128), only negated (127), per channel either way (random filter over 0..=255
/// with zero point 128 or 127, and a mixed filter), or not at all (another zero point: the
/// int32 kernel runs). Every level runs the same cases against the reference. Strides 1–3:
/// half the cases send every channel block at every stride up to the filter width through
/// the row path's tap quads (by default only narrow tails at stride 1 take it), so both row
/// paths see every block shape and stride.
#[test]
fn depthwise_byte_dot_product_matches_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0xD4, uk.isa);
        let mut dw4_runs = 0;
        for case in 0..160 {
            let c = rng.pick(&[1, 16, 31, 48, 64, 65, 96, 128, 144, 200]);
            let k = rng.pick(&[
                (3, 3),
                (3, 3),
                (5, 5),
                (1, 1),
                (1, 2),
                (2, 3),
                (3, 1),
                (2, 2),
            ]);
            let s = rng.range(1, 3);
            let p = Padding {
                top: rng.below(k.0),
                bottom: rng.below(k.0),
                left: rng.below(k.1),
                right: rng.below(k.1),
            };
            let h = rng.range(k.0.saturating_sub(p.top + p.bottom).max(1), 9);
            let wd = rng.range(k.1.saturating_sub(p.left + p.right).max(1), 13);
            let w = window(Nhwc::new(rng.range(1, 2), h, wd, c), c, k, (s, s), p);
            let mut q = quant(&mut rng);
            let ntaps = k.0 * k.1;
            let (zw, fits) = match case % 4 {
                0 => (128, true),
                1 => (127, true),
                2 => (rng.pick(&[0, 3, 250, 255]), false),
                _ => (128, true),
            };
            q.filter = QuantParams::new(q.filter.scale, zw);
            let mut filter = rng.bytes(ntaps * c);
            if case % 4 == 3 {
                // Zero point 127, even channels below 255 (weights −127..=127 fit as they
                // are), odd ones above 0 (−126..=128, negated where 128 occurs).
                q.filter = QuantParams::new(q.filter.scale, 127);
                for (i, v) in filter.iter_mut().enumerate() {
                    *v = if (i % c).is_multiple_of(2) {
                        (*v).min(254)
                    } else {
                        (*v).max(1)
                    };
                }
            }
            let input = rng.bytes(w.input.len());
            let b = bias(&mut rng, c);
            let mut expected = vec![0u8; w.output.len()];
            let r = conv::depthwise_conv2d_u8(
                &w,
                1,
                &input,
                q.input,
                &filter,
                q.filter,
                &b,
                q.output,
                q.act,
                &mut expected,
            );
            let packed = PackedDwU8::pack(uk, k.0, k.1, c, &filter, &b, q);
            assert_eq!(r.is_ok(), packed.is_ok());
            let Ok(packed) = packed else { continue };
            if packed.kernel_name() == "reference" {
                continue;
            }
            let zw = q.filter.zero_point;
            let channel_fits = |ch: usize, lo: i32, hi: i32| {
                (0..ntaps).all(|t| (lo..=hi).contains(&(i32::from(filter[t * c + ch]) - zw)))
            };
            let fitting =
                fits || (0..c).all(|ch| channel_fits(ch, -128, 127) || channel_fits(ch, -127, 128));
            if let (Some(d4), true) = (uk.u8_dw4, fitting) {
                assert_eq!(packed.kernel_name(), d4.name, "case {case}");
                dw4_runs += 1;
            } else if !fitting || uk.u8_dw4.is_none() {
                // The tap-pair kernel where the table has it, else the int32 one.
                let name = uk.u8_dw2.map_or(uk.u8_dw.name, |d| d.name);
                assert_eq!(packed.kernel_name(), name, "case {case}");
            }
            let mut got = vec![0xa5u8; w.output.len()];
            if case % 5 == 0 {
                pool2()
                    .install(|| dwconv_u8::depthwise_conv2d_u8(&w, 1, &packed, &input, &mut got));
            } else if case % 2 == 1 {
                dwconv_u8::with_all_quads(|| {
                    dwconv_u8::depthwise_conv2d_u8(&w, 1, &packed, &input, &mut got)
                });
            } else {
                dwconv_u8::depthwise_conv2d_u8(&w, 1, &packed, &input, &mut got);
            }
            assert!(
                got == expected,
                "{} {} case {case}: {w:?} {q:?} first diff at {:?}",
                uk.isa,
                packed.kernel_name(),
                got.iter().zip(&expected).position(|(a, b)| a != b)
            );
        }
        if uk.u8_dw4.is_some() {
            assert!(
                dw4_runs >= 80,
                "{}: only {dw4_runs} cases ran the byte kernel",
                uk.isa
            );
        }
    }
}

#[test]
fn pools_match_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0x9001, uk.isa);
        for case in 0..200 {
            let c = rng.pick(&[1, 3, 16, 17, 64, 1024]);
            let mut w = random_window(&mut rng, c, c, false);
            if case % 4 == 0 {
                // Global 7×7 average (the MobileNet pool), batch 1 or 2.
                w = window(
                    Nhwc::new(rng.range(1, 2), 7, 7, c),
                    c,
                    (7, 7),
                    (2, 2),
                    Padding::default(),
                );
            }
            let q = QuantParams::new(rng.pick(&[0.01f32, 0.1, 1.0]), rng.zero_point());
            let act = rng.pick(&ACTS);
            let input = rng.bytes(w.input.len());
            let (mut e1, mut e2) = (vec![0u8; w.output.len()], vec![0u8; w.output.len()]);
            pool::average_pool_u8(&w, &input, q, act, &mut e1);
            pool::max_pool_u8(&w, &input, q, act, &mut e2);
            let (mut g1, mut g2) = (vec![1u8; w.output.len()], vec![1u8; w.output.len()]);
            let run = |g1: &mut [u8], g2: &mut [u8]| {
                pool_u8::average_pool_u8(uk, &w, &input, q, act, g1);
                pool_u8::max_pool_u8(uk, &w, &input, q, act, g2);
            };
            if case % 3 == 0 {
                pool2().install(|| run(&mut g1, &mut g2));
            } else {
                run(&mut g1, &mut g2);
            }
            assert_eq!(g1, e1, "average {w:?} {q:?} {act:?}");
            assert_eq!(g2, e2, "max {w:?} {q:?} {act:?}");
        }
    }
}

#[test]
fn packed_weights_are_shareable() {
    fn shareable<T: Send + Sync + std::fmt::Debug>() {}
    shareable::<PackedConvU8>();
    shareable::<PackedDwU8>();
}

#[test]
fn large_operations_split_over_two_threads_match_reference() {
    // Big enough to pass the fast operators' parallel threshold: the row split (28×28), the
    // channel-block split (7×7 with many channels), im2col panels, depthwise rows, pools.
    for uk in tables() {
        let mut rng = Rng::seeded(0x2222, uk.isa);
        let q = ConvQuant {
            input: QuantParams::new(0.02, 131),
            filter: QuantParams::new(0.01, 117),
            output: QuantParams::new(0.1, 9),
            act: Activation::Relu6,
        };
        let pw = |h: usize, c: usize, oc: usize| {
            window(
                Nhwc::new(1, h, h, c),
                oc,
                (1, 1),
                (1, 1),
                Padding::default(),
            )
        };
        check_conv(uk, &mut rng, &pw(28, 128, 72), q, true);
        check_conv(uk, &mut rng, &pw(7, 512, 520), q, true);
        let p1 = Padding {
            top: 1,
            left: 1,
            bottom: 1,
            right: 1,
        };
        let w3 = window(Nhwc::new(2, 24, 24, 16), 40, (3, 3), (1, 1), p1);
        check_conv(uk, &mut rng, &w3, q, true);

        // Rows split over the team, on a large image and on small ones with many channels and
        // a partial last channel block.
        let p_s2 = Padding {
            top: 0,
            left: 0,
            bottom: 1,
            right: 1,
        };
        for wd in [
            window(Nhwc::new(1, 40, 40, 160), 160, (3, 3), (1, 1), p1),
            window(Nhwc::new(1, 7, 7, 1048), 1048, (3, 3), (1, 1), p1),
            window(Nhwc::new(2, 8, 8, 1040), 1040, (3, 3), (2, 2), p_s2),
        ] {
            let c = wd.output.c;
            let input = rng.bytes(wd.input.len());
            let filter = rng.bytes(9 * c);
            let b = bias(&mut rng, c);
            let mut expected = vec![0u8; wd.output.len()];
            conv::depthwise_conv2d_u8(
                &wd,
                1,
                &input,
                q.input,
                &filter,
                q.filter,
                &b,
                q.output,
                q.act,
                &mut expected,
            )
            .unwrap();
            let packed = PackedDwU8::pack(uk, 3, 3, c, &filter, &b, q).unwrap();
            let mut got = vec![0x5au8; wd.output.len()];
            pool2().install(|| {
                nnhal_kernels::parallel::with_team(|| {
                    dwconv_u8::depthwise_conv2d_u8(&wd, 1, &packed, &input, &mut got)
                })
            });
            assert!(got == expected, "{} depthwise {:?}", uk.isa, wd.input);
        }

        let wp = window(Nhwc::new(1, 40, 40, 256), 256, (3, 3), (1, 1), p1);
        let input = rng.bytes(wp.input.len());
        let qp = QuantParams::new(0.1, 3);
        for act in ACTS {
            let (mut e1, mut e2) = (vec![0u8; wp.output.len()], vec![0u8; wp.output.len()]);
            pool::average_pool_u8(&wp, &input, qp, act, &mut e1);
            pool::max_pool_u8(&wp, &input, qp, act, &mut e2);
            let (mut g1, mut g2) = (vec![1u8; wp.output.len()], vec![1u8; wp.output.len()]);
            pool2().install(|| {
                pool_u8::average_pool_u8(uk, &wp, &input, qp, act, &mut g1);
                pool_u8::max_pool_u8(uk, &wp, &input, qp, act, &mut g2);
            });
            assert!(g1 == e1 && g2 == e2, "{} pools {act:?}", uk.isa);
        }
    }
}

/// The layers that run far from the dot-product peak: pointwise with few taps (K = 16..32) or
/// few channels (N = 8..24, where a block of 32 has a half the kernel skips), and the first
/// convolution of a 3-channel image (3×3, K = 27), at strides 1 and 2, SAME-like and VALID
/// padding, odd sizes (partial row tiles), per-tensor zero points 0, 128 and 255, every
/// activation (bounds inside the byte range and the full range, where the clamp is skipped)
/// and multipliers from 3e−10 to just below 1, at every level, on the GEMM kernel.
#[test]
fn small_k_and_narrow_layers_match_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0x5A11, uk.isa);
        let (mut fast, mut total) = (0, 0);
        let mut shapes = Vec::new();
        for in_c in [16, 24, 27, 32] {
            for out_c in [8, 16, 24, 40] {
                let input = Nhwc::new(1, 13, 11, in_c);
                shapes.push(window(input, out_c, (1, 1), (1, 1), Padding::default()));
            }
        }
        for (h, w) in [(15, 17), (16, 16)] {
            for s in [1, 2] {
                for p in [
                    Padding::default(),
                    Padding {
                        top: 1,
                        left: 1,
                        bottom: 1,
                        right: 1,
                    },
                    Padding {
                        top: 0,
                        left: 0,
                        bottom: 1,
                        right: 1,
                    },
                ] {
                    for out_c in [16, 24, 32] {
                        let input = Nhwc::new(1, h, w, 3);
                        shapes.push(window(input, out_c, (3, 3), (s, s), p));
                    }
                }
            }
        }
        for (i, w) in shapes.iter().enumerate() {
            for act in ACTS {
                let mut q = quant(&mut rng);
                q.act = act;
                q.input.zero_point = [0, 128, 255][i % 3];
                q.output.zero_point = [0, 128, 255, rng.below(256) as i32][rng.below(4)];
                match check_conv(uk, &mut rng, w, q, i % 4 == 0) {
                    Some("reference") | None => {}
                    Some(name) => {
                        assert_eq!(name, uk.u8_gemm.name, "{w:?} {q:?}");
                        fast += 1;
                    }
                }
                total += 1;
            }
        }
        assert!(
            fast * 10 >= total * 8,
            "{}: only {fast} of {total} cases ran on the GEMM kernel",
            uk.isa
        );
    }
}

/// Thin and wide inputs whose output rows are mostly windows inside the input (the im2col
/// runs that advance one source offset per pixel) with windows at every border, spans below,
/// at and above 16 bytes, batches that a panel crosses, and inputs whose last rows end within
/// 16 bytes of the buffer (the exact copies), at every level.
#[test]
fn im2col_runs_match_reference() {
    for uk in tables() {
        let mut rng = Rng::seeded(0x1C01, uk.isa);
        for case in 0..120 {
            let in_c = rng.pick(&[1, 2, 3, 4, 5, 8]);
            let (kh, kw) = (rng.range(1, 8), rng.range(1, 8));
            let (sh, sw) = (rng.range(1, 4), rng.range(1, 4));
            let p = Padding {
                top: rng.below(kh),
                bottom: rng.below(kh),
                left: rng.below(kw),
                right: rng.below(kw),
            };
            let h = rng.range(kh.saturating_sub(p.top + p.bottom).max(1), 9);
            let w = rng.range(kw.saturating_sub(p.left + p.right).max(1), 48);
            let input = Nhwc::new(rng.range(1, 3), h, w, in_c);
            let out_c = rng.pick(&[8, 16, 24, 32, 40]);
            let win = window(input, out_c, (kh, kw), (sh, sw), p);
            let q = quant(&mut rng);
            check_conv(uk, &mut rng, &win, q, case % 4 == 0);
        }
    }
}
