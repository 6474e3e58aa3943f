//! The backend test models of the `onnx` package (onnx 1.23.2: the pytorch-converted,
//! pytorch-operator and simple suites, vendored in importers/onnx/testdata/backend/) through the
//! importer and the driver, in this process and, for a sample, over a real `nnhal-service`:
//! every model either runs within the suite's tolerance (|a − e| ≤ 1e-5 + 1e-3·|e|) on every
//! test data set, or is refused at import for one of the reasons the README's table lists.

mod common;

use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::ConnectOptions;
use nnhal_cli::modelfile::{Array, ArrayData, ModelRequest};
use nnhal_onnx::{Data, Tensor};
use prost::Message;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    common::repo_root().join("importers/onnx/testdata/backend")
}

/// The models that run, out of 140.
const RUNS: usize = 101;

/// Why the others are refused: a phrase of the importer's message, by model.
const REFUSED: &[(&str, &str)] = &[
    ("test_AvgPool3d", "a 3-D convolution or pooling"),
    ("test_AvgPool3d_stride", "a 3-D convolution or pooling"),
    (
        "test_AvgPool3d_stride1_pad0_gpu_input",
        "a 3-D convolution or pooling",
    ),
    ("test_Conv3d", "a 3-D convolution or pooling"),
    ("test_Conv3d_dilated", "a 3-D convolution or pooling"),
    (
        "test_Conv3d_dilated_strided",
        "a 3-D convolution or pooling",
    ),
    ("test_Conv3d_groups", "a 3-D convolution or pooling"),
    ("test_Conv3d_no_bias", "a 3-D convolution or pooling"),
    ("test_Conv3d_stride", "a 3-D convolution or pooling"),
    ("test_Conv3d_stride_padding", "a 3-D convolution or pooling"),
    ("test_MaxPool3d", "a 3-D convolution or pooling"),
    ("test_MaxPool3d_stride", "a 3-D convolution or pooling"),
    (
        "test_MaxPool3d_stride_padding",
        "a 3-D convolution or pooling",
    ),
    ("test_operator_add_broadcast", "element type double"),
    ("test_operator_add_size1_broadcast", "element type double"),
    (
        "test_operator_add_size1_right_broadcast",
        "element type double",
    ),
    (
        "test_operator_add_size1_singleton_broadcast",
        "element type double",
    ),
    ("test_operator_addconstant", "element type double"),
    ("test_operator_permute2", "a transpose of rank 6"),
    (
        "test_expand_shape_model1",
        "output shape is a runtime value",
    ),
    (
        "test_expand_shape_model2",
        "output shape is a runtime value",
    ),
    (
        "test_expand_shape_model3",
        "output shape is a runtime value",
    ),
    (
        "test_expand_shape_model4",
        "output shape is a runtime value",
    ),
    ("test_gradient_of_add", "ai.onnx.preview.training"),
    ("test_gradient_of_add_and_mul", "ai.onnx.preview.training"),
    ("test_sequence_model1", "(SequenceEmpty)"),
    ("test_sequence_model2", "(SequenceConstruct)"),
    ("test_sequence_model3", "(SequenceConstruct)"),
    ("test_sequence_model4", "(SequenceConstruct)"),
    ("test_sequence_model5", "(SequenceConstruct)"),
    ("test_sequence_model6", "(SplitToSequence)"),
    ("test_sequence_model7", "element type double"),
    ("test_sequence_model8", "sequence tensors"),
    (
        "test_strnorm_model_monday_casesensintive_lower",
        "element type string",
    ),
    (
        "test_strnorm_model_monday_casesensintive_nochangecase",
        "element type string",
    ),
    (
        "test_strnorm_model_monday_casesensintive_upper",
        "element type string",
    ),
    (
        "test_strnorm_model_monday_empty_output",
        "element type string",
    ),
    (
        "test_strnorm_model_monday_insensintive_upper_twodim",
        "element type string",
    ),
    (
        "test_strnorm_model_nostopwords_nochangecase",
        "element type string",
    ),
];

fn models() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for suite in ["pytorch-converted", "pytorch-operator", "simple"] {
        for e in std::fs::read_dir(root().join(suite)).unwrap() {
            all.push(e.unwrap().path());
        }
    }
    all.sort();
    all
}

fn tensor(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap();
    let t = nnhal_onnx::proto::TensorProto::decode(bytes.as_slice()).unwrap();
    nnhal_onnx::decode::tensor(&t, &path.display().to_string()).unwrap()
}

/// A test tensor as the runner's input. NNAPI has no int64: integer inputs are fed as int32
/// (the importer declares them TENSOR_INT32), and a value outside int32 is a problem.
fn array(t: &Tensor) -> Result<Array, String> {
    let data = match &t.data {
        Data::F32(v) => ArrayData::F32(v.clone()),
        Data::I32(v) => ArrayData::I32(v.clone()),
        Data::I64(v) => ArrayData::I32(
            v.iter()
                .map(|&x| i32::try_from(x).map_err(|_| format!("int64 value {x} is outside int32")))
                .collect::<Result<_, _>>()?,
        ),
        other => panic!("a {} test tensor", other.type_name()),
    };
    Ok(Array {
        shape: t.dims.clone(),
        data,
    })
}

fn data_sets(model: &Path) -> Vec<PathBuf> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(model)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    sets
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    (0..)
        .map(|k| dir.join(format!("{prefix}_{k}.pb")))
        .take_while(|p| p.exists())
        .collect()
}

/// Runs every data set of an imported model; the problems found.
fn check(
    name: &str,
    model: &Path,
    imported: &nnhal_onnx::ImportedModel,
    execute: &dyn Fn(&nnhal::hal::Model, &nnhal::hal::Request),
) -> Vec<String> {
    let sets = data_sets(model);
    if sets.is_empty() {
        return vec![format!("{name}: imported, but no test data is vendored")];
    }
    let mut problems = Vec::new();
    for set in sets {
        let inputs: Vec<Array> = match numbered(&set, "input")
            .iter()
            .map(|p| array(&tensor(p)))
            .collect()
        {
            Ok(inputs) => inputs,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let request = match ModelRequest::new(imported, &inputs) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        execute(&imported.model, &request.request);
        let got = request.outputs(imported).unwrap();
        let want: Vec<Tensor> = numbered(&set, "output").iter().map(|p| tensor(p)).collect();
        if got.len() != want.len() {
            problems.push(format!(
                "{name}: {} outputs, expected {}",
                got.len(),
                want.len()
            ));
            continue;
        }
        for (k, (g, e)) in got.iter().zip(&want).enumerate() {
            if let ArrayData::I32(gv) = &g.data {
                // An integer output (int64 in the model) is held as int32: equal, exactly.
                let ev = e.data.to_i64();
                let same_shape = g.shape == e.dims || (e.dims.is_empty() && g.shape == [1]);
                let exact = ev.is_some_and(|ev| {
                    ev.len() == gv.len() && gv.iter().zip(&ev).all(|(&a, &b)| i64::from(a) == b)
                });
                if !same_shape || !exact {
                    problems.push(format!(
                        "{name} output {k}: {:?} of shape {:?}, expected {:?} of shape {:?}",
                        gv,
                        g.shape,
                        e.data.to_i64(),
                        e.dims
                    ));
                }
                continue;
            }
            let ArrayData::F32(gv) = &g.data else {
                problems.push(format!("{name} output {k}: not float32"));
                continue;
            };
            let ev = e.f32s().unwrap();
            // A scalar ONNX output is [1] here (NNAPI has no rank-0 tensors).
            let same_shape = g.shape == e.dims || (e.dims.is_empty() && g.shape == [1]);
            if !same_shape || gv.len() != ev.len() {
                problems.push(format!(
                    "{name} output {k}: shape {:?}, expected {:?}",
                    g.shape, e.dims
                ));
                continue;
            }
            if let Some((i, (a, b))) = gv.iter().zip(ev).enumerate().find(|(_, (a, b))| {
                // NaN where the reference has NaN agrees (numpy's allclose, equal_nan).
                !((*a - *b).abs() <= 1e-5 + 1e-3 * b.abs() || (a.is_nan() && b.is_nan()))
            }) {
                problems.push(format!(
                    "{name} output {k}: element {i} is {a}, expected {b}"
                ));
            }
        }
    }
    problems
}

fn name(model: &Path) -> String {
    model.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn backend_models_run_or_are_refused_by_name() {
    let driver = nnhal::Driver::new(1).unwrap();
    let all = models();
    assert_eq!(all.len(), 140);
    let mut problems = Vec::new();
    let mut runs = 0;
    let mut refused = Vec::new();
    for model in &all {
        let name = name(model);
        match nnhal_onnx::import_file(&model.join("model.onnx")) {
            Err(e) => refused.push((name, e.to_string())),
            Ok(imported) => {
                let p = check(&name, model, &imported, &|m, r| {
                    driver.prepare_model(m.clone()).unwrap().execute(r).unwrap();
                });
                if p.is_empty() {
                    runs += 1;
                }
                problems.extend(p);
            }
        }
    }
    for (name, why) in &refused {
        println!("refused {name}: {why}");
    }
    for (name, why) in &refused {
        match REFUSED.iter().find(|(n, _)| n == name) {
            None => problems.push(format!("{name} is refused unexpectedly: {why}")),
            Some((_, phrase)) if !why.contains(phrase) => {
                problems.push(format!("{name} is refused for another reason: {why}"))
            }
            _ => {}
        }
    }
    for (n, _) in REFUSED {
        if !refused.iter().any(|(r, _)| r == n) {
            problems.push(format!("{n} is no longer refused: update REFUSED"));
        }
    }
    println!(
        "{runs} of {} backend models run, {} refused",
        all.len(),
        refused.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(runs, RUNS);
    assert_eq!(runs + refused.len(), all.len());
}

/// A sample (every fifth model that runs) over a real service on its Unix socket.
#[test]
fn backend_sample_over_rpc() {
    let mut child = ServiceChild::start(&ChildOptions {
        program: Some(common::service_exe()),
        tag: "nnhal-onnx-backend",
        ..ChildOptions::default()
    })
    .unwrap();
    let device = child.connect(&ConnectOptions::default()).unwrap();
    let mut problems = Vec::new();
    let mut ran = 0;
    for model in models().iter().step_by(5) {
        let Ok(imported) = nnhal_onnx::import_file(&model.join("model.onnx")) else {
            continue;
        };
        ran += 1;
        problems.extend(check(&name(model), model, &imported, &|m, r| {
            device.prepare_model(m.clone()).unwrap().execute(r).unwrap();
        }));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(ran >= RUNS / 6, "{ran} sampled");
}
