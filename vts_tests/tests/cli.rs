//! The `nnhal-vts` command line as a user runs it: the default rpc transport starts a service
//! process, the subcommands print `PASS`/`FAIL` lines and end with `N passed, M failed`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of the `nnhal-vts` binary alone in a fresh directory, so no `nnhal-service` sits next
/// to it and the transport must fall back to serving from its own executable.
struct LoneBinary {
    dir: PathBuf,
    exe: PathBuf,
}

impl LoneBinary {
    fn new(name: &str) -> LoneBinary {
        let dir = std::env::temp_dir().join(format!("nnhal-vts-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("nnhal-vts");
        std::fs::copy(env!("CARGO_BIN_EXE_nnhal-vts"), &exe).unwrap();
        LoneBinary { dir, exe }
    }
}

impl Drop for LoneBinary {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(exe: &Path, args: &[&str]) -> (bool, String, String) {
    let mut attempts = 0;
    let out = loop {
        match Command::new(exe)
            .args(args)
            .env_remove("NNHAL_SERVICE")
            .output()
        {
            // A just-written executable can be briefly "busy" while a concurrently forked
            // child of another test still holds the writer's descriptor (until its exec).
            Err(e) if e.raw_os_error() == Some(26) && attempts < 50 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn vector(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("vectors")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn basic_over_a_self_started_service() {
    let lone = LoneBinary::new("basic");
    let (ok, out, err) = run(&lone.exe, &["basic"]);
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("binder RPC to"), "{err}");
    assert!(err.contains(" serve` (pid "), "{err}");
    assert!(out.ends_with("11 passed, 0 failed\n"), "{out}");
    // The refusals `basic` provokes on purpose (caching, allocate, null arguments) are the
    // contract's answers: the service logs them at debug, not among the PASS lines as warnings.
    assert!(!err.contains("WARN"), "{err}");
}

#[test]
fn vectors_and_mutations_default_to_binder() {
    let lone = LoneBinary::new("suites");
    let (ok, out, err) = run(
        &lone.exe,
        &["vectors", &vector("add.json"), &vector("conv_quant8.json")],
    );
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("binder RPC"), "{err}");
    assert!(out.ends_with("2 passed, 0 failed, 0 skipped\n"), "{out}");

    let (ok, out, err) = run(
        &lone.exe,
        &[
            "mutations",
            "--class",
            "7",
            "--class",
            "23",
            &vector("add.json"),
        ],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("SKIP BI-07"), "{out}");
    assert!(out.contains("PASS BI-23"), "{out}");
    assert!(
        out.lines().last().unwrap().ends_with(" passed, 0 failed"),
        "{out}"
    );
}

#[test]
fn a_missing_path_fails_before_any_service_starts() {
    let exe = Path::new(env!("CARGO_BIN_EXE_nnhal-vts"));
    let out = Command::new(exe)
        .args(["vectors", "/nonexistent/vector.json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot read /nonexistent/vector.json: no such file or directory"),
        "{err}"
    );
    // The rpc transport announces the service it started on stderr; none may have started.
    assert!(!err.contains("device:"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_vector_without_expected_values_is_skipped_not_failed() {
    let dir = std::env::temp_dir().join(format!("nnhal-vts-noexp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(vector("relu_float_1.json")).unwrap())
            .unwrap();
    for example in v["examples"].as_array_mut().unwrap() {
        example["outputs"] = serde_json::json!({});
    }
    let file = dir.join("no_expected.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let (ok, out, err) = run(
        Path::new(env!("CARGO_BIN_EXE_nnhal-vts")),
        &[
            "vectors",
            "--transport",
            "inproc",
            file.to_str().unwrap(),
            &vector("add.json"),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{out}\n{err}");
    assert!(
        out.contains("SKIP relu_float_1: example 0 has no expected values for output 0"),
        "{out}"
    );
    assert!(out.ends_with("1 passed, 0 failed, 1 skipped\n"), "{out}");
}

#[test]
fn help_shows_defaults_and_exit_statuses() {
    let exe = Path::new(env!("CARGO_BIN_EXE_nnhal-vts"));
    let help = |args: &[&str]| {
        let out = Command::new(exe).args(args).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&["--help"]);
    assert!(
        top.contains("Exit status:") && top.contains("2  usage or input error"),
        "{top}"
    );
    for sub in ["vectors", "mutations"] {
        let text = help(&[sub, "--help"]);
        assert!(
            text.contains("[default: the bundled vectors"),
            "{sub}: {text}"
        );
        assert!(text.contains("[default: rpc]"), "{sub}: {text}");
    }
    let out = Command::new(exe)
        .args(["serve", "--socket", "/tmp/x.sock", "--log-level", "bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown log level `bogus`"));
}

#[test]
fn qos_deadlines_over_binder() {
    let lone = LoneBinary::new("qos");
    let (ok, out, err) = run(&lone.exe, &["qos"]);
    assert!(ok, "{out}\n{err}");
    assert!(err.contains("binder RPC"), "{err}");
    assert!(
        out.contains("PASS prepare_with_passed_deadline_launches_and_reports_missed_deadline"),
        "{out}"
    );
    assert!(out.ends_with("6 passed, 0 failed, 0 skipped\n"), "{out}");
}

#[test]
fn dynamic_output_shapes_and_signed_coupling() {
    let exe = Path::new(env!("CARGO_BIN_EXE_nnhal-vts"));
    let vectors = [
        vector("add.json"),
        vector("conv_quant8.json"),
        vector("softmax_quant8_1.json"),
        vector("lstm.json"),
    ];
    let mut args = vec!["dynamic", "--transport", "inproc"];
    args.extend(vectors.iter().map(String::as_str));
    let (ok, out, err) = run(exe, &args);
    assert!(ok, "{out}\n{err}");
    assert!(out.ends_with("4 passed, 0 failed, 0 skipped\n"), "{out}");

    // Coupling applies to the single-operation quant8 models only: the float ADD and the
    // LSTM are skipped with their reason, the other two must run signed as well.
    args[0] = "coupling";
    let (ok, out, err) = run(exe, &args);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("SKIP add: VTS does not couple it"), "{out}");
    assert!(out.contains("PASS conv_quant8"), "{out}");
    assert!(out.ends_with("2 passed, 0 failed, 2 skipped\n"), "{out}");
}
