//! Speed of the float32 convolution loops (`ops::conv_f32`) on the 15 CONV_2D layers of
//! MobileNet v1 1.0/224 (shapes from the MobileNet layer table): microseconds and GFLOP/s per
//! layer and their sum. A tuning tool, not a test.
//!
//! `cargo run --release -p nnhal-kernels --example ukbench -- [--isa X] [--threads N] [--reps R] [--only LAYER]`

use std::time::Instant;

use nnhal_kernels::conv::f32::{self as conv_f32, PackedConvF32};
use nnhal_kernels::conv::FilterShape;
use nnhal_kernels::ukernels::{self, Isa};
use nnhal_kernels::{Activation, Nhwc, Padding, Window};

struct Layer {
    name: &'static str,
    input: Nhwc,
    out_c: usize,
    k: usize,
    stride: usize,
    padding: Padding,
    act: Activation,
}

fn layers() -> Vec<Layer> {
    let same_s2 = Padding {
        left: 0,
        right: 1,
        top: 0,
        bottom: 1,
    };
    let mut v = vec![Layer {
        name: "conv0",
        input: Nhwc::new(1, 224, 224, 3),
        out_c: 32,
        k: 3,
        stride: 2,
        padding: same_s2,
        act: Activation::Relu6,
    }];
    // (spatial, in_c, out_c) of pw1..pw13.
    let pw = [
        (112, 32, 64),
        (56, 64, 128),
        (56, 128, 128),
        (28, 128, 256),
        (28, 256, 256),
        (14, 256, 512),
        (14, 512, 512),
        (14, 512, 512),
        (14, 512, 512),
        (14, 512, 512),
        (14, 512, 512),
        (7, 512, 1024),
        (7, 1024, 1024),
    ];
    let extra: Vec<(usize, usize, usize)> = std::env::var("UKBENCH_EXTRA")
        .ok()
        .map(|s| {
            s.split(';')
                .map(|t| {
                    let v: Vec<usize> = t.split(',').map(|x| x.trim().parse().unwrap()).collect();
                    (v[0], v[1], v[2])
                })
                .collect()
        })
        .unwrap_or_default();
    const NAMES: [&str; 13] = [
        "pw1", "pw2", "pw3", "pw4", "pw5", "pw6", "pw7", "pw8", "pw9", "pw10", "pw11", "pw12",
        "pw13",
    ];
    for (name, (hw, ci, co)) in NAMES.iter().zip(pw) {
        v.push(Layer {
            name,
            input: Nhwc::new(1, hw, hw, ci),
            out_c: co,
            k: 1,
            stride: 1,
            padding: Padding::default(),
            act: Activation::Relu6,
        });
    }
    for (hw, ci, co) in extra {
        v.push(Layer {
            name: "extra",
            input: Nhwc::new(1, hw, hw, ci),
            out_c: co,
            k: 1,
            stride: 1,
            padding: Padding::default(),
            act: Activation::Relu6,
        });
    }
    v.push(Layer {
        name: "logits",
        input: Nhwc::new(1, 1, 1, 1024),
        out_c: 1001,
        k: 1,
        stride: 1,
        padding: Padding::default(),
        act: Activation::None,
    });
    v
}

fn window(l: &Layer) -> Window {
    let p = l.padding;
    let oh = (l.input.h + p.top + p.bottom - l.k) / l.stride + 1;
    let ow = (l.input.w + p.left + p.right - l.k) / l.stride + 1;
    Window {
        input: l.input,
        output: Nhwc::new(l.input.n, oh, ow, l.out_c),
        filter_h: l.k,
        filter_w: l.k,
        stride_h: l.stride,
        stride_w: l.stride,
        padding: p,
    }
}

fn values(seed: &mut u64, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((*seed >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * 0.5
        })
        .collect()
}

fn main() {
    let mut isa = None;
    let mut threads = 1usize;
    let mut reps = 30usize;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("missing value");
        match a.as_str() {
            "--isa" => isa = Some(Isa::parse(&val()).expect("isa")),
            "--threads" => threads = val().parse().expect("threads"),
            "--reps" => reps = val().parse().expect("reps"),
            "--only" => only = Some(val()),
            other => panic!("unknown argument {other}"),
        }
    }
    let uk = match isa {
        Some(i) => ukernels::table(i).expect("isa not usable here"),
        None => ukernels::best(),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    println!(
        "isa {} kernel {} threads {threads} reps {reps} (median)",
        uk.isa, uk.f32_gemm.name
    );
    let mut seed = 1u64;
    let (mut total_us, mut total_flop) = (0.0f64, 0.0f64);
    for l in layers() {
        if only.as_deref().is_some_and(|o| o != l.name) {
            continue;
        }
        let w = window(&l);
        let shape = FilterShape {
            out_c: l.out_c,
            kh: l.k,
            kw: l.k,
            in_c: l.input.c,
        };
        let filter = values(&mut seed, shape.out_c * shape.taps());
        let bias = values(&mut seed, shape.out_c);
        let input = values(&mut seed, w.input.len());
        let packed = PackedConvF32::pack(uk, shape, &filter, &bias);
        let mut out = vec![0.0f32; w.output.len()];
        let mut times = Vec::with_capacity(reps);
        pool.install(|| {
            for _ in 0..3 {
                conv_f32::conv2d_f32(&w, &packed, &input, l.act, &mut out);
            }
            for _ in 0..reps {
                let t = Instant::now();
                conv_f32::conv2d_f32(&w, &packed, &input, l.act, &mut out);
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        });
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let us = times[times.len() / 2];
        let best = times[0];
        let flop = 2.0 * (w.output.len() * shape.taps()) as f64;
        total_us += us;
        total_flop += flop;
        println!(
            "{:<7} M={:<6} K={:<5} N={:<5} {:>9.1} us {:>7.1} GFLOP/s (best {:>7.1})",
            l.name,
            w.output.n * w.output.h * w.output.w,
            shape.taps(),
            shape.out_c,
            us,
            flop / us * 1e-3,
            flop / best * 1e-3
        );
    }
    println!(
        "sum             {:>27.1} us {:>7.1} GFLOP/s",
        total_us,
        total_flop / total_us * 1e-3
    );
}
