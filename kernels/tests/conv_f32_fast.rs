//! The float32 GEMM convolution and fully connected loops (`ops::conv_f32`) against the
//! reference oracles `conv::conv2d_f32` and `conv::fully_connected_f32`, on every instruction
//! set level this processor supports.
//!
//! Shapes are chosen so row counts, channel counts and depths are not multiples of any tile
//! (including N = 1001), with 1×1 / 3×3 / 5×3 filters, strides 1–3, asymmetric padding and
//! batch 2, plus seeded random shapes. The fast path sums in a different order, so each
//! element may differ from the reference by a few ULP of the sum of absolute products; the
//! bound is computed per element from the same reference run on absolute values.

mod support;

use nnhal_kernels::conv::f32::{self as conv_f32, PackedConvF32};
use nnhal_kernels::conv::reference as conv;
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::ukernels::Isa;
use nnhal_kernels::{Activation, Nhwc, Padding, Window};
use support::{tables, Rng, ACTIVATIONS};

impl Rng {
    /// Uniform in [-1, 1) with a full 24-bit mantissa.
    fn value(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 23) as f32) - 1.0
    }

    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.value()).collect()
    }
}

fn window(
    input: Nhwc,
    out_c: usize,
    (filter_h, filter_w): (usize, usize),
    (stride_h, stride_w): (usize, usize),
    padding: Padding,
) -> Window {
    let out_h = (input.h + padding.top + padding.bottom - filter_h) / stride_h + 1;
    let out_w = (input.w + padding.left + padding.right - filter_w) / stride_w + 1;
    Window {
        input,
        output: Nhwc::new(input.n, out_h, out_w, out_c),
        filter_h,
        filter_w,
        stride_h,
        stride_w,
        padding,
    }
}

fn abs(v: &[f32]) -> Vec<f32> {
    v.iter().map(|x| x.abs()).collect()
}

/// `got` equals `want` within a few ULP of the matching sum of absolute terms `mag`.
fn assert_close(got: &[f32], want: &[f32], mag: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, ((&g, &w), &m)) in got.iter().zip(want).zip(mag).enumerate() {
        let tol = 1e-5 * m.max(f32::MIN_POSITIVE);
        assert!(
            (g - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w} (tolerance {tol})"
        );
    }
}

/// Runs one convolution on every level and activation against the reference.
fn check_conv(rng: &mut Rng, w: &Window) {
    check_conv_with(rng, w, &ACTIVATIONS);
}

/// Runs one convolution on every level with each of `acts` against the reference.
fn check_conv_with(rng: &mut Rng, w: &Window, acts: &[Activation]) {
    let shape = FilterShape {
        out_c: w.output.c,
        kh: w.filter_h,
        kw: w.filter_w,
        in_c: w.input.c,
    };
    let input = rng.values(w.input.len());
    let filter = rng.values(shape.out_c * shape.taps());
    let bias = rng.values(shape.out_c);
    let mut mag = vec![0.0; w.output.len()];
    conv::conv2d_f32(
        w,
        &abs(&input),
        &abs(&filter),
        &abs(&bias),
        Activation::None,
        &mut mag,
    );
    for uk in tables() {
        let packed = PackedConvF32::pack(uk, shape, &filter, &bias);
        assert!(packed.packed_bytes() >= shape.out_c * (shape.taps() + 1) * 4);
        for &act in acts {
            let mut want = vec![0.0; w.output.len()];
            conv::conv2d_f32(w, &input, &filter, &bias, act, &mut want);
            let mut got = vec![f32::NAN; w.output.len()];
            // A fresh copy per call: later calls reuse the segment plan the first one
            // recorded, which must not depend on where the input lies.
            let moved = input.clone();
            conv_f32::conv2d_f32(w, &packed, &moved, act, &mut got);
            assert_close(&got, &want, &mag, &format!("{} {act:?} {w:?}", uk.isa));
        }
    }
}

fn pad(top: usize, bottom: usize, left: usize, right: usize) -> Padding {
    Padding {
        left,
        right,
        top,
        bottom,
    }
}

#[test]
fn pointwise_gemm_shapes() {
    let mut rng = Rng(1);
    let none = Padding::default();
    // (n, h, w, in_c, out_c): rows and channels off every tile size, M = 1, N = 1001.
    for (n, h, w, ci, co) in [
        (1, 7, 7, 32, 64),
        (1, 5, 3, 17, 33),
        (1, 3, 3, 8, 59),
        (2, 3, 5, 9, 47),
        (1, 1, 1, 64, 1001),
        (2, 1, 1, 13, 7),
        (1, 4, 4, 1, 5),
        (1, 2, 9, 70, 96),
        (1, 8, 8, 3, 1),
        // Last blocks of at most 16 and at most 24 columns (the narrow block kernels).
        (1, 4, 5, 9, 16),
        (1, 3, 7, 11, 24),
        (1, 2, 3, 6, 20),
        (1, 6, 6, 8, 144),
        (1, 1, 1, 40, 56),
    ] {
        check_conv(
            &mut rng,
            &window(Nhwc::new(n, h, w, ci), co, (1, 1), (1, 1), none),
        );
    }
}

#[test]
fn spatial_filters_strides_and_padding() {
    let mut rng = Rng(2);
    let cases = [
        // MobileNet's conv0 in small: 3×3, stride 2, SAME (0 before, 1 after), in_c 3.
        (Nhwc::new(1, 16, 16, 3), 32, (3, 3), (2, 2), pad(0, 1, 0, 1)),
        (Nhwc::new(2, 9, 7, 5), 19, (3, 3), (1, 1), pad(1, 1, 1, 1)),
        (Nhwc::new(1, 11, 10, 4), 33, (5, 3), (2, 3), pad(2, 1, 0, 2)),
        (Nhwc::new(2, 6, 8, 7), 17, (5, 3), (3, 1), pad(3, 2, 1, 1)),
        (
            Nhwc::new(1, 7, 9, 6),
            40,
            (1, 1),
            (2, 2),
            Padding::default(),
        ),
        (Nhwc::new(1, 5, 5, 8), 9, (1, 1), (1, 1), pad(1, 0, 2, 1)),
        (Nhwc::new(1, 4, 4, 2), 3, (3, 3), (1, 1), pad(4, 4, 3, 3)),
        (
            Nhwc::new(2, 3, 3, 11),
            65,
            (3, 3),
            (3, 3),
            Padding::default(),
        ),
    ];
    for (input, co, k, s, p) in cases {
        check_conv(&mut rng, &window(input, co, k, s, p));
    }
}

/// MobileNet v1's conv0 (224×224×3, 3×3 stride 2, SAME = pad 0 before / 1 after), one 1×1
/// layer and the logits, full size, on every level, with the activations MobileNet uses.
#[test]
fn mobilenet_layers() {
    let mut rng = Rng(6);
    let relu6 = [Activation::Relu6];
    check_conv_with(
        &mut rng,
        &window(
            Nhwc::new(1, 224, 224, 3),
            32,
            (3, 3),
            (2, 2),
            pad(0, 1, 0, 1),
        ),
        &relu6,
    );
    let none = Padding::default();
    check_conv_with(
        &mut rng,
        &window(Nhwc::new(1, 14, 14, 256), 512, (1, 1), (1, 1), none),
        &relu6,
    );
    check_conv_with(
        &mut rng,
        &window(Nhwc::new(1, 1, 1, 1024), 1001, (1, 1), (1, 1), none),
        &[Activation::None],
    );
    // MobileNet v2's last 7×7 pointwise layer: 1.6 MB of weights in several panels, each
    // computed while the next one is prefetched, 49 rows (a one-row tile last).
    check_conv_with(
        &mut rng,
        &window(Nhwc::new(1, 7, 7, 320), 1280, (1, 1), (1, 1), none),
        &relu6,
    );
}

#[test]
fn random_shapes() {
    let mut rng = Rng(3);
    for _ in 0..24 {
        let (kh, kw) = (1 + rng.below(5), 1 + rng.below(5));
        let (sh, sw) = (1 + rng.below(3), 1 + rng.below(3));
        let p = pad(rng.below(kh), rng.below(kh), rng.below(kw), rng.below(kw));
        let h = kh.saturating_sub(p.top + p.bottom).max(1) + rng.below(8);
        let wd = kw.saturating_sub(p.left + p.right).max(1) + rng.below(8);
        let input = Nhwc::new(1 + rng.below(2), h, wd, 1 + rng.below(40));
        let out_c = 1 + rng.below(80);
        check_conv(&mut rng, &window(input, out_c, (kh, kw), (sh, sw), p));
    }
}

#[test]
fn fully_connected_matches_reference() {
    let mut rng = Rng(4);
    for (rows, k, units) in [
        (1, 1024, 1001),
        (3, 17, 5),
        (9, 64, 33),
        (2, 1, 40),
        (8, 100, 64),
    ] {
        let input = rng.values(rows * k);
        let weights = rng.values(units * k);
        let bias = rng.values(units);
        let mut mag = vec![0.0; rows * units];
        conv::fully_connected_f32(
            rows,
            k,
            units,
            &abs(&input),
            &abs(&weights),
            &abs(&bias),
            Activation::None,
            &mut mag,
        );
        let shape = FilterShape {
            out_c: units,
            kh: 1,
            kw: 1,
            in_c: k,
        };
        for uk in tables() {
            let packed = PackedConvF32::pack(uk, shape, &weights, &bias);
            for act in ACTIVATIONS {
                let mut want = vec![0.0; rows * units];
                conv::fully_connected_f32(rows, k, units, &input, &weights, &bias, act, &mut want);
                let mut got = vec![f32::NAN; rows * units];
                conv_f32::fully_connected_f32(&packed, rows, &input, act, &mut got);
                assert_close(
                    &got,
                    &want,
                    &mag,
                    &format!("{} {act:?} fc {rows}×{k}×{units}", uk.isa),
                );
            }
        }
    }
}

/// Inside a 2-thread pool the work is split (over row tiles when each thread gets at least
/// four, each thread's tiles cut by columns when the weights exceed a panel, over column
/// blocks otherwise, over (block, tile) cells when the blocks are odd);
/// every element must still be written, with the same
/// bits. Every case is above the fast path's parallel threshold (2^19 multiply-adds).
#[test]
fn parallel_matches_sequential() {
    let mut rng = Rng(5);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let cases = [
        // Many rows: split over row tiles (ragged last tile).
        window(
            Nhwc::new(2, 23, 19, 24),
            70,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        window(Nhwc::new(1, 60, 60, 3), 32, (3, 3), (2, 2), pad(0, 1, 0, 1)),
        // 196 rows, 28 tiles of 7: over row tiles, 14 per thread.
        window(
            Nhwc::new(1, 14, 14, 96),
            200,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        // 100 rows, 15 tiles of 7, and 600 KB of weights (more than half an L2): each
        // thread's share of the row tiles cut into column pieces (ragged last tile and block).
        window(
            Nhwc::new(1, 10, 10, 600),
            250,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        // Few rows: split over column blocks (ragged last block).
        window(
            Nhwc::new(1, 7, 7, 256),
            1001,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        window(
            Nhwc::new(1, 1, 1, 1024),
            1001,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        // Few rows and 5 column blocks, which do not share evenly between 2 threads: over
        // (block, row tile) cells, whole tiles and a ragged last tile.
        window(
            Nhwc::new(1, 7, 7, 96),
            160,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        window(
            Nhwc::new(1, 5, 9, 100),
            150,
            (1, 1),
            (1, 1),
            Padding::default(),
        ),
        // 81 rows, 12 tiles: over row tiles, with a ragged last one.
        window(Nhwc::new(1, 9, 9, 40), 300, (3, 3), (1, 1), pad(1, 1, 1, 1)),
    ];
    for w in cases {
        let shape = FilterShape {
            out_c: w.output.c,
            kh: w.filter_h,
            kw: w.filter_w,
            in_c: w.input.c,
        };
        let input = rng.values(w.input.len());
        let filter = rng.values(shape.out_c * shape.taps());
        let bias = rng.values(shape.out_c);
        for uk in tables() {
            let packed = PackedConvF32::pack(uk, shape, &filter, &bias);
            let mut seq = vec![f32::NAN; w.output.len()];
            conv_f32::conv2d_f32(&w, &packed, &input, Activation::Relu6, &mut seq);
            let mut par = vec![-7.0; w.output.len()];
            pool.install(|| {
                assert!(nnhal_kernels::in_worker());
                conv_f32::conv2d_f32(&w, &packed, &input, Activation::Relu6, &mut par)
            });
            let same = seq
                .iter()
                .zip(&par)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{}: parallel differs from sequential for {w:?}",
                uk.isa
            );
            let mut want = vec![0.0; w.output.len()];
            conv::conv2d_f32(&w, &input, &filter, &bias, Activation::Relu6, &mut want);
            let worst = seq
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(
                worst < 1e-3,
                "{}: {worst} off the reference for {w:?}",
                uk.isa
            );
        }
    }
}

/// One packed filter run over two geometries: the second window must not use the segment
/// plan recorded for the first.
#[test]
fn packed_filter_over_two_windows() {
    let mut rng = Rng(11);
    let a = window(Nhwc::new(1, 17, 13, 3), 20, (3, 3), (2, 2), pad(0, 1, 0, 1));
    let b = window(Nhwc::new(1, 9, 21, 3), 20, (3, 3), (1, 1), pad(1, 1, 1, 1));
    let shape = FilterShape {
        out_c: 20,
        kh: 3,
        kw: 3,
        in_c: 3,
    };
    let filter = rng.values(shape.out_c * shape.taps());
    let bias = rng.values(shape.out_c);
    for uk in tables() {
        let packed = PackedConvF32::pack(uk, shape, &filter, &bias);
        for w in [a, b, a, b] {
            let input = rng.values(w.input.len());
            let mut want = vec![0.0; w.output.len()];
            conv::conv2d_f32(&w, &input, &filter, &bias, Activation::None, &mut want);
            let mut got = vec![f32::NAN; w.output.len()];
            conv_f32::conv2d_f32(&w, &packed, &input, Activation::None, &mut got);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(worst < 1e-4, "{}: {worst} off for {w:?}", uk.isa);
        }
    }
}

/// Each level really packs for its own kernel (a table that silently fell back to the
/// generic one would make the per-level tests above check nothing new).
#[test]
fn levels_use_their_own_kernels() {
    for uk in tables() {
        let name = uk.f32_gemm.name;
        assert!(name.starts_with("f32_gemm_"), "{name}");
        let level = match uk.isa {
            Isa::Avx512Vnni | Isa::Avx512Amx => "avx512",
            Isa::Dotprod => "neon",
            other => other.name(),
        };
        assert!(name.contains(level), "{} uses {name}", uk.isa);
        let packed = PackedConvF32::pack(
            uk,
            FilterShape {
                out_c: 1,
                kh: 1,
                kw: 1,
                in_c: 1,
            },
            &[1.0],
            &[0.0],
        );
        assert_eq!(packed.kernel_name(), name);
    }
}

/// Packed filters are shared by the threads of an execution.
#[test]
fn packed_is_send_sync() {
    fn send_sync<T: Send + Sync + std::fmt::Debug>() {}
    send_sync::<PackedConvF32>();
}
