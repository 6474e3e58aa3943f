//! Runs golden vectors and mutation classes against a [`Device`] and reports what happened.
//!
//! A vector passes when, in both constant modes and with its constant tensors fed as inputs
//! (AOSP's "all tensors as inputs" variant), the model is reported fully supported, prepares,
//! and every example's outputs are within the harness tolerance (ignored outputs are
//! supplied but not compared). Each example gets a fresh request, as in the AOSP harness.
//!
//! Every call into the device is wrapped in `catch_unwind`: a panic in an in-process driver is
//! a failure of that vector or variant with its message, not the end of the run.

use crate::compare::compare;
use crate::model::{build_request, to_model, ConstantMode};
use crate::mutations::{BaseModel, ModelMutator, RequestMutator};
use crate::transport::{Device, Prepared};
use crate::vector::Vector;
use nnhal::hal::{ErrorStatus, HalError, HalResult, Model, OperationType, Request};
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, turning a panic into an error message naming `what`.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic payload".into());
        format!("{what} panicked: {msg}")
    })
}

fn status_name(e: &HalError) -> &'static str {
    e.status().name()
}

/// The outcome of one vector.
#[derive(Clone, Debug, Default)]
pub struct VectorReport {
    pub name: String,
    /// `None` when the vector passed (or was skipped).
    pub failure: Option<String>,
    /// Why the vector was not run: a valid model the driver reports unsupported, or one VTS
    /// itself does not run as a generated test. Never set together with `failure`.
    pub skipped: Option<String>,
    /// Quant8 output elements compared in CONSTANT_COPY mode, and how many matched exactly
    /// (counted in one mode only so each golden element counts once).
    pub quant8_total: usize,
    pub quant8_exact: usize,
    /// Executions that ran and were compared (both modes, all examples).
    pub executions: usize,
}

impl VectorReport {
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.skipped.is_none()
    }

    pub fn is_skipped(&self) -> bool {
        self.failure.is_none() && self.skipped.is_some()
    }
}

/// Per-mode counters gathered while running.
#[derive(Default)]
struct ModeRun {
    failures: Vec<String>,
    /// Set when the driver reported the model unsupported (or, for a dynamic-shape model,
    /// answered GENERAL_FAILURE, which VTS accepts as "skip").
    skip: Option<String>,
    quant8_total: usize,
    quant8_exact: usize,
    executions: usize,
}

fn unsupported_list(model: &Model, supported: &[bool]) -> String {
    supported
        .iter()
        .enumerate()
        .filter(|(_, s)| !**s)
        .map(|(k, _)| {
            let raw = model.operations[k].operation_type;
            let name =
                OperationType::from_raw(raw).map_or_else(|| raw.to_string(), |t| t.to_string());
            format!("{k} ({name})")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The shapes a driver reports for outputs declared with unspecified (0) dimensions must be
/// fully specified, keep the declared rank and known extents, and hold exactly the expected
/// number of values.
fn check_dynamic_shapes(
    outputs: &[crate::model::OutputSlot],
    shapes: &[Vec<u32>],
    example: &crate::vector::Example,
) -> Result<(), String> {
    if shapes.len() != outputs.len() {
        return Err(format!(
            "{} output shapes reported for {} outputs with unspecified dimensions",
            shapes.len(),
            outputs.len()
        ));
    }
    for (slot, shape) in outputs.iter().zip(shapes) {
        let declared = &slot.dimensions;
        let agrees = shape.len() == declared.len()
            && declared.iter().zip(shape).all(|(&d, &s)| d == 0 || d == s);
        let count: u64 = shape.iter().map(|&d| u64::from(d)).product();
        let expected = example.output(slot.position).map(<[f64]>::len);
        if !agrees || expected.is_some_and(|n| n as u64 != count) {
            return Err(format!(
                "output {} reported shape {shape:?}, declared {declared:?} with {} values",
                slot.position,
                expected.map_or_else(|| "unknown".into(), |n| n.to_string())
            ));
        }
    }
    Ok(())
}

fn run_mode(device: &dyn Device, v: &Vector, mode: ConstantMode, label: &str, run: &mut ModeRun) {
    let fail = |run: &mut ModeRun, msg: String| run.failures.push(format!("{label}: {msg}"));
    let dynamic = v.model.output_indexes.iter().any(|&o| {
        v.model
            .operands
            .get(o as usize)
            .is_some_and(|op| op.dimensions.contains(&0))
    });
    let model = match to_model(v, mode) {
        Ok(m) => m,
        Err(e) => return fail(run, format!("cannot build the model: {e}")),
    };
    match guarded("supported_operations", || {
        device.supported_operations(&model)
    }) {
        Err(p) => return fail(run, p),
        Ok(Err(e)) => return fail(run, format!("supported_operations returned {e}")),
        Ok(Ok(s)) if s.len() != model.operations.len() => {
            return fail(
                run,
                format!(
                    "supported_operations answered {} flags for {} operations",
                    s.len(),
                    model.operations.len()
                ),
            )
        }
        Ok(Ok(s)) if s.iter().any(|x| !x) => {
            run.skip = Some(format!(
                "unsupported by the driver: {}",
                unsupported_list(&model, &s)
            ));
            return;
        }
        Ok(Ok(_)) => {}
    }
    let prepared = match guarded("prepare_model", || device.prepare_model(model)) {
        Err(p) => return fail(run, p),
        Ok(Err(e)) => return fail(run, format!("prepare_model returned {e}")),
        Ok(Ok(p)) => p,
    };
    for (ex, example) in v.examples.iter().enumerate() {
        let at = format!("example {ex}");
        let built = match build_request(v, mode, example) {
            Ok(b) => b,
            Err(e) => {
                fail(run, format!("{at}: cannot build the request: {e}"));
                continue;
            }
        };
        let result = match guarded("execute", || prepared.execute(&built.request)) {
            Err(p) => {
                fail(run, format!("{at}: {p}"));
                continue;
            }
            Ok(Err(e)) if dynamic && e.status() == ErrorStatus::GeneralFailure => {
                // DynamicOutputShapeTest accepts GENERAL_FAILURE and skips the test.
                run.skip = Some(format!("{at}: GENERAL_FAILURE on unspecified outputs: {e}"));
                return;
            }
            Ok(Err(e)) => {
                fail(run, format!("{at}: execute returned {e}"));
                continue;
            }
            Ok(Ok(r)) => r,
        };
        run.executions += 1;
        if dynamic {
            if let Err(why) = check_dynamic_shapes(&built.outputs, &result.output_shapes, example) {
                fail(run, format!("{at}: {why}"));
                continue;
            }
        } else if !result.output_shapes.is_empty() {
            // 1.0 reports no shapes; when the driver does report them they must be the
            // declared ones.
            let declared: Vec<Vec<u32>> =
                built.outputs.iter().map(|s| s.dimensions.clone()).collect();
            if result.output_shapes != declared {
                fail(
                    run,
                    format!(
                        "{at}: reported output shapes {:?}, declared {declared:?}",
                        result.output_shapes
                    ),
                );
            }
        }
        let actual = match built.read_outputs() {
            Ok(a) => a,
            Err(e) => {
                fail(run, format!("{at}: cannot read the outputs back: {e}"));
                continue;
            }
        };
        for (slot, bytes) in built.outputs.iter().zip(&actual) {
            if v.tolerance.ignored_outputs.contains(&slot.position) {
                if let Some(m) = v.tolerance.multinomial {
                    if let Err(why) = multinomial(v, example, bytes, m.tolerance) {
                        fail(run, format!("{at} output {}: {why}", slot.position));
                    }
                }
                continue;
            }
            if example.output(slot.position).is_some_and(<[f64]>::is_empty) {
                // A zero-sized output: its shape was checked, it has no values.
                continue;
            }
            let Some(expected) = example.output(slot.position) else {
                fail(
                    run,
                    format!("{at}: output {} has no expected values", slot.position),
                );
                continue;
            };
            let c = compare(slot.operand_type, expected, bytes, &v.tolerance);
            if label == ConstantMode::Copy.name() {
                run.quant8_total += c.quant8_total;
                run.quant8_exact += c.quant8_exact;
            }
            if !c.passed() {
                fail(
                    run,
                    format!(
                        "{at} output {} (operand {}, {}): {}",
                        slot.position,
                        slot.operand,
                        slot.operand_type,
                        c.describe()
                    ),
                );
            }
        }
    }
}

/// RANDOM_MULTINOMIAL's statistical check on an output: the logits are the example's first
/// input, rows of the last extent of the model's first input.
fn multinomial(
    v: &Vector,
    example: &crate::vector::Example,
    drawn: &[u8],
    tolerance: f64,
) -> Result<(), String> {
    let logits = example
        .input(0)
        .ok_or("the example has no logits (input 0)")?;
    let classes = v
        .model
        .input_indexes
        .first()
        .and_then(|&i| v.model.operands.get(i as usize))
        .and_then(|o| o.dimensions.last().copied())
        .ok_or("the model's first input has no class dimension")?;
    crate::compare::check_multinomial(logits, classes as usize, drawn, tolerance)
}

/// Whether a vector comes from the later (NNAPI 1.1–1.3) set, whose files already include
/// AOSP's `all_tensors_as_inputs` variants.
fn is_later(v: &Vector) -> bool {
    v.version.as_deref().is_some_and(|ver| ver != "V1_0")
}

/// A model the generator marks `expectFailure` (its parameters are wrong in a way only
/// preparation or execution can tell, e.g. a depthwise filter of the wrong shape), run as
/// VTS's ValidationTest runs it (`validateFailure`): getSupportedOperations must answer; a
/// model not fully supported may fail to prepare (VTS then stops there); otherwise it must
/// prepare, and executing its request must fail. It passes when it fails that way.
fn run_expect_failure(device: &dyn Device, v: &Vector) -> VectorReport {
    let mut report = VectorReport {
        name: v.name.clone(),
        ..VectorReport::default()
    };
    let outcome = (|| -> Result<(), String> {
        let model =
            to_model(v, ConstantMode::Copy).map_err(|e| format!("cannot build the model: {e}"))?;
        let supported = guarded("supported_operations", || {
            device.supported_operations(&model)
        })?
        .map_err(|e| format!("supported_operations returned {e}; VTS asserts it answers"))?;
        let full = supported.iter().all(|&s| s);
        let prepared = match guarded("prepare_model", || device.prepare_model(model))? {
            Ok(p) => p,
            Err(_) if !full => return Ok(()),
            Err(e) => {
                return Err(format!(
                    "prepare_model of a fully supported model returned {e}"
                ))
            }
        };
        let example = v.examples.first().ok_or("no example")?;
        let built = build_request(v, ConstantMode::Copy, example)
            .map_err(|e| format!("cannot build the request: {e}"))?;
        match guarded("execute", || prepared.execute(&built.request))? {
            Ok(_) => Err("expectFailure: the execution succeeded".into()),
            Err(_) => Ok(()),
        }
    })();
    report.failure = outcome.err();
    report
}

/// Runs one vector in both constant modes.
pub fn run_vector(device: &dyn Device, v: &Vector) -> VectorReport {
    if v.expect_failure {
        return run_expect_failure(device, v);
    }
    let mut run = ModeRun::default();
    for mode in ConstantMode::ALL {
        run_mode(device, v, mode, mode.name(), &mut run);
        if run.skip.is_some() {
            break;
        }
    }
    // AOSP runs every 1.0 test a third time with its constant tensors fed as inputs.
    if let Some(variant) = v
        .tensors_as_inputs()
        .filter(|_| !is_later(v) && run.skip.is_none())
    {
        run_mode(
            device,
            &variant,
            ConstantMode::Copy,
            "tensors as inputs",
            &mut run,
        );
    }
    let failure = match run.failures.split_first() {
        None => None,
        Some((first, [])) => Some(first.clone()),
        Some((first, rest)) => Some(format!(
            "{first} [+{} more: {}]",
            rest.len(),
            rest.iter()
                .take(3)
                .map(|r| r.split(':').take(2).collect::<Vec<_>>().join(":"))
                .collect::<Vec<_>>()
                .join("; ")
        )),
    };
    VectorReport {
        name: v.name.clone(),
        skipped: if failure.is_none() { run.skip } else { None },
        failure,
        quant8_total: run.quant8_total,
        quant8_exact: run.quant8_exact,
        executions: run.executions,
    }
}

/// Totals over many vectors.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub reports: Vec<VectorReport>,
}

impl Summary {
    pub fn passed(&self) -> usize {
        self.reports.iter().filter(|r| r.passed()).count()
    }

    pub fn failed(&self) -> usize {
        self.reports.iter().filter(|r| r.failure.is_some()).count()
    }

    pub fn skipped(&self) -> usize {
        self.reports.iter().filter(|r| r.is_skipped()).count()
    }

    /// (exactly matching, compared) quant8 elements over all vectors.
    pub fn quant8(&self) -> (usize, usize) {
        self.reports
            .iter()
            .fold((0, 0), |(e, t), r| (e + r.quant8_exact, t + r.quant8_total))
    }

    pub fn failures(&self) -> Vec<&VectorReport> {
        self.reports
            .iter()
            .filter(|r| r.failure.is_some())
            .collect()
    }
}

/// Runs every vector, calling `each` as soon as one finishes (for streaming output).
pub fn run_vectors(
    device: &dyn Device,
    vectors: &[Vector],
    mut each: impl FnMut(&VectorReport),
) -> Summary {
    let mut summary = Summary::default();
    for v in vectors {
        let report = run_vector(device, v);
        each(&report);
        summary.reports.push(report);
    }
    summary
}

// ---------------------------------------------------------------- mutations

fn expect_invalid<T>(what: &str, result: Result<HalResult<T>, String>) -> Result<(), String> {
    match result {
        Err(panic) => Err(panic),
        Ok(Ok(_)) => Err(format!("{what} succeeded")),
        Ok(Err(e)) if e.status() == ErrorStatus::InvalidArgument => Ok(()),
        Ok(Err(e)) => Err(format!(
            "{what} returned {} instead of INVALID_ARGUMENT: {}",
            status_name(&e),
            e.message()
        )),
    }
}

/// Checks that both `supported_operations` and `prepare_model` reject `model` with
/// INVALID_ARGUMENT, without panicking.
pub fn check_invalid_model(device: &dyn Device, model: &Model) -> Result<(), String> {
    let supported = expect_invalid(
        "supported_operations",
        guarded("supported_operations", || {
            device.supported_operations(model)
        }),
    );
    let prepared = expect_invalid(
        "prepare_model",
        guarded("prepare_model", || device.prepare_model(model.clone())),
    );
    match (supported, prepared) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(a), Ok(())) | (Ok(()), Err(a)) => Err(a),
        (Err(a), Err(b)) => Err(format!("{a}; {b}")),
    }
}

/// Checks that `execute` (and `executeFenced`, over binder) rejects `request` with
/// INVALID_ARGUMENT, without panicking.
pub fn check_invalid_request(prepared: &dyn Prepared, request: &Request) -> Result<(), String> {
    expect_invalid("execute", guarded("execute", || prepared.execute(request)))?;
    // The AIDL VTS's ValidateRequest also sends every malformed request through
    // executeFenced, which must refuse it at the call.
    match guarded("execute_fenced", || prepared.execute_fenced(request)) {
        Ok(Some(fenced)) => expect_invalid("execute_fenced", Ok(fenced)),
        Ok(None) => Ok(()),
        Err(panic) => Err(panic),
    }
}

/// The outcome of one mutation class over a set of base models.
#[derive(Clone, Debug, Default)]
pub struct ClassReport {
    /// `BI-xx name`.
    pub class: String,
    /// Vectors the class produced at least one variant for.
    pub vectors: BTreeSet<String>,
    /// Variants generated and checked.
    pub variants: usize,
    /// One line per failing variant (or unusable base model).
    pub failures: Vec<String>,
    /// Why the class was not run on this device, when it cannot apply there.
    pub skipped: Option<String>,
    /// Base models a request class could not use, and why: ones the driver reports not fully
    /// supported and then does not prepare (VTS's createPreparedModel ends the test there).
    pub skipped_bases: Vec<String>,
}

impl ClassReport {
    /// Every variant was rejected as it must be (a skipped class neither passes nor fails).
    pub fn passed(&self) -> bool {
        self.skipped.is_none() && self.failures.is_empty() && self.variants > 0
    }

    /// A multi-line description of the failures, at most `limit` of them.
    pub fn describe_failures(&self, limit: usize) -> String {
        let mut s: Vec<String> = self.failures.iter().take(limit).cloned().collect();
        if self.failures.len() > limit {
            s.push(format!("... and {} more", self.failures.len() - limit));
        }
        s.join("\n")
    }
}

/// Checks that `base` itself is a valid model; mutating an already rejected model would prove
/// nothing.
fn check_base(device: &dyn Device, base: &BaseModel) -> Result<(), String> {
    match guarded("supported_operations", || {
        device.supported_operations(&base.model)
    }) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("{}: base model rejected: {e}", base.id())),
        Err(p) => Err(format!("{}: base model: {p}", base.id())),
    }
}

/// Applies one model mutation class to every base model and checks every variant.
pub fn run_model_class(
    device: &dyn Device,
    mutator: &ModelMutator,
    bases: &[BaseModel],
) -> ClassReport {
    let mut report = ClassReport {
        class: format!("{} {}", mutator.bi, mutator.name),
        ..ClassReport::default()
    };
    if mutator.hidl_only && !device.carries_consumer_counts() {
        report.skipped = Some(format!(
            "{} has no form on this transport: the AIDL Operand has no numberOfConsumers",
            mutator.vts
        ));
        return report;
    }
    for v in (mutator.standalone)() {
        report.variants += 1;
        if let Err(e) = check_invalid_model(device, &v.model) {
            report.failures.push(format!("{}: {e}", v.name));
        }
    }
    for base in bases {
        if let Err(e) = check_base(device, base) {
            report.failures.push(e);
            continue;
        }
        let mutate = match mutator.aidl {
            Some(aidl) if base.later => aidl,
            _ => mutator.mutate,
        };
        let variants = match guarded("mutator", || mutate(&base.model)) {
            Ok(v) => v,
            Err(p) => {
                report.failures.push(format!("{}: {p}", base.id()));
                continue;
            }
        };
        if !variants.is_empty() {
            report.vectors.insert(base.vector.clone());
        }
        for v in variants {
            report.variants += 1;
            if let Err(e) = check_invalid_model(device, &v.model) {
                report
                    .failures
                    .push(format!("{}: {}: {e}", base.id(), v.name));
            }
        }
    }
    report
}

/// Applies one request mutation class to every base model that takes requests: prepares it,
/// checks that its unmutated request executes, then checks every variant.
pub fn run_request_class(
    device: &dyn Device,
    mutator: &RequestMutator,
    bases: &[BaseModel],
) -> ClassReport {
    let mut report = ClassReport {
        class: format!("{} {}", mutator.bi, mutator.name),
        ..ClassReport::default()
    };
    for base in bases {
        if base.expect_failure {
            report.skipped_bases.push(format!(
                "{}: expectFailure (VTS's validateFailure runs no request mutators)",
                base.id()
            ));
            continue;
        }
        let full = matches!(
            guarded("supported_operations", || device.supported_operations(&base.model)),
            Ok(Ok(s)) if s.iter().all(|&x| x)
        );
        let prepared = match guarded("prepare_model", || device.prepare_model(base.model.clone())) {
            Ok(Ok(p)) => p,
            Ok(Err(e)) if !full => {
                report.skipped_bases.push(format!(
                    "{}: not fully supported and not prepared ({e})",
                    base.id()
                ));
                continue;
            }
            Ok(Err(e)) => {
                report
                    .failures
                    .push(format!("{}: base model did not prepare: {e}", base.id()));
                continue;
            }
            Err(p) => {
                report.failures.push(format!("{}: {p}", base.id()));
                continue;
            }
        };
        let valid = (base.request)();
        match guarded("execute", || prepared.execute(&valid)) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                report
                    .failures
                    .push(format!("{}: base request failed: {e}", base.id()));
                continue;
            }
            Err(p) => {
                report
                    .failures
                    .push(format!("{}: base request: {p}", base.id()));
                continue;
            }
        }
        let build = || (base.request)();
        let variants = (mutator.mutate)(&base.model, &build);
        if !variants.is_empty() {
            report.vectors.insert(base.vector.clone());
        }
        for v in variants {
            report.variants += 1;
            if let Err(e) = check_invalid_request(prepared.as_ref(), &v.request) {
                report
                    .failures
                    .push(format!("{}: {}: {e}", base.id(), v.name));
            }
        }
    }
    report
}
