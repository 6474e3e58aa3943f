//! Runs the elementwise, normalization and transform kernels directly on every golden
//! conformance vector of their operations (ADD, MUL, FLOOR, RELU*, LOGISTIC, TANH, DEQUANTIZE,
//! SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, CONCATENATION, DEPTH_TO_SPACE,
//! SPACE_TO_DEPTH, RESIZE_BILINEAR). Vectors are found by their operation type, so any vector
//! added to `vts_tests/vectors` for these operations is picked up automatically.

mod common;

use common::{assert_f32_close, assert_u8_close, Vector};
use nnhal_kernels::elementwise::reference as elementwise;
use nnhal_kernels::normalization::reference as normalization;
use nnhal_kernels::transform::reference as transform;
use nnhal_kernels::{Activation, Nhwc, QuantParams};
use std::path::PathBuf;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vts_tests/vectors")
}

/// Names of the single-operation vectors whose operation is one of `ops`.
fn vectors_of(ops: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(vectors_dir()).expect("vectors directory") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let operations = json["model"]["operations"].as_array().unwrap();
        if operations.len() == 1 && ops.contains(&operations[0]["type"].as_str().unwrap()) {
            names.push(path.file_stem().unwrap().to_str().unwrap().to_string());
        }
    }
    names.sort();
    names
}

fn activation(code: i32) -> Activation {
    match code {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Relu1,
        3 => Activation::Relu6,
        other => panic!("fused activation {other}"),
    }
}

fn nhwc(dims: &[usize]) -> Nhwc {
    assert_eq!(dims.len(), 4, "{dims:?}");
    Nhwc::new(dims[0], dims[1], dims[2], dims[3])
}

/// What one example produced: float32 or quant8 values for the (single) compared output.
enum Produced {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

/// Runs vector `name` through the kernels; returns (exactly matching quant8 elements, quant8
/// elements compared).
fn run(name: &str) -> (usize, usize) {
    let v = Vector::load(name);
    assert_eq!(v.operations.len(), 1, "{name}");
    let op = &v.operations[0];
    let out_index = op.outputs[0];
    let out_operand = &v.operands[out_index];
    let is_quant = out_operand.ty == "TENSOR_QUANT8_ASYMM";
    let qp = |i: usize| QuantParams::new(v.operands[i].scale, v.operands[i].zero_point);
    let dims = |i: usize| v.operands[i].dims.clone();
    let (mut exact, mut total) = (0, 0);

    for (e, ex) in v.examples.iter().enumerate() {
        let len = out_operand.dims.iter().product::<usize>();
        let inputs = &op.inputs;
        let produced = match op.ty.as_str() {
            "ADD" | "MUL" => {
                let (a, b) = (inputs[0], inputs[1]);
                let act = activation(v.scalar_i32(ex, inputs[2]));
                let out_shape = dims(out_index);
                let is_add = op.ty == "ADD";
                if is_quant {
                    let mut out = vec![0u8; len];
                    let kernel = if is_add {
                        elementwise::add_u8
                    } else {
                        elementwise::mul_u8
                    };
                    kernel(
                        &v.u8s(ex, a),
                        &dims(a),
                        qp(a),
                        &v.u8s(ex, b),
                        &dims(b),
                        qp(b),
                        qp(out_index),
                        act,
                        &mut out,
                        &out_shape,
                    )
                    .unwrap();
                    Produced::U8(out)
                } else {
                    let mut out = vec![0f32; len];
                    let kernel = if is_add {
                        elementwise::add_f32
                    } else {
                        elementwise::mul_f32
                    };
                    kernel(
                        &v.f32s(ex, a),
                        &dims(a),
                        &v.f32s(ex, b),
                        &dims(b),
                        act,
                        &mut out,
                        &out_shape,
                    );
                    Produced::F32(out)
                }
            }
            "FLOOR" | "TANH" | "LOGISTIC" | "RELU" | "RELU1" | "RELU6" if !is_quant => {
                let input = v.f32s(ex, inputs[0]);
                let mut out = vec![0f32; len];
                match op.ty.as_str() {
                    "FLOOR" => elementwise::floor_f32(&input, &mut out),
                    "TANH" => elementwise::tanh_f32(&input, &mut out),
                    "LOGISTIC" => elementwise::logistic_f32(&input, &mut out),
                    "RELU" => elementwise::clamp_f32(Activation::Relu, &input, &mut out),
                    "RELU1" => elementwise::clamp_f32(Activation::Relu1, &input, &mut out),
                    _ => elementwise::clamp_f32(Activation::Relu6, &input, &mut out),
                }
                Produced::F32(out)
            }
            "RELU" | "RELU1" | "RELU6" => {
                let act = match op.ty.as_str() {
                    "RELU" => Activation::Relu,
                    "RELU1" => Activation::Relu1,
                    _ => Activation::Relu6,
                };
                // The output must carry the input's parameters.
                assert_eq!(qp(inputs[0]), qp(out_index), "{name}");
                let mut out = vec![0u8; len];
                elementwise::clamp_u8(act, qp(inputs[0]), &v.u8s(ex, inputs[0]), &mut out);
                Produced::U8(out)
            }
            "LOGISTIC" => {
                assert_eq!(qp(out_index), QuantParams::new(1.0 / 256.0, 0), "{name}");
                let mut out = vec![0u8; len];
                elementwise::logistic_u8(&v.u8s(ex, inputs[0]), qp(inputs[0]), &mut out).unwrap();
                Produced::U8(out)
            }
            "DEQUANTIZE" => {
                let mut out = vec![0f32; len];
                nnhal_kernels::quantize::reference::dequantize_u8(
                    &v.u8s(ex, inputs[0]),
                    qp(inputs[0]),
                    &mut out,
                );
                Produced::F32(out)
            }
            "SOFTMAX" => {
                let input_dims = dims(inputs[0]);
                let depth = *input_dims.last().unwrap();
                let beta = v.scalar_f32(ex, inputs[1]);
                if is_quant {
                    assert_eq!(qp(out_index), QuantParams::new(1.0 / 256.0, 0), "{name}");
                    let mut out = vec![0u8; len];
                    normalization::softmax_u8(
                        &v.u8s(ex, inputs[0]),
                        qp(inputs[0]),
                        depth,
                        beta,
                        &mut out,
                    )
                    .unwrap();
                    Produced::U8(out)
                } else {
                    let mut out = vec![0f32; len];
                    normalization::softmax_f32(&v.f32s(ex, inputs[0]), depth, beta, &mut out);
                    Produced::F32(out)
                }
            }
            "L2_NORMALIZATION" => {
                let depth = *dims(inputs[0]).last().unwrap();
                let mut out = vec![0f32; len];
                normalization::l2_normalization_f32(&v.f32s(ex, inputs[0]), depth, &mut out);
                Produced::F32(out)
            }
            "LOCAL_RESPONSE_NORMALIZATION" => {
                let depth = *dims(inputs[0]).last().unwrap();
                let radius = usize::try_from(v.scalar_i32(ex, inputs[1])).unwrap();
                let mut out = vec![0f32; len];
                normalization::local_response_normalization_f32(
                    &v.f32s(ex, inputs[0]),
                    depth,
                    radius,
                    v.scalar_f32(ex, inputs[2]),
                    v.scalar_f32(ex, inputs[3]),
                    v.scalar_f32(ex, inputs[4]),
                    &mut out,
                );
                Produced::F32(out)
            }
            "CONCATENATION" => {
                let (tensors, axis_input) = inputs.split_at(inputs.len() - 1);
                let axis = usize::try_from(v.scalar_i32(ex, axis_input[0])).unwrap();
                let shapes: Vec<Vec<usize>> = tensors.iter().map(|&i| dims(i)).collect();
                if is_quant {
                    for &i in tensors {
                        assert_eq!(qp(i), qp(out_index), "{name}");
                    }
                    let data: Vec<Vec<u8>> = tensors.iter().map(|&i| v.u8s(ex, i)).collect();
                    let parts: Vec<(&[u8], &[usize])> = data
                        .iter()
                        .zip(&shapes)
                        .map(|(d, s)| (d.as_slice(), s.as_slice()))
                        .collect();
                    let mut out = vec![0u8; len];
                    transform::concatenation(&parts, axis, &mut out);
                    Produced::U8(out)
                } else {
                    let data: Vec<Vec<f32>> = tensors.iter().map(|&i| v.f32s(ex, i)).collect();
                    let parts: Vec<(&[f32], &[usize])> = data
                        .iter()
                        .zip(&shapes)
                        .map(|(d, s)| (d.as_slice(), s.as_slice()))
                        .collect();
                    let mut out = vec![0f32; len];
                    transform::concatenation(&parts, axis, &mut out);
                    Produced::F32(out)
                }
            }
            "DEPTH_TO_SPACE" | "SPACE_TO_DEPTH" => {
                let shape = nhwc(&dims(inputs[0]));
                let block = usize::try_from(v.scalar_i32(ex, inputs[1])).unwrap();
                let to_space = op.ty == "DEPTH_TO_SPACE";
                if is_quant {
                    assert_eq!(qp(inputs[0]), qp(out_index), "{name}");
                    let input = v.u8s(ex, inputs[0]);
                    let mut out = vec![0u8; len];
                    if to_space {
                        transform::depth_to_space(&input, shape, block, &mut out);
                    } else {
                        transform::space_to_depth(&input, shape, block, &mut out);
                    }
                    Produced::U8(out)
                } else {
                    let input = v.f32s(ex, inputs[0]);
                    let mut out = vec![0f32; len];
                    if to_space {
                        transform::depth_to_space(&input, shape, block, &mut out);
                    } else {
                        transform::space_to_depth(&input, shape, block, &mut out);
                    }
                    Produced::F32(out)
                }
            }
            "RESIZE_BILINEAR" => {
                let shape = nhwc(&dims(inputs[0]));
                // Input 1 is the output width, input 2 the output height.
                let out_w = usize::try_from(v.scalar_i32(ex, inputs[1])).unwrap();
                let out_h = usize::try_from(v.scalar_i32(ex, inputs[2])).unwrap();
                assert_eq!(out_operand.dims, [shape.n, out_h, out_w, shape.c], "{name}");
                let mut out = vec![0f32; len];
                transform::resize_bilinear_f32(
                    &v.f32s(ex, inputs[0]),
                    shape,
                    out_h,
                    out_w,
                    &mut out,
                );
                Produced::F32(out)
            }
            other => panic!("{name}: operation {other} is not covered here"),
        };

        let expected = &ex.outputs[&out_index];
        let what = format!("{name} example {e}");
        match produced {
            Produced::F32(out) => assert_f32_close(&what, expected, &out),
            Produced::U8(out) => {
                exact += assert_u8_close(&what, expected, &out);
                total += out.len();
            }
        }
    }
    if total > 0 {
        println!("{name}: quant8 {exact}/{total} exact");
    } else {
        println!("{name}: float32 within tolerance");
    }
    (exact, total)
}

/// Runs every vector of `ops`, requiring at least `min_vectors` of them.
fn run_all(ops: &[&str], min_vectors: usize) {
    let names = vectors_of(ops);
    assert!(names.len() >= min_vectors, "{ops:?}: found only {names:?}");
    for name in &names {
        run(name);
    }
}

#[test]
fn golden_add_mul() {
    run_all(&["ADD", "MUL"], 5);
}

#[test]
fn golden_floor_tanh_dequantize() {
    run_all(&["FLOOR", "TANH", "DEQUANTIZE"], 3);
}

#[test]
fn golden_relu() {
    run_all(&["RELU", "RELU1", "RELU6"], 12);
}

#[test]
fn golden_logistic() {
    run_all(&["LOGISTIC"], 3);
}

#[test]
fn golden_softmax() {
    run_all(&["SOFTMAX"], 3);
}

#[test]
fn golden_l2_and_local_response_normalization() {
    run_all(&["L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION"], 5);
}

#[test]
fn golden_concatenation() {
    run_all(&["CONCATENATION"], 4);
}

#[test]
fn golden_depth_space() {
    run_all(&["DEPTH_TO_SPACE", "SPACE_TO_DEPTH"], 8);
}

#[test]
fn golden_resize_bilinear() {
    run_all(&["RESIZE_BILINEAR"], 1);
}
