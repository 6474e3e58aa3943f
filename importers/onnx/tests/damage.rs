//! Damaged and hostile ONNX files: random byte damage never panics and either imports a model
//! that validates or fails with an error in words; specific lies (a 2 GB tensor claim, a size
//! that disagrees with the data, a cycle, a dangling name) get their own clear messages.

use nnhal_onnx::proto::*;
use nnhal_onnx::{import, OnnxError};
use proptest::prelude::*;
use prost::Message;
use std::path::Path;

fn case_bytes() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/cases");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    names.sort();
    names.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn described(e: &OnnxError) -> bool {
    let text = e.to_string();
    !text.is_empty() && !text.contains("panicked")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random damage (overwritten bytes, a cut, an inserted run) to any case file.
    #[test]
    fn damaged_bytes_never_panic(
        which in 0usize..64,
        edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8),
        cut in proptest::option::of(any::<u16>()),
        insert in proptest::option::of((any::<u16>(), proptest::collection::vec(any::<u8>(), 1..16))),
    ) {
        let all = case_bytes();
        let mut bytes = all[which % all.len()].clone();
        for (at, value) in edits {
            let i = at as usize % bytes.len();
            bytes[i] = value;
        }
        if let Some((at, run)) = insert {
            let i = at as usize % bytes.len();
            bytes.splice(i..i, run);
        }
        if let Some(cut) = cut {
            bytes.truncate(cut as usize % (bytes.len() + 1));
        }
        match import(&bytes) {
            Ok(m) => prop_assert!(nnhal_hal::validate::validate_model(&m.model).is_ok()),
            Err(e) => prop_assert!(described(&e), "{e}"),
        }
    }
}

fn graph(
    nodes: Vec<NodeProto>,
    init: Vec<TensorProto>,
    inputs: &[&str],
    outputs: &[&str],
) -> Vec<u8> {
    let info = |name: &str| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: [1, 2, 2, 2]
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                        })
                        .collect(),
                }),
            })),
        }),
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(13),
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: init,
            input: inputs.iter().map(|n| info(n)).collect(),
            output: outputs.iter().map(|n| info(n)).collect(),
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
    .encode_to_vec()
}

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: Some(name.into()),
        op_type: Some(op.into()),
        ..NodeProto::default()
    }
}

fn error(bytes: &[u8]) -> String {
    import(bytes).expect_err("refused").to_string()
}

#[test]
fn bi_onnx_a_2gb_tensor_claim_is_refused_before_allocating() {
    let huge = TensorProto {
        dims: vec![1 << 31, 1],
        data_type: Some(1),
        name: Some("w".into()),
        raw_data: Some(vec![0; 8]),
        ..TensorProto::default()
    };
    let e = error(&graph(
        vec![node("Add", "a", &["x", "w"], &["y"])],
        vec![huge],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("initializer 0 'w'") && e.contains("claim more than"),
        "{e}"
    );
}

fn int64s(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![values.len() as i64],
        data_type: Some(7),
        name: Some(name.into()),
        int64_data: values.to_vec(),
        ..TensorProto::default()
    }
}

/// A 619-byte file once folded a ConstantOfShape into an 805 MB constant (4.7 GB peak while
/// importing); folding has its own, much smaller bound, checked before the fill.
#[test]
fn bi_onnx_a_folded_constant_of_huge_shape_is_refused_before_allocating() {
    let e = error(&graph(
        vec![
            node("ConstantOfShape", "fill", &["shape"], &["w"]),
            node("Add", "a", &["x", "w"], &["y"]),
        ],
        vec![int64s("shape", &[67108865, 3])],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("'fill' (ConstantOfShape)") && e.contains("folding would make"),
        "{e}"
    );
}

/// Gather's output size is indices × the gathered rows: small inputs can claim a lot.
#[test]
fn bi_onnx_a_folded_gather_blowup_is_refused_before_allocating() {
    let e = error(&graph(
        vec![
            node("ConstantOfShape", "fill", &["shape"], &["t"]),
            node("Gather", "g", &["t", "idx"], &["w"]),
            node("Add", "a", &["x", "w"], &["y"]),
        ],
        vec![int64s("shape", &[2, 1 << 21]), int64s("idx", &[0; 64])],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("'g' (Gather)") && e.contains("folding would make"),
        "{e}"
    );
}

/// Many folds each within the per-tensor bound still cannot add up to gigabytes.
#[test]
fn bi_onnx_folds_adding_up_past_the_total_bound_are_refused() {
    let mut nodes = Vec::new();
    let names: Vec<String> = (0..8).map(|k| format!("f{k}")).collect();
    for name in &names {
        nodes.push(node("ConstantOfShape", name, &["shape"], &[name.as_str()]));
    }
    nodes.push(node("Add", "a", &["x", "f0"], &["y"]));
    let e = error(&graph(
        nodes,
        vec![int64s("shape", &[1 << 22])],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("'f4' (ConstantOfShape)") && e.contains("more than 16777216 elements in all"),
        "{e}"
    );
}

#[test]
fn bi_onnx_declared_size_disagreeing_with_data_is_refused() {
    let short = TensorProto {
        dims: vec![2, 2],
        data_type: Some(1),
        name: Some("w".into()),
        raw_data: Some(vec![0; 12]),
        ..TensorProto::default()
    };
    let e = error(&graph(
        vec![node("Add", "a", &["x", "w"], &["y"])],
        vec![short],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("need 16 bytes of float, raw_data holds 12"),
        "{e}"
    );
    let few = TensorProto {
        dims: vec![3],
        data_type: Some(1),
        name: Some("w".into()),
        float_data: vec![1.0],
        ..TensorProto::default()
    };
    let e = error(&graph(
        vec![node("Add", "a", &["x", "w"], &["y"])],
        vec![few],
        &["x"],
        &["y"],
    ));
    assert!(e.contains("need 3 values, the tensor holds 1"), "{e}");
}

#[test]
fn bi_onnx_cycles_and_dangling_names_are_refused() {
    let cycle = graph(
        vec![
            node("Relu", "r1", &["b"], &["a"]),
            node("Relu", "r2", &["a"], &["b"]),
        ],
        vec![],
        &["x"],
        &["b"],
    );
    let e = error(&cycle);
    assert!(
        e.contains("node 0 'r1' (Relu)") && e.contains("cycle"),
        "{e}"
    );
    let dangling = graph(
        vec![node("Relu", "r", &["nowhere"], &["y"])],
        vec![],
        &["x"],
        &["y"],
    );
    let e = error(&dangling);
    assert!(e.contains("'nowhere' is not produced by any node"), "{e}");
}

#[test]
fn bi_onnx_unsupported_operator_names_the_node() {
    let e = error(&graph(
        vec![node("Einsum", "t", &["x"], &["y"])],
        vec![],
        &["x"],
        &["y"],
    ));
    assert!(e.starts_with("node 0 't' (Einsum): "), "{e}");
}

#[test]
fn bi_onnx_not_a_model() {
    for bytes in [&b""[..], b"\xff\xff\xff\xff", b"hello world, not protobuf"] {
        let e = error(bytes);
        assert!(e.starts_with("malformed ONNX model"), "{e}");
    }
}

/// Reshapes of an NHWC image that need its NCHW element order go through TRANSPOSE (never run in
/// the wrong order); a flattened image feeding an element-wise operation is put back in NCHW
/// order first.
#[test]
fn reshape_needing_nchw_order_transposes() {
    let ops = |bytes: &[u8]| -> Vec<&'static str> {
        let m = nnhal_onnx::import(bytes).unwrap();
        m.model
            .operations
            .iter()
            .map(|o| {
                nnhal_hal::OperationType::from_raw(o.operation_type)
                    .unwrap()
                    .name()
            })
            .collect()
    };
    let shape = TensorProto {
        dims: vec![3],
        data_type: Some(7),
        name: Some("s".into()),
        int64_data: vec![1, 2, 4],
        ..TensorProto::default()
    };
    let reshaped = graph(
        vec![node("Reshape", "to3d", &["x", "s"], &["y"])],
        vec![shape],
        &["x"],
        &["y"],
    );
    assert_eq!(ops(&reshaped), ["TRANSPOSE", "RESHAPE"]);
    let flat_add = graph(
        vec![
            node("Flatten", "f", &["x"], &["f"]),
            node("Add", "a", &["f", "f"], &["y"]),
        ],
        vec![],
        &["x"],
        &["y"],
    );
    let o = ops(&flat_add);
    assert_eq!(o.first(), Some(&"RESHAPE"));
    assert!(
        o.contains(&"TRANSPOSE") && o.last() == Some(&"ADD"),
        "{o:?}"
    );
}
