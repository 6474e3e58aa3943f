//! The seeded CoreML set (importers/coreml/testdata/cases/, made by
//! importers/coreml/tools/make_cases.py: each network built with coremltools and, with the same
//! weights, in ONNX, whose onnxruntime outputs are the expected ones) through the importer and
//! the driver: in this process, and through a real `nnhal-service` over its Unix socket. Outputs
//! within |a − e| ≤ 1e-5 + 1e-4·|e|.

mod common;

use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::ConnectOptions;
use nnhal_cli::modelfile::{npy, Array, ArrayData, ModelRequest};
use std::path::PathBuf;

fn dir() -> PathBuf {
    common::repo_root().join("importers/coreml/testdata/cases")
}

struct Case {
    name: String,
    inputs: usize,
    outputs: usize,
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
            inputs: c["inputs"].as_array().unwrap().len(),
            outputs: c["outputs"].as_array().unwrap().len(),
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
    let imported = match nnhal_coreml::import_file(&dir().join(format!("{}.mlmodel", case.name))) {
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
            .find(|(_, (a, b))| (*a - *b).abs() > 1e-5 + 1e-4 * b.abs());
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
fn coreml_set_matches_onnxruntime_in_process() {
    let driver = nnhal::Driver::new(1).unwrap();
    let all = cases();
    assert!(all.len() >= 118, "{} cases", all.len());
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
fn coreml_set_matches_onnxruntime_over_rpc() {
    let mut child = ServiceChild::start(&ChildOptions {
        program: Some(common::service_exe()),
        tag: "nnhal-coreml-cases",
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

/// Writes `model` to a scratch file and runs `nnhal run` on it.
fn run_cli(model: &nnhal_coreml::proto::Model, tag: &str) -> std::process::Output {
    use prost::Message;
    let dir = std::env::temp_dir().join(format!("nnhal-coreml-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.mlmodel");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args(["run", path.to_str().unwrap()])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

fn case_model(name: &str) -> nnhal_coreml::proto::Model {
    use prost::Message;
    let bytes = std::fs::read(dir().join(format!("{name}.mlmodel"))).unwrap();
    nnhal_coreml::proto::Model::decode(bytes.as_slice()).unwrap()
}

#[test]
fn unsupported_layer_names_the_layer_and_exits_2() {
    use nnhal_coreml::proto::{model::Type, neural_network_layer::Layer, Unsupported};
    let mut model = case_model("conv_valid_3x3");
    let Some(Type::NeuralNetwork(net)) = &mut model.r#type else {
        panic!("a neuralNetwork body")
    };
    net.layers[0].layer = Some(Layer::Embedding(Unsupported {}));
    let out = run_cli(&model, "unsupported");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("layer 0 'conv' (embedding)"), "{err}");
}

#[test]
fn dilated_deconvolution_and_grouped_dilation_are_refused_with_the_layer_named() {
    use nnhal_coreml::proto::{model::Type, neural_network_layer::Layer};
    for (tag, case, why) in [
        (
            "deconv",
            "conv_valid_3x3",
            "a dilated deconvolution: TRANSPOSE_CONV_2D has no dilation",
        ),
        (
            "grouped-dilation",
            "conv_grouped",
            "GROUPED_CONV_2D has no dilation",
        ),
    ] {
        let mut model = case_model(case);
        let Some(Type::NeuralNetwork(net)) = &mut model.r#type else {
            panic!("a neuralNetwork body")
        };
        let Some(Layer::Convolution(c)) = &mut net.layers[0].layer else {
            panic!("a convolution")
        };
        if tag == "deconv" {
            c.is_deconvolution = true;
        }
        c.dilation_factor = vec![2, 2];
        let out = run_cli(&model, tag);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("layer 0 'conv' (convolution)") && err.contains(why),
            "{err}"
        );
    }
}

/// The coremltools-converted MobileNet v1 has its ReLU6 as four layers each (ReLU, linear,
/// unary threshold, linear); every one is lowered as a single RELU6.
#[test]
fn converted_mobilenet_relu6_patterns_become_relu6() {
    let imported =
        nnhal_coreml::import_file(&dir().join("mobilenet_v1_025_128_converted.mlmodel")).unwrap();
    let relu6 = nnhal::hal::OperationType::Relu6.raw();
    let count = imported
        .model
        .operations
        .iter()
        .filter(|o| o.operation_type == relu6)
        .count();
    assert_eq!(count, 27);
    assert!(imported
        .summary
        .iter()
        .any(|l| l.contains("RELU6 (with the 3 layers after it")));
}

#[test]
fn ml_program_models_are_refused_with_exit_2() {
    use nnhal_coreml::proto::{model::Type, Unsupported};
    let mut model = case_model("conv_valid_3x3");
    model.r#type = Some(Type::MlProgram(Unsupported {}));
    let out = run_cli(&model, "mlprogram");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("mlProgram"), "{err}");
}

#[test]
fn classifier_labels_come_with_the_probabilities() {
    let d = dir();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args(["run", d.join("classifier_labels.mlmodel").to_str().unwrap()])
        .args([
            "--input",
            d.join("classifier_labels.in0.npy").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = npy::read(&d.join("classifier_labels.out0.npy")).unwrap();
    let p = values(&expected);
    let best = (0..p.len()).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap();
    let first = text.lines().find(|l| l.starts_with("class '")).unwrap();
    let label = ["cat", "dog", "bird"][best];
    assert!(first.starts_with(&format!("class '{label}': ")), "{text}");
}
