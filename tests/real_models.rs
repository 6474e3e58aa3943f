//! Two small real networks of the kinds NNAPI 1.2–1.3's operations exist for, as TensorFlow
//! Lite's NNAPI delegate sends them (`vts_tests/real/`, written by its `make.py`): a
//! transformer text encoder (token embedding by GATHER, layer normalization as MEAN, SUB, MUL,
//! RSQRT and ADD, attention through RESHAPE, TRANSPOSE, SPLIT, FULLY_CONNECTED per head and
//! SOFTMAX, a feed-forward block) and an LSTM keyword spotter (UNIDIRECTIONAL_SEQUENCE_LSTM,
//! STRIDED_SLICE of the last step, a dense head). Every operation of each must be supported,
//! and both outputs (probabilities and logits) must match LiteRT's builtin kernels within the
//! file's tolerance, in-process at every kernel level and over binder.

use nnhal::kernels::ukernels::{table, Isa};
use nnhal_vts::runner::run_vector;
use nnhal_vts::transport::{Device, InProcessDevice, RpcDevice, TransportOptions};
use nnhal_vts::vector::Vector;
use std::path::{Path, PathBuf};

fn load(name: &str) -> Vector {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("vts_tests/real/{name}.json"));
    Vector::from_file(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The operations a file must hold: what makes it the network it claims to be.
const ENCODER_OPERATIONS: &[&str] = &[
    "GATHER",
    "MEAN",
    "SUB",
    "MUL",
    "RSQRT",
    "ADD",
    "RESHAPE",
    "TRANSPOSE",
    "SPLIT",
    "SOFTMAX",
    "FULLY_CONNECTED",
    "CONCATENATION",
];
const SPOTTER_OPERATIONS: &[&str] = &[
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "STRIDED_SLICE",
    "FULLY_CONNECTED",
    "SOFTMAX",
];

fn networks() -> [(Vector, &'static [&'static str]); 2] {
    [
        (load("encoder_f32"), ENCODER_OPERATIONS),
        (load("kws_lstm_f32"), SPOTTER_OPERATIONS),
    ]
}

/// Every operation supported, then every example within tolerance (both constant modes).
fn runs_whole(device: &dyn Device, v: &Vector, holds: &[&str]) {
    for op in holds {
        assert!(
            v.model.operations.iter().any(|o| o.operation_type == *op),
            "{} has no {op}",
            v.name
        );
    }
    let model = nnhal_vts::to_model(v, nnhal_vts::ConstantMode::Copy).unwrap();
    let supported = device.supported_operations(&model).unwrap();
    let refused: Vec<&str> = supported
        .iter()
        .zip(&v.model.operations)
        .filter(|(s, _)| !**s)
        .map(|(_, o)| o.operation_type.as_str())
        .collect();
    assert!(refused.is_empty(), "{}: unsupported {refused:?}", v.name);
    let report = run_vector(device, v);
    assert!(
        report.passed(),
        "{} on {}: {:?} {:?}",
        v.name,
        device.describe(),
        report.failure,
        report.skipped
    );
}

#[test]
fn encoder_and_keyword_spotter_run_whole_at_every_kernel_level() {
    for &isa in Isa::levels().iter().filter(|l| l.is_supported()) {
        let device = InProcessDevice::with_kernels(2, table(isa).unwrap()).unwrap();
        for (v, holds) in networks() {
            eprintln!("{} at {isa:?}", v.name);
            runs_whole(&device, &v, holds);
        }
    }
}

#[test]
fn encoder_and_keyword_spotter_run_whole_over_binder() {
    let device = RpcDevice::open(&TransportOptions {
        threads: 2,
        service: Some(PathBuf::from(env!("CARGO_BIN_EXE_nnhal-service"))),
        ..TransportOptions::default()
    })
    .expect("start nnhal-service and connect");
    for (v, holds) in networks() {
        runs_whole(&device, &v, holds);
    }
}
