//! Every kernel with a parallel branch computes, on a rayon pool worker, exactly the bits it
//! computes on a plain thread.
//!
//! Kernels fan their work out over the pool only when called from one of its workers
//! (`nnhal_kernels::in_worker`), and most of them only above a length threshold. The
//! conformance vectors are tiny and run from the test thread, so they never reach those
//! branches. Each test here builds pseudo-random operands with shapes large enough to take
//! the parallel branch with several chunks and a ragged last chunk (batch > 1, odd extents,
//! padding and strides where the kernel has them), runs the kernel once on the test thread
//! and once inside a 4-thread pool, and compares the two outputs bit for bit. The two output
//! buffers start from different fill patterns, so an element that neither run writes shows
//! up as a mismatch too.
//!
//! CONCATENATION, DEPTH_TO_SPACE and SPACE_TO_DEPTH have no parallel branch today; they are
//! covered anyway so that one added later is checked from the start.

mod support;

use std::fmt::Debug;
use std::sync::OnceLock;
use support::{Rng, ACTIVATIONS};

use nnhal_kernels::conv::reference as conv;
use nnhal_kernels::elementwise::reference as ew;
use nnhal_kernels::normalization::reference as norm;
use nnhal_kernels::pool::reference as pool;
use nnhal_kernels::quantize::reference as qz;
use nnhal_kernels::transform::reference as transform;
use nnhal_kernels::{in_worker, Activation, Nhwc, Padding, QuantParams, Window};

/// Mirrors of the private thresholds in kernels/src (`PARALLEL_MIN_LEN` of the element-wise,
/// transform and normalization reference loops, `PARALLEL_CHUNK` of the element-wise and
/// normalization ones).
/// Only used to assert that the shapes below really are past them.
const PARALLEL_MIN_LEN: usize = 1 << 16;
const PARALLEL_CHUNK: usize = 1 << 14;

impl Rng {
    /// Uniform in [lo, hi), with a full 24-bit mantissa so sums depend on their order.
    fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| lo + (hi - lo) * ((self.next() >> 40) as f32 / (1u32 << 24) as f32))
            .collect()
    }

    fn u8s(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 56) as u8).collect()
    }

    /// Uniform in [-bound, bound].
    fn i32s(&mut self, n: usize, bound: i32) -> Vec<i32> {
        let span = 2 * bound as u64 + 1;
        (0..n)
            .map(|_| (self.next() % span) as i32 - bound)
            .collect()
    }
}

/// An output element type: two distinct fill patterns and an exact bit view.
trait Elem: Copy + Send + Sync + Debug {
    const FILLS: [Self; 2];
    fn bits(self) -> u32;
}

impl Elem for f32 {
    // Two NaN payloads no kernel produces.
    const FILLS: [f32; 2] = [f32::from_bits(0x7fc0_5e05), f32::from_bits(0x7fc0_9a72)];
    fn bits(self) -> u32 {
        self.to_bits()
    }
}

impl Elem for u8 {
    const FILLS: [u8; 2] = [0x5a, 0xa5];
    fn bits(self) -> u32 {
        self.into()
    }
}

fn thread_pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap()
    })
}

/// Runs `kernel` into a `len`-element output on the calling (non-pool) thread and again on a
/// worker of the 4-thread pool, and asserts that the outputs are identical bit for bit.
fn check<T: Elem>(what: &str, len: usize, kernel: impl Fn(&mut [T]) + Sync) {
    assert!(
        !in_worker(),
        "{what}: the sequential run must be off the pool"
    );
    let mut seq = vec![T::FILLS[0]; len];
    kernel(&mut seq);
    let mut par = vec![T::FILLS[1]; len];
    thread_pool().install(|| {
        assert!(in_worker(), "{what}: install() must run on a pool worker");
        kernel(&mut par);
    });
    let differs = |i: &usize| seq[*i].bits() != par[*i].bits();
    if let Some(i) = (0..len).find(differs) {
        let count = (0..len).filter(differs).count();
        panic!(
            "{what}: {count} of {len} elements differ, the first at index {i}: \
             sequential {:?} ({:#x}), parallel {:?} ({:#x})",
            seq[i],
            seq[i].bits(),
            par[i],
            par[i].bits()
        );
    }
}

/// Asserts that a chunked kernel of `len` elements gets at least three full chunks of
/// `chunk` and a partial one.
fn assert_ragged(len: usize, chunk: usize) {
    assert!(len >= PARALLEL_MIN_LEN, "{len} stays sequential");
    assert!(
        len / chunk >= 3 && !len.is_multiple_of(chunk),
        "{len} vs chunk {chunk}"
    );
}

fn q(scale: f32, zero_point: i32) -> QuantParams {
    QuantParams::new(scale, zero_point)
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

/// Padding on every side, different on each so no two edges clip alike.
const PAD: Padding = Padding {
    left: 2,
    right: 1,
    top: 1,
    bottom: 2,
};

#[test]
fn conv2d() {
    let mut rng = Rng(1);
    // 2 × 20 output rows of 15 pixels; filter 3×4 over stride 2 with uneven padding.
    let w = window(Nhwc::new(2, 39, 29, 11), 7, (3, 4), (2, 2), PAD);
    assert_eq!((w.output.h, w.output.w), (20, 15));
    let filter_len = w.output.c * w.filter_h * w.filter_w * w.input.c;

    let input = rng.f32s(w.input.len(), -4.0, 4.0);
    let filter = rng.f32s(filter_len, -0.25, 0.25);
    let bias = rng.f32s(w.output.c, -1.0, 1.0);
    check("conv2d_f32", w.output.len(), |out| {
        conv::conv2d_f32(&w, &input, &filter, &bias, Activation::Relu6, out)
    });

    // Multiplier 0.02 · 0.01 / 0.05 = 0.004; Relu6 spans q 10..=130.
    let input = rng.u8s(w.input.len());
    let filter = rng.u8s(filter_len);
    let bias = rng.i32s(w.output.c, 5000);
    check("conv2d_u8", w.output.len(), |out| {
        conv::conv2d_u8(
            &w,
            &input,
            q(0.02, 128),
            &filter,
            q(0.01, 120),
            &bias,
            q(0.05, 10),
            Activation::Relu6,
            out,
        )
        .unwrap()
    });
}

#[test]
fn depthwise_conv2d() {
    let mut rng = Rng(2);
    // Multiplier 1 and 3 take different inner loops. 3 × 26 output rows of 11 pixels.
    for multiplier in [1, 3] {
        let w = window(Nhwc::new(3, 25, 21, 5), 5 * multiplier, (3, 3), (1, 2), PAD);
        assert_eq!((w.output.h, w.output.w), (26, 11));
        let filter_len = w.filter_h * w.filter_w * w.output.c;

        let input = rng.f32s(w.input.len(), -4.0, 4.0);
        let filter = rng.f32s(filter_len, -1.0, 1.0);
        let bias = rng.f32s(w.output.c, -1.0, 1.0);
        check(
            &format!("depthwise_conv2d_f32 ×{multiplier}"),
            w.output.len(),
            |out| {
                conv::depthwise_conv2d_f32(
                    &w,
                    multiplier,
                    &input,
                    &filter,
                    &bias,
                    Activation::Relu1,
                    out,
                )
            },
        );

        let input = rng.u8s(w.input.len());
        let filter = rng.u8s(filter_len);
        let bias = rng.i32s(w.output.c, 5000);
        check(
            &format!("depthwise_conv2d_u8 ×{multiplier}"),
            w.output.len(),
            |out| {
                conv::depthwise_conv2d_u8(
                    &w,
                    multiplier,
                    &input,
                    q(0.02, 128),
                    &filter,
                    q(0.01, 120),
                    &bias,
                    q(0.03, 128),
                    Activation::None,
                    out,
                )
                .unwrap()
            },
        );
    }
}

#[test]
fn fully_connected() {
    let mut rng = Rng(3);
    // The grain is 16384 / input_size outputs (54 and 2340 here); neither the batch, the
    // units nor the output length is a multiple of it. Input size 7 also takes the short
    // dot-product path.
    for (batch, input_size, units) in [(5, 300, 205), (13, 7, 997)] {
        let len = batch * units;
        assert!(len / (16384 / input_size) >= 4, "too few grains");

        let input = rng.f32s(batch * input_size, -2.0, 2.0);
        let weights = rng.f32s(units * input_size, -0.5, 0.5);
        let bias = rng.f32s(units, -1.0, 1.0);
        check(
            &format!("fully_connected_f32 {batch}×{input_size}→{units}"),
            len,
            |out| {
                conv::fully_connected_f32(
                    batch,
                    input_size,
                    units,
                    &input,
                    &weights,
                    &bias,
                    Activation::Relu,
                    out,
                )
            },
        );

        let input = rng.u8s(batch * input_size);
        let weights = rng.u8s(units * input_size);
        let bias = rng.i32s(units, 5000);
        check(
            &format!("fully_connected_u8 {batch}×{input_size}→{units}"),
            len,
            |out| {
                conv::fully_connected_u8(
                    batch,
                    input_size,
                    units,
                    &input,
                    q(0.02, 128),
                    &weights,
                    q(0.01, 120),
                    &bias,
                    q(0.2, 128),
                    Activation::Relu,
                    out,
                )
                .unwrap()
            },
        );
    }
}

/// The NumPy broadcast of two shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], j: usize| (j + s.len()).checked_sub(rank).map_or(1, |k| s[k]);
    (0..rank).map(|j| dim(a, j).max(dim(b, j))).collect()
}

/// Operand shapes of ADD and MUL, all broadcasting to [3, 37, 19, 41] (86 469 elements: five
/// full chunks and a partial one). Chunk boundaries fall mid-run, and the last axis is
/// walked with steps (1, 1), (1, 0) and (0, 1).
const BINARY_SHAPES: [(&[usize], &[usize]); 4] = [
    (&[3, 37, 19, 41], &[3, 37, 19, 41]),
    (&[3, 37, 19, 41], &[1, 1, 19, 1]),
    (&[19, 41], &[3, 37, 19, 41]),
    (&[3, 1, 19, 1], &[1, 37, 1, 41]),
];

#[test]
fn add_and_mul_f32() {
    let mut rng = Rng(4);
    for (i, (a_shape, b_shape)) in BINARY_SHAPES.into_iter().enumerate() {
        let out_shape = broadcast_shape(a_shape, b_shape);
        let len = out_shape.iter().product();
        assert_ragged(len, PARALLEL_CHUNK);
        let a = rng.f32s(a_shape.iter().product(), -4.0, 4.0);
        let b = rng.f32s(b_shape.iter().product(), -4.0, 4.0);
        let act = ACTIVATIONS[i];
        let case = format!("{a_shape:?} with {b_shape:?}, {act:?}");
        check(&format!("add_f32 {case}"), len, |out| {
            ew::add_f32(&a, a_shape, &b, b_shape, act, out, &out_shape)
        });
        check(&format!("mul_f32 {case}"), len, |out| {
            ew::mul_f32(&a, a_shape, &b, b_shape, act, out, &out_shape)
        });
    }
}

#[test]
fn add_and_mul_u8() {
    let mut rng = Rng(5);
    for (i, (a_shape, b_shape)) in BINARY_SHAPES.into_iter().enumerate() {
        let out_shape = broadcast_shape(a_shape, b_shape);
        let len = out_shape.iter().product();
        assert_ragged(len, PARALLEL_CHUNK);
        let a = rng.u8s(a_shape.iter().product());
        let b = rng.u8s(b_shape.iter().product());
        let act = ACTIVATIONS[(i + 1) % 4];
        let case = format!("{a_shape:?} with {b_shape:?}, {act:?}");
        check(&format!("add_u8 {case}"), len, |out| {
            ew::add_u8(
                &a,
                a_shape,
                q(0.01, 100),
                &b,
                b_shape,
                q(0.015, 50),
                q(0.02, 128),
                act,
                out,
                &out_shape,
            )
            .unwrap()
        });
        // Multiplier 0.05 · 0.04 / 0.05 = 0.04.
        check(&format!("mul_u8 {case}"), len, |out| {
            ew::mul_u8(
                &a,
                a_shape,
                q(0.05, 128),
                &b,
                b_shape,
                q(0.04, 120),
                q(0.05, 100),
                act,
                out,
                &out_shape,
            )
            .unwrap()
        });
    }
}

/// Length of the unary inputs: five full chunks and a partial one.
const UNARY_LEN: usize = 5 * PARALLEL_CHUNK + 777;

#[test]
fn unary_f32() {
    assert_ragged(UNARY_LEN, PARALLEL_CHUNK);
    let x = Rng(6).f32s(UNARY_LEN, -8.0, 8.0);
    check("floor_f32", UNARY_LEN, |out| ew::floor_f32(&x, out));
    for act in ACTIVATIONS {
        check(&format!("clamp_f32 {act:?}"), UNARY_LEN, |out| {
            ew::clamp_f32(act, &x, out)
        });
    }
    check("logistic_f32", UNARY_LEN, |out| ew::logistic_f32(&x, out));
    check("tanh_f32", UNARY_LEN, |out| ew::tanh_f32(&x, out));
}

#[test]
fn unary_u8() {
    assert_ragged(UNARY_LEN, PARALLEL_CHUNK);
    let x = Rng(7).u8s(UNARY_LEN);
    for act in ACTIVATIONS {
        check(&format!("clamp_u8 {act:?}"), UNARY_LEN, |out| {
            ew::clamp_u8(act, q(0.05, 100), &x, out)
        });
    }
    for qp in [q(0.0625, 100), q(0.02, 128)] {
        check(&format!("logistic_u8 {qp:?}"), UNARY_LEN, |out| {
            ew::logistic_u8(&x, qp, out).unwrap()
        });
    }
    check("dequantize", UNARY_LEN, |out: &mut [f32]| {
        qz::dequantize_u8(&x, q(0.37, 131), out)
    });
    check("dequantize_i8", UNARY_LEN, |out: &mut [f32]| {
        qz::dequantize_i8(&x, 0.37, out)
    });
    // A ragged channel count, so chunks start mid-channel.
    let scales: Vec<f32> = (0..7).map(|c| 0.1 + c as f32 * 0.3).collect();
    let rows = UNARY_LEN / 7;
    check("dequantize_per_channel", rows * 7, |out: &mut [f32]| {
        qz::dequantize_per_channel(&x[..rows * 7], &[rows, 7], 1, &scales, out)
    });
    let f: Vec<f32> = x.iter().map(|&v| f32::from(v) * 0.731 - 90.0).collect();
    check("quantize_u8", UNARY_LEN, |out: &mut [u8]| {
        qz::quantize_u8(&f, q(0.37, 131), out)
    });
}

/// `(depth, rows)` of the normalization inputs. Tasks hold `max(16384 / depth, 1)` whole
/// rows: 442 rows of 37 (ragged: 4 full tasks and 8 695 elements), 16 rows of 1000 (4 full
/// tasks and 6 000), and single rows of 20 000, longer than a chunk.
const ROWS: [(usize, usize); 3] = [(37, 2003), (1000, 70), (20_000, 4)];

fn for_each_row_shape(mut body: impl FnMut(usize, usize)) {
    for (depth, rows) in ROWS {
        let len = depth * rows;
        let task = (PARALLEL_CHUNK / depth).max(1) * depth;
        if task == depth {
            // One row per task: there is no partial task to have.
            assert!(len >= PARALLEL_MIN_LEN && rows >= 3);
        } else {
            assert_ragged(len, task);
        }
        body(depth, len);
    }
}

#[test]
fn softmax() {
    let mut rng = Rng(8);
    for_each_row_shape(|depth, len| {
        let x = rng.f32s(len, -6.0, 6.0);
        check(&format!("softmax_f32 depth {depth}"), len, |out| {
            norm::softmax_f32(&x, depth, 0.7, out)
        });
        // Skewed towards 0 so that a few entries dominate each row: with uniform bytes nearly
        // every probability of a 1000-long row is below 1/256 and quantizes to 0.
        let x: Vec<u8> = rng
            .u8s(len)
            .iter()
            .map(|&v| (u32::from(v).pow(3) / 255u32.pow(2)) as u8)
            .collect();
        for (scale, beta) in [(0.1, 1.0), (0.5, 0.5), (2.0, 1.0)] {
            check(
                &format!("softmax_u8 depth {depth} scale {scale} beta {beta}"),
                len,
                |out| norm::softmax_u8(&x, q(scale, 0), depth, beta, out).unwrap(),
            );
        }
    });
}

#[test]
fn l2_normalization() {
    let mut rng = Rng(9);
    for_each_row_shape(|depth, len| {
        let x = rng.f32s(len, -3.0, 3.0);
        check(&format!("l2_normalization_f32 depth {depth}"), len, |out| {
            norm::l2_normalization_f32(&x, depth, out)
        });
    });
}

#[test]
fn local_response_normalization() {
    let mut rng = Rng(10);
    for_each_row_shape(|depth, len| {
        let x = rng.f32s(len, -2.0, 2.0);
        check(
            &format!("local_response_normalization_f32 depth {depth}"),
            len,
            |out| norm::local_response_normalization_f32(&x, depth, 3, 1.0, 0.3, 0.75, out),
        );
    });
}

#[test]
fn pooling() {
    let mut rng = Rng(11);
    // 3 × 42 output rows of 21 pixels; filter 3×4 over strides 2×3, so windows overlap, with
    // uneven padding.
    let w = window(Nhwc::new(3, 83, 61, 7), 7, (3, 4), (2, 3), PAD);
    assert_eq!((w.output.h, w.output.w), (42, 21));
    let len = w.output.len();

    let x = rng.f32s(w.input.len(), -4.0, 4.0);
    check("average_pool_f32", len, |out| {
        pool::average_pool_f32(&w, &x, Activation::Relu1, out)
    });
    check("max_pool_f32", len, |out| {
        pool::max_pool_f32(&w, &x, Activation::Relu, out)
    });
    check("l2_pool_f32", len, |out| {
        pool::l2_pool_f32(&w, &x, Activation::None, out)
    });

    let x = rng.u8s(w.input.len());
    check("average_pool_u8", len, |out| {
        pool::average_pool_u8(&w, &x, q(0.05, 100), Activation::Relu6, out)
    });
    check("max_pool_u8", len, |out| {
        pool::max_pool_u8(&w, &x, q(0.02, 128), Activation::None, out)
    });
}

#[test]
fn resize_bilinear() {
    let mut rng = Rng(12);
    // Non-integer scales both ways: 13×11 → 97×151 (batch 2) and 300×250 → 171×133.
    for (shape, out_h, out_w) in [
        (Nhwc::new(2, 13, 11, 3), 97, 151),
        (Nhwc::new(1, 300, 250, 3), 171, 133),
    ] {
        let len = shape.n * out_h * out_w * shape.c;
        assert!(len >= PARALLEL_MIN_LEN, "{len} stays sequential");
        let x = rng.f32s(shape.len(), -4.0, 4.0);
        check(
            &format!("resize_bilinear_f32 {shape:?} → {out_h}×{out_w}"),
            len,
            |out| transform::resize_bilinear_f32(&x, shape, out_h, out_w, out),
        );
    }
}

#[test]
fn depth_and_space() {
    let mut rng = Rng(13);
    let shape = Nhwc::new(2, 37, 29, 18);
    let x = rng.f32s(shape.len(), -4.0, 4.0);
    check("depth_to_space f32", shape.len(), |out| {
        transform::depth_to_space(&x, shape, 3, out)
    });
    let shape = Nhwc::new(2, 39, 87, 5);
    let x = rng.u8s(shape.len());
    check("space_to_depth u8", shape.len(), |out| {
        transform::space_to_depth(&x, shape, 3, out)
    });
}

#[test]
fn concatenation() {
    let mut rng = Rng(14);
    // Three inputs of [3, 17, 23, 5] with the given extent on `axis`.
    for (axis, extents) in [(0, [1, 4, 2]), (1, [17, 4, 29]), (3, [5, 2, 7])] {
        let shapes: Vec<Vec<usize>> = extents
            .iter()
            .map(|&e| {
                let mut s = vec![3, 17, 23, 5];
                s[axis] = e;
                s
            })
            .collect();
        let data: Vec<Vec<f32>> = shapes
            .iter()
            .map(|s| rng.f32s(s.iter().product(), -4.0, 4.0))
            .collect();
        let inputs: Vec<(&[f32], &[usize])> = data
            .iter()
            .zip(&shapes)
            .map(|(d, s)| (&d[..], &s[..]))
            .collect();
        let len = data.iter().map(Vec::len).sum();
        check(&format!("concatenation axis {axis}"), len, |out| {
            transform::concatenation(&inputs, axis, out)
        });
    }
}
