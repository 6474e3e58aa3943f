//! Shared fixtures of the integration tests: one in-process device, the bundled vectors and
//! their base models, loaded once per test binary and shared by its tests.

#![allow(dead_code)]

use nnhal_vts::mutations::{base_models, model_mutator, request_mutator, BaseModel};
use nnhal_vts::runner::{run_model_class, run_request_class, ClassReport};
use nnhal_vts::transport::InProcessDevice;
use nnhal_vts::vector::{bundled_dir, load, Vector};
use std::sync::OnceLock;

pub fn device() -> &'static InProcessDevice {
    static DEVICE: OnceLock<InProcessDevice> = OnceLock::new();
    DEVICE.get_or_init(|| InProcessDevice::new(2).expect("in-process driver"))
}

pub fn vectors() -> &'static [Vector] {
    static VECTORS: OnceLock<Vec<Vector>> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let v = load(&bundled_dir()).expect("bundled vectors load");
        assert!(!v.is_empty(), "no vectors in {}", bundled_dir().display());
        v
    })
}

pub fn bases() -> &'static [BaseModel] {
    static BASES: OnceLock<Vec<BaseModel>> = OnceLock::new();
    BASES.get_or_init(|| {
        vectors()
            .iter()
            .flat_map(|v| base_models(v).unwrap_or_else(|e| panic!("{}: {e}", v.name)))
            .collect()
    })
}

fn assert_class(report: &ClassReport, test_name: &str) {
    assert!(
        report.variants > 0 && !report.vectors.is_empty(),
        "{test_name}: the mutator applied to no vector"
    );
    assert!(
        report.failures.is_empty(),
        "{test_name}: {} of {} variants on {} vectors not rejected with INVALID_ARGUMENT:\n{}",
        report.failures.len(),
        report.variants,
        report.vectors.len(),
        report.describe_failures(40)
    );
    println!(
        "{test_name}: {} variants on {} vectors rejected",
        report.variants,
        report.vectors.len()
    );
}

/// Runs model class `bi` over every base model; `test_name` must be `bi<NN>_<class name>`.
pub fn model_class(bi: u8, test_name: &str) {
    let m = model_mutator(bi).expect("a model class");
    assert_eq!(
        format!("bi{:02}_{}", bi, m.name),
        test_name,
        "test name and class disagree"
    );
    assert_class(&run_model_class(device(), m, bases()), test_name);
}

/// Runs request class `bi` over every base model (each prepared once, with a valid request).
pub fn request_class(bi: u8, test_name: &str) {
    let m = request_mutator(bi).expect("a request class");
    assert_eq!(
        format!("bi{:02}_{}", bi, m.name),
        test_name,
        "test name and class disagree"
    );
    assert_class(&run_request_class(device(), m, bases()), test_name);
}

/// Declares one `#[test]` per class: `name => BI number`.
#[macro_export]
macro_rules! class_tests {
    ($runner:path; $($name:ident => $bi:expr),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $runner($bi, stringify!($name));
            }
        )*
    };
}
