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
/// importing); folding has a budget relative to the file, checked before the fill.
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

/// Many folds each within the budget still cannot add up past it together (a tiny file has
/// the floor, 64 MiB: four folds of 16 MiB fit, the fifth does not).
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
        e.contains("'f4' (ConstantOfShape)")
            && e.contains(&format!("{}-byte folding budget", nnhal_onnx::FOLD_FLOOR)),
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

fn with_ints(mut n: NodeProto, name: &str, ints: &[i64]) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Ints as i32),
        ints: ints.to_vec(),
        ..AttributeProto::default()
    });
    n
}

fn with_int(mut n: NodeProto, name: &str, i: i64) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Int as i32),
        i: Some(i),
        ..AttributeProto::default()
    });
    n
}

fn with_str(mut n: NodeProto, name: &str, s: &str) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::String as i32),
        s: Some(s.as_bytes().to_vec()),
        ..AttributeProto::default()
    });
    n
}

/// BI-95: a Slice or Split whose indices cut nothing or do not add up (a zero step, an empty
/// slice, split sizes that miss the axis) is refused by name, never sliced out of bounds.
#[test]
fn bi95_slices_and_splits_that_do_not_cut_the_axis_are_refused() {
    let slice = |starts: i64, ends: i64, step: i64| {
        error(&graph(
            vec![node("Slice", "s", &["x", "b", "e", "ax", "st"], &["y"])],
            vec![
                int64s("b", &[starts]),
                int64s("e", &[ends]),
                int64s("ax", &[3]),
                int64s("st", &[step]),
            ],
            &["x"],
            &["y"],
        ))
    };
    let e = slice(0, 2, 0);
    assert!(e.starts_with("node 0 's' (Slice): step 0"), "{e}");
    let e = slice(5, 9, 1);
    assert!(e.contains("(Slice): the slice is empty"), "{e}");
    let e = error(&graph(
        vec![with_int(
            node("Split", "p", &["x", "sizes"], &["y", "z"]),
            "axis",
            1,
        )],
        vec![int64s("sizes", &[1, 2])],
        &["x"],
        &["y", "z"],
    ));
    assert!(
        e.contains("(Split): split sizes [1, 2] do not cut axis 1"),
        "{e}"
    );
}

/// BI-96: a Pad whose pads do not fit the input (reflecting more than the axis holds, negative
/// pads, a pads list of the wrong length) is refused by name.
#[test]
fn bi96_pads_that_do_not_fit_the_input_are_refused() {
    let pad = |mode: &str, pads: &[i64]| {
        error(&graph(
            vec![with_str(
                node("Pad", "p", &["x", "pads"], &["y"]),
                "mode",
                mode,
            )],
            vec![int64s("pads", pads)],
            &["x"],
            &["y"],
        ))
    };
    let e = pad("reflect", &[0, 0, 0, 2, 0, 0, 0, 0]);
    assert!(
        e.contains("(Pad): reflect pads 2, 0 on an axis of size 2"),
        "{e}"
    );
    let e = pad("constant", &[0, 0, -1, 0, 0, 0, 0, 0]);
    assert!(
        e.contains("(Pad): pads") && e.contains("only non-negative pads"),
        "{e}"
    );
    let e = pad("constant", &[1, 1, 1]);
    assert!(e.contains("(Pad): 3 pads for a rank-4 input"), "{e}");
    let e = pad("mirror", &[0; 8]);
    assert!(e.contains("(Pad): mode 'mirror' is not one of"), "{e}");
}

/// BI-97: index-like attributes and inputs out of their ranges (a perm that is not a
/// permutation, a Gather index past the axis, Tile repeats of the wrong rank or zero) are
/// refused by name before any operation is emitted.
#[test]
fn bi97_permutations_indices_and_repeats_out_of_range_are_refused() {
    let e = error(&graph(
        vec![with_ints(
            node("Transpose", "t", &["x"], &["y"]),
            "perm",
            &[0, 1, 1, 2],
        )],
        vec![],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("(Transpose): perm [0, 1, 1, 2] is not a permutation"),
        "{e}"
    );
    let e = error(&graph(
        vec![with_int(
            node("Gather", "g", &["x", "i"], &["y"]),
            "axis",
            1,
        )],
        vec![int64s("i", &[0, 7])],
        &["x"],
        &["y"],
    ));
    assert!(
        e.contains("(Gather): index 7 out of range for size 2"),
        "{e}"
    );
    for reps in [&[1, 1, 2][..], &[1, 0, 1, 1]] {
        let e = error(&graph(
            vec![node("Tile", "r", &["x", "reps"], &["y"])],
            vec![int64s("reps", reps)],
            &["x"],
            &["y"],
        ));
        assert!(
            e.contains("(Tile): repeats") && e.contains("for a rank-4 input"),
            "{e}"
        );
    }
}

fn typed(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                        })
                        .collect(),
                }),
            })),
        }),
    }
}

fn typed_graph(
    nodes: Vec<NodeProto>,
    init: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(13),
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: init,
            input: inputs,
            output: outputs,
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
    .encode_to_vec()
}

/// An int64 graph input is a TENSOR_INT32 model input (NNAPI has no int64): lowered as Gather
/// indices and in integer Add/Sub/Mul, and refused by name anywhere else.
#[test]
fn int64_graph_inputs_are_lowered_as_indices_and_refused_elsewhere() {
    use nnhal_onnx::SourceType;
    let table = TensorProto {
        dims: vec![4, 3],
        data_type: Some(1),
        name: Some("w".into()),
        float_data: (0..12).map(|v| v as f32).collect(),
        ..TensorProto::default()
    };
    let m = import(&typed_graph(
        vec![node("Gather", "g", &["w", "i"], &["y"])],
        vec![table],
        vec![typed("i", 7, &[1, 4])],
        vec![typed("y", 1, &[1, 4, 3])],
    ))
    .unwrap();
    assert_eq!(m.inputs[0].source_type, SourceType::Int32);
    assert!(
        m.summary.iter().any(|s| s.contains("(Gather) → GATHER")),
        "{:?}",
        m.summary
    );

    let m = import(&typed_graph(
        vec![node("Mul", "m", &["i", "k"], &["y"])],
        vec![int64s("k", &[3])],
        vec![typed("i", 7, &[2])],
        vec![typed("y", 7, &[2])],
    ))
    .unwrap();
    assert_eq!(m.outputs[0].source_type, SourceType::Int32);

    let e = error(&typed_graph(
        vec![node("Mul", "m", &["i", "k"], &["y"])],
        vec![int64s("k", &[1 << 40])],
        vec![typed("i", 7, &[1])],
        vec![typed("y", 7, &[1])],
    ));
    assert!(
        e.contains("(Mul): constant 1099511627776 is outside int32"),
        "{e}"
    );

    let e = error(&typed_graph(
        vec![node("Relu", "r", &["i"], &["y"])],
        vec![],
        vec![typed("i", 7, &[4])],
        vec![typed("y", 1, &[4])],
    ));
    assert!(
        e.contains("(Relu): input 0 is an integer runtime tensor"),
        "{e}"
    );

    let e = error(&typed_graph(
        vec![node("Expand", "x", &["x", "s"], &["y"])],
        vec![],
        vec![typed("x", 1, &[1, 3, 1]), typed("s", 7, &[2])],
        vec![typed("y", 1, &[1, 3, 3])],
    ));
    assert!(
        e.contains("(Expand): input 1 is a runtime shape")
            && e.contains("no operation whose output shape is a runtime value"),
        "{e}"
    );
}

fn floats(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: values.to_vec(),
        name: Some(name.into()),
        ..TensorProto::default()
    }
}

/// The comparison, selection and ArgMax lowerings refuse what they cannot express by name.
#[test]
fn logic_lowerings_refuse_by_name() {
    // A Where whose condition is a float tensor.
    let e = error(&graph(
        vec![node("Where", "w", &["x", "x", "x"], &["y"])],
        vec![],
        &["x"],
        &["y"],
    ));
    assert!(
        e.starts_with("node 0 'w' (Where): ") && e.contains("a boolean tensor is needed"),
        "{e}"
    );
    // ArgMax taking the last extreme index.
    let e = error(&graph(
        vec![with_int(
            node("ArgMax", "a", &["x"], &["y"]),
            "select_last_index",
            1,
        )],
        vec![],
        &["x"],
        &["y"],
    ));
    assert!(e.contains("select_last_index = 1"), "{e}");
    // Not of a float tensor.
    let e = error(&graph(
        vec![node("Not", "n", &["x"], &["y"])],
        vec![],
        &["x"],
        &["y"],
    ));
    assert!(e.contains("Not of a non-boolean tensor"), "{e}");
}

/// DequantizeLinear with per-axis scales whose count is not the axis' size is refused.
#[test]
fn per_axis_scales_of_the_wrong_count_are_refused() {
    let w = TensorProto {
        dims: vec![2, 2, 1, 1],
        data_type: Some(3),
        raw_data: Some(vec![1, 2, 3, 4]),
        name: Some("wq".into()),
        ..TensorProto::default()
    };
    let e = error(&graph(
        vec![
            with_int(
                node("DequantizeLinear", "d", &["wq", "ws"], &["w"]),
                "axis",
                0,
            ),
            node("Conv", "c", &["x", "w"], &["y"]),
        ],
        vec![w, floats("ws", &[3], &[0.1, 0.2, 0.3])],
        &["x"],
        &["y"],
    ));
    assert!(
        e.starts_with("node 0 'd' (DequantizeLinear): ")
            && e.contains("3 scales along axis 0 of a tensor of shape [2, 2, 1, 1]"),
        "{e}"
    );
}
