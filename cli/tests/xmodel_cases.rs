//! XModel graphs through nnhal-xmodel and the driver, against the float64 reference of
//! `nnhal_xmodel::reference` (written from the XIR operator definitions): the fixtures of
//! importers/xmodel/testdata/ (made by `cargo run -p nnhal-xmodel --example make_fixtures`) in
//! this process and through a real `nnhal-service`, the quantized fixture against both the
//! NNAPI-rounding and the DPU-rounding reference, and the `nnhal` CLI on them (outputs as
//! `.npy`, refusals with exit status 2).
//!
//! Tolerance: float32 |a − e| ≤ 1e-4 + 1e-4·|e| (the driver sums in float32, in its own
//! order); a quantized output within one step (2^-fix_point) of the NNAPI-rounding reference:
//! float32 sums can land on the other side of a rounding tie than the float64 ones.

mod common;

use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::ConnectOptions;
use nnhal_cli::modelfile::{npy, Array, ArrayData, ModelRequest};
use nnhal_xmodel::reference::{self, Rounding, Tensor};
use nnhal_xmodel::Options;
use std::path::PathBuf;
use std::process::Command;

const FIXTURES: &[&str] = &[
    "convs",
    "transposed",
    "dense",
    "eltwise",
    "pools",
    "activations",
    "shapes",
    "resizes",
    "rearranges",
    "quantized",
    "quant_signed",
    "quant_unsigned",
];

/// The fixtures lowered to quant8 operations throughout: bit-exact with the NNAPI-rounding
/// reference.
const QUANTIZED: &[&str] = &["quantized", "quant_signed", "quant_unsigned"];

fn path(stem: &str) -> PathBuf {
    common::repo_root().join(format!("importers/xmodel/testdata/{stem}.xmodel"))
}

/// Inputs in [−2, 2) (xorshift, per input).
fn inputs(shapes: &[Vec<usize>]) -> Vec<Vec<f32>> {
    shapes
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut x = 0x1234_5678_9ABC_DEF1u64 + k as u64;
            (0..s.iter().product::<usize>())
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ((x >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
                })
                .collect()
        })
        .collect()
}

fn f32s(a: &Array) -> Vec<f32> {
    match &a.data {
        ArrayData::F32(v) => v.clone(),
        _ => panic!("float32 outputs expected"),
    }
}

/// Runs a fixture; gives (driver outputs, NNAPI-rounding reference, DPU-rounding reference).
fn run(
    stem: &str,
    options: &Options,
    execute: &dyn Fn(&nnhal::hal::Model, &nnhal::hal::Request),
) -> (Vec<Vec<f32>>, Vec<Tensor>, Vec<Tensor>) {
    let bytes = std::fs::read(path(stem)).unwrap();
    let imported = nnhal_xmodel::import(&bytes, options).unwrap_or_else(|e| panic!("{stem}: {e}"));
    let shapes: Vec<Vec<usize>> = imported.inputs.iter().map(|e| e.shape.clone()).collect();
    let values = inputs(&shapes);
    let arrays: Vec<Array> = shapes
        .iter()
        .zip(&values)
        .map(|(s, v)| Array {
            shape: s.clone(),
            data: ArrayData::F32(v.clone()),
        })
        .collect();
    let request = ModelRequest::new(&imported, &arrays).unwrap();
    execute(&imported.model, &request.request);
    let got: Vec<Vec<f32>> = request
        .outputs(&imported)
        .unwrap()
        .iter()
        .map(f32s)
        .collect();
    let graph = nnhal_xmodel::decode(&bytes).unwrap();
    let tensors: Vec<Tensor> = shapes
        .iter()
        .zip(&values)
        .map(|(s, v)| Tensor {
            shape: s.clone(),
            data: v.iter().map(|&x| f64::from(x)).collect(),
        })
        .collect();
    let nnapi = reference::run(&graph, options, &tensors, Rounding::Nnapi).unwrap();
    let dpu = reference::run(&graph, options, &tensors, Rounding::Dpu).unwrap();
    (got, nnapi, dpu)
}

/// The fix point of each output of the quantized fixture (its `fix` operators).
fn steps(stem: &str) -> Vec<Option<f64>> {
    let graph = nnhal_xmodel::decode(&std::fs::read(path(stem)).unwrap()).unwrap();
    let outs = nnhal_xmodel::lower::outputs(&graph, &[]).unwrap();
    outs.iter()
        .map(|&o| {
            let op = &graph.ops[o];
            (op.ty == "fix").then(|| 2f64.powi(-(op.int("fix_point").unwrap() as i32)))
        })
        .collect()
}

fn check(stem: &str, execute: &dyn Fn(&nnhal::hal::Model, &nnhal::hal::Request)) -> Vec<String> {
    let (got, want, _) = run(stem, &Options::default(), execute);
    let steps = steps(stem);
    let mut problems = Vec::new();
    for (k, (g, e)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.len(), e.data.len(), "{stem} output {k}");
        let tol = |e: f64| match steps[k] {
            Some(step) => step * 1.000_001,
            None => 1e-4 + 1e-4 * e.abs(),
        };
        if let Some((i, (a, b))) = g
            .iter()
            .zip(&e.data)
            .enumerate()
            .find(|(_, (a, b))| (f64::from(**a) - **b).abs() > tol(**b))
        {
            problems.push(format!(
                "{stem} output {k}: element {i} is {a}, reference {b}"
            ));
        }
    }
    problems
}

/// A quantized fixture's outputs against the NNAPI-rounding reference, element for element.
fn bit_exact(
    stem: &str,
    execute: &dyn Fn(&nnhal::hal::Model, &nnhal::hal::Request),
) -> Vec<String> {
    let (got, want, _) = run(stem, &Options::default(), execute);
    let mut problems = Vec::new();
    for (k, (g, e)) in got.iter().zip(&want).enumerate() {
        let differ = g
            .iter()
            .zip(&e.data)
            .filter(|(a, b)| f64::from(**a) != **b)
            .count();
        if differ > 0 {
            problems.push(format!(
                "{stem} output {k}: {differ} of {} elements differ from the NNAPI-rounding \
                 reference",
                g.len()
            ));
        }
    }
    problems
}

#[test]
fn fixtures_match_the_reference_in_process() {
    let driver = nnhal::Driver::new(1).unwrap();
    let mut problems = Vec::new();
    let execute = |model: &nnhal::hal::Model, request: &nnhal::hal::Request| {
        driver
            .prepare_model(model.clone())
            .unwrap()
            .execute(request)
            .unwrap();
    };
    for stem in FIXTURES {
        problems.extend(check(stem, &execute));
    }
    for stem in QUANTIZED {
        problems.extend(bit_exact(stem, &execute));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn fixtures_match_the_reference_over_rpc() {
    let mut child = ServiceChild::start(&ChildOptions {
        program: Some(common::service_exe()),
        tag: "nnhal-xmodel-cases",
        ..ChildOptions::default()
    })
    .unwrap();
    let device = child.connect(&ConnectOptions::default()).unwrap();
    let mut problems = Vec::new();
    let execute = |model: &nnhal::hal::Model, request: &nnhal::hal::Request| {
        device
            .prepare_model(model.clone())
            .unwrap()
            .execute(request)
            .unwrap();
    };
    for stem in FIXTURES {
        problems.extend(check(stem, &execute));
    }
    for stem in QUANTIZED {
        problems.extend(bit_exact(stem, &execute));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The quantized fixtures: bit-exact with the NNAPI-rounding reference (above); against the
/// DPU's single rounding, every requantized operator's elements within one step, and the
/// share that differs per layer — about 2^-k of the accumulators for a requantization by
/// 2^-k (`docs/xmodel.md`) — printed; at least 99 % of each output within one step of the
/// DPU-rounding reference.
#[test]
fn quantized_fixtures_against_dpu_rounding() {
    let driver = nnhal::Driver::new(1).unwrap();
    for stem in QUANTIZED {
        let (got, _, dpu) = run(stem, &Options::default(), &|model, request| {
            driver
                .prepare_model(model.clone())
                .unwrap()
                .execute(request)
                .unwrap();
        });
        let graph = nnhal_xmodel::decode(&std::fs::read(path(stem)).unwrap()).unwrap();
        let shapes: Vec<Vec<usize>> =
            nnhal_xmodel::import(&std::fs::read(path(stem)).unwrap(), &Options::default())
                .unwrap()
                .inputs
                .iter()
                .map(|e| e.shape.clone())
                .collect();
        let tensors: Vec<Tensor> = shapes
            .iter()
            .zip(inputs(&shapes))
            .map(|(s, v)| Tensor {
                shape: s.clone(),
                data: v.iter().map(|&x| f64::from(x)).collect(),
            })
            .collect();
        let layers = reference::rounding_by_layer(&graph, &Options::default(), &tensors)
            .unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert!(!layers.is_empty(), "{stem}: nothing requantized");
        for l in &layers {
            println!(
                "{stem} '{}': {} of {} elements one step apart under DPU rounding ({} up, {} \
                 down, {:.3} %)",
                l.name,
                l.dpu_higher + l.dpu_lower,
                l.elements,
                l.dpu_higher,
                l.dpu_lower,
                100.0 * (l.dpu_higher + l.dpu_lower) as f64 / l.elements as f64
            );
        }
        let steps = steps(stem);
        for (k, g) in got.iter().enumerate() {
            // Outputs that are `fix` operators: their step is known here.
            let Some(step) = steps[k] else {
                continue;
            };
            let within = g
                .iter()
                .zip(&dpu[k].data)
                .filter(|(a, b)| (f64::from(**a) - **b).abs() <= step * 1.000_001)
                .count();
            println!(
                "{stem} output {k}: {within} of {} within one step of DPU rounding",
                g.len()
            );
            assert!(within * 100 >= 99 * g.len(), "{stem} output {k}");
        }
    }
}

fn nnhal(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nnhal"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn cli_runs_an_xmodel_and_writes_its_outputs() {
    let dir = std::env::temp_dir().join(format!("nnhal-xmodel-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let model = path("dense");
    let out = nnhal(&[
        "run",
        model.to_str().unwrap(),
        "--output-dir",
        dir.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sm = npy::read(&dir.join("output_0.npy")).unwrap();
    let mt = npy::read(&dir.join("output_1.npy")).unwrap();
    assert_eq!(
        (sm.shape.clone(), mt.shape.clone()),
        (vec![2, 3], vec![3, 2])
    );
    // The softmax rows sum to one.
    let v = f32s(&sm);
    for row in v.chunks(3) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }
    let imported = nnhal(&["import", model.to_str().unwrap()]);
    let listing = String::from_utf8_lossy(&imported.stdout);
    assert!(
        listing.contains("'ip' (inner-product): FULLY_CONNECTED"),
        "{listing}"
    );
    assert!(listing.contains("XIR operators"), "{listing}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_start_at_cuts_the_graph() {
    let model = path("quantized");
    let out = nnhal(&["import", model.to_str().unwrap(), "--start-at", "c1_relu"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The sum still needs the graph's own input: both are inputs now, in file order.
    assert!(text.contains("input 0 'x' [1, 6, 6, 4]"), "{text}");
    assert!(text.contains("input 1 'c1_relu' [1, 6, 6, 8]"), "{text}");
    assert!(!text.contains("'c1' (conv2d)"), "{text}");
    // The quant8 lowering says what it made of each operator, and where it fell back.
    let out = nnhal(&["import", path("quant_signed").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("'c1' (conv2d): CONV_2D on TENSOR_QUANT8_ASYMM (output scale 2^-4"),
        "{text}"
    );
    assert!(
        text.contains("'avg' (avgpool2d): AVERAGE_POOL_2D on float32 (quant8 inputs dequantized"),
        "{text}"
    );
    let out = nnhal(&["import", model.to_str().unwrap(), "--start-at", "nothing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no operator of that name"));
}

/// A refused file: exit status 2 and the reason in words.
fn refused(bytes: &[u8], name: &str, words: &str) {
    let file =
        std::env::temp_dir().join(format!("nnhal-xmodel-{}-{name}.xmodel", std::process::id()));
    std::fs::write(&file, bytes).unwrap();
    let out = nnhal(&["run", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(2), "{name}: {err}");
    assert!(err.contains(words), "{name}: {err}");
}

#[test]
fn cli_refusals_exit_2_with_the_reason() {
    use nnhal_xmodel::writer::GraphWriter;
    let good = std::fs::read(path("convs")).unwrap();
    refused(&good[..good.len() / 2], "truncated", "not an XIR graph");
    let mut g = GraphWriter::new("custom");
    let x = g.data("x", &[1, 2, 2, 1]);
    g.op(
        "scatter",
        "PPScatterV2",
        &[("input", &[&x])],
        vec![],
        &[1, 2, 2, 1],
    );
    refused(&g.bytes(), "custom", "'PPScatterV2' is not lowered");
    let mut g = GraphWriter::new("compiled");
    let x = g.data("x", &[1, 2, 2, 1]);
    g.op("w", "const-fix", &[], vec![], &[1]);
    g.op("r", "relu", &[("input", &[&x])], vec![], &[1, 2, 2, 1]);
    refused(
        &g.bytes(),
        "compiled",
        "import the quantizer's *_int.xmodel",
    );
    let mut g = GraphWriter::new("short");
    let x = g.data("x", &[1, 2, 2, 1]);
    let c = g.constant("c", &[1, 2, 2, 1], &[1.0, 2.0, 3.0]);
    g.op("a", "add", &[("input", &[&x, &c])], vec![], &[1, 2, 2, 1]);
    refused(
        &g.bytes(),
        "length",
        "12 bytes of data for shape [1, 2, 2, 1]",
    );
    for (stem, words) in [
        ("quant_bias_shift", "negative bias shift -3"),
        ("quant_multiplier", "output multiplier 2^1"),
        ("quant_bits4", "bit_width 4"),
    ] {
        refused(&std::fs::read(path(stem)).unwrap(), stem, words);
    }
}

/// The public quantizer output with its custom operator: refused by name; from the operator
/// after it, the rest imports (running it is too slow for a test: see the README).
#[test]
fn voxelnet_is_refused_by_its_custom_operator_and_imports_after_it() {
    let model = PathBuf::from("/work/shared/models/xmodel/VoxelNet_int.xmodel");
    if !model.exists() {
        println!("skipped: {} is not present", model.display());
        return;
    }
    let out = nnhal(&["import", model.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'PPScatterV2'"));
    let options = Options {
        start_at: vec!["VoxelNet__VoxelNet_input_4_fix".into()],
    };
    let imported = nnhal_xmodel::import_file(&model, &options).unwrap();
    assert_eq!(imported.inputs[0].shape, vec![1, 64, 496, 432]);
    assert_eq!(imported.outputs.len(), 3);
}

/// The public VoxelNet quantizer output from its custom operator on: the cut graph in-process
/// against the NNAPI-rounding reference (bit-exact) and the DPU-rounding one (per output the
/// share of elements equal and within one step, at least 99 % within), and per requantized
/// layer the share of accumulators the two roundings put one step apart (the negative exact
/// ties, about half of 2^-shift, never more than one step). Too slow for CI (a few minutes in
/// release): `cargo test --release -p nnhal-cli --test xmodel_cases -- --ignored voxelnet`.
#[test]
#[ignore]
fn voxelnet_after_its_custom_operator_against_the_references() {
    let model = PathBuf::from("/work/shared/models/xmodel/VoxelNet_int.xmodel");
    if !model.exists() {
        println!("skipped: {} is not present", model.display());
        return;
    }
    let bytes = std::fs::read(&model).unwrap();
    let options = Options {
        start_at: vec!["VoxelNet__VoxelNet_input_4_fix".into()],
    };
    let imported = nnhal_xmodel::import(&bytes, &options).unwrap();
    let graph = nnhal_xmodel::decode(&bytes).unwrap();
    let start = graph.index("VoxelNet__VoxelNet_input_4_fix").unwrap();
    let step_in = 2f64.powi(-(graph.ops[start].int("fix_point").unwrap() as i32));
    // Inputs on the starting fix's grid, in [−2, 2).
    let shape = imported.inputs[0].shape.clone();
    let raw = &inputs(std::slice::from_ref(&shape))[0];
    let values: Vec<f32> = raw
        .iter()
        .map(|&x| ((f64::from(x) / step_in).round() * step_in) as f32)
        .collect();
    let request = ModelRequest::new(
        &imported,
        &[Array {
            shape: shape.clone(),
            data: ArrayData::F32(values.clone()),
        }],
    )
    .unwrap();
    let driver = nnhal::Driver::new(0).unwrap();
    let t = std::time::Instant::now();
    driver
        .prepare_model(imported.model.clone())
        .unwrap()
        .execute(&request.request)
        .unwrap();
    println!("driver: {:.2} s", t.elapsed().as_secs_f64());
    let got: Vec<Vec<f32>> = request
        .outputs(&imported)
        .unwrap()
        .iter()
        .map(f32s)
        .collect();
    let input = Tensor {
        shape,
        data: values.iter().map(|&x| f64::from(x)).collect(),
    };
    let outs = nnhal_xmodel::lower::outputs(&graph, &[start]).unwrap();
    for rounding in [Rounding::Nnapi, Rounding::Dpu] {
        let want =
            reference::run(&graph, &options, std::slice::from_ref(&input), rounding).unwrap();
        for (k, (g, e)) in got.iter().zip(&want).enumerate() {
            let step = 2f64.powi(-(graph.ops[outs[k]].int("fix_point").unwrap() as i32));
            let equal = g
                .iter()
                .zip(&e.data)
                .filter(|(a, b)| f64::from(**a) == **b)
                .count();
            let within = g
                .iter()
                .zip(&e.data)
                .filter(|(a, b)| (f64::from(**a) - **b).abs() <= step)
                .count();
            println!(
                "{rounding:?} output {k} '{}': {} elements, {equal} equal ({:.4} %), {within} \
                 within one step ({:.4} %)",
                graph.ops[outs[k]].name,
                g.len(),
                100.0 * equal as f64 / g.len() as f64,
                100.0 * within as f64 / g.len() as f64
            );
            // The driver is the NNAPI-rounding reference, bit for bit. Against the DPU's
            // rounding the outputs carry what about 20 requantized layers' negative ties
            // compound to (figures in the README); each layer's own are checked below.
            match rounding {
                Rounding::Nnapi => assert_eq!(equal, g.len(), "output {k}"),
                Rounding::Dpu => assert!(within * 100 >= 99 * g.len(), "output {k}"),
            }
        }
    }
    let layers =
        reference::rounding_by_layer(&graph, &options, std::slice::from_ref(&input)).unwrap();
    let (mut total, mut apart) = (0, 0);
    for l in &layers {
        let d = l.dpu_higher + l.dpu_lower;
        total += l.elements;
        apart += d;
        println!(
            "layer '{}' (2^-{}): {d} of {} one step apart ({} up, {} down, {:.3} %)",
            l.name,
            l.shift,
            l.elements,
            l.dpu_higher,
            l.dpu_lower,
            100.0 * d as f64 / l.elements as f64
        );
        // Every requantized layer of this graph is a convolution with its weights one ulp
        // below 2^-fp_w: one rounding, half away from zero, which DPU_ROUND puts one step
        // higher on negative exact ties only (about half of 2^-shift; 2× for the spread).
        assert_eq!(l.dpu_lower, 0, "layer '{}'", l.name);
        assert!(
            d as f64 <= 2.0 * 2f64.powi(-(l.shift as i32)) * l.elements as f64,
            "layer '{}'",
            l.name
        );
    }
    println!(
        "{} requantized layers: {apart} of {total} elements one step apart ({:.3} %)",
        layers.len(),
        100.0 * apart as f64 / total as f64
    );
}

/// The weight scale one float32 ulp below 2^-fp_w gives, in the driver's own derivation
/// (`Requantize::for_conv`), the Q31 multiplier 2^31 − 2^7 with right shift k for every
/// requantization 2^-k (1 ≤ k ≤ 31) the quant8 fix points can make, as the lowering predicts;
/// the exact power of two gives (2^30, k − 1). Through the driver's arithmetic the former
/// rounds every accumulator below 2^23 once, half away from zero, as the reference does.
#[test]
fn weights_one_ulp_below_round_once() {
    use nnhal_kernels::quant::{
        multiply_by_quantized_multiplier_smaller_than_one, Requantize, RequantizeAny,
    };
    use nnhal_kernels::{Activation, QuantParams};
    use nnhal_xmodel::lower::{nnapi_multiplier, scale_below, BELOW_EXACT, QUANT_FP};
    let mut checked = 0;
    for a in QUANT_FP {
        for b in QUANT_FP {
            for c in QUANT_FP {
                let k = a + b - c;
                if !(1..=31).contains(&k) {
                    continue;
                }
                let p = |s: f32| QuantParams::new(s, 0);
                let s_in = 2f32.powi(-a as i32);
                let s_out = 2f32.powi(-c as i32);
                let below = scale_below(b);
                assert!(below < 2f32.powi(-b as i32) && below.is_normal());
                let d =
                    Requantize::for_conv(p(s_in), p(below), p(s_out), Activation::None).unwrap();
                let want = ((1i64 << 31) - 128, k);
                assert_eq!((i64::from(d.multiplier), i64::from(d.right_shift)), want);
                assert_eq!(nnapi_multiplier(s_in, below, s_out), Some(want));
                // The grouped and later-version paths derive it alike.
                let any =
                    RequantizeAny::for_conv(p(s_in), p(below), p(s_out), Activation::None).unwrap();
                assert_eq!((any.multiplier, any.left_shift), (d.multiplier, 0));
                assert_eq!(any.right_shift, d.right_shift);
                let exact = 2f32.powi(-b as i32);
                let d =
                    Requantize::for_conv(p(s_in), p(exact), p(s_out), Activation::None).unwrap();
                let want = (1i64 << 30, k - 1);
                assert_eq!((i64::from(d.multiplier), i64::from(d.right_shift)), want);
                assert_eq!(nnapi_multiplier(s_in, exact, s_out), Some(want));
                checked += 1;
            }
        }
    }
    assert!(checked > 1000);
    let m = i32::MAX - 127;
    for k in 1..=31i64 {
        let accs = (-70_000..70_000)
            .chain((BELOW_EXACT - 70_000)..BELOW_EXACT)
            .chain(-BELOW_EXACT + 1..-BELOW_EXACT + 70_000);
        for acc in accs {
            let driver = multiply_by_quantized_multiplier_smaller_than_one(acc as i32, m, k as i32);
            let reference = reference::nnapi_requantize(acc, i64::from(m), k);
            // One rounding of acc / 2^k, half away from zero.
            let once = (acc as f64 / 2f64.powi(k as i32)).round() as i64;
            assert_eq!(
                (i64::from(driver), reference),
                (once, once),
                "acc {acc} k {k}"
            );
        }
    }
}

/// A layer whose accumulators could reach 2^23 keeps its weights at exactly 2^-fp_w (the
/// one-ulp multiplier would move them by one), a layer bounded below 2^23 gets the single
/// rounding; both stay bit-exact with the NNAPI-rounding reference, in-process.
#[test]
fn weights_one_ulp_below_only_where_the_accumulator_stays_exact() {
    use nnhal_xmodel::writer::GraphWriter;
    let depth = 1024;
    let mut g = GraphWriter::new("accumulator_bound");
    let x = g.data("x", &[1, depth]);
    let xf = g.fix("x_fix", &x, 0, &[1, depth]);
    let mut outs = Vec::new();
    // 1024 · 128 · 128 = 2^24 for weights −128; 1024 · 128 · 1 = 2^17 for weights 1.
    for (name, w, out_fp) in [("big", -128.0f32, -12), ("small", 1.0, -6)] {
        let c = g.constant(&format!("{name}_w"), &[1, depth], &vec![w; depth]);
        let cf = g.fix(&format!("{name}_w_fix"), &c, 0, &[1, depth]);
        let ip = g.op(
            name,
            "inner-product",
            &[("input", &[&xf]), ("weights", &[&cf])],
            vec![("axis", nnhal_xmodel::writer::int(1))],
            &[1, 1],
        );
        outs.push(g.fix(&format!("{name}_fix"), &ip, out_fp, &[1, 1]));
    }
    g.returns(&outs.iter().map(String::as_str).collect::<Vec<_>>());
    let bytes = g.bytes();
    let options = Options::default();
    let imported = nnhal_xmodel::import(&bytes, &options).unwrap();
    let line = |name: &str| {
        imported
            .summary
            .iter()
            .find(|l| l.starts_with(&format!("'{name}'")))
            .unwrap()
            .clone()
    };
    assert!(!line("big").contains("one ulp below"), "{}", line("big"));
    assert!(
        line("big").contains("requantized by 2^-12"),
        "{}",
        line("big")
    );
    assert!(
        line("small").contains("one ulp below 2^-fp: multiplier 2147483520 >> 6"),
        "{}",
        line("small")
    );
    // Integers in [−128, 128): the input's grid.
    let values: Vec<f32> = inputs(&[vec![1, depth]])[0]
        .iter()
        .map(|&v| (v * 64.0).round().clamp(-128.0, 127.0))
        .collect();
    let request = ModelRequest::new(
        &imported,
        &[Array {
            shape: vec![1, depth],
            data: ArrayData::F32(values.clone()),
        }],
    )
    .unwrap();
    let driver = nnhal::Driver::new(1).unwrap();
    driver
        .prepare_model(imported.model.clone())
        .unwrap()
        .execute(&request.request)
        .unwrap();
    let got: Vec<Vec<f32>> = request
        .outputs(&imported)
        .unwrap()
        .iter()
        .map(f32s)
        .collect();
    let graph = nnhal_xmodel::decode(&bytes).unwrap();
    let tensor = Tensor {
        shape: vec![1, depth],
        data: values.iter().map(|&v| f64::from(v)).collect(),
    };
    let want = reference::run(&graph, &options, &[tensor], Rounding::Nnapi).unwrap();
    for (g, e) in got.iter().zip(&want) {
        let g: Vec<f64> = g.iter().map(|&v| f64::from(v)).collect();
        assert_eq!(g, e.data);
    }
}
