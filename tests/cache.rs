//! Compilation caching (docs/hal-contract.md, "Compilation caching"): the `nnhal-vts caching`
//! suite over binder (a `nnhal-service` child, cache files passed as descriptors in
//! ParcelFileDescriptor arrays) and in process, and a cache written by a service at one
//! `NNHAL_ISA` level read by a service at another.

use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::{CacheFiles as Handles, ConnectOptions};
use nnhal::hal::ErrorStatus;
use nnhal::kernels::ukernels::{self, Isa};
use nnhal_vts::caching::{self, CacheFiles};
use nnhal_vts::transport::{InProcessDevice, RpcDevice, TransportOptions};
use nnhal_vts::vector::{bundled_dir, load, Vector};
use nnhal_vts::{to_model, ConstantMode};
use std::os::fd::AsFd;
use std::path::PathBuf;

fn vectors() -> Vec<Vector> {
    let v = load(&bundled_dir()).expect("bundled vectors load");
    assert!(v.len() >= 100, "only {} bundled vectors", v.len());
    v
}

fn named<'a>(v: &'a [Vector], name: &str) -> &'a Vector {
    v.iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

fn failures(outcomes: Vec<(String, Result<(), String>)>) -> Vec<String> {
    outcomes
        .into_iter()
        .filter_map(|(name, o)| o.err().map(|why| format!("{name}: {why}")))
        .collect()
}

#[test]
fn caching_suite_passes_over_binder() {
    let device = RpcDevice::open(&TransportOptions {
        threads: 2,
        service: Some(PathBuf::from(env!("CARGO_BIN_EXE_nnhal-service"))),
        ..TransportOptions::default()
    })
    .expect("start nnhal-service and connect");
    let v = vectors();
    let mut outcomes = caching::vectors(&device, &v);
    let restored = outcomes.len();
    outcomes.extend(caching::checks(&device, named(&v, "add"), true));
    outcomes.extend(caching::checks(
        &device,
        named(&v, "conv_float_large"),
        false,
    ));
    assert!(outcomes.len() > restored + 10);
    let failed = failures(outcomes);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn caching_suite_passes_in_process() {
    let device = InProcessDevice::new(2).unwrap();
    let v = vectors();
    let mut outcomes = caching::vectors(&device, &v);
    outcomes.extend(caching::checks(&device, named(&v, "conv_quant8"), true));
    let failed = failures(outcomes);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_cache_written_at_one_isa_level_is_a_miss_at_another_over_binder() {
    let levels: Vec<Isa> = Isa::levels()
        .iter()
        .copied()
        .filter(|&l| ukernels::table(l).is_ok())
        .collect();
    assert!(levels.len() >= 2, "the host runs one level only");
    let (low, high) = (levels[0], levels[levels.len() - 1]);
    let start = |isa: Isa| {
        ServiceChild::start(&ChildOptions {
            program: Some(PathBuf::from(env!("CARGO_BIN_EXE_nnhal-service"))),
            threads: 1,
            env: vec![("NNHAL_ISA".into(), isa.name().into())],
            tag: "nnhal-cache-isa",
            ..ChildOptions::default()
        })
        .expect("start nnhal-service")
    };
    let (mut a, mut b) = (start(low), start(high));
    let connect = ConnectOptions::default();
    let (da, db) = (a.connect(&connect).unwrap(), b.connect(&connect).unwrap());
    let v = vectors();
    let model = to_model(named(&v, "conv_float"), ConstantMode::Copy).unwrap();
    let files = CacheFiles::new().unwrap();
    let token = caching::token(42);
    let handles = Handles {
        model: vec![files.model.as_fd()],
        data: vec![files.data.as_fd()],
        token: &token,
    };
    da.prepare_model_cached(&model, &handles).unwrap();
    assert!(
        !CacheFiles::read(&files.model).is_empty(),
        "no cache written"
    );
    da.prepare_model_from_cache_with(&handles)
        .expect("restored at the level that wrote it");
    let e = db
        .prepare_model_from_cache_with(&handles)
        .err()
        .expect("restored at another level");
    assert_eq!(e.status(), ErrorStatus::GeneralFailure, "{e}");
    // What one level wrote the other can overwrite, and then read.
    db.prepare_model_cached(&model, &handles).unwrap();
    db.prepare_model_from_cache_with(&handles).unwrap();
    assert!(da.prepare_model_from_cache_with(&handles).is_err());
}
