//! `nnhal bench` as a user runs it: the real binary on small vectors, in-process and through its
//! own child service. Checks the JSON line `ratio.py` reads, the exit statuses (1 for a wrong
//! output, 2 for usage errors), the per-operation profile and the golden-logits variant.

mod common;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nnhal(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args(args)
        // The service binary beside the test executable is the one cargo built for this run.
        .env_remove("NNHAL_SERVICE")
        .env_remove("NNHAL_ISA")
        .output()
        .expect("nnhal starts")
}

fn vectors() -> PathBuf {
    common::repo_root().join("vts_tests/vectors")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The last stdout line, which `--json` makes a JSON object.
fn last_json(out: &Output) -> Value {
    let text = stdout(out);
    let line = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!(
            "last line is not JSON ({e}): {line}\nstderr: {}",
            stderr(out)
        )
    })
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nnhal-bench-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_json(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(value).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// Two operations, `t = x + c` then `y = relu(t)`, with golden logits on `t` (operand 3).
fn chain_vector(logits: &[f64]) -> Value {
    let tensor = |lifetime: &str, value: Value| {
        json!({"type": "TENSOR_FLOAT32", "dimensions": [1, 2, 2, 1], "scale": 0.0,
               "zeroPoint": 0, "lifetime": lifetime, "value": value})
    };
    json!({
        "name": "add_relu_chain",
        "model": {
            "operands": [
                tensor("MODEL_INPUT", Value::Null),
                tensor("CONSTANT_COPY", json!([0.5, 0.5, 0.5, 0.5])),
                {"type": "INT32", "dimensions": [], "scale": 0.0, "zeroPoint": 0,
                 "lifetime": "CONSTANT_COPY", "value": [0]},
                tensor("TEMPORARY_VARIABLE", Value::Null),
                tensor("MODEL_OUTPUT", Value::Null),
            ],
            "operations": [
                {"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]},
                {"type": "RELU", "inputs": [3], "outputs": [4]},
            ],
            "inputIndexes": [0],
            "outputIndexes": [4],
        },
        "examples": [{"inputs": {"0": [1.0, -2.0, 3.0, -4.0]},
                      "outputs": {"0": [1.5, 0.0, 3.5, 0.0]}}],
        "origin": {"goldenLogits": {"operand": 3, "values": logits}},
    })
}

#[test]
fn json_line_has_the_contract_fields() {
    let conv = vectors().join("conv_float.json");
    let out = nnhal(&[
        "bench",
        conv.to_str().unwrap(),
        "--iterations",
        "3",
        "--warmup",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = last_json(&out);
    for key in [
        "median_ms",
        "p10_ms",
        "p90_ms",
        "min_ms",
        "prepare_ms",
        "threads",
        "iterations",
        "warmup",
        "isa",
        "transport",
        "model",
        "output_ok",
    ] {
        assert!(j.get(key).is_some(), "no {key} in {j}");
    }
    assert_eq!(j["model"], "conv_float");
    assert_eq!(j["output_ok"], true);
    assert_eq!(
        (j["iterations"].as_u64(), j["warmup"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(j["threads"], 1);
    assert_eq!(j["transport"], "inproc");
    assert!(j["isa"].is_string());
    assert!(
        j.get("logits_exact").is_none(),
        "conv_float has no golden logits"
    );
    let ms = |k: &str| j[k].as_f64().unwrap();
    assert!(ms("min_ms") > 0.0);
    assert!(ms("min_ms") <= ms("p10_ms") && ms("p10_ms") <= ms("median_ms"));
    assert!(ms("median_ms") <= ms("p90_ms"));
    // Without --json no line is JSON.
    let out = nnhal(&["bench", conv.to_str().unwrap(), "--iterations", "1"]);
    assert!(out.status.success());
    assert!(stdout(&out).lines().all(|l| !l.starts_with('{')));
}

#[test]
fn a_wrong_output_exits_with_1() {
    let dir = scratch("tampered");
    let text = std::fs::read_to_string(vectors().join("conv_quant8.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    // Beyond the quant8 allowance of 1.
    let first = &mut v["examples"][0]["outputs"]["0"][0];
    *first = json!(first.as_f64().unwrap() + 5.0);
    let path = write_json(&dir, "tampered.json", &v);
    let out = nnhal(&["bench", &path, "--iterations", "2", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(last_json(&out)["output_ok"], false);
    assert!(stdout(&out).contains("WRONG"), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn golden_logits_are_checked_bit_for_bit() {
    let dir = scratch("logits");
    let right = write_json(&dir, "right.json", &chain_vector(&[1.5, -1.5, 3.5, -3.5]));
    let out = nnhal(&["bench", &right, "--iterations", "2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = last_json(&out);
    assert_eq!(
        (j["output_ok"].clone(), j["logits_exact"].clone()),
        (json!(true), json!(true))
    );

    // One logit off by the smallest step: the output is still right, the logits are not.
    let off = f64::from(f32::from_bits(3.5f32.to_bits() + 1));
    let wrong = write_json(&dir, "wrong.json", &chain_vector(&[1.5, -1.5, off, -3.5]));
    let out = nnhal(&["bench", &wrong, "--iterations", "2", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let j = last_json(&out);
    assert_eq!(
        (j["output_ok"].clone(), j["logits_exact"].clone()),
        (json!(true), json!(false))
    );
    assert!(stdout(&out).contains("NOT EXACT"), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn profile_has_one_row_per_operation() {
    let dir = scratch("profile");
    let path = write_json(&dir, "chain.json", &chain_vector(&[1.5, -1.5, 3.5, -3.5]));
    let out = nnhal(&["bench", &path, "--iterations", "3", "--profile", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            words.next().is_some_and(|w| w.parse::<usize>().is_ok())
                && words.next().is_some_and(|w| w == "ADD" || w == "RELU")
        })
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].contains("[1,2,2,1]"), "{}", rows[0]);
    let profile = last_json(&out)["profile"].as_array().unwrap().clone();
    assert_eq!(profile.len(), 2);
    assert_eq!(profile[1]["type"], "RELU");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rpc_through_an_own_service() {
    let conv = vectors().join("conv_quant8.json");
    let out = nnhal(&[
        "bench",
        conv.to_str().unwrap(),
        "--transport",
        "rpc",
        "--threads",
        "2",
        "--iterations",
        "3",
        "--warmup",
        "1",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let j = last_json(&out);
    assert_eq!(j["transport"], "rpc");
    assert_eq!(j["output_ok"], true);
    assert_eq!(j["threads"], 2);
    assert!(stdout(&out).contains("own service"), "{}", stdout(&out));
}

#[test]
fn usage_errors_exit_with_2() {
    let conv = vectors().join("conv_float.json");
    let conv = conv.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["bench", "Cargo.toml"], "not a vector file"),
        (&["bench", "no/such/vector.json"], "not a vector file"),
        (
            &["bench", conv, "--transport", "rpc", "--profile"],
            "not available over rpc",
        ),
        (&["bench", conv, "--iterations", "0"], "at least 1"),
        (
            &["bench", conv, "--socket", "/nonexistent.sock"],
            "--transport rpc",
        ),
    ];
    for (args, message) in cases {
        let out = nnhal(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
    }
    // An instruction set of another architecture, or one this processor lacks.
    let foreign = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    let out = nnhal(&["bench", conv, "--isa", foreign]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--isa"), "{}", stderr(&out));
    // Neither or both of --builtin and a vector: clap's own usage error.
    assert_eq!(nnhal(&["bench"]).status.code(), Some(2));
    let both = nnhal(&["bench", "--builtin", "mobilenet-v1-f32", conv]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn every_supported_isa_runs() {
    let conv = vectors().join("conv_float.json");
    let levels: &[&str] = if cfg!(target_arch = "x86_64") {
        &["generic", "avx2", "avx512", "avx512vnni", "avx512amx"]
    } else {
        &["generic", "neon", "dotprod"]
    };
    for level in levels {
        let out = nnhal(&[
            "bench",
            conv.to_str().unwrap(),
            "--isa",
            level,
            "--iterations",
            "1",
            "--json",
        ]);
        match out.status.code() {
            Some(0) => assert_eq!(last_json(&out)["isa"], *level),
            // A level this processor lacks is a usage error that says so.
            Some(2) => assert!(
                stderr(&out).contains("does not support"),
                "{}",
                stderr(&out)
            ),
            other => panic!("--isa {level}: status {other:?}: {}", stderr(&out)),
        }
    }
}

/// One execution of the builtin MobileNet proves the model, its weights and the reference check
/// end to end.
#[test]
fn builtin_mobilenet_matches_the_reference() {
    let out = nnhal(&[
        "bench",
        "--builtin",
        "mobilenet-v1-f32",
        "--iterations",
        "1",
        "--warmup",
        "0",
        "--json",
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let j = last_json(&out);
    assert_eq!(j["model"], "mobilenet-v1-f32");
    assert_eq!(j["output_ok"], true);
    assert_eq!(j["top5"], json!([290, 271, 523, 538, 149]));
    assert!(j["max_abs_diff"].as_f64().unwrap() <= 1e-5);
}

#[test]
fn ab_runs_two_plans_alternately() {
    let conv = vectors().join("conv_float.json");
    let b = if cfg!(target_arch = "x86_64") {
        "avx2"
    } else {
        "generic"
    };
    let out = nnhal(&[
        "bench",
        conv.to_str().unwrap(),
        "--isa",
        "generic",
        "--ab-isa",
        b,
        "--iterations",
        "5",
        "--warmup",
        "1",
        "--json",
    ]);
    if out.status.code() == Some(2) && stderr(&out).contains("does not support") {
        return;
    }
    assert!(out.status.success(), "{}", stderr(&out));
    let j = last_json(&out);
    assert_eq!(j["isa"], "generic");
    assert_eq!(j["ab"]["isa"], b);
    assert_eq!(j["ab"]["output_ok"], true);
    let (a_ms, b_ms) = (
        j["median_ms"].as_f64().unwrap(),
        j["ab"]["median_ms"].as_f64().unwrap(),
    );
    assert!(a_ms > 0.0 && b_ms > 0.0, "{j}");
    let ratio = j["ab"]["ratio"].as_f64().unwrap();
    assert!((ratio - b_ms / a_ms).abs() < 1e-9, "{j}");
    assert!(j["ab"]["paired_ratio"].as_f64().unwrap() > 0.0);
    assert!(stdout(&out).contains("B/A"), "{}", stdout(&out));
    // Both plans live in this process.
    let rpc = nnhal(&[
        "bench",
        conv.to_str().unwrap(),
        "--ab-isa",
        "generic",
        "--transport",
        "rpc",
    ]);
    assert_eq!(rpc.status.code(), Some(2), "{}", stderr(&rpc));
    assert!(stderr(&rpc).contains("--ab-isa"), "{}", stderr(&rpc));
}
