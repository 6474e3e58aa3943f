//! `nnhal-vts mutations` over the whole later (NNAPI 1.1–1.3) set, in-process: every file
//! VTS's ValidationTest instantiates gets every model and request mutation class in its AIDL
//! VTS form, and every variant must be refused (about half a minute in a debug build).

use nnhal_vts::mutations::{base_models, BaseModel, MODEL_MUTATORS, REQUEST_MUTATORS};
use nnhal_vts::runner::{run_model_class, run_request_class};
use nnhal_vts::suites::validation_applies;
use nnhal_vts::transport::InProcessDevice;
use nnhal_vts::vector::{unpack_later, vector_files, Vector};
use std::collections::HashSet;
use std::path::Path;

#[test]
fn later_mutations_are_rejected() {
    let dir = unpack_later(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("later-vectors"))
        .expect("unpack vts_tests/later/vectors.tar.xz");
    let vectors: Vec<Vector> = vector_files(&dir)
        .unwrap()
        .iter()
        .map(|f| Vector::from_file(f).unwrap())
        .filter(validation_applies)
        .collect();
    let seen: HashSet<&str> = vectors
        .iter()
        .flat_map(|v| {
            v.model
                .operations
                .iter()
                .map(|op| op.operation_type.as_str())
        })
        .collect();
    assert!(vectors.len() > 3600, "{} vectors", vectors.len());
    // Every operation of the AIDL interface but OEM_OPERATION has a vector.
    assert!(seen.len() >= 102, "{} operation types", seen.len());
    let bases: Vec<BaseModel> = vectors
        .iter()
        .flat_map(|v| base_models(v).unwrap_or_else(|e| panic!("{}: {e}", v.name)))
        .collect();
    let device = InProcessDevice::new(2).unwrap();
    let mut reports = Vec::new();
    for m in MODEL_MUTATORS {
        reports.push(run_model_class(&device, m, &bases));
    }
    for m in REQUEST_MUTATORS {
        reports.push(run_request_class(&device, m, &bases));
    }
    let mut unexpected = Vec::new();
    for r in &reports {
        eprintln!(
            "{}: {} of {} variants failed on {} vectors",
            r.class,
            r.failures.len(),
            r.variants,
            r.vectors.len()
        );
        if r.skipped.is_none() && r.variants == 0 {
            unexpected.push(format!("{}: no variant", r.class));
        }
        unexpected.extend(r.failures.iter().map(|f| format!("{}: {f}", r.class)));
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}
