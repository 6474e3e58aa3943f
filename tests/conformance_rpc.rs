//! The conformance suite through the real transport: a `nnhal-service` child process, binder
//! RPC on a Unix socket, models and requests converted to AIDL parcelables, pools passed as
//! memfd file descriptors. The same runner and mutators as the in-process suite (`vts_tests/`),
//! so a difference between the two is a transport bug.

use nnhal_vts::basic;
use nnhal_vts::mutations::{base_models, BaseModel, MODEL_MUTATORS, REQUEST_MUTATORS};
use nnhal_vts::runner::{run_model_class, run_request_class, run_vectors};
use nnhal_vts::transport::{Device, RpcDevice, TransportOptions};
use nnhal_vts::vector::{bundled_dir, load, Vector};
use std::path::PathBuf;

/// A service of our own for this test, stopped when the device is dropped.
fn start_service() -> RpcDevice {
    RpcDevice::open(&TransportOptions {
        threads: 2,
        service: Some(PathBuf::from(env!("CARGO_BIN_EXE_nnhal-service"))),
        ..TransportOptions::default()
    })
    .expect("start nnhal-service and connect")
}

fn vectors() -> Vec<Vector> {
    let v = load(&bundled_dir()).expect("bundled vectors load");
    assert!(v.len() >= 100, "only {} bundled vectors", v.len());
    v
}

#[test]
fn vectors_pass_over_binder() {
    let device = start_service();
    assert!(device.child_pid().is_some());
    let summary = run_vectors(&device, &vectors(), |_| {});
    let (exact, total) = summary.quant8();
    let failures: Vec<String> = summary
        .failures()
        .iter()
        .map(|r| format!("FAIL {}: {}", r.name, r.failure.as_deref().unwrap_or("")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(total > 0);
    assert_eq!(
        exact, total,
        "quant8 outputs must match the goldens exactly"
    );
}

#[test]
fn every_mutation_is_rejected_over_binder() {
    let device = start_service();
    let bases: Vec<BaseModel> = vectors()
        .iter()
        .flat_map(|v| base_models(v).unwrap_or_else(|e| panic!("{}: {e}", v.name)))
        .collect();
    let mut problems = Vec::new();
    let mut skipped = Vec::new();
    let mut variants = 0;
    let reports = MODEL_MUTATORS
        .iter()
        .map(|m| run_model_class(&device, m, &bases))
        .chain(
            REQUEST_MUTATORS
                .iter()
                .map(|m| run_request_class(&device, m, &bases)),
        );
    for report in reports {
        variants += report.variants;
        if report.skipped.is_some() {
            skipped.push(report.class.clone());
        } else if !report.passed() {
            problems.push(format!(
                "{}: {} of {} variants failed\n{}",
                report.class,
                report.failures.len(),
                report.variants,
                report.describe_failures(5)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Only the class whose field the AIDL wire lacks may be skipped.
    assert_eq!(skipped, vec!["BI-07 consumer_count_off_by_one".to_string()]);
    assert!(variants > 50_000, "only {variants} variants were checked");
}

#[test]
fn basic_tests_pass_over_binder() {
    let device = start_service();
    let remote = device.remote().expect("binder client");
    let failures: Vec<String> = basic::run_all(remote)
        .into_iter()
        .filter_map(|(name, outcome)| outcome.err().map(|why| format!("{name}: {why}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(basic::BASIC_CASES.len(), 11);
}

#[test]
fn the_started_service_stops_with_its_device() {
    let device = start_service();
    let pid = device.child_pid().expect("a started service") as i32;
    let socket = device.socket().to_path_buf();
    assert!(socket.exists());
    drop(device);
    // The child was reaped by the drop: the pid no longer names a process of ours.
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    assert!(!alive, "service {pid} still running");
    assert!(!socket.exists(), "{} left behind", socket.display());
}
