//! ONNX models through the real `nnhal` binary and, for rpc, a real `nnhal-service` on a Unix
//! socket, against onnxruntime's outputs committed as .npy (importers/onnx/tools/
//! make_expected.py computed them; no Python runs here).

mod common;

use nnhal_cli::modelfile::{npy, Array, ArrayData, ModelRequest};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn testdata(rel: &str) -> PathBuf {
    common::repo_root()
        .join("importers/onnx/testdata")
        .join(rel)
}

/// A private runtime directory (XDG_RUNTIME_DIR of the binaries, so the default socket is
/// ours) that also holds the outputs.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nnhal-onnx-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn command(&self, exe: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(exe);
        c.env("XDG_RUNTIME_DIR", &self.0)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        c
    }

    fn nnhal(&self, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_nnhal"))
            .args(args)
            .output()
            .unwrap()
    }

    fn start_service(&self) -> Running {
        let child = self
            .command(common::service_exe())
            .args(["--log-level", "warn"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let running = Running(child);
        let socket = self.0.join("nnhal/default.sock");
        let start = Instant::now();
        while !socket.exists() {
            assert!(start.elapsed() < Duration::from_secs(20), "no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        running
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn f32s(a: &Array) -> Vec<f32> {
    match &a.data {
        ArrayData::F32(v) => v.clone(),
        ArrayData::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        ArrayData::I8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        other => panic!("a {} output", other.type_name()),
    }
}

/// Runs `nnhal run MODEL --input x.npy --output-dir DIR [extra]` and returns output 0.
fn run_cli(s: &Scratch, model: &str, extra: &[&str]) -> Array {
    let dir = s.0.join("out");
    let input = testdata("expected/mobilenet_input.npy");
    let mut args = vec![
        "run",
        model,
        "--input",
        input.to_str().unwrap(),
        "--output-dir",
        dir.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = s.nnhal(&args);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    npy::read(&dir.join("output_0.npy")).unwrap()
}

fn max_diff(a: &[f32], e: &[f32]) -> f32 {
    assert_eq!(a.len(), e.len());
    a.iter()
        .zip(e)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn check_f32(got: &Array) {
    let expected = npy::read(&testdata("expected/mobilenet_f32.npy")).unwrap();
    assert_eq!(got.shape, expected.shape);
    let d = max_diff(&f32s(got), &f32s(&expected));
    println!("mobilenet f32: max |nnhal − onnxruntime| = {d:e}");
    assert!(d <= 1e-4, "max difference {d}");
}

#[test]
fn mobilenet_f32_in_process_matches_onnxruntime() {
    let s = Scratch::new();
    let model = testdata("mobilenet_v1_f32.onnx");
    check_f32(&run_cli(&s, model.to_str().unwrap(), &[]));
}

#[test]
fn mobilenet_f32_over_rpc_matches_onnxruntime() {
    let s = Scratch::new();
    let _service = s.start_service();
    let model = testdata("mobilenet_v1_f32.onnx");
    check_f32(&run_cli(
        &s,
        model.to_str().unwrap(),
        &["--transport", "rpc"],
    ));
}

#[test]
fn mobilenet_u8u8_over_rpc_within_two_steps_of_onnxruntime() {
    let s = Scratch::new();
    let _service = s.start_service();
    let model = testdata("mobilenet_v1_u8u8.onnx");
    let got = run_cli(&s, model.to_str().unwrap(), &["--transport", "rpc"]);
    let expected = npy::read(&testdata("expected/mobilenet_u8u8.npy")).unwrap();
    let d = max_diff(&f32s(&got), &f32s(&expected));
    println!(
        "mobilenet u8u8: max |nnhal − onnxruntime| = {d} ({} steps of 1/256)",
        d * 256.0
    );
    assert!(d <= 2.0 / 256.0 + 1e-7, "max difference {d}");
}

/// The uint8 model's logits (the QLinearSoftmax input) within one quantization step: the
/// model gets that tensor as a second graph output (re-encoded with the importer's own
/// messages) and runs in-process.
#[test]
fn mobilenet_u8u8_logits_within_one_step() {
    use prost::Message;
    let bytes = std::fs::read(testdata("mobilenet_v1_u8u8.onnx")).unwrap();
    let mut model = nnhal_onnx::proto::ModelProto::decode(bytes.as_slice()).unwrap();
    let graph = model.graph.as_mut().unwrap();
    graph.output.push(nnhal_onnx::proto::ValueInfoProto {
        name: Some("logits_2d_quantized".into()),
        r#type: None,
    });
    let imported = nnhal_onnx::import(&model.encode_to_vec()).unwrap();
    let input = npy::read(&testdata("expected/mobilenet_input.npy")).unwrap();
    let request = ModelRequest::new(&imported, &[input]).unwrap();
    let driver = nnhal::Driver::new(1).unwrap();
    driver
        .prepare_model(imported.model.clone())
        .unwrap()
        .execute(&request.request)
        .unwrap();
    let outputs = request.outputs(&imported).unwrap();
    let expected = npy::read(&testdata("expected/mobilenet_u8u8_logits.npy")).unwrap();
    let (ArrayData::U8(got), ArrayData::U8(want)) = (&outputs[1].data, &expected.data) else {
        panic!("uint8 logits expected");
    };
    let steps = got
        .iter()
        .zip(want)
        .map(|(&a, &b)| (i32::from(a) - i32::from(b)).abs())
        .max()
        .unwrap();
    let off = got.iter().zip(want).filter(|(a, b)| a != b).count();
    println!("logits: max {steps} step(s), {off} of {} differ", got.len());
    assert!(steps <= 1, "logits {steps} steps apart");
}

#[test]
fn unsupported_attribute_names_the_node_and_exits_2() {
    use nnhal_onnx::proto::*;
    use prost::Message;
    let s = Scratch::new();
    let tensor = |name: &str, dims: &[i64], values: Vec<f32>| TensorProto {
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: values,
        name: Some(name.into()),
        ..TensorProto::default()
    };
    let info = |name: &str, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
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
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into(), "w".into()],
                output: vec!["y".into()],
                name: Some("Conv_17".into()),
                op_type: Some("Conv".into()),
                attribute: vec![AttributeProto {
                    name: Some("coefficients".into()),
                    r#type: Some(attribute_proto::AttributeType::Ints as i32),
                    ints: vec![2, 2],
                    ..AttributeProto::default()
                }],
                ..NodeProto::default()
            }],
            initializer: vec![tensor("w", &[1, 1, 3, 3], vec![1.0; 9])],
            input: vec![info("x", &[1, 1, 8, 8])],
            output: vec![info("y", &[1, 1, 4, 4])],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    };
    let path = s.0.join("unknown_attribute.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    for command in ["run", "import"] {
        let out = s.nnhal(&[command, path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("node 0 'Conv_17' (Conv): attribute 'coefficients' is not supported"),
            "{err}"
        );
    }
}

#[test]
fn damaged_file_is_a_usage_error() {
    let s = Scratch::new();
    let bytes = std::fs::read(testdata("mobilenet_v1_u8u8.onnx")).unwrap();
    let path = s.0.join("truncated.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let out = s.nnhal(&["run", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("malformed ONNX model"), "{err}");
}

#[test]
fn import_writes_a_vector_that_runs_the_same() {
    let s = Scratch::new();
    let model = testdata("mobilenet_v1_f32.onnx");
    let json = s.0.join("m.json");
    let out = s.nnhal(&[
        "import",
        model.to_str().unwrap(),
        "--out",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("58 ONNX nodes → 31 NNAPI operations"),
        "{text}"
    );
    assert!(text.contains("fused as RELU6 into the producer"), "{text}");
    let v = nnhal_vts::vector::Vector::from_file(&json).unwrap();
    let m = nnhal_vts::vector::model::to_model(&v, nnhal_vts::vector::model::ConstantMode::Copy)
        .unwrap();
    let imported = nnhal_onnx::import_file(&model).unwrap();
    assert_eq!(m.operations, imported.model.operations);
    assert_eq!(m.operand_values.len(), imported.model.operand_values.len());
}

#[test]
fn bench_takes_a_model_file_in_process_and_over_rpc() {
    let s = Scratch::new();
    let model =
        common::repo_root().join("importers/onnx/testdata/cases/residual_branches_head.onnx");
    for transport in ["inproc", "rpc"] {
        let out = s.nnhal(&[
            "bench",
            model.to_str().unwrap(),
            "--iterations",
            "3",
            "--warmup",
            "1",
            "--transport",
            transport,
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("output     correct: outputs identical to an in-process run"),
            "{text}"
        );
    }
}

/// A model of 25 M parameters (generated here, 100 MB) whose weight is transposed by constant
/// folding at import: it is within the folding budget (twice the file), where the old fixed
/// bound of 16 M folded elements refused it, and it runs in process. The weight's values are
/// a formula, so the expected output is computed here.
#[test]
fn a_25m_parameter_model_folds_and_runs_in_process() {
    use nnhal_onnx::proto::*;
    use prost::Message;
    const K: usize = 5000;
    const N: usize = 5001;
    let w = |k: usize, n: usize| ((k * 7 + n * 3) % 11) as f32 - 5.0;
    // Stored [N, K], transposed to [K, N] by a Transpose node, as exporters write Linear.
    let raw: Vec<u8> = (0..N)
        .flat_map(|n| (0..K).map(move |k| w(k, n)))
        .flat_map(f32::to_le_bytes)
        .collect();
    let info = |name: &str, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
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
    };
    let node = |op: &str, ins: &[&str], out: &str, perm: Option<Vec<i64>>| NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        op_type: Some(op.into()),
        attribute: perm
            .map(|p| AttributeProto {
                name: Some("perm".into()),
                r#type: Some(attribute_proto::AttributeType::Ints as i32),
                ints: p,
                ..AttributeProto::default()
            })
            .into_iter()
            .collect(),
        ..NodeProto::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(GraphProto {
            node: vec![
                node("Transpose", &["w"], "wt", Some(vec![1, 0])),
                node("MatMul", &["x", "wt"], "y", None),
            ],
            initializer: vec![TensorProto {
                dims: vec![N as i64, K as i64],
                data_type: Some(1),
                raw_data: Some(raw),
                name: Some("w".into()),
                ..TensorProto::default()
            }],
            input: vec![info("x", &[1, K as i64])],
            output: vec![info("y", &[1, N as i64])],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    };
    let bytes = model.encode_to_vec();
    assert!(bytes.len() > 100_000_000);
    const _: () = assert!(
        K * N > 1 << 24,
        "more than the old bound of 16 M folded elements"
    );
    let imported = nnhal_onnx::import(&bytes).unwrap();
    let x: Vec<f32> = (0..K).map(|k| (k % 5) as f32 * 0.25).collect();
    let input = Array {
        shape: vec![1, K],
        data: ArrayData::F32(x.clone()),
    };
    let request = ModelRequest::new(&imported, &[input]).unwrap();
    let driver = nnhal::Driver::new(1).unwrap();
    driver
        .prepare_model(imported.model.clone())
        .unwrap()
        .execute(&request.request)
        .unwrap();
    let got = f32s(&request.outputs(&imported).unwrap()[0]);
    for (n, &g) in got.iter().enumerate().step_by(97) {
        let e: f64 = (0..K).map(|k| f64::from(x[k]) * f64::from(w(k, n))).sum();
        assert!(
            (f64::from(g) - e).abs() <= 1e-3 * e.abs().max(1.0),
            "y[{n}] = {g}, expected {e}"
        );
    }
}
