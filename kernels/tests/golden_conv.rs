//! Runs the convolution, fully-connected and pooling kernels directly on the golden conformance
//! vectors of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D and
//! L2_POOL_2D, resolving each operation's scalar operands the way the driver does.
//!
//! Quant8 outputs must match the goldens exactly (stricter than the harness's ±1): these
//! kernels are the reference the faster variants are checked against.

mod common;

use common::{assert_f32_close, assert_u8_close, Example, Vector};
use nnhal_kernels::conv::reference as conv;
use nnhal_kernels::pool::reference as pool;
use nnhal_kernels::{Activation, Nhwc, Padding, QuantParams, Window};

fn activation(code: i32) -> Activation {
    match code {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Relu1,
        3 => Activation::Relu6,
        _ => panic!("fused activation {code}"),
    }
}

/// One spatial axis of an implicit-padding op: `(out, pad_head, pad_tail)`.
fn implicit_axis(scheme: i32, input: usize, stride: usize, filter: usize) -> (usize, usize, usize) {
    match scheme {
        // SAME
        1 => {
            let out = input.div_ceil(stride);
            let total = ((out - 1) * stride + filter).saturating_sub(input);
            (out, total / 2, total - total / 2)
        }
        // VALID
        2 => ((input - filter) / stride + 1, 0, 0),
        _ => panic!("padding scheme {scheme}"),
    }
}

/// One spatial axis of an explicit-padding op.
fn explicit_out(input: usize, filter: usize, stride: usize, head: usize, tail: usize) -> usize {
    (input + stride + head + tail - filter) / stride
}

/// The parameters that follow the tensor operands of a sliding-window op.
struct Spatial {
    padding: Padding,
    out_h: usize,
    out_w: usize,
    stride_h: usize,
    stride_w: usize,
}

/// Reads `[pad_l, pad_r, pad_t, pad_b, stride_w, stride_h]` (explicit) or
/// `[scheme, stride_w, stride_h]` (implicit) starting at operand position `first`.
fn spatial(
    v: &Vector,
    ex: &Example,
    ins: &[usize],
    first: usize,
    explicit: bool,
    input: Nhwc,
    (filter_h, filter_w): (usize, usize),
) -> Spatial {
    let s = |k: usize| v.scalar_i32(ex, ins[first + k]);
    let u = |k: usize| usize::try_from(s(k)).unwrap();
    if explicit {
        let padding = Padding {
            left: u(0),
            right: u(1),
            top: u(2),
            bottom: u(3),
        };
        let (stride_w, stride_h) = (u(4), u(5));
        Spatial {
            out_h: explicit_out(input.h, filter_h, stride_h, padding.top, padding.bottom),
            out_w: explicit_out(input.w, filter_w, stride_w, padding.left, padding.right),
            padding,
            stride_h,
            stride_w,
        }
    } else {
        let scheme = s(0);
        let (stride_w, stride_h) = (u(1), u(2));
        let (out_h, top, bottom) = implicit_axis(scheme, input.h, stride_h, filter_h);
        let (out_w, left, right) = implicit_axis(scheme, input.w, stride_w, filter_w);
        Spatial {
            padding: Padding {
                left,
                right,
                top,
                bottom,
            },
            out_h,
            out_w,
            stride_h,
            stride_w,
        }
    }
}

fn nhwc(dims: &[usize]) -> Nhwc {
    assert_eq!(dims.len(), 4, "rank");
    Nhwc::new(dims[0], dims[1], dims[2], dims[3])
}

fn quant(v: &Vector, i: usize) -> QuantParams {
    QuantParams::new(v.operands[i].scale, v.operands[i].zero_point)
}

fn is_quant(v: &Vector, i: usize) -> bool {
    v.operands[i].ty == "TENSOR_QUANT8_ASYMM"
}

/// Compares one output and returns the exact-match count for quant8 (None for float).
enum Out {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

fn check(what: &str, expected: &[f64], out: Out) -> Option<(usize, usize)> {
    match out {
        Out::F32(a) => {
            assert_f32_close(what, expected, &a);
            None
        }
        Out::U8(a) => Some((assert_u8_close(what, expected, &a), a.len())),
    }
}

fn run_conv(v: &Vector, ex: &Example, ins: &[usize], depthwise: bool) -> Out {
    let input_shape = nhwc(&v.operands[ins[0]].dims);
    let filter_dims = &v.operands[ins[1]].dims;
    let (filter_h, filter_w) = (filter_dims[1], filter_dims[2]);
    let explicit = ins.len() == if depthwise { 11 } else { 10 };
    let sp = spatial(v, ex, ins, 3, explicit, input_shape, (filter_h, filter_w));
    // Depth multiplier and activation follow the padding/stride operands.
    let after = 3 + if explicit { 6 } else { 3 };
    let (depth_multiplier, act) = if depthwise {
        (
            usize::try_from(v.scalar_i32(ex, ins[after])).unwrap(),
            activation(v.scalar_i32(ex, ins[after + 1])),
        )
    } else {
        (1, activation(v.scalar_i32(ex, ins[after])))
    };
    let out_c = if depthwise {
        filter_dims[3]
    } else {
        filter_dims[0]
    };
    let w = Window {
        input: input_shape,
        output: Nhwc::new(input_shape.n, sp.out_h, sp.out_w, out_c),
        filter_h,
        filter_w,
        stride_h: sp.stride_h,
        stride_w: sp.stride_w,
        padding: sp.padding,
    };
    if is_quant(v, ins[0]) {
        let input = v.u8s(ex, ins[0]);
        let filter = v.u8s(ex, ins[1]);
        let bias = v.i32s(ex, ins[2]);
        let (iq, fq) = (quant(v, ins[0]), quant(v, ins[1]));
        let oq = quant(v, v.operations[0].outputs[0]);
        let mut out = vec![0u8; w.output.len()];
        if depthwise {
            conv::depthwise_conv2d_u8(
                &w,
                depth_multiplier,
                &input,
                iq,
                &filter,
                fq,
                &bias,
                oq,
                act,
                &mut out,
            )
        } else {
            conv::conv2d_u8(&w, &input, iq, &filter, fq, &bias, oq, act, &mut out)
        }
        .unwrap();
        Out::U8(out)
    } else {
        let input = v.f32s(ex, ins[0]);
        let filter = v.f32s(ex, ins[1]);
        let bias = v.f32s(ex, ins[2]);
        let mut out = vec![0f32; w.output.len()];
        if depthwise {
            conv::depthwise_conv2d_f32(&w, depth_multiplier, &input, &filter, &bias, act, &mut out);
        } else {
            conv::conv2d_f32(&w, &input, &filter, &bias, act, &mut out);
        }
        Out::F32(out)
    }
}

fn run_fully_connected(v: &Vector, ex: &Example, ins: &[usize]) -> Out {
    let weights_dims = &v.operands[ins[1]].dims;
    let (units, input_size) = (weights_dims[0], weights_dims[1]);
    let input_len: usize = v.operands[ins[0]].dims.iter().product();
    let batch = input_len / input_size;
    let act = activation(v.scalar_i32(ex, ins[3]));
    if is_quant(v, ins[0]) {
        let oq = quant(v, v.operations[0].outputs[0]);
        let mut out = vec![0u8; batch * units];
        conv::fully_connected_u8(
            batch,
            input_size,
            units,
            &v.u8s(ex, ins[0]),
            quant(v, ins[0]),
            &v.u8s(ex, ins[1]),
            quant(v, ins[1]),
            &v.i32s(ex, ins[2]),
            oq,
            act,
            &mut out,
        )
        .unwrap();
        Out::U8(out)
    } else {
        let mut out = vec![0f32; batch * units];
        conv::fully_connected_f32(
            batch,
            input_size,
            units,
            &v.f32s(ex, ins[0]),
            &v.f32s(ex, ins[1]),
            &v.f32s(ex, ins[2]),
            act,
            &mut out,
        );
        Out::F32(out)
    }
}

fn run_pool(v: &Vector, ex: &Example, ins: &[usize], op: &str) -> Out {
    let input_shape = nhwc(&v.operands[ins[0]].dims);
    let explicit = ins.len() == 10;
    // Filter width/height follow the strides.
    let at = if explicit { 7 } else { 4 };
    let filter_w = usize::try_from(v.scalar_i32(ex, ins[at])).unwrap();
    let filter_h = usize::try_from(v.scalar_i32(ex, ins[at + 1])).unwrap();
    let act = activation(v.scalar_i32(ex, ins[at + 2]));
    let sp = spatial(v, ex, ins, 1, explicit, input_shape, (filter_h, filter_w));
    let w = Window {
        input: input_shape,
        output: Nhwc::new(input_shape.n, sp.out_h, sp.out_w, input_shape.c),
        filter_h,
        filter_w,
        stride_h: sp.stride_h,
        stride_w: sp.stride_w,
        padding: sp.padding,
    };
    if is_quant(v, ins[0]) {
        let q = quant(v, ins[0]);
        assert_eq!(q, quant(v, v.operations[0].outputs[0]), "output params");
        let input = v.u8s(ex, ins[0]);
        let mut out = vec![0u8; w.output.len()];
        match op {
            "AVERAGE_POOL_2D" => pool::average_pool_u8(&w, &input, q, act, &mut out),
            "MAX_POOL_2D" => pool::max_pool_u8(&w, &input, q, act, &mut out),
            _ => panic!("{op} has no quant8 form"),
        }
        Out::U8(out)
    } else {
        let input = v.f32s(ex, ins[0]);
        let mut out = vec![0f32; w.output.len()];
        match op {
            "AVERAGE_POOL_2D" => pool::average_pool_f32(&w, &input, act, &mut out),
            "MAX_POOL_2D" => pool::max_pool_f32(&w, &input, act, &mut out),
            "L2_POOL_2D" => pool::l2_pool_f32(&w, &input, act, &mut out),
            _ => unreachable!(),
        }
        Out::F32(out)
    }
}

/// Runs every example of one vector; returns the quant8 (exact, total) counts, if any.
fn run(name: &str) -> Option<(usize, usize)> {
    let v = Vector::load(name);
    assert_eq!(v.operations.len(), 1, "{name}: single-operation model");
    let op = &v.operations[0];
    let out_idx = op.outputs[0];
    let mut totals: Option<(usize, usize)> = None;
    for (e, ex) in v.examples.iter().enumerate() {
        let ins = &op.inputs;
        let out = match op.ty.as_str() {
            "CONV_2D" => run_conv(&v, ex, ins, false),
            "DEPTHWISE_CONV_2D" => run_conv(&v, ex, ins, true),
            "FULLY_CONNECTED" => run_fully_connected(&v, ex, ins),
            "AVERAGE_POOL_2D" | "MAX_POOL_2D" | "L2_POOL_2D" => run_pool(&v, ex, ins, &op.ty),
            other => panic!("{name}: unexpected op {other}"),
        };
        let len = match &out {
            Out::F32(a) => a.len(),
            Out::U8(a) => a.len(),
        };
        let declared: usize = v.operands[out_idx].dims.iter().product();
        assert_eq!(len, declared, "{name}: output shape");
        let expected = &ex.outputs[&out_idx];
        if let Some((exact, n)) = check(&format!("{name}#{e}"), expected, out) {
            let t = totals.get_or_insert((0, 0));
            t.0 += exact;
            t.1 += n;
        }
    }
    match totals {
        Some((exact, n)) => println!("{name}: quant8 {exact}/{n} exact"),
        None => println!("{name}: float32 within tolerance"),
    }
    totals
}

/// One test per vector, so a failure names the vector.
macro_rules! golden {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            #[allow(non_snake_case)]
            fn $name() {
                if let Some((exact, n)) = run(stringify!($name)) {
                    assert_eq!(exact, n, "{}: quant8 not bit-exact", stringify!($name));
                }
            }
        )*
        /// Every vector of these operations present in the vector directory is listed above.
        #[test]
        fn every_vector_is_covered() {
            let listed = [$(stringify!($name)),*];
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vts_tests/vectors");
            let prefixes = ["conv_", "depthwise_conv", "fully_connected_", "avg_pool_", "max_pool_", "l2_pool_"];
            for entry in std::fs::read_dir(dir).unwrap() {
                let file = entry.unwrap().file_name().into_string().unwrap();
                let Some(stem) = file.strip_suffix(".json") else { continue };
                if prefixes.iter().any(|p| stem.starts_with(p)) {
                    assert!(listed.contains(&stem), "{stem} is not run by this test");
                }
            }
        }
    };
}

golden!(
    conv_1_h3_w2_SAME,
    conv_1_h3_w2_VALID,
    conv_1_h3_w2_VALID_2,
    conv_3_h3_w2_SAME,
    conv_3_h3_w2_SAME_2,
    conv_float,
    conv_float_2,
    conv_float_channels,
    conv_float_large,
    conv_float_weights_as_inputs,
    conv_quant8,
    conv_quant8_2,
    conv_quant8_channels,
    conv_quant8_channels_weights_as_inputs,
    conv_quant8_large_weights_as_inputs,
    conv_quant8_overflow,
    conv_quant8_weights_as_inputs,
    depthwise_conv,
    depthwise_conv2d_float,
    depthwise_conv2d_float_large,
    depthwise_conv2d_float_large_2,
    depthwise_conv2d_float_large_weights_as_inputs,
    depthwise_conv2d_float_weights_as_inputs,
    depthwise_conv2d_quant8,
    depthwise_conv2d_quant8_2,
    depthwise_conv2d_quant8_large,
    depthwise_conv2d_quant8_weights_as_inputs,
    fully_connected_float,
    fully_connected_float_2,
    fully_connected_float_large,
    fully_connected_float_weights_as_inputs,
    fully_connected_quant8,
    fully_connected_quant8_2,
    fully_connected_quant8_large_weights_as_inputs,
    fully_connected_quant8_weights_as_inputs,
    avg_pool_float_1,
    avg_pool_float_2,
    avg_pool_float_3,
    avg_pool_quant8_1,
    avg_pool_quant8_2,
    avg_pool_quant8_3,
    max_pool_float_1,
    max_pool_float_2,
    max_pool_float_4,
    max_pool_quant8_1,
    max_pool_quant8_2,
    max_pool_quant8_3,
    l2_pool_float,
    l2_pool_float_2,
);
