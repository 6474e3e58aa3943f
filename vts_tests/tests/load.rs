//! `nnhal-vts stress` and `nnhal-vts faults` as a user runs them, small: each starts its own
//! service process, must end `N passed, 0 failed`, and reports the service's resident size,
//! threads and fds.

use std::process::Command;

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nnhal-vts"))
        .args(args)
        .output()
        .expect("run nnhal-vts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nnhal-vts {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn last_line(stdout: &str) -> &str {
    stdout.lines().last().unwrap_or("")
}

#[test]
fn stress_small_run_ends_all_passed() {
    let out = run(&["stress", "--clients", "2", "--executions", "12"]);
    assert!(last_line(&out).ends_with(" passed, 0 failed"), "{out}");
    // Two warm-up clients, two clients, the baseline and the RSS checks.
    assert!(last_line(&out).starts_with("6 passed"), "{out}");
    for label in [
        "service at rest:",
        "after warm-up:",
        "during (peak):",
        "after:",
    ] {
        assert!(out.contains(label), "no `{label}` line:\n{out}");
    }
    assert!(out.contains("24 executions checked"), "{out}");
}

#[test]
fn faults_suite_ends_all_passed() {
    let out = run(&["faults", "--idle-connections", "100"]);
    assert!(last_line(&out) == "8 passed, 0 failed", "{out}");
}
