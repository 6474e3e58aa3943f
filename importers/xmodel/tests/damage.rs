//! Damaged and refused `.xmodel` files (BI-85…BI-89 in docs/bad-inputs.md): each gives its
//! typed error with the reason, never a panic, and the fixtures import.

use nnhal_xmodel::proto;
use nnhal_xmodel::writer::{int, ints, string, GraphWriter};
use nnhal_xmodel::{import, Options, XmodelError};

fn err(bytes: &[u8]) -> XmodelError {
    import(bytes, &Options::default()).expect_err("refused")
}

fn small() -> GraphWriter {
    let mut g = GraphWriter::new("small");
    let x = g.data("x", &[1, 2, 2, 1]);
    let c = g.constant("c", &[1], &[0.5]);
    g.op("a", "add", &[("input", &[&x, &c])], vec![], &[1, 2, 2, 1]);
    g
}

#[test]
fn fixtures_import() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut n = 0;
    // The quantized graphs made to be refused (cli/tests/xmodel_cases.rs checks the words).
    let refused = ["quant_bias_shift", "quant_multiplier", "quant_bits4"];
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let result = nnhal_xmodel::import_file(&path, &Options::default());
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if refused.contains(&stem.as_str()) {
            assert!(
                matches!(result, Err(XmodelError::Operators { .. })),
                "{stem} imported"
            );
        } else {
            result.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        n += 1;
    }
    assert!(n >= 10);
    assert!(import(&small().bytes(), &Options::default()).is_ok());
}

#[test]
fn bi85_truncated_or_foreign_bytes_are_not_xmodel() {
    let bytes = small().bytes();
    for cut in [1, bytes.len() / 3, bytes.len() - 1] {
        let e = err(&bytes[..cut]);
        assert!(matches!(e, XmodelError::NotXmodel(_)), "cut {cut}: {e}");
    }
    let e = err(b"\x89PNG\r\n\x1a\n not a graph");
    assert!(e.to_string().starts_with("not an XIR graph"), "{e}");
    let e = err(&[]);
    assert!(e.to_string().contains("no operators"), "{e}");
}

#[test]
fn bi86_names_arguments_and_cycles_are_checked() {
    let mut g = small();
    g.data("x", &[1]);
    assert!(err(&g.bytes())
        .to_string()
        .contains("two operators are named 'x'"));
    let mut g = small();
    g.op("b", "relu", &[("input", &["ghost"])], vec![], &[1]);
    assert!(err(&g.bytes())
        .to_string()
        .contains("names 'ghost', which is no operator"));
    let mut g = GraphWriter::new("cycle");
    g.op("p", "relu", &[("input", &["q"])], vec![], &[1]);
    g.op("q", "relu", &[("input", &["p"])], vec![], &[1]);
    assert!(err(&g.bytes()).to_string().contains("cycle"));
    let mut g = small();
    g.graph.op_node[2]
        .op_attr
        .insert("empty".into(), proto::AttrValue { value: None });
    assert!(err(&g.bytes()).to_string().contains("serial_v1"));
    let mut g = small();
    g.data("huge", &[1 << 15, 1 << 15, 2]);
    assert!(err(&g.bytes()).to_string().contains("more than"));
}

#[test]
fn bi87_constant_bytes_that_disagree_with_the_shape() {
    let mut g = GraphWriter::new("short");
    let x = g.data("x", &[1, 2, 2, 1]);
    let c = g.constant("c", &[1, 2, 2, 1], &[1.0, 2.0, 3.0]);
    g.op("a", "add", &[("input", &[&x, &c])], vec![], &[1, 2, 2, 1]);
    let e = err(&g.bytes());
    assert!(matches!(e, XmodelError::Malformed(_)), "{e}");
    assert!(
        e.to_string()
            .contains("'c': 12 bytes of data for shape [1, 2, 2, 1] of float32 (16 bytes)"),
        "{e}"
    );
    let mut g = small();
    g.graph.op_node[1].op_attr.insert(
        "shape".into(),
        proto::AttrValue {
            value: Some(ints(&[2])),
        },
    );
    assert!(err(&g.bytes())
        .to_string()
        .contains("disagrees with its tensor"));
    let mut g = small();
    g.graph.op_node[1].op_attr.insert(
        "data_type".into(),
        proto::AttrValue {
            value: Some(string("complex64")),
        },
    );
    assert!(err(&g.bytes())
        .to_string()
        .contains("data type 'complex64'"));
}

#[test]
fn bi88_compiled_graphs_are_refused() {
    let mut g = small();
    g.op("w", "const-fix", &[], vec![], &[1]);
    let e = err(&g.bytes());
    assert!(matches!(e, XmodelError::Compiled(_)), "{e}");
    assert!(
        e.to_string()
            .contains("import the quantizer's *_int.xmodel"),
        "{e}"
    );
    let mut g = small();
    g.graph.op_node[1].op_attr.insert(
        "data".into(),
        proto::AttrValue {
            value: Some(proto::attr_value::Value::BytesValue(proto::Bytes {
                value: vec![],
            })),
        },
    );
    assert!(matches!(err(&g.bytes()), XmodelError::Compiled(_)));
    let mut g = small();
    let root = g.graph.subg_root.as_mut().unwrap();
    root.subg_child.push(proto::SubGraph {
        subgraph_name: "dpu".into(),
        subg_attr: [(
            "device".to_string(),
            proto::AttrValue {
                value: Some(string("DPU")),
            },
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    });
    assert!(err(&g.bytes()).to_string().contains("runs on the DPU"));
}

#[test]
fn bi89_custom_and_unsupported_operators_are_named() {
    let mut g = GraphWriter::new("custom");
    let x = g.data("x", &[1, 2, 2, 1]);
    let s = g.op(
        "scatter",
        "PPScatterV2",
        &[("input", &[&x])],
        vec![],
        &[1, 2, 2, 1],
    );
    g.op("after", "relu", &[("input", &[&s])], vec![], &[1, 2, 2, 1]);
    let e = err(&g.bytes());
    let text = e.to_string();
    assert!(
        text.contains("'scatter' (PPScatterV2): operator type 'PPScatterV2' is not lowered"),
        "{text}"
    );
    assert!(text.contains("1 operator(s) after them"), "{text}");
    // From the operator after it, the graph imports.
    let options = Options {
        start_at: vec!["scatter".into()],
    };
    let m = import(&g.bytes(), &options).unwrap();
    assert_eq!(m.inputs[0].name, "scatter");
    let mut g = GraphWriter::new("wide");
    let x = g.data("x", &[1, 2, 2, 1]);
    g.op(
        "f",
        "fix",
        &[("input", &[&x])],
        vec![
            ("fix_point", int(4)),
            ("bit_width", int(16)),
            ("round_mode", string("DPU_ROUND")),
        ],
        &[1, 2, 2, 1],
    );
    assert!(err(&g.bytes()).to_string().contains("bit_width 16"));
    let mut g = GraphWriter::new("reflect");
    let x = g.data("x", &[1, 2, 2, 1]);
    g.op(
        "p",
        "pad",
        &[("input", &[&x])],
        vec![
            ("paddings", ints(&[0, 0, 2, 0, 0, 0, 0, 0])),
            ("mode", string("REFLECT")),
        ],
        &[1, 4, 2, 1],
    );
    // REFLECT cannot mirror more rows than the axis has past its edge element.
    let e = err(&g.bytes()).to_string();
    assert!(e.contains("REFLECT padding of 2/0 on an axis of 2"), "{e}");
}
