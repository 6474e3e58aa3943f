//! The NNAPI 1.1–1.3 golden vectors (`vts_tests/later/vectors.tar.xz`, 16,396 AOSP test
//! models of every AIDL V1 operation and operand type): every file either passes or is
//! reported unsupported with its reason, never failed — in particular a valid model is never
//! INVALID_ARGUMENT. The whole set runs in-process; a sample runs over binder RPC through a
//! `nnhal-service` child, the transport a device uses.

use nnhal_vts::runner::run_vector;
use nnhal_vts::transport::{Device, InProcessDevice, RpcDevice, TransportOptions};
use nnhal_vts::vector::{unpack_later, vector_files, Vector};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn later_dir() -> PathBuf {
    unpack_later(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("later-vectors"))
        .expect("unpack vts_tests/later/vectors.tar.xz")
}

#[derive(Default, Debug)]
struct Counts {
    passed: usize,
    failed: Vec<String>,
    skipped: usize,
    /// Per version directory: passed, skipped.
    per_version: BTreeMap<String, [usize; 2]>,
    /// Skips for a reason other than "the driver reports an operation unsupported" or
    /// "expectFailure": each would hide a defect of the suite.
    odd_skips: Vec<String>,
    /// Files of the target set (see [`is_target`]) seen, and those of them that did not pass.
    targets: usize,
    targets_not_passed: Vec<String>,
}

/// Operations beyond NNAPI 1.0 that the driver runs, by name: each family adds its own
/// (kept apart from what the driver claims, so a claim that stops holding fails here).
const LATER_OPERATIONS: &[&str] = &[
    // NNAPI 1.1: the element-wise, reduction and data-movement families.
    "SUB",
    "DIV",
    "MEAN",
    "PAD",
    "SQUEEZE",
    "STRIDED_SLICE",
    "TRANSPOSE",
    "SPACE_TO_BATCH_ND",
    "BATCH_TO_SPACE_ND",
    // conv (NNAPI 1.2)
    "GROUPED_CONV_2D",
    "TRANSPOSE_CONV_2D",
    // normalization (NNAPI 1.2)
    "INSTANCE_NORMALIZATION",
    // math
    "ABS",
    "EXP",
    "LOG",
    "NEG",
    "POW",
    "RSQRT",
    "SIN",
    "SQRT",
    "MAXIMUM",
    "MINIMUM",
    "PRELU",
    "ELU",
    "HARD_SWISH",
    "LOG_SOFTMAX",
    "CAST",
    // logic
    "EQUAL",
    "NOT_EQUAL",
    "GREATER",
    "GREATER_EQUAL",
    "LESS",
    "LESS_EQUAL",
    "LOGICAL_AND",
    "LOGICAL_OR",
    "LOGICAL_NOT",
    "SELECT",
    // reduce
    "REDUCE_ALL",
    "REDUCE_ANY",
    "REDUCE_MAX",
    "REDUCE_MIN",
    "REDUCE_PROD",
    "REDUCE_SUM",
    "ARGMAX",
    "ARGMIN",
    "TOPK_V2",
    // transform (NNAPI 1.2)
    "RESIZE_NEAREST_NEIGHBOR",
    // quantize: QUANTIZE (float32 to quant8 and signed quant8).
    "QUANTIZE",
    // transform (NNAPI 1.2)
    "PAD_V2",
    "EXPAND_DIMS",
    "TILE",
    "CHANNEL_SHUFFLE",
    "SLICE",
    "SPLIT",
    // index
    "GATHER",
    "FILL",
    "RANK",
    // recurrent (NNAPI 1.2): the sequence forms, float32.
    "UNIDIRECTIONAL_SEQUENCE_RNN",
    "BIDIRECTIONAL_SEQUENCE_RNN",
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "BIDIRECTIONAL_SEQUENCE_LSTM",
    "QUANTIZED_16BIT_LSTM",
    // random (NNAPI 1.2): float32 logits, checked statistically.
    "RANDOM_MULTINOMIAL",
    // control flow (NNAPI 1.3): the subgraphs' operations must be targets too.
    "IF",
    "WHILE",
    // detection (NNAPI 1.2): float32, quant8 and signed quant8 with TENSOR_QUANT16_ASYMM
    // boxes; with them the zero-sized files of the other operations.
    "BOX_WITH_NMS_LIMIT",
    "ROI_ALIGN",
    "ROI_POOLING",
    "AXIS_ALIGNED_BBOX_TRANSFORM",
    "HEATMAP_MAX_KEYPOINT",
    "GENERATE_PROPOSALS",
    "DETECTION_POSTPROCESSING",
    // recurrent (NNAPI 1.3): signed quant8 with symmetric weights.
    "QUANTIZED_LSTM",
];

/// Operand types beyond NNAPI 1.0 (BOOL and signed quant8 aside) that the driver runs.
const LATER_TYPES: &[&str] = &[
    // conv: per-channel filters (see PER_CHANNEL_FILTERS_OF)
    "TENSOR_QUANT8_SYMM_PER_CHANNEL",
    // logic, reduce
    "TENSOR_BOOL8",
    // quantize: DEQUANTIZE's symmetric input (the specification allows it nowhere else
    // among the operations above).
    "TENSOR_QUANT8_SYMM",
    // math (CAST identity), recurrent: the 16-bit quantized cell state and its storage.
    "TENSOR_QUANT16_SYMM",
    "TENSOR_QUANT16_ASYMM",
    // float16 on every operation above (held as float32, rounded to binary16 per operation).
    "TENSOR_FLOAT16",
    "FLOAT16",
    // control flow: the operands naming IF branches and WHILE conditions and bodies.
    "SUBGRAPH",
];

/// The operations that take a TENSOR_QUANT8_SYMM_PER_CHANNEL filter: a file with such an
/// operand is a target only when every operation reading it is one of these.
const PER_CHANNEL_FILTERS_OF: &[&str] = &[
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "GROUPED_CONV_2D",
    "TRANSPOSE_CONV_2D",
    "DEQUANTIZE",
];

/// The set the driver must run in full: every operation an NNAPI 1.0 one (OEM aside) or one
/// of [`LATER_OPERATIONS`], and every operand type a 1.0 type, BOOL, TENSOR_QUANT8_ASYMM_SIGNED
/// or one of [`LATER_TYPES`], in any variant (relaxed, NCHW, dynamic output shape, inputs as
/// internal operands).
fn is_target(v: &Vector) -> bool {
    use nnhal::hal::{OperandType, OperationType};
    let op_ok = |name: &str| {
        LATER_OPERATIONS.contains(&name)
            || OperationType::from_name(name)
                .is_some_and(|op| op.in_nnapi_1_0() && op != OperationType::OemOperation)
    };
    let type_ok = |name: &str| {
        LATER_TYPES.contains(&name)
            || OperandType::from_name(name).is_some_and(|ty| {
                (ty.in_nnapi_1_0() && !ty.is_opaque())
                    || matches!(ty, OperandType::Bool | OperandType::TensorQuant8AsymmSigned)
            })
    };
    let per_channel_ok = v.model.operations.iter().all(|o| {
        PER_CHANNEL_FILTERS_OF.contains(&o.operation_type.as_str())
            || o.inputs.iter().all(|&i| {
                v.model
                    .operands
                    .get(i as usize)
                    .map(|o| o.operand_type.as_str())
                    != Some("TENSOR_QUANT8_SYMM_PER_CHANNEL")
            })
    });
    let subgraphs = &v.model.referenced;
    v.model
        .operations
        .iter()
        .chain(subgraphs.iter().flat_map(|g| &g.operations))
        .all(|o| op_ok(&o.operation_type))
        && v.model
            .operands
            .iter()
            .chain(subgraphs.iter().flat_map(|g| &g.operands))
            .all(|o| type_ok(&o.operand_type))
        && per_channel_ok
}

/// The size of the target set, and the passes (target files and expectFailure files that
/// are refused) it gives: 4,636 and 4,667 for NNAPI 1.0; the NNAPI 1.1 operations bring
/// 1,814 targets; the convolution family (per-channel filters of its own included) 2,272; the
/// math, logic and reduce families 774 (their TENSOR_QUANT8_SYMM casts aside); per-channel
/// CONV_2D and DEPTHWISE_CONV_2D filters and the quantize family 408 (with the per-channel
/// expectFailure depthwise files), and the two identity CASTs of TENSOR_QUANT8_SYMM; the
/// shape and indexing operations of the transform and index families 891; the float32
/// sequence RNN and LSTM operations 220; the 16-bit quantized types' identity CASTs 4 and
/// QUANTIZED_16BIT_LSTM 24; QUANTIZED_LSTM 12; float16 on every operation above 2,532; IF, WHILE (their
/// subgraphs' operations on these types) and RANDOM_MULTINOMIAL 393; BOX_WITH_NMS_LIMIT,
/// ROI_ALIGN and ROI_POOLING, with the zero-sized files of the operations that follow them;
/// AXIS_ALIGNED_BBOX_TRANSFORM, HEATMAP_MAX_KEYPOINT, GENERATE_PROPOSALS and
/// DETECTION_POSTPROCESSING: every one of the 16,396 files, each of them passing.
const TARGETS: usize = 16396;
const PASSED: usize = 16396;

fn run(device: &dyn Device, files: &[PathBuf]) -> Counts {
    let mut c = Counts::default();
    for file in files {
        let v = match Vector::from_file(file) {
            Ok(v) => v,
            Err(e) => {
                c.failed.push(format!("FAIL {e}"));
                continue;
            }
        };
        let report = run_vector(device, &v);
        let version = v.version.clone().unwrap_or_default();
        let slot = c.per_version.entry(version).or_default();
        if is_target(&v) {
            c.targets += 1;
            if let Some(why) = report.failure.as_ref().or(report.skipped.as_ref()) {
                c.targets_not_passed.push(format!("{}: {why}", v.name));
            }
        }
        if let Some(why) = &report.failure {
            c.failed.push(format!("FAIL {}: {why}", v.name));
        } else if let Some(why) = &report.skipped {
            c.skipped += 1;
            slot[1] += 1;
            if !why.starts_with("unsupported by the driver: ") && !why.starts_with("expectFailure")
            {
                c.odd_skips.push(format!("{}: {why}", v.name));
            }
        } else {
            c.passed += 1;
            slot[0] += 1;
        }
    }
    c
}

#[test]
fn every_later_vector_passes_or_is_reported_unsupported() {
    let files = vector_files(&later_dir()).unwrap();
    assert_eq!(files.len(), 16_396, "the archive holds 16,396 files");
    let device = InProcessDevice::new(2).unwrap();
    let c = run(&device, &files);
    eprintln!(
        "{} passed, {} failed, {} skipped; per version (passed, skipped): {:?}",
        c.passed,
        c.failed.len(),
        c.skipped,
        c.per_version
    );
    assert!(c.failed.is_empty(), "{}", c.failed.join("\n"));
    assert!(c.odd_skips.is_empty(), "{}", c.odd_skips.join("\n"));
    // The archive's index.tsv counts 4,636 files of 1.0 operations on 1.0 types, BOOL and
    // signed quant8; the families of LATER_OPERATIONS and LATER_TYPES add the rest of the
    // target set. Every one must run (expectFailure files by failing at execution).
    assert_eq!(c.targets, TARGETS, "target files classified");
    assert!(
        c.targets_not_passed.is_empty(),
        "{}",
        c.targets_not_passed.join("\n")
    );
    // What runs today (with the dynamic-shape copies and the expectFailure files refused);
    // a drop means an operation stopped running.
    assert!(c.passed >= PASSED, "only {} passed", c.passed);
    assert_eq!(c.skipped, 0, "every file runs");
}

#[test]
fn every_tenth_quantized_and_float16_target_at_every_isa_level() {
    // The quantized kernels differ per level (VNNI, AVX-512, AVX2, generic; NEON and dotprod on
    // aarch64) and must agree with the goldens on each: every 10th target file with a quantized
    // operand, on every level this processor runs.
    use nnhal::kernels::ukernels::{table, Isa};
    // Float16 files too: their float32 image runs every level's float kernels, and the
    // edges convert with the processor's F16C where it has it.
    let quantized = |v: &Vector| {
        v.model.operands.iter().any(|o| {
            matches!(
                o.operand_type.as_str(),
                "TENSOR_QUANT8_ASYMM"
                    | "TENSOR_QUANT8_ASYMM_SIGNED"
                    | "TENSOR_QUANT8_SYMM"
                    | "TENSOR_QUANT8_SYMM_PER_CHANNEL"
                    | "TENSOR_FLOAT16"
            )
        })
    };
    let sample: Vec<PathBuf> = vector_files(&later_dir())
        .unwrap()
        .into_iter()
        .filter(|f| {
            Vector::from_file(f)
                .map(|v| is_target(&v) && quantized(&v))
                .unwrap_or(true)
        })
        .step_by(10)
        .collect();
    assert!(
        sample.len() >= 300,
        "{} quantized and float16 target files",
        sample.len()
    );
    let levels: Vec<Isa> = Isa::levels()
        .iter()
        .copied()
        .filter(|l| l.is_supported())
        .collect();
    for &isa in &levels {
        let device = InProcessDevice::with_kernels(2, table(isa).unwrap()).unwrap();
        let c = run(&device, &sample);
        eprintln!(
            "{}: {} of {} quantized and float16 target files passed",
            isa.name(),
            c.passed,
            sample.len()
        );
        assert!(
            c.failed.is_empty(),
            "{}: {}",
            isa.name(),
            c.failed.join("\n")
        );
        assert!(
            c.targets_not_passed.is_empty(),
            "{}: {}",
            isa.name(),
            c.targets_not_passed.join("\n")
        );
        assert_eq!(c.targets, sample.len());
    }
}

#[test]
fn a_sample_of_later_vectors_over_binder() {
    let files = vector_files(&later_dir()).unwrap();
    // Every 40th file: all three versions, control flow, dynamic shapes, every operand type;
    // and every layer-normalised LSTM and LSH_PROJECTION type 3 file, the last NNAPI 1.2
    // forms of 1.0 operations to run.
    let newest = |f: &Path| {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        name.starts_with("layer_norm_lstm_") || name.starts_with("lsh_projection_3_")
    };
    let sample: Vec<PathBuf> = files
        .iter()
        .enumerate()
        .filter(|(i, f)| i % 40 == 0 || newest(f))
        .map(|(_, f)| f.clone())
        .collect();
    let device = RpcDevice::open(&TransportOptions {
        threads: 2,
        service: Some(PathBuf::from(env!("CARGO_BIN_EXE_nnhal-service"))),
        ..TransportOptions::default()
    })
    .expect("start nnhal-service and connect");
    assert!(device.child_pid().is_some());
    let c = run(&device, &sample);
    eprintln!(
        "binder sample of {}: {} passed, {} failed, {} skipped ({} target files)",
        sample.len(),
        c.passed,
        c.failed.len(),
        c.skipped,
        c.targets
    );
    assert!(c.failed.is_empty(), "{}", c.failed.join("\n"));
    assert!(c.odd_skips.is_empty(), "{}", c.odd_skips.join("\n"));
    assert!(
        c.targets_not_passed.is_empty(),
        "{}",
        c.targets_not_passed.join("\n")
    );
    assert!(c.targets >= 28, "{} target files in the sample", c.targets);
    // Every operation of the interface runs: nothing in the sample is skipped.
    assert_eq!((c.passed, c.skipped), (sample.len(), 0));
}

#[test]
fn control_flow_bodies_may_leave_ranks_unknown() {
    // An IF whose branches declare their non-constant tensors without dimensions (unknown
    // rank, as the CTS-only control-flow tests do) is valid and runs (the shapes are found at
    // execution); a constant without dimensions stays malformed.
    let file = later_dir().join("V1_3/if_constant_copy_false.json");
    let mut v = Vector::from_file(&file).unwrap();
    for sub in &mut v.model.referenced {
        for o in &mut sub.operands {
            if o.operand_type.starts_with("TENSOR_") && o.lifetime != "CONSTANT_COPY" {
                o.dimensions.clear();
            }
        }
    }
    let device = InProcessDevice::new(1).unwrap();
    let model = nnhal_vts::to_model(&v, nnhal_vts::ConstantMode::Copy).unwrap();
    assert_eq!(device.supported_operations(&model).unwrap(), vec![true]);
    let report = run_vector(&device, &v);
    assert!(
        report.failure.is_none() && report.skipped.is_none(),
        "{:?} {:?}",
        report.failure,
        report.skipped
    );

    let mut bad = model.clone();
    let constant = bad.referenced[0]
        .operands
        .iter_mut()
        .find(|o| o.lifetime == nnhal::hal::OperandLifeTime::ConstantCopy.raw())
        .unwrap();
    constant.operand_type = nnhal::hal::OperandType::TensorFloat32.raw();
    constant.dimensions.clear();
    assert_eq!(
        device.supported_operations(&bad).unwrap_err().status(),
        nnhal::hal::ErrorStatus::InvalidArgument
    );
}

#[test]
fn bi40_layer_norm_lstm_weights_all_or_none() {
    // NNAPI 1.2's LSTM inputs 23–26 (input, forget, cell, output layer-norm weights): all
    // omitted is a plain LSTM, all given normalises; any other mix is malformed, and so is an
    // input-gate weight with CIFG or its absence without. The optional inputs are made
    // constants first: a model input among them leaves the check to execution, where the
    // request decides what is omitted.
    use nnhal::hal::{DataLocation, ErrorStatus, Model, OperandLifeTime};
    let device = InProcessDevice::new(1).unwrap();
    let load = |name: &str| {
        let v = Vector::from_file(&later_dir().join("V1_2").join(name)).unwrap();
        let mut m = nnhal_vts::to_model(&v, nnhal_vts::ConstantMode::Copy).unwrap();
        let optional = [1, 5, 9, 10, 11, 12, 16, 17, 23, 24, 25, 26];
        for i in optional.map(|pos| m.operations[0].inputs[pos]) {
            let o = &mut m.operands[i as usize];
            if o.lifetime == OperandLifeTime::ModelInput.raw() {
                let bytes = 4 * o.dimensions.iter().product::<u32>();
                o.lifetime = OperandLifeTime::ConstantCopy.raw();
                o.location = DataLocation {
                    pool_index: 0,
                    offset: m.operand_values.len() as u32,
                    length: bytes,
                };
                m.operand_values
                    .extend(1.0f32.to_le_bytes().repeat(bytes as usize / 4));
                m.input_indexes.retain(|&x| x != i);
            }
        }
        m
    };
    let omit = |model: &Model, inputs: &[u32]| {
        let mut m = model.clone();
        for &i in inputs {
            let o = &mut m.operands[i as usize];
            o.lifetime = OperandLifeTime::NoValue.raw();
            o.location = DataLocation::default();
        }
        m
    };
    let status = |m: &Model| device.supported_operations(m).map_err(|e| e.status());
    let no_cifg = load("layer_norm_lstm_NoCifgPeepholeProjectionNoClippingLayerNormLstm.json");
    let cifg = load("layer_norm_lstm_CifgPeepholeProjectionNoClippingLayerNormLstm.json");
    for m in [
        no_cifg.clone(),
        cifg.clone(),
        omit(&no_cifg, &[23, 24, 25, 26]),
        omit(&cifg, &[24, 25, 26]),
    ] {
        assert_eq!(status(&m), Ok(vec![true]));
        assert!(device.prepare_model(m).is_ok());
    }
    for (m, what) in [
        (omit(&no_cifg, &[23]), "input weights omitted without CIFG"),
        (omit(&no_cifg, &[25]), "cell weights omitted"),
        (
            omit(&no_cifg, &[24, 25, 26]),
            "only the input weights given",
        ),
        (omit(&cifg, &[26]), "output weights omitted with CIFG"),
    ] {
        assert_eq!(
            status(&m),
            Err(ErrorStatus::InvalidArgument),
            "{what} must be malformed"
        );
    }
    // CIFG with input-gate layer-norm weights: the forget gate's vector used there too.
    let mut m = cifg.clone();
    m.operands[23] = m.operands[24].clone();
    assert_eq!(status(&m), Err(ErrorStatus::InvalidArgument));
}

#[test]
#[ignore = "writes vts_tests/probes/later.tsv; run by name to regenerate it"]
fn write_operation_probes() {
    // `nnhal info` asks the device about every operation with a small real model of it: for
    // each operation beyond NNAPI 1.0, the conformance model with the fewest operations (then
    // the smallest file) among the ones that expect success, without the dynamic-shape and
    // relaxed variants. One line per operation: its name, a tab, the vector as compact JSON.
    use nnhal::hal::OperationType;
    let mut best: BTreeMap<String, (usize, u64, String)> = BTreeMap::new();
    for file in vector_files(&later_dir()).unwrap() {
        let v = Vector::from_file(&file).unwrap();
        if v.expect_failure || v.relaxed || v.variant.contains("dynamic") {
            continue;
        }
        let size = std::fs::metadata(&file).unwrap().len();
        let count = v.model.operations.len();
        for o in &v.model.operations {
            let name = o.operation_type.clone();
            if OperationType::from_name(&name).is_none_or(|op| op.in_nnapi_1_0()) {
                continue;
            }
            let better = best
                .get(&name)
                .is_none_or(|&(c, s, _)| (count, size) < (c, s));
            if better {
                let value: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
                best.insert(name, (count, size, value.to_string()));
            }
        }
    }
    let mut out = String::new();
    for (name, (_, _, json)) in &best {
        out.push_str(&format!("{name}\t{json}\n"));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("vts_tests/probes/later.tsv");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, out).unwrap();
    assert_eq!(
        best.len(),
        73,
        "operations beyond NNAPI 1.0 (29–101) with a probe"
    );
}
