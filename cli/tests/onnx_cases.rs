//! The seeded small-graph set (importers/onnx/testdata/cases/, made by
//! importers/onnx/tools/make_cases.py with onnxruntime's outputs) through the importer and the
//! driver: in this process, and through a real `nnhal-service` over its Unix socket. Float
//! outputs within |a − e| ≤ 1e-5 + 1e-4·|e|, quantized models within one output step.

mod common;

use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::ConnectOptions;
use nnhal_cli::modelfile::{npy, Array, ArrayData, ModelRequest};
use std::path::PathBuf;

fn dir() -> PathBuf {
    common::repo_root().join("importers/onnx/testdata/cases")
}

struct Case {
    name: String,
    inputs: usize,
    outputs: usize,
    /// One quantization step per output (quantized models).
    quant_step: Option<Vec<f64>>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            inputs: c["inputs"].as_u64().unwrap() as usize,
            outputs: c["outputs"].as_u64().unwrap() as usize,
            quant_step: (c["tolerance"] == "quant").then(|| match &c["step"] {
                serde_json::Value::Array(steps) => {
                    steps.iter().map(|s| s.as_f64().unwrap()).collect()
                }
                step => vec![step.as_f64().unwrap(); c["outputs"].as_u64().unwrap() as usize],
            }),
        })
        .collect()
}

fn values(a: &Array) -> Vec<f64> {
    match &a.data {
        ArrayData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

/// Checks every output of `case` given how to execute a request; returns the problems.
fn check(case: &Case, execute: &dyn Fn(&nnhal::hal::Model, &nnhal::hal::Request)) -> Vec<String> {
    let imported = match nnhal_onnx::import_file(&dir().join(format!("{}.onnx", case.name))) {
        Ok(m) => m,
        Err(e) => return vec![format!("{}: {e}", case.name)],
    };
    let inputs: Vec<Array> = (0..case.inputs)
        .map(|k| npy::read(&dir().join(format!("{}.in{k}.npy", case.name))).unwrap())
        .collect();
    let request = ModelRequest::new(&imported, &inputs).unwrap();
    execute(&imported.model, &request.request);
    let got = request.outputs(&imported).unwrap();
    let mut problems = Vec::new();
    assert_eq!(got.len(), case.outputs, "{}", case.name);
    for (k, g) in got.iter().enumerate() {
        let e = npy::read(&dir().join(format!("{}.out{k}.npy", case.name))).unwrap();
        if g.shape != e.shape {
            problems.push(format!(
                "{} output {k}: shape {:?}, expected {:?}",
                case.name, g.shape, e.shape
            ));
            continue;
        }
        let (gv, ev) = (values(g), values(&e));
        let bad = gv
            .iter()
            .zip(&ev)
            .enumerate()
            .find(|(_, (a, b))| match &case.quant_step {
                Some(steps) => (*a - *b).abs() > steps[k] * 1.0001,
                None => (*a - *b).abs() > 1e-5 + 1e-4 * b.abs(),
            });
        if let Some((i, (a, b))) = bad {
            problems.push(format!(
                "{} output {k}: element {i} is {a}, onnxruntime {b}",
                case.name
            ));
        }
    }
    problems
}

#[test]
fn random_graph_set_matches_onnxruntime_in_process() {
    let driver = nnhal::Driver::new(1).unwrap();
    let all = cases();
    assert!(all.len() >= 188, "{} cases", all.len());
    let mut problems = Vec::new();
    for case in &all {
        problems.extend(check(case, &|model, request| {
            driver
                .prepare_model(model.clone())
                .unwrap()
                .execute(request)
                .unwrap();
        }));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!("{} cases agree with onnxruntime", all.len());
}

#[test]
fn random_graph_set_matches_onnxruntime_over_rpc() {
    let mut child = ServiceChild::start(&ChildOptions {
        program: Some(common::service_exe()),
        tag: "nnhal-onnx-cases",
        ..ChildOptions::default()
    })
    .unwrap();
    let device = child.connect(&ConnectOptions::default()).unwrap();
    let mut problems = Vec::new();
    for case in &cases() {
        problems.extend(check(case, &|model, request| {
            device
                .prepare_model(model.clone())
                .unwrap()
                .execute(request)
                .unwrap();
        }));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
