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
    assert!(out.ends_with("2 passed, 0 failed\n"), "{out}");

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
fn a_missing_vector_is_a_failure_line() {
    let (ok, out, _) = run(
        Path::new(env!("CARGO_BIN_EXE_nnhal-vts")),
        &[
            "vectors",
            "--transport",
            "inproc",
            "/nonexistent/vector.json",
        ],
    );
    assert!(!ok);
    assert!(out.contains("FAIL "), "{out}");
    assert!(out.ends_with("0 passed, 1 failed\n"), "{out}");
}
