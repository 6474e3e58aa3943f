//! The benchmark behind `nnhal bench`: one model prepared once and executed many times,
//! in-process or through the binder service, with its output checked.
//!
//! A workload is the builtin float32 MobileNet v1 ([`crate::mobilenet`], checked against the
//! ONNX Runtime reference output) or the first example of a golden vector (checked with the
//! vector's own tolerance). A vector whose `origin.goldenLogits` names an operand is also run
//! once as the variant whose output is that operand, which must match bit for bit: for the
//! uint8 MobileNet the softmax output is almost flat and checks little, its input does.
//!
//! The report keeps what `ratio.py` and people read: latency statistics, prepare time, the
//! output verdicts and, on request, the per-operation profile. [`Report::json`] is the one-line
//! form the anchors' comparison script parses (`perf/README.md`, "What a
//! benchmark command must print").

use crate::mobilenet;
use nnhal::binder::child::{ChildOptions, ServiceChild};
use nnhal::binder::{self, CacheFiles, ConnectOptions, RemoteDevice, RemotePreparedModel};
use nnhal::{Driver, PreparedModel};
use nnhal_hal::memory::create_memfd;
use nnhal_hal::{
    DataLocation, HalResult, Memory, Model, OperandType, OperationType, Request, RequestArgument,
};
use nnhal_kernels::ukernels::{self, Isa};
use nnhal_vts::vector::compare::compare;
use nnhal_vts::vector::model::{
    build_request, decode, to_model, BuiltRequest, ConstantMode, OutputSlot,
};
use nnhal_vts::vector::{Tolerance, Vector};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The name `--builtin` accepts for the float32 MobileNet v1.
pub const BUILTIN_MOBILENET_F32: &str = "mobilenet-v1-f32";

/// Why a benchmark did not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The command line asked for something impossible (exit status 2).
    #[error("{0}")]
    Usage(String),
    /// Preparing or executing failed (exit status 1).
    #[error("{0}")]
    Failed(String),
}

fn failed(what: &str) -> impl Fn(nnhal_hal::HalError) -> BenchError + '_ {
    move |e| BenchError::Failed(format!("{what}: {e}"))
}

/// How executions reach the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The driver library in this process.
    #[default]
    Inproc,
    /// The HAL service over binder RPC: a running one (`socket`) or a child started for the run.
    Rpc,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Inproc => "inproc",
            Transport::Rpc => "rpc",
        }
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A builtin model by name ([`BUILTIN_MOBILENET_F32`]).
    Builtin(String),
    /// A golden vector file.
    Vector(PathBuf),
    /// A model file (ONNX), run on a seeded random input.
    Model(PathBuf),
}

/// Everything `nnhal bench` can be asked.
#[derive(Clone, Debug)]
pub struct Options {
    pub source: Source,
    /// Kernel worker threads (0 = one per core).
    pub threads: usize,
    /// Timed executions.
    pub iterations: usize,
    /// Untimed executions before them.
    pub warmup: usize,
    pub transport: Transport,
    /// rpc: a running service's socket; `None` starts a child service.
    pub socket: Option<PathBuf>,
    /// Micro-kernel level; `None`: the process default ([`ukernels::best`]).
    pub isa: Option<String>,
    /// Measure every operation (in-process only).
    pub profile: bool,
    /// Prepare through a compilation cache in this directory: restored from it when it holds
    /// one for this model, prepared and written to it otherwise.
    pub cache: Option<PathBuf>,
    /// In-process A/B: a second plan of the same model on this micro-kernel level, on the
    /// same worker threads, timed alternately with the first ([`AbReport`]).
    pub ab_isa: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            source: Source::Builtin(BUILTIN_MOBILENET_F32.into()),
            threads: 1,
            iterations: 100,
            warmup: 10,
            transport: Transport::Inproc,
            socket: None,
            isa: None,
            profile: false,
            cache: None,
            ab_isa: None,
        }
    }
}

/// Latency statistics of the timed executions, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
}

impl Stats {
    /// Statistics of `samples` (any order); all zero when empty. Percentiles interpolate
    /// linearly between the two nearest ranks, so the median of an even count is the mean of
    /// the middle two.
    pub fn of(samples: &[f64]) -> Stats {
        if samples.is_empty() {
            return Stats::default();
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let pos = q * (s.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        };
        Stats {
            median: at(0.5),
            p10: at(0.1),
            p90: at(0.9),
            min: s[0],
            max: s[s.len() - 1],
            mean: s.iter().sum::<f64>() / s.len() as f64,
        }
    }
}

/// The arithmetic of one operation, from the model's declared shapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCost {
    /// Multiply-adds (0 for operations without a dot product).
    pub macs: u64,
    /// Whether the operation works on TENSOR_QUANT8_ASYMM data (rates in GOP/s, not GFLOP/s).
    pub quantized: bool,
}

fn elements(dims: &[u32]) -> u64 {
    dims.iter().map(|&d| u64::from(d)).product()
}

/// The multiply-adds of every operation of `model`: CONV_2D: output elements × kh·kw·in_c;
/// DEPTHWISE_CONV_2D: output elements × kh·kw; FULLY_CONNECTED: output elements (rows × units)
/// × input_size. Other operations count 0.
pub fn op_costs(model: &Model) -> Vec<OpCost> {
    let dims = |i: u32| -> &[u32] {
        model
            .operands
            .get(i as usize)
            .map_or(&[], |o| o.dimensions.as_slice())
    };
    model
        .operations
        .iter()
        .map(|op| {
            let out = op.outputs.first().map_or(0, |&o| elements(dims(o)));
            let filter = op.inputs.get(1).map_or(&[][..], |&f| dims(f));
            let per_output = match OperationType::from_raw(op.operation_type) {
                Some(OperationType::Conv2d) if filter.len() == 4 => elements(&filter[1..]),
                Some(OperationType::DepthwiseConv2d) if filter.len() == 4 => {
                    elements(&filter[1..3])
                }
                Some(OperationType::FullyConnected) if filter.len() == 2 => u64::from(filter[1]),
                _ => 0,
            };
            let quantized = op.outputs.first().is_some_and(|&o| {
                model.operands.get(o as usize).map(|x| x.operand_type)
                    == Some(OperandType::TensorQuant8Asymm.raw())
            });
            OpCost {
                macs: out * per_output,
                quantized,
            }
        })
        .collect()
}

/// One row of the per-operation profile.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    pub index: usize,
    pub operation: String,
    pub output_dims: Vec<u32>,
    /// Median wall time over the profiled executions, in microseconds.
    pub median_us: f64,
    /// Share of the sum of all medians.
    pub share: f64,
    pub cost: OpCost,
}

impl ProfileRow {
    /// GFLOP/s (float) or GOP/s (quantized), two operations per multiply-add; `None` when the
    /// operation has no dot product.
    pub fn rate(&self) -> Option<f64> {
        (self.cost.macs > 0 && self.median_us > 0.0)
            .then(|| 2.0 * self.cost.macs as f64 / (self.median_us * 1e3))
    }
}

/// The result of checking one output.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub ok: bool,
    /// One line for people.
    pub summary: String,
    /// Fields for the JSON line.
    pub fields: BTreeMap<String, Value>,
}

/// The second plan of an A/B run (`--ab-isa`): the same model prepared with another
/// micro-kernel table on the same worker threads, executed alternately with the first (A, B,
/// then B, A, ...), so both see the same phases of a shared host.
#[derive(Clone, Debug)]
pub struct AbReport {
    pub isa: Isa,
    pub prepare_ms: f64,
    /// Latency of B's timed executions (as many as A's).
    pub latency: Stats,
    /// B's median over A's median.
    pub ratio: f64,
    /// The median of the per-pair ratios B/A (each pair ran back to back).
    pub paired_ratio: f64,
    /// B's first and last output.
    pub output: Verdict,
    /// B's golden-logits variant, when the vector has one.
    pub logits: Option<Verdict>,
}

/// Everything one benchmark run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// `mobilenet-v1-f32` or the vector's name.
    pub model: String,
    /// Operations of the benchmarked model.
    pub operations: usize,
    /// Multiply-adds of one execution.
    pub macs: u64,
    pub quantized: bool,
    pub transport: Transport,
    /// Where the service ran (rpc), for people.
    pub endpoint: Option<String>,
    /// Kernel threads; `None` when a running service was used (its own setting).
    pub threads: Option<usize>,
    /// Micro-kernel level; `None` when a running service was used.
    pub isa: Option<Isa>,
    pub iterations: usize,
    pub warmup: usize,
    pub prepare_ms: f64,
    /// With `--cache`: `warm` (restored from the cache) or `cold` (prepared, cache written).
    pub cache: Option<&'static str>,
    /// Latency of the timed executions.
    pub latency: Stats,
    /// The output of the first and of the last execution.
    pub output: Verdict,
    /// The golden-logits variant, when the vector has one.
    pub logits: Option<Verdict>,
    pub profile: Option<Vec<ProfileRow>>,
    /// The second plan of an A/B run.
    pub ab: Option<AbReport>,
}

impl Report {
    /// Whether every checked output was right.
    pub fn passed(&self) -> bool {
        let ab_ok = self
            .ab
            .as_ref()
            .is_none_or(|b| b.output.ok && b.logits.as_ref().is_none_or(|l| l.ok));
        self.output.ok && self.logits.as_ref().is_none_or(|l| l.ok) && ab_ok
    }

    /// The one-line JSON object (`median_ms` and friends).
    pub fn json(&self) -> Value {
        let mut o = json!({
            "model": self.model,
            "median_ms": self.latency.median,
            "p10_ms": self.latency.p10,
            "p90_ms": self.latency.p90,
            "min_ms": self.latency.min,
            "max_ms": self.latency.max,
            "mean_ms": self.latency.mean,
            "prepare_ms": self.prepare_ms,
            "cache": self.cache,
            "threads": self.threads,
            "iterations": self.iterations,
            "runs": self.iterations,
            "warmup": self.warmup,
            "isa": self.isa.map(Isa::name),
            "transport": self.transport.name(),
            "macs": self.macs,
            "output_ok": self.output.ok,
        });
        let map = o.as_object_mut().expect("an object");
        if self.latency.median > 0.0 {
            let rate = 2.0 * self.macs as f64 / (self.latency.median * 1e6);
            let key = if self.quantized { "gops" } else { "gflops" };
            map.insert(key.into(), json!(rate));
        }
        for (k, v) in &self.output.fields {
            map.insert(k.clone(), v.clone());
        }
        if let Some(l) = &self.logits {
            map.insert("logits_exact".into(), json!(l.ok));
            for (k, v) in &l.fields {
                map.insert(format!("logits_{k}"), v.clone());
            }
        }
        if let Some(rows) = &self.profile {
            let rows: Vec<Value> = rows
                .iter()
                .map(|r| {
                    json!({
                        "index": r.index,
                        "type": r.operation,
                        "output": r.output_dims,
                        "median_us": r.median_us,
                        "share": r.share,
                        "rate": r.rate(),
                    })
                })
                .collect();
            map.insert("profile".into(), Value::Array(rows));
        }
        if let Some(b) = &self.ab {
            let mut ab = json!({
                "isa": b.isa.name(),
                "prepare_ms": b.prepare_ms,
                "median_ms": b.latency.median,
                "p10_ms": b.latency.p10,
                "p90_ms": b.latency.p90,
                "min_ms": b.latency.min,
                "ratio": b.ratio,
                "paired_ratio": b.paired_ratio,
                "output_ok": b.output.ok,
            });
            if let Some(l) = &b.logits {
                ab["logits_exact"] = json!(l.ok);
            }
            map.insert("ab".into(), ab);
        }
        o
    }

    /// The report for people, one fact per line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let unit = if self.quantized { "GOP/s" } else { "GFLOP/s" };
        let _ = writeln!(
            out,
            "model      {} ({} operations, {} per execution)",
            self.model,
            self.operations,
            amount(2 * self.macs, if self.quantized { "OP" } else { "FLOP" })
        );
        let shown = |v: Option<String>| v.unwrap_or_else(|| "(the service's own)".into());
        let _ = writeln!(
            out,
            "device     {}{}, isa {}, threads {}",
            self.transport.name(),
            self.endpoint
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            shown(self.isa.map(|i| i.name().to_string())),
            shown(self.threads.map(|t| t.to_string())),
        );
        let _ = match self.cache {
            Some(how) => writeln!(out, "prepare    {:.2} ms ({how} cache)", self.prepare_ms),
            None => writeln!(out, "prepare    {:.2} ms", self.prepare_ms),
        };
        let s = &self.latency;
        let rate = if s.median > 0.0 {
            format!(", {:.1} {unit}", 2.0 * self.macs as f64 / (s.median * 1e6))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "latency    median {:.3} ms, p10 {:.3}, p90 {:.3}, min {:.3} ms ({} timed after {} \
             warm-up{rate})",
            s.median, s.p10, s.p90, s.min, self.iterations, self.warmup
        );
        let verdict =
            |v: &Verdict| format!("{} {}", if v.ok { "correct:" } else { "WRONG:" }, v.summary);
        let _ = writeln!(out, "output     {}", verdict(&self.output));
        if let Some(l) = &self.logits {
            let _ = writeln!(
                out,
                "logits     {} {}",
                if l.ok { "bit-exact:" } else { "NOT EXACT:" },
                l.summary
            );
        }
        if let Some(b) = &self.ab {
            let s = &b.latency;
            let _ = writeln!(
                out,
                "B          isa {}: prepare {:.2} ms, median {:.3} ms, p10 {:.3}, p90 {:.3}, min \
                 {:.3} ms (alternating with A above)",
                b.isa, b.prepare_ms, s.median, s.p10, s.p90, s.min
            );
            let _ = writeln!(
                out,
                "B/A        {:.3} (medians), {:.3} (median of back-to-back pairs)",
                b.ratio, b.paired_ratio
            );
            let _ = writeln!(out, "B output   {}", verdict(&b.output));
            if let Some(l) = &b.logits {
                let _ = writeln!(
                    out,
                    "B logits   {} {}",
                    if l.ok { "bit-exact:" } else { "NOT EXACT:" },
                    l.summary
                );
            }
        }
        if let Some(rows) = &self.profile {
            out.push_str(&profile_table(rows, unit));
        }
        out
    }
}

/// `count` with an SI prefix: "1.137 GFLOP", "32 FLOP".
fn amount(count: u64, unit: &str) -> String {
    let c = count as f64;
    match count {
        0..1_000 => format!("{count} {unit}"),
        1_000..1_000_000 => format!("{:.3} k{unit}", c / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} M{unit}", c / 1e6),
        _ => format!("{:.3} G{unit}", c / 1e9),
    }
}

fn profile_table(rows: &[ProfileRow], unit: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "profile    median per operation ({unit} at 2 operations per multiply-add)"
    );
    let _ = writeln!(
        out,
        "{:>4}  {:<26} {:<20} {:>11} {:>7} {:>9}",
        "#", "operation", "output", "median µs", "share", unit
    );
    for r in rows {
        let dims = format!(
            "[{}]",
            r.output_dims
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
        let rate = r.rate().map_or_else(|| "–".into(), |g| format!("{g:.1}"));
        let _ = writeln!(
            out,
            "{:>4}  {:<26} {:<20} {:>11.1} {:>6.1}% {:>9}",
            r.index,
            r.operation,
            dims,
            r.median_us,
            100.0 * r.share,
            rate
        );
    }
    let total: f64 = rows.iter().map(|r| r.median_us).sum();
    let macs: u64 = rows.iter().map(|r| r.cost.macs).sum();
    let rate = if total > 0.0 {
        format!("{:.1}", 2.0 * macs as f64 / (total * 1e3))
    } else {
        "–".into()
    };
    let _ = writeln!(
        out,
        "{:>4}  {:<26} {:<20} {:>11.1} {:>6.1}% {:>9}",
        "", "total", "", total, 100.0, rate
    );
    out
}

// ---- workloads ------------------------------------------------------------------------------

/// How an output is judged.
enum Check {
    /// The builtin MobileNet: top-5 classes and every probability against the reference.
    Reference,
    /// A vector example: the harness tolerance against the expected values.
    Golden {
        tolerance: Tolerance,
        expected: Vec<Option<Vec<f64>>>,
    },
    /// A model file: bit for bit what an in-process run of the same request gave.
    Same(Vec<Vec<u8>>),
}

/// A model, the request for its example, and how to judge the output.
struct Workload {
    name: String,
    model: Model,
    request: BuiltRequest,
    check: Check,
}

impl Workload {
    fn judge(&self, outputs: &[Vec<u8>]) -> Verdict {
        match &self.check {
            Check::Reference => judge_reference(&outputs[0]),
            Check::Golden {
                tolerance,
                expected,
            } => judge_golden(&self.request.outputs, outputs, expected, tolerance),
            Check::Same(expected) => {
                let ok = expected.as_slice() == outputs;
                Verdict {
                    ok,
                    summary: if ok {
                        "outputs identical to an in-process run of the same input".into()
                    } else {
                        "outputs differ from an in-process run of the same input".into()
                    },
                    fields: BTreeMap::new(),
                }
            }
        }
    }
}

/// A model file's workload: its seeded random input, its outputs checked against the same
/// model run once in this process before the benchmark.
fn model_workload(path: &Path) -> Result<Workload, BenchError> {
    use crate::modelfile::{self, ModelFileError, ModelRequest};
    let err = |e: ModelFileError| match e {
        ModelFileError::Input(why) => BenchError::Usage(why),
        ModelFileError::Failed(why) => BenchError::Failed(why),
    };
    let imported = modelfile::import(path).map_err(err)?;
    let inputs: Vec<_> = imported
        .inputs
        .iter()
        .enumerate()
        .map(|(k, e)| modelfile::random_input(e, 1 + k as u64))
        .collect();
    let reference = ModelRequest::new(&imported, &inputs).map_err(err)?;
    Driver::new(1)
        .and_then(|d| d.prepare_model(imported.model.clone()))
        .and_then(|p| p.execute(&reference.request))
        .map_err(failed("the in-process reference run"))?;
    let expected = reference.output_bytes().map_err(err)?;
    let request = ModelRequest::new(&imported, &inputs).map_err(err)?;
    let outputs = imported
        .model
        .output_indexes
        .iter()
        .zip(&request.request.outputs)
        .enumerate()
        .map(|(position, (&operand, arg))| {
            let o = &imported.model.operands[operand as usize];
            OutputSlot {
                position,
                operand,
                operand_type: OperandType::from_raw(o.operand_type)
                    .unwrap_or(OperandType::TensorFloat32),
                dimensions: o.dimensions.clone(),
                scale: o.scale,
                zero_point: o.zero_point,
                location: arg.location,
            }
        })
        .collect();
    Ok(Workload {
        name: path.display().to_string(),
        model: imported.model,
        request: BuiltRequest {
            request: request.request,
            outputs,
        },
        check: Check::Same(expected),
    })
}

fn judge_reference(bytes: &[u8]) -> Verdict {
    let got: Vec<f32> = decode(OperandType::TensorFloat32, bytes)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let reference = mobilenet::reference_output();
    let top5 = mobilenet::top_k(&got, 5);
    let mut max_diff = 0f32;
    let mut outside = 0usize;
    for (&g, &r) in got.iter().zip(&reference) {
        // A NaN output is outside and the largest difference (NaN sorts above infinity).
        let d = (g - r).abs();
        if d.is_nan() || d > mobilenet::REFERENCE_TOLERANCE {
            outside += 1;
        }
        if d.total_cmp(&max_diff).is_gt() {
            max_diff = d;
        }
    }
    let top_ok = top5 == mobilenet::REFERENCE_TOP5;
    let ok = got.len() == reference.len() && top_ok && outside == 0;
    let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
    let mut summary = format!(
        "top-5 {} ({}), max |Δp| {:.2e} vs the ONNX Runtime reference (limit {:.0e})",
        list(&top5),
        if top_ok {
            "as the reference".to_string()
        } else {
            format!("reference {}", list(&mobilenet::REFERENCE_TOP5))
        },
        max_diff,
        mobilenet::REFERENCE_TOLERANCE
    );
    if outside > 0 {
        let _ = write!(summary, ", {outside} of {} outside", reference.len());
    }
    let mut fields = BTreeMap::new();
    fields.insert("top5".into(), json!(top5));
    fields.insert("max_abs_diff".into(), json!(max_diff));
    Verdict {
        ok,
        summary,
        fields,
    }
}

fn judge_golden(
    slots: &[OutputSlot],
    outputs: &[Vec<u8>],
    expected: &[Option<Vec<f64>>],
    tolerance: &Tolerance,
) -> Verdict {
    let mut ok = true;
    let mut parts = Vec::new();
    let mut max_diff = 0f64;
    let mut mismatches = 0usize;
    for ((slot, bytes), want) in slots.iter().zip(outputs).zip(expected) {
        let Some(want) = want else {
            parts.push(format!("output {} not compared", slot.position));
            continue;
        };
        let c = compare(slot.operand_type, want, bytes, tolerance);
        ok &= c.passed();
        max_diff = max_diff.max(c.max_abs_diff);
        mismatches += c.mismatches;
        let mut part = format!("output {}: max |diff| {}", slot.position, c.max_abs_diff);
        if c.quant8_total > 0 {
            let _ = write!(part, ", {} of {} exact", c.quant8_exact, c.quant8_total);
        }
        if !c.passed() {
            let _ = write!(part, " — {}", c.describe());
        }
        parts.push(part);
    }
    let mut fields = BTreeMap::new();
    fields.insert("max_abs_diff".into(), json!(max_diff));
    fields.insert("mismatches".into(), json!(mismatches));
    Verdict {
        ok,
        summary: parts.join("; "),
        fields,
    }
}

/// A sealed memfd pool holding `data` (at least 4 bytes: an empty pool is invalid).
fn sealed_pool(name: &str, data: &[u8]) -> Result<Memory, BenchError> {
    let size = data.len().max(4) as u64;
    let fd = create_memfd(name, data, size, true)
        .map_err(|e| BenchError::Failed(format!("cannot create the {name} pool: {e}")))?;
    Ok(Memory::shared(fd, size))
}

fn builtin(name: &str) -> Result<Workload, BenchError> {
    if name != BUILTIN_MOBILENET_F32 {
        return Err(BenchError::Usage(format!(
            "unknown builtin model {name:?} (known: {BUILTIN_MOBILENET_F32})"
        )));
    }
    let model = mobilenet::model();
    let input: Vec<u8> = mobilenet::input()
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let out_len = mobilenet::CLASSES * 4;
    let argument = |pool_index: u32, length: usize| RequestArgument {
        has_no_value: false,
        location: DataLocation {
            pool_index,
            offset: 0,
            length: length as u32,
        },
        dimensions: Vec::new(),
    };
    let request = Request {
        inputs: vec![argument(0, input.len())],
        outputs: vec![argument(1, out_len)],
        pools: vec![
            sealed_pool("nnhal-bench-input", &input)?,
            sealed_pool("nnhal-bench-output", &vec![0; out_len])?,
        ],
    };
    let output = mobilenet::operands::OUTPUT;
    let slot = OutputSlot {
        position: 0,
        operand: output,
        operand_type: OperandType::TensorFloat32,
        dimensions: model.operands[output as usize].dimensions.clone(),
        scale: 0.0,
        zero_point: 0,
        location: request.outputs[0].location,
    };
    Ok(Workload {
        name: BUILTIN_MOBILENET_F32.into(),
        model,
        request: BuiltRequest {
            request,
            outputs: vec![slot],
        },
        check: Check::Reference,
    })
}

/// The parts of a vector's `origin` object the benchmark reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Origin {
    #[serde(default)]
    golden_logits: Option<GoldenLogits>,
}

#[derive(Debug, Deserialize)]
struct GoldenLogits {
    operand: u32,
    values: Vec<f64>,
}

#[derive(Debug, Default, Deserialize)]
struct WithOrigin {
    #[serde(default)]
    origin: Option<Origin>,
}

fn vector_workload(v: &Vector) -> Result<Workload, BenchError> {
    let invalid = |e: nnhal_vts::vector::VectorError| BenchError::Usage(format!("{}: {e}", v.name));
    let example = v
        .examples
        .first()
        .ok_or_else(|| BenchError::Usage(format!("{}: the vector has no example", v.name)))?;
    let model = to_model(v, ConstantMode::Copy).map_err(invalid)?;
    let request = build_request(v, ConstantMode::Copy, example).map_err(invalid)?;
    let expected = request
        .outputs
        .iter()
        .map(|slot| {
            if v.tolerance.ignored_outputs.contains(&slot.position) {
                return Ok(None);
            }
            example
                .output(slot.position)
                .map(|e| Some(e.to_vec()))
                .ok_or_else(|| {
                    BenchError::Usage(format!(
                        "{}: output {} has no expected values",
                        v.name, slot.position
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(Workload {
        name: v.name.clone(),
        model,
        request,
        check: Check::Golden {
            tolerance: v.tolerance.clone(),
            expected,
        },
    })
}

/// The variant of `v` whose only output is `operand` (with `values` expected exactly): the
/// operations after the one producing it are dropped, and so are the operands only they used;
/// the rest are renumbered in their original order.
pub fn output_variant(v: &Vector, operand: u32, values: Vec<f64>) -> Result<Vector, String> {
    let ops = &v.model.operations;
    let producer = ops
        .iter()
        .position(|op| op.outputs.contains(&operand))
        .ok_or_else(|| format!("no operation computes operand {operand}"))?;
    let kept = &ops[..=producer];
    let mut used = vec![false; v.model.operands.len()];
    for &i in kept
        .iter()
        .flat_map(|op| op.inputs.iter().chain(&op.outputs))
        .chain(&v.model.input_indexes)
    {
        *used
            .get_mut(i as usize)
            .ok_or_else(|| format!("operand index {i} out of range"))? = true;
    }
    let mut renumber = vec![u32::MAX; used.len()];
    let mut operands = Vec::new();
    for (i, operand_info) in v.model.operands.iter().enumerate() {
        if used[i] {
            renumber[i] = operands.len() as u32;
            let mut o = operand_info.clone();
            if o.lifetime == "MODEL_OUTPUT" {
                o.lifetime = "TEMPORARY_VARIABLE".into();
            }
            operands.push(o);
        }
    }
    let new_output = renumber[operand as usize];
    operands[new_output as usize].lifetime = "MODEL_OUTPUT".into();
    let map = |list: &[u32]| list.iter().map(|&i| renumber[i as usize]).collect();
    let mut out = v.clone();
    out.name = format!("{}_output_{operand}", v.name);
    out.model.operands = operands;
    out.model.operations = kept
        .iter()
        .map(|op| nnhal_vts::vector::VectorOperation {
            operation_type: op.operation_type.clone(),
            inputs: map(&op.inputs),
            outputs: map(&op.outputs),
        })
        .collect();
    out.model.input_indexes = map(&v.model.input_indexes);
    out.model.output_indexes = vec![new_output];
    out.examples.truncate(1);
    for example in &mut out.examples {
        example.outputs = BTreeMap::from([("0".to_string(), values.clone())]);
    }
    // Bit for bit: no allowance on any type.
    let mut tolerance = Tolerance::default();
    tolerance.float32.atol = 0.0;
    tolerance.float32.rtol = 0.0;
    tolerance.quant8.max_abs_diff = 0;
    tolerance.int32.max_abs_diff = 0;
    out.tolerance = tolerance;
    // AOSP's input list describes the original model only.
    out.aosp = Default::default();
    Ok(out)
}

/// The vector at `path` and, when it names golden logits, its logits variant.
fn load_vector(path: &Path) -> Result<(Workload, Option<Workload>), BenchError> {
    let not_a_vector =
        |why: String| BenchError::Usage(format!("not a vector file: {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| not_a_vector(e.to_string()))?;
    let v = Vector::from_json(&text, path).map_err(|e| match e {
        // Its own message already says "… is not a vector file: why".
        json @ nnhal_vts::vector::VectorError::Json { .. } => BenchError::Usage(json.to_string()),
        other => not_a_vector(other.to_string()),
    })?;
    let origin: WithOrigin =
        serde_json::from_str(&text).map_err(|e| not_a_vector(format!("origin: {e}")))?;
    let workload = vector_workload(&v)?;
    let logits = match origin.origin.and_then(|o| o.golden_logits) {
        Some(g) => {
            let variant = output_variant(&v, g.operand, g.values).map_err(|why| {
                BenchError::Usage(format!("{}: origin.goldenLogits: {why}", v.name))
            })?;
            Some(vector_workload(&variant)?)
        }
        None => None,
    };
    Ok((workload, logits))
}

// ---- devices --------------------------------------------------------------------------------

/// The device executions go to.
enum Device {
    Inproc(Driver),
    Rpc {
        // Declared first so the session closes before a child service is stopped.
        device: RemoteDevice,
        _child: Option<ServiceChild>,
        endpoint: String,
    },
}

enum Prepared {
    Inproc(Arc<PreparedModel>),
    Rpc(RemotePreparedModel),
}

impl Device {
    fn prepare(&self, model: Model) -> HalResult<Prepared> {
        match self {
            Device::Inproc(driver) => driver.prepare_model(model).map(Prepared::Inproc),
            Device::Rpc { device, .. } => device.prepare_model(model).map(Prepared::Rpc),
        }
    }

    /// `prepareModelFromCache` from `files` when they hold this token's cache (`warm`),
    /// otherwise `prepareModel` writing the cache into them (`cold`). Where the device did
    /// not take `model`, it is handed back for the caller to drop once the clock has stopped:
    /// freeing the benchmark's own copy of the constants is no part of a preparation.
    fn prepare_cached(
        &self,
        model: Model,
        files: &CacheDir,
    ) -> HalResult<(Prepared, &'static str, Option<Model>)> {
        let (m, d) = (files.model.as_fd(), files.data.as_fd());
        let token = &files.token;
        let warm = match self {
            Device::Inproc(driver) => driver
                .prepare_model_from_files(&[m], &[d], token)
                .map(Prepared::Inproc),
            Device::Rpc { device, .. } => device
                .prepare_model_from_cache_with(&CacheFiles {
                    model: vec![m],
                    data: vec![d],
                    token,
                })
                .map(Prepared::Rpc),
        };
        if let Ok(prepared) = warm {
            return Ok((prepared, "warm", Some(model)));
        }
        let (cold, unread) = match self {
            Device::Inproc(driver) => driver
                .prepare_model_to_files(model, &[m], &[d], token)
                .map(|p| (Prepared::Inproc(p), None)),
            Device::Rpc { device, .. } => device
                .prepare_model_cached(
                    &model,
                    &CacheFiles {
                        model: vec![m],
                        data: vec![d],
                        token,
                    },
                )
                .map(|p| (Prepared::Rpc(p), Some(model))),
        }?;
        Ok((cold, "cold", unread))
    }
}

/// The two cache files of one workload in a `--cache` directory, and its token: a hash of
/// the workload's name and model, so another model never restores this one's cache.
struct CacheDir {
    model: std::fs::File,
    data: std::fs::File,
    token: [u8; 32],
}

impl CacheDir {
    fn open(dir: &Path, name: &str, model: &Model) -> Result<CacheDir, BenchError> {
        use std::hash::{Hash, Hasher};
        std::fs::create_dir_all(dir)
            .map_err(|e| BenchError::Usage(format!("--cache {}: {e}", dir.display())))?;
        let stem: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let file = |kind: &str| {
            let path = dir.join(format!("{stem}.{kind}.nnhalcache"));
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| BenchError::Usage(format!("{}: {e}", path.display())))
        };
        // One pass over the model's values (17 MB for the float MobileNet), then each 8-byte
        // piece of the token from that digest and its index.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (name, &model.operand_values, model.operands.len()).hash(&mut h);
        model.operations.len().hash(&mut h);
        let digest = h.finish();
        let mut token = [0u8; 32];
        for (k, chunk) in token.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (k, digest).hash(&mut h);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
        Ok(CacheDir {
            model: file("model")?,
            data: file("data")?,
            token,
        })
    }
}

impl Prepared {
    fn execute(&self, request: &Request) -> HalResult<()> {
        match self {
            Prepared::Inproc(p) => p.execute(request).map(drop),
            Prepared::Rpc(p) => p.execute(request).map(drop),
        }
    }
}

/// The requested micro-kernel level, checked against this build and processor.
fn parse_isa(name: &str) -> Result<Isa, BenchError> {
    let usage = |e: ukernels::IsaError| BenchError::Usage(format!("--isa {name}: {e}"));
    let isa = Isa::parse(name).map_err(usage)?;
    ukernels::table(isa).map_err(usage)?;
    Ok(isa)
}

/// The device, threads and isa the report names.
fn open(
    options: &Options,
    isa: Option<Isa>,
) -> Result<(Device, Option<usize>, Option<Isa>), BenchError> {
    match options.transport {
        Transport::Inproc => {
            let driver = match isa {
                Some(isa) => {
                    let table =
                        ukernels::table(isa).map_err(|e| BenchError::Usage(e.to_string()))?;
                    Driver::with_kernels(options.threads, table)
                }
                None => Driver::new(options.threads),
            }
            .map_err(failed("cannot start the driver"))?;
            let (threads, isa) = (driver.threads(), driver.isa());
            Ok((Device::Inproc(driver), Some(threads), Some(isa)))
        }
        Transport::Rpc => match &options.socket {
            Some(socket) => {
                let device =
                    binder::connect_with(socket, &ConnectOptions::default()).map_err(|e| {
                        BenchError::Failed(format!(
                            "{e} (is nnhal-service running on {}?)",
                            socket.display()
                        ))
                    })?;
                let endpoint = format!("service on {}", socket.display());
                Ok((
                    Device::Rpc {
                        device,
                        _child: None,
                        endpoint,
                    },
                    None,
                    None,
                ))
            }
            None => {
                let mut child = ServiceChild::start(&ChildOptions {
                    threads: options.threads,
                    // The service takes its kernels from NNHAL_ISA.
                    env: isa
                        .map(|i| ("NNHAL_ISA".to_string(), i.name().to_string()))
                        .into_iter()
                        .collect(),
                    tag: "nnhal-bench",
                    ..ChildOptions::default()
                })
                .map_err(|e| BenchError::Failed(e.to_string()))?;
                let device = child
                    .connect(&ConnectOptions::default())
                    .map_err(|e| BenchError::Failed(e.to_string()))?;
                let endpoint = format!("own service, pid {}", child.pid());
                // The child picks its kernels the way this process would (same environment
                // and processor), unless told otherwise.
                let isa = isa.unwrap_or(ukernels::best().isa);
                let threads = match options.threads {
                    0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
                    n => n,
                };
                Ok((
                    Device::Rpc {
                        device,
                        _child: Some(child),
                        endpoint,
                    },
                    Some(threads),
                    Some(isa),
                ))
            }
        },
    }
}

// ---- the run --------------------------------------------------------------------------------

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run_once(prepared: &Prepared, w: &Workload) -> Result<Vec<Vec<u8>>, BenchError> {
    prepared
        .execute(&w.request.request)
        .map_err(failed("execution"))?;
    w.request
        .read_outputs()
        .map_err(failed("reading the outputs"))
}

/// Overwrites every output region with values that fail any check against `outputs` (float32
/// NaN; a quant8 value at least 128 away; other types bit-inverted), so the check after the
/// timed executions sees what they wrote rather than what the first one left.
fn scramble_outputs(request: &BuiltRequest, outputs: &[Vec<u8>]) -> Result<(), BenchError> {
    let memory = &request.request.pools[nnhal_vts::vector::model::OUTPUT_POOL as usize];
    let pool = nnhal_hal::MappedPool::map(memory, "output pool")
        .map_err(failed("mapping the output pool"))?;
    for (slot, bytes) in request.outputs.iter().zip(outputs) {
        let scrambled: Vec<u8> = match slot.operand_type {
            OperandType::TensorFloat32 | OperandType::Float32 => vec![0xFF; bytes.len()],
            OperandType::TensorQuant8Asymm => bytes
                .iter()
                .map(|&b| if b < 128 { 255 } else { 0 })
                .collect(),
            _ => bytes.iter().map(|&b| !b).collect(),
        };
        pool.write(u64::from(slot.location.offset), &scrambled)
            .map_err(failed("clearing the outputs"))?;
    }
    Ok(())
}

/// Runs the benchmark `options` describe.
pub fn run(options: &Options) -> Result<Report, BenchError> {
    if options.iterations == 0 {
        return Err(BenchError::Usage("--iterations must be at least 1".into()));
    }
    if options.profile && options.transport == Transport::Rpc {
        return Err(BenchError::Usage(
            "--profile needs --transport inproc: per-operation times are not available over rpc"
                .into(),
        ));
    }
    if options.socket.is_some() && options.transport != Transport::Rpc {
        return Err(BenchError::Usage("--socket needs --transport rpc".into()));
    }
    // Checked before a large vector is read.
    let isa = options.isa.as_deref().map(parse_isa).transpose()?;
    let ab_isa = options
        .ab_isa
        .as_deref()
        .map(|name| {
            let isa =
                Isa::parse(name).map_err(|e| BenchError::Usage(format!("--ab-isa {name}: {e}")))?;
            ukernels::table(isa).map_err(|e| BenchError::Usage(format!("--ab-isa {name}: {e}")))
        })
        .transpose()?;
    if ab_isa.is_some() && options.transport != Transport::Inproc {
        return Err(BenchError::Usage(
            "--ab-isa needs --transport inproc: both plans run in this process".into(),
        ));
    }
    if isa.is_some() && options.socket.is_some() {
        return Err(BenchError::Usage(
            "--isa cannot change a running service (--socket); start it with \
             NNHAL_ISA=<level> instead"
                .into(),
        ));
    }
    let (workload, logits) = match &options.source {
        Source::Builtin(name) => (builtin(name)?, None),
        Source::Vector(path) => load_vector(path)?,
        Source::Model(path) => (model_workload(path)?, None),
    };
    let (device, threads, isa) = open(options, isa)?;
    let costs = op_costs(&workload.model);
    let operations = workload.model.operations.len();
    let profile_model = options.profile.then(|| workload.model.clone());

    let cache_dir = options
        .cache
        .as_deref()
        .map(|dir| CacheDir::open(dir, &workload.name, &workload.model))
        .transpose()?;
    // The model handed to the device is the benchmark's own copy, made before the clock
    // starts: a restore from the cache never looks at it.
    let model = workload.model.clone();
    let started = Instant::now();
    let (prepared, cache, unread) = match &cache_dir {
        Some(files) => device
            .prepare_cached(model, files)
            .map(|(p, how, unread)| (p, Some(how), unread))
            .map_err(failed("prepareModel"))?,
        None => (
            device.prepare(model).map_err(failed("prepareModel"))?,
            None,
            None,
        ),
    };
    let prepare_ms = ms(started.elapsed());
    drop(unread);
    // The B plan of an A/B run: the same model on a sibling driver (same worker pool).
    let second = match (&device, ab_isa) {
        (Device::Inproc(driver), Some(table)) => {
            let b = Device::Inproc(driver.sibling(table));
            let started = Instant::now();
            let prepared = b
                .prepare(workload.model.clone())
                .map_err(failed("prepareModel (B plan)"))?;
            Some((b, prepared, ms(started.elapsed()), table.isa))
        }
        _ => None,
    };

    // The first output of each plan is checked before any timing, the last one after it.
    let first_bytes = run_once(&prepared, &workload)?;
    let first = workload.judge(&first_bytes);
    scramble_outputs(&workload.request, &first_bytes)?;
    let first_b = match &second {
        Some((_, b, ..)) => {
            let bytes = run_once(b, &workload)?;
            let verdict = workload.judge(&bytes);
            scramble_outputs(&workload.request, &bytes)?;
            Some(verdict)
        }
        None => None,
    };
    let plans: Vec<&Prepared> = std::iter::once(&prepared)
        .chain(second.as_ref().map(|(_, b, ..)| b))
        .collect();
    for _ in 0..options.warmup {
        for p in &plans {
            p.execute(&workload.request.request)
                .map_err(failed("execution"))?;
        }
    }
    // One sample list per plan; with two plans each iteration runs both back to back, A first
    // on even iterations and B first on odd ones, so neither always follows the other.
    let mut samples = vec![Vec::with_capacity(options.iterations); plans.len()];
    let mut last_plan = 0;
    for i in 0..options.iterations {
        for j in 0..plans.len() {
            let which = if i % 2 == 0 { j } else { plans.len() - 1 - j };
            let t = Instant::now();
            plans[which]
                .execute(&workload.request.request)
                .map_err(failed("execution"))?;
            samples[which].push(ms(t.elapsed()));
            last_plan = which;
        }
    }
    let last = workload.judge(
        &workload
            .request
            .read_outputs()
            .map_err(failed("reading the outputs"))?,
    );
    let combine = |first: Verdict, last: Option<Verdict>| match last {
        Some(last) if first.ok && !last.ok => Verdict {
            summary: format!("first execution right, last one wrong: {}", last.summary),
            ..last
        },
        _ => first,
    };
    let (last_a, last_b) = if last_plan == 0 {
        (Some(last), None)
    } else {
        (None, Some(last))
    };
    let output = combine(first, last_a);

    let profile = match (&prepared, profile_model) {
        (Prepared::Inproc(p), Some(model)) => Some(profile(
            p,
            &model,
            &workload.request.request,
            &costs,
            options.iterations,
        )?),
        _ => None,
    };

    let judge_logits = |device: &Device| -> Result<Option<Verdict>, BenchError> {
        match &logits {
            Some(variant) => {
                let prepared = device
                    .prepare(variant.model.clone())
                    .map_err(failed("prepareModel (logits variant)"))?;
                Ok(Some(variant.judge(&run_once(&prepared, variant)?)))
            }
            None => Ok(None),
        }
    };
    let ab = match (second, first_b) {
        (Some((device_b, _, prepare_ms, isa)), Some(first_b)) => {
            let latency = Stats::of(&samples[1]);
            let a = Stats::of(&samples[0]).median;
            let pairs: Vec<f64> = samples[0]
                .iter()
                .zip(&samples[1])
                .map(|(a, b)| b / a)
                .collect();
            Some(AbReport {
                isa,
                prepare_ms,
                ratio: if a > 0.0 { latency.median / a } else { 0.0 },
                paired_ratio: Stats::of(&pairs).median,
                latency,
                output: combine(first_b, last_b),
                logits: judge_logits(&device_b)?,
            })
        }
        _ => None,
    };
    let logits = judge_logits(&device)?;

    let endpoint = match &device {
        Device::Rpc { endpoint, .. } => Some(endpoint.clone()),
        Device::Inproc(_) => None,
    };
    Ok(Report {
        model: workload.name,
        operations,
        macs: costs.iter().map(|c| c.macs).sum(),
        quantized: costs.iter().any(|c| c.quantized),
        transport: options.transport,
        endpoint,
        threads,
        isa,
        iterations: options.iterations,
        warmup: options.warmup,
        prepare_ms,
        cache,
        latency: Stats::of(&samples[0]),
        output,
        logits,
        profile,
        ab,
    })
}

/// Per-operation medians over `runs` profiled executions.
fn profile(
    prepared: &PreparedModel,
    model: &Model,
    request: &Request,
    costs: &[OpCost],
    runs: usize,
) -> Result<Vec<ProfileRow>, BenchError> {
    let n = model.operations.len();
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(runs); n];
    for _ in 0..runs {
        let (_, per_op) = prepared
            .execute_profiled(request)
            .map_err(failed("profiled execution"))?;
        if per_op.len() != n {
            return Err(BenchError::Failed(format!(
                "the profile has {} entries for {n} operations",
                per_op.len()
            )));
        }
        for (k, d) in per_op.iter().enumerate() {
            times[k].push(d.as_secs_f64() * 1e6);
        }
    }
    let medians: Vec<f64> = times.iter().map(|t| Stats::of(t).median).collect();
    let total: f64 = medians.iter().sum();
    Ok(model
        .operations
        .iter()
        .enumerate()
        .map(|(k, op)| ProfileRow {
            index: k,
            operation: OperationType::from_raw(op.operation_type).map_or_else(
                || format!("type {}", op.operation_type),
                |t| t.name().into(),
            ),
            output_dims: op
                .outputs
                .first()
                .map(|&o| model.operands[o as usize].dimensions.clone())
                .unwrap_or_default(),
            median_us: medians[k],
            share: if total > 0.0 { medians[k] / total } else { 0.0 },
            cost: costs[k],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_interpolate_between_ranks() {
        let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.median, s.min, s.max, s.mean), (2.5, 1.0, 4.0, 2.5));
        let s = Stats::of(&(0..=10).map(f64::from).collect::<Vec<_>>());
        assert_eq!((s.p10, s.median, s.p90), (1.0, 5.0, 9.0));
        assert_eq!(Stats::of(&[]), Stats::default());
    }

    #[test]
    fn costs_of_the_builtin_mobilenet() {
        let model = mobilenet::model();
        let costs = op_costs(&model);
        assert_eq!(costs.iter().map(|c| c.macs).sum::<u64>(), mobilenet::MACS);
        assert_eq!(costs[0].macs, 10_838_016);
        assert_eq!(costs[1].macs, 3_612_672);
        assert_eq!(costs[27].macs, 0); // average pool
        assert!(costs.iter().all(|c| !c.quantized));
    }

    /// `t = a + b` (3), `u = relu(t)` (4), `y = u * c` (6): a chain with a constant (5) that
    /// only the last operation reads.
    const CHAIN: &str = r#"{"name": "chain", "model": {
        "operands": [
          {"type": "TENSOR_FLOAT32", "dimensions": [2], "lifetime": "MODEL_INPUT"},
          {"type": "TENSOR_FLOAT32", "dimensions": [2], "lifetime": "MODEL_INPUT"},
          {"type": "INT32", "dimensions": [], "lifetime": "CONSTANT_COPY", "value": [0]},
          {"type": "TENSOR_FLOAT32", "dimensions": [2], "lifetime": "TEMPORARY_VARIABLE"},
          {"type": "TENSOR_FLOAT32", "dimensions": [2], "lifetime": "TEMPORARY_VARIABLE"},
          {"type": "TENSOR_FLOAT32", "dimensions": [2], "lifetime": "CONSTANT_COPY",
           "value": [2, 3]},
          {"type": "TENSOR_FLOAT32", "dimensions": [2], "lifetime": "MODEL_OUTPUT"}],
        "operations": [
          {"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]},
          {"type": "RELU", "inputs": [3], "outputs": [4]},
          {"type": "MUL", "inputs": [4, 5, 2], "outputs": [6]}],
        "inputIndexes": [0, 1], "outputIndexes": [6]},
      "examples": [{"inputs": {"0": [1, -5], "1": [2, 2]}, "outputs": {"0": [6, 0]}}]}"#;

    #[test]
    fn output_variant_drops_what_only_later_operations_use() {
        let v = Vector::from_json(CHAIN, Path::new("chain.json")).unwrap();
        let t = output_variant(&v, 3, vec![3.0, -3.0]).unwrap();
        assert_eq!(t.model.operations.len(), 1);
        assert_eq!(t.model.operands.len(), 4);
        assert_eq!(t.model.operands[3].lifetime, "MODEL_OUTPUT");
        assert_eq!(t.model.output_indexes, [3]);
        assert_eq!(t.examples[0].output(0), Some(&[3.0, -3.0][..]));
        assert_eq!(t.tolerance.float32.atol, 0.0);

        // Cutting after RELU keeps operands 0..=4 and renumbers nothing.
        let u = output_variant(&v, 4, vec![3.0, 0.0]).unwrap();
        assert_eq!(u.model.operands.len(), 5);
        assert_eq!(u.model.operations[1].inputs, [3]);
        assert_eq!(u.model.operands[3].lifetime, "TEMPORARY_VARIABLE");

        // The variant is a runnable model computing the cut operand.
        let w = vector_workload(&t).unwrap();
        let driver = Driver::new(1).unwrap();
        let prepared = Prepared::Inproc(driver.prepare_model(w.model.clone()).unwrap());
        assert!(w.judge(&run_once(&prepared, &w).unwrap()).ok);

        assert!(
            output_variant(&v, 0, vec![]).is_err(),
            "an input has no producer"
        );
        assert!(output_variant(&v, 99, vec![]).is_err());
    }

    #[test]
    fn scrambled_outputs_fail_every_check() {
        let driver = Driver::new(1).unwrap();
        let dir = nnhal_vts::vector::bundled_dir();
        for name in ["conv_float", "conv_quant8"] {
            let v = Vector::from_file(&dir.join(format!("{name}.json"))).unwrap();
            let w = vector_workload(&v).unwrap();
            let prepared = Prepared::Inproc(driver.prepare_model(w.model.clone()).unwrap());
            let first = run_once(&prepared, &w).unwrap();
            assert!(w.judge(&first).ok, "{name}");
            scramble_outputs(&w.request, &first).unwrap();
            let scrambled = w.request.read_outputs().unwrap();
            assert!(!w.judge(&scrambled).ok, "{name}");
            // The next execution writes the right values again.
            assert!(w.judge(&run_once(&prepared, &w).unwrap()).ok, "{name}");
        }
    }
}
