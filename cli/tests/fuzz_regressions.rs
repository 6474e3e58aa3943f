//! The fuzz targets' inputs, replayed in the normal suite (`docs/fuzzing.md`): every committed
//! seed (`fuzz/corpus/<target>/seed-*`) and every input that once made a target fail
//! (`fuzz/regressions/<target>/*`) runs through the same `nnhal_cli::fuzzing` function the target
//! calls. A regression comes back as a failing (or aborting) test here, without nightly.
//!
//! `write_fuzz_seeds` (ignored; run it by name) regenerates the seeds from the bundled vectors.

mod common;

use nnhal_cli::fuzzing;
use std::path::PathBuf;

fn fuzz_dir() -> PathBuf {
    common::repo_root().join("fuzz")
}

/// The committed inputs of `target`: its seeds and its regressions.
fn inputs(target: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (dir, prefix) in [("corpus", "seed-"), ("regressions", "")] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with(prefix) && !name.starts_with('.') && path.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn replay(target: &str, run: impl Fn(&[u8])) -> usize {
    let files = inputs(target);
    for file in &files {
        let data = std::fs::read(file).unwrap();
        run(&data);
    }
    files.len()
}

#[test]
fn fuzz_model_inputs_replay() {
    let ran = std::cell::Cell::new(0);
    let n = replay("model", |d| {
        if fuzzing::run_model(d) {
            ran.set(ran.get() + 1);
        }
    });
    assert!(n >= 20, "only {n} model inputs committed");
    // The seeds are the vectors' models: most of them prepare and run.
    assert!(
        ran.get() * 2 > n,
        "only {} of {n} model inputs ran",
        ran.get()
    );
}

#[test]
fn fuzz_cache_inputs_replay() {
    let ran = std::cell::Cell::new(0);
    let n = replay("cache", |d| {
        if fuzzing::run_cache(d) {
            ran.set(ran.get() + 1);
        }
    });
    assert!(n >= 20, "only {n} cache inputs committed");
    // The seeds are the caches of the vectors' models: most of them restore and run.
    assert!(
        ran.get() * 2 > n,
        "only {} of {n} cache inputs ran",
        ran.get()
    );
}

#[test]
fn fuzz_request_inputs_replay() {
    let n = replay("request", fuzzing::run_request);
    assert!(n >= 5, "only {n} request inputs committed");
}

#[test]
fn fuzz_parcel_inputs_replay() {
    let n = replay("parcel", |d| fuzzing::ParcelTarget::get().run(d));
    assert!(n >= 5, "only {n} parcel inputs committed");
}

#[test]
fn fuzz_vector_inputs_replay() {
    let n = replay("vector", fuzzing::run_vector);
    assert!(n >= 20, "only {n} vector inputs committed");
}

#[test]
fn fuzz_onnx_inputs_replay() {
    let n = replay("onnx", fuzzing::run_onnx);
    assert!(n >= 5, "only {n} onnx inputs committed");
}

#[test]
fn fuzz_coreml_inputs_replay() {
    let n = replay("coreml", fuzzing::run_coreml);
    assert!(n >= 5, "only {n} coreml inputs committed");
}

#[test]
fn fuzz_tflite_inputs_replay() {
    let n = replay("tflite", fuzzing::run_tflite);
    assert!(n >= 5, "only {n} tflite inputs committed");
}

#[test]
fn fuzz_xmodel_inputs_replay() {
    let n = replay("xmodel", fuzzing::run_xmodel);
    assert!(n >= 5, "only {n} xmodel inputs committed");
}

/// The model codec gives back what it encoded, so the seeds are the vectors' real models.
#[test]
fn fuzz_model_codec_round_trips() {
    let vectors = nnhal_vts::vector::load(&common::repo_root().join("vts_tests/vectors")).unwrap();
    for v in vectors.iter().take(20) {
        let model =
            nnhal_vts::vector::model::to_model(v, nnhal_vts::vector::model::ConstantMode::Copy)
                .unwrap();
        let again = fuzzing::model_from_bytes(&fuzzing::model_to_bytes(&model));
        assert_eq!(again.operands, model.operands);
        assert_eq!(again.operations, model.operations);
        assert_eq!(again.operand_values, model.operand_values);
        assert_eq!(again.input_indexes, model.input_indexes);
        assert_eq!(again.output_indexes, model.output_indexes);
    }
}

/// Referenced subgraphs (IF and WHILE bodies) survive the codec, so the model target reaches
/// control flow; the counting loop decoded from its bytes prepares and runs.
#[test]
fn fuzz_model_codec_carries_control_flow() {
    let model = nnhal_vts::probe::while_count_model(2);
    let bytes = fuzzing::model_to_bytes(&model);
    let again = fuzzing::model_from_bytes(&bytes);
    assert_eq!(again.referenced.len(), model.referenced.len());
    for (a, b) in again.referenced.iter().zip(&model.referenced) {
        assert_eq!(a.operands, b.operands);
        assert_eq!(a.operations, b.operations);
        assert_eq!(a.input_indexes, b.input_indexes);
        assert_eq!(a.output_indexes, b.output_indexes);
    }
    assert!(fuzzing::run_model(&bytes));
}

/// A valid request for `fuzzing::request_target_model`: both inputs in one pool, the output
/// in another.
fn valid_request(sealed: bool) -> Vec<u8> {
    use nnhal::hal::{DataLocation, Request, RequestArgument};
    let arg = |pool_index, offset| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index,
            offset,
            length: 36,
        },
        dimensions: Vec::new(),
    };
    let request = Request {
        inputs: vec![arg(0, 0), arg(0, 36)],
        outputs: vec![arg(1, 0)],
        pools: Vec::new(),
    };
    let inputs: Vec<u8> = (0..18).flat_map(|i| (i as f32).to_le_bytes()).collect();
    fuzzing::request_to_bytes(&request, &[(72, sealed, inputs), (36, sealed, Vec::new())])
}

#[test]
#[ignore = "writes fuzz/corpus/cache/seed-*; run by name to regenerate the seeds"]
fn write_fuzz_cache_seeds() {
    let dir = fuzz_dir().join("corpus").join("cache");
    std::fs::create_dir_all(&dir).unwrap();
    let vectors_dir = common::repo_root().join("vts_tests/vectors");
    for file in nnhal_vts::vector::vector_files(&vectors_dir).unwrap() {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let vector = nnhal_vts::vector::Vector::from_file(&file).unwrap();
        let model = nnhal_vts::vector::model::to_model(
            &vector,
            nnhal_vts::vector::model::ConstantMode::Copy,
        )
        .unwrap();
        // Small inputs only: the fuzzer's speed falls with their length.
        if let Some(cache) = fuzzing::cache_input(model).filter(|c| c.len() <= 16 << 10) {
            std::fs::write(dir.join(format!("seed-{name}")), cache).unwrap();
        }
    }
}

#[test]
#[ignore = "writes fuzz/corpus/*/seed-*; run by name to regenerate the seeds"]
fn write_fuzz_seeds() {
    let corpus = fuzz_dir().join("corpus");
    let vectors_dir = common::repo_root().join("vts_tests/vectors");
    let write = |target: &str, name: &str, data: &[u8]| {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("seed-{name}")), data).unwrap();
    };
    for file in nnhal_vts::vector::vector_files(&vectors_dir).unwrap() {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read(&file).unwrap();
        // Small inputs only: the fuzzer's speed falls with their length.
        if text.len() <= 8 << 10 {
            write("vector", &name, &text);
        }
        let vector = nnhal_vts::vector::Vector::from_file(&file).unwrap();
        let model = nnhal_vts::vector::model::to_model(
            &vector,
            nnhal_vts::vector::model::ConstantMode::Copy,
        )
        .unwrap();
        let bytes = fuzzing::model_to_bytes(&model);
        if bytes.len() <= 16 << 10 {
            write("model", &name, &bytes);
        }
    }
    // One model seed per operation past NNAPI 1.0: the first single-operation file of each in
    // the later set, so the model target starts inside every family, not only the 1.0 ones.
    let later = nnhal_vts::vector::unpack_later(
        &std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("later-vectors"),
    )
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for file in nnhal_vts::vector::vector_files(&later).unwrap() {
        let Ok(vector) = nnhal_vts::vector::Vector::from_file(&file) else {
            continue;
        };
        let [operation] = vector.model.operations.as_slice() else {
            continue;
        };
        let name = operation.operation_type.clone();
        let later_op =
            nnhal::hal::OperationType::from_name(&name).is_some_and(|op| !op.in_nnapi_1_0());
        if !later_op || seen.contains(&name) {
            continue;
        }
        let Ok(model) = nnhal_vts::vector::model::to_model(
            &vector,
            nnhal_vts::vector::model::ConstantMode::Copy,
        ) else {
            continue;
        };
        let bytes = fuzzing::model_to_bytes(&model);
        if bytes.len() <= 16 << 10 {
            write("model", &format!("later-{}", name.to_lowercase()), &bytes);
            seen.insert(name);
        }
    }
    write("request", "valid-sealed", &valid_request(true));
    write("request", "valid-unsealed", &valid_request(false));
    let mut short = valid_request(true);
    short.truncate(short.len() / 2);
    write("request", "truncated", &short);
    write("request", "empty", &[]);
    write("request", "one-pool", &valid_request(true)[..40]);
    // Parcel: each IDevice and IPreparedModel code with no arguments, then a few with an
    // i32 and with an fd.
    for code in 0u8..10 {
        write("parcel", &format!("device-{code}"), &[0, code, 0, 0]);
        write("parcel", &format!("prepared-{code}"), &[1, code, 0, 0]);
    }
    write(
        "parcel",
        "device-fd",
        &[0, 7, 2, 0, 1, 1, 0, 0, 0, 3, 0, 16, 1],
    );
}
