//! TensorFlow Lite models through nnhal-tflite and the driver, against LiteRT's builtin
//! kernels (`OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES`): the small fixtures of
//! importers/tflite/testdata/ (made by importers/tflite/tools/make_fixtures.py, LiteRT's
//! outputs recorded beside them) in this process and through a real `nnhal-service`, and
//! MobileNet v2 float32 and int8 from the shared perf directory when it is present, within
//! the tolerance of the golden vector made from the same file.
//!
//! Fixture tolerance: bool and int32 outputs (comparisons, ARG_MAX, TOPK_V2 indices) exactly;
//! float32 |a − e| ≤ 1e-5 + 1e-4·|e| (the driver and LiteRT sum in
//! different orders); int8 two output steps: each of the up to 17 requantizing operations of a
//! fixture may round one step apart from LiteRT's fixed-point multipliers, and the int8
//! HARD_SWISH and LOGISTIC follow NNAPI's reference formulas, not LiteRT's tables (measured
//! worst: 2 steps, one element of shapes_int8). uint8 outputs take the same two steps; in
//! layers_int8 and layers_uint8, 12 of 640 elements are one step off, all in the channels of the
//! quantized RESIZE_BILINEAR (NNAPI interpolates in float and rounds once, LiteRT's int8
//! kernel in fixed point); moves_int8 matches exactly.

mod common;

use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::ConnectOptions;
use nnhal_cli::modelfile::{npy, Array, ArrayData, ModelRequest};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    common::repo_root().join("importers/tflite/testdata")
}

/// The fixtures with recorded outputs that the importer lowers entirely.
const CASES: &[&str] = &[
    "conv_f32",
    "conv_int8",
    "conv_f16",
    "shapes_f32",
    "shapes_int8",
    "misc_f32",
    "layers_f32",
    "layers_int8",
    "layers_uint8",
    "moves_f32",
    "moves_int8",
    "math_f32",
    "edges_f32",
    "lookup_f32",
    "recurrent_f32",
];

fn values(a: &Array) -> Vec<f64> {
    match &a.data {
        ArrayData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    }
}

fn count(stem: &str, what: &str) -> usize {
    (0..)
        .take_while(|k| dir().join(format!("{stem}.{what}_{k}.npy")).exists())
        .count()
}

fn check(stem: &str, execute: &dyn Fn(&nnhal::hal::Model, &nnhal::hal::Request)) -> Vec<String> {
    let imported = match nnhal_tflite::import_file(&dir().join(format!("{stem}.tflite"))) {
        Ok(m) => m,
        Err(e) => return vec![format!("{stem}: {e}")],
    };
    let inputs: Vec<Array> = (0..count(stem, "input"))
        .map(|k| npy::read(&dir().join(format!("{stem}.input_{k}.npy"))).unwrap())
        .collect();
    let request = ModelRequest::new(&imported, &inputs).unwrap();
    execute(&imported.model, &request.request);
    let got = request.outputs(&imported).unwrap();
    assert_eq!(got.len(), count(stem, "output"), "{stem}");
    let mut problems = Vec::new();
    for (k, g) in got.iter().enumerate() {
        let e = npy::read(&dir().join(format!("{stem}.output_{k}.npy"))).unwrap();
        if g.shape != e.shape || g.data.type_name() != e.data.type_name() {
            problems.push(format!(
                "{stem} output {k}: {:?} {}, LiteRT {:?} {}",
                g.shape,
                g.data.type_name(),
                e.shape,
                e.data.type_name()
            ));
            continue;
        }
        // Booleans and integers (comparisons, indices) must match exactly.
        let exact = matches!(e.data, ArrayData::I32(_) | ArrayData::Bool(_));
        let quantized = !matches!(e.data, ArrayData::F32(_));
        let (gv, ev) = (values(g), values(&e));
        let bad = gv.iter().zip(&ev).enumerate().find(|(_, (a, b))| {
            if exact {
                a != b
            } else if quantized {
                (*a - *b).abs() > 2.0
            } else {
                (*a - *b).abs() > 1e-5 + 1e-4 * b.abs()
            }
        });
        if let Some((i, (a, b))) = bad {
            problems.push(format!("{stem} output {k}: element {i} is {a}, LiteRT {b}"));
        }
    }
    problems
}

#[test]
fn fixtures_match_litert_in_process() {
    let driver = nnhal::Driver::new(1).unwrap();
    let mut problems = Vec::new();
    for stem in CASES {
        problems.extend(check(stem, &|model, request| {
            driver
                .prepare_model(model.clone())
                .unwrap()
                .execute(request)
                .unwrap();
        }));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn fixtures_match_litert_over_rpc() {
    let mut child = ServiceChild::start(&ChildOptions {
        program: Some(common::service_exe()),
        tag: "nnhal-tflite-cases",
        ..ChildOptions::default()
    })
    .unwrap();
    let device = child.connect(&ConnectOptions::default()).unwrap();
    let mut problems = Vec::new();
    for stem in CASES {
        problems.extend(check(stem, &|model, request| {
            device
                .prepare_model(model.clone())
                .unwrap()
                .execute(request)
                .unwrap();
        }));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// MobileNet v2 (`/work/shared/perf` or `$NNHAL_PERF_DIR`): the `.tflite` through the
/// importer against the golden vector made from the same file (its example input, LiteRT's
/// builtin outputs and tolerance).
fn mobilenet_v2(name: &str) {
    let perf = std::env::var_os("NNHAL_PERF_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/perf"));
    let (model, vector) = (
        perf.join(format!("{name}.tflite")),
        perf.join(format!("{name}.json")),
    );
    if !model.exists() || !vector.exists() {
        println!("skipped: {} or its .json is not present", model.display());
        return;
    }
    let imported = nnhal_tflite::import_file(&model).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vector).unwrap()).unwrap();
    let example = &v["examples"][0];
    let numbers = |x: &serde_json::Value| -> Vec<f64> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_f64().unwrap())
            .collect()
    };
    let edge = &imported.inputs[0];
    let raw = numbers(&example["inputs"]["0"]);
    let input = Array {
        shape: edge.shape.clone(),
        data: match edge.source_type {
            nnhal_tflite::SourceType::Int8 => ArrayData::I8(raw.iter().map(|&x| x as i8).collect()),
            _ => ArrayData::F32(raw.iter().map(|&x| x as f32).collect()),
        },
    };
    let request = ModelRequest::new(&imported, &[input]).unwrap();
    let driver = nnhal::Driver::new(0).unwrap();
    driver
        .prepare_model(imported.model.clone())
        .unwrap()
        .execute(&request.request)
        .unwrap();
    let got = request.outputs(&imported).unwrap();
    let tol = &v["tolerance"];
    // The vector numbers its outputs in the signature's order and records the TFLite tensor
    // of each; the importer's follow the subgraph's output list.
    let decoded = nnhal_tflite::decode(&std::fs::read(&model).unwrap()).unwrap();
    let origin = v["origin"]["outputs"].as_array().unwrap();
    assert_eq!(origin.len(), got.len());
    for entry in origin {
        let position = entry["position"].as_u64().unwrap();
        let tensor = entry["tfliteTensor"].as_u64().unwrap() as usize;
        let k = decoded.outputs.iter().position(|&t| t == tensor).unwrap();
        let g = &got[k];
        let want = numbers(&example["outputs"][position.to_string()]);
        let gv = values(g);
        assert_eq!(gv.len(), want.len(), "{name} output {k}");
        let (worst, at) = gv
            .iter()
            .zip(&want)
            .map(|(a, e)| (a - e).abs())
            .enumerate()
            .fold(
                (0.0f64, 0),
                |(w, i), (j, d)| if d > w { (d, j) } else { (w, i) },
            );
        match g.data {
            ArrayData::F32(_) => {
                let (atol, rtol) = (
                    tol["float32"]["atol"].as_f64().unwrap(),
                    tol["float32"]["rtol"].as_f64().unwrap(),
                );
                for (i, (a, e)) in gv.iter().zip(&want).enumerate() {
                    assert!(
                        (a - e).abs() <= atol + rtol * e.abs(),
                        "{name} output {k} element {i}: {a}, LiteRT {e} (atol {atol}, rtol {rtol})"
                    );
                }
            }
            _ => {
                let steps = tol["quant8Signed"]["maxAbsDiff"].as_f64().unwrap();
                assert!(
                    worst <= steps,
                    "{name} output {k}: element {at} off by {worst} steps (tolerance {steps})"
                );
            }
        }
        println!("{name} output {k}: largest difference {worst} at element {at}");
    }
}

#[test]
fn mobilenet_v2_f32_matches_litert() {
    mobilenet_v2("mobilenet_v2_f32");
}

#[test]
fn mobilenet_v2_int8_matches_litert() {
    mobilenet_v2("mobilenet_v2_int8");
}

#[test]
fn the_cli_runs_and_reports_a_tflite_file() {
    let exe = Path::new(env!("CARGO_BIN_EXE_nnhal"));
    let out = std::process::Command::new(exe)
        .arg("import")
        .arg(dir().join("misc_int8.tflite"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("operator 3 (DIV) → not lowered") && err.contains("(SOFTMAX) → SOFTMAX"),
        "{err}"
    );
    let tmp = std::env::temp_dir().join(format!("nnhal-tflite-run-{}", std::process::id()));
    let out = std::process::Command::new(exe)
        .arg("run")
        .arg(dir().join("conv_int8.tflite"))
        .arg("--input")
        .arg(dir().join("conv_int8.input_0.npy"))
        .arg("--output-dir")
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = npy::read(&tmp.join("output_0.npy")).unwrap();
    let want = npy::read(&dir().join("conv_int8.output_0.npy")).unwrap();
    assert!(
        matches!(got.data, ArrayData::I8(_)),
        "an int8 output stays int8"
    );
    assert_eq!(got.shape, want.shape);
    let worst = values(&got)
        .iter()
        .zip(values(&want))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(worst <= 1.0, "{worst} steps");
    std::fs::remove_dir_all(&tmp).ok();
    // A damaged file: exit status 2 with the reason.
    let cut = tmp.with_extension("tflite");
    let bytes = std::fs::read(dir().join("conv_f32.tflite")).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let out = std::process::Command::new(exe)
        .arg("import")
        .arg(&cut)
        .output()
        .unwrap();
    std::fs::remove_file(&cut).ok();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TensorFlow Lite model"));
}

/// `nnhal run` reads int32 and bool `.npy` inputs and writes each output in the model's type:
/// a comparison as bool, ARG_MAX and TOPK_V2 indices as int32, equal to LiteRT's.
#[test]
fn the_cli_reads_and_writes_bool_and_int32_arrays() {
    let exe = Path::new(env!("CARGO_BIN_EXE_nnhal"));
    let tmp = std::env::temp_dir().join(format!("nnhal-tflite-edges-{}", std::process::id()));
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("run").arg(dir().join("edges_f32.tflite"));
    for k in 0..3 {
        cmd.arg("--input")
            .arg(dir().join(format!("edges_f32.input_{k}.npy")));
    }
    let out = cmd.arg("--output-dir").arg(&tmp).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (k, ty) in [(0, "bool"), (1, "int32"), (3, "int32")] {
        let got = npy::read(&tmp.join(format!("output_{k}.npy"))).unwrap();
        let want = npy::read(&dir().join(format!("edges_f32.output_{k}.npy"))).unwrap();
        assert_eq!(got.data.type_name(), ty, "output {k}");
        assert_eq!(got, want, "output {k}");
    }
    // An input of the wrong type (float32 indices) is a usage error naming both types.
    let floats = tmp.join("idx.npy");
    npy::write(
        &floats,
        &Array {
            shape: vec![2],
            data: ArrayData::F32(vec![0.0, 1.0]),
        },
    )
    .unwrap();
    let out = std::process::Command::new(exe)
        .arg("run")
        .arg(dir().join("edges_f32.tflite"))
        .arg("--input")
        .arg(dir().join("edges_f32.input_0.npy"))
        .arg("--input")
        .arg(&floats)
        .arg("--input")
        .arg(dir().join("edges_f32.input_2.npy"))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&tmp).ok();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("float32 data, the model takes int32"), "{err}");
}
