//! `nnhal`: command-line client of the Neural Networks HAL service.
//!
//! ```text
//! nnhal info      [--socket PATH] [--instance NAME] [--json] what the device reports through binder
//! nnhal run       [--socket PATH] [--instance NAME] [--constants copy|reference] [--json]
//!                 VECTOR.json
//!                                                        a golden vector's examples through the
//!                                                        service, outputs and PASS/FAIL
//! nnhal run       MODEL.onnx|MODEL.mlmodel|MODEL.tflite|MODEL.xmodel [--input X.npy]... [--output-dir DIR] [--transport inproc|rpc] [--start-at OP,…]
//!                 [--socket PATH]                        an ONNX, CoreML or TFLite model, in-process or
//!                                                        through the service; outputs as .npy
//! nnhal import    MODEL.onnx|MODEL.mlmodel|MODEL.tflite [--out MODEL.json]
//!                                                        the lowered model and what each node
//!                                                        became
//! nnhal bench-rpc [--socket PATH] [--instance NAME] [-n N]  round-trip latency: ADD vs bare call
//! nnhal bench     (--builtin mobilenet-v1-f32 | VECTOR.json | MODEL.onnx | MODEL.mlmodel | MODEL.tflite)
//!                 [--threads N] [--iterations K]
//!                 [--warmup W] [--transport inproc|rpc] [--socket PATH] [--isa LEVEL]
//!                 [--ab-isa LEVEL] [--profile] [--cache DIR] [--json]
//!                                                        latency of one model, output checked
//! ```
//!
//! Exit status: 0 on success, 1 when something failed or an output was wrong, 2 for a usage or
//! input error (bad arguments, a file that is not a vector, an instruction set this processor
//! lacks, no service on the socket). Every failure reaches the user through [`CliError`].

use clap::{Parser, Subcommand};
use nnhal::binder::{self, ConnectOptions, RemoteDevice};
use nnhal::hal::{OperandType, OperationType, PerformanceInfo};
use nnhal_vts::probe::{self, AddRun};
use nnhal_vts::vector::compare::compare;
use nnhal_vts::vector::model::{build_request, decode, to_model, ConstantMode};
use nnhal_vts::vector::Vector;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "nnhal",
    version,
    about = "Client of the nnhal Neural Networks HAL service",
    after_help = nnhal::cli::client_after_help()
)]
struct Cli {
    /// Log level of this program: off, error, warn, info, debug or trace (also TARGET=LEVEL
    /// directives, comma-separated) [default: $RUST_LOG, else warn]
    #[arg(long, global = true, value_name = "LEVEL", value_parser = nnhal::cli::parse_log_level)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct Target {
    #[arg(long, value_name = "PATH", help = nnhal::cli::socket_help("Socket of the running nnhal-service"))]
    socket: Option<PathBuf>,
    /// Service instance (`android.hardware.neuralnetworks.IDevice/NAME`)
    #[arg(long, value_name = "NAME", default_value = "default")]
    instance: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print capabilities, type, version and supported operations, as reported through binder
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Info {
        #[command(flatten)]
        target: Target,
        /// Print one JSON object instead of the table
        #[arg(long)]
        json: bool,
    },
    /// Run a golden vector's examples (.json) through the service: print each output and
    /// PASS/FAIL against the expected values (the AOSP harness tolerance); or run a model file,
    /// ONNX (.onnx), CoreML (.mlmodel) or TensorFlow Lite (.tflite), in-process or through the service
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Run {
        #[command(flatten)]
        target: Target,
        /// Where the model's constants travel: inline (CONSTANT_COPY) or in a shared-memory
        /// pool (CONSTANT_REFERENCE)
        #[arg(long, value_enum, default_value = "copy")]
        constants: Constants,
        /// Output values printed per output (all mismatches are counted regardless)
        #[arg(long, value_name = "N", default_value_t = 16)]
        show: usize,
        /// Print one JSON object (per example: verdict and outputs) instead of the text
        #[arg(long)]
        json: bool,
        /// Model file: one NumPy .npy input per graph input, in the graph's order, layout
        /// and dtype [default: a seeded random input]
        #[arg(long = "input", value_name = "FILE.npy")]
        inputs: Vec<PathBuf>,
        /// Model file: write DIR/output_0.npy, output_1.npy, … (the graph's outputs, in its
        /// layout) instead of printing a summary of each
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// Model file: run in this process or through the service on --socket [default:
        /// inproc]; a vector always runs through the service
        #[arg(long, value_enum)]
        transport: Option<Transport>,
        /// XModel file: start the graph at these operators (their outputs become the model's
        /// float32 inputs, in their declared shape)
        #[arg(long = "start-at", value_name = "OP[,OP…]", value_delimiter = ',')]
        start_at: Vec<String>,
        /// Golden vector file (.json; format in docs/vector-format.md), e.g.
        /// vts_tests/vectors/conv_quant8.json, or a model file: ONNX (.onnx) or CoreML
        /// (.mlmodel)
        #[arg(value_name = "VECTOR.json|MODEL.onnx|MODEL.mlmodel|MODEL.tflite")]
        vector: PathBuf,
    },
    /// Lower a model file, ONNX (.onnx), CoreML (.mlmodel) or TensorFlow Lite (.tflite), to an NNAPI 1.0 model: print
    /// what each node or layer became and, with --out, write the model in the golden-vector
    /// JSON schema (.json)
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Import {
        /// Where to write the lowered model (docs/vector-format.md; no examples)
        #[arg(long, value_name = "MODEL.json")]
        out: Option<PathBuf>,
        /// XModel file: start the graph at these operators (their outputs become the model's
        /// float32 inputs)
        #[arg(long = "start-at", value_name = "OP[,OP…]", value_delimiter = ',')]
        start_at: Vec<String>,
        /// The model file: ONNX (.onnx), CoreML (.mlmodel), TensorFlow Lite (.tflite) or XModel
        /// (.xmodel)
        #[arg(value_name = "MODEL.onnx|MODEL.mlmodel|MODEL.tflite|MODEL.xmodel")]
        model: PathBuf,
    },
    /// Median round trip of a one-operation ADD ([1,2,2,1] float32) executed through the
    /// service, beside the median of a bare binder call (getType) in the same run
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    BenchRpc {
        #[command(flatten)]
        target: Target,
        /// Measured executions (and bare calls)
        #[arg(short = 'n', long, value_name = "N", default_value_t = 1000)]
        iterations: usize,
        /// Unmeasured warm-up calls of each kind
        #[arg(long, value_name = "N", default_value_t = 100)]
        warmup: usize,
    },
    /// Latency of one model prepared once and executed repeatedly: the builtin MobileNet, a
    /// golden vector (.json) or a model file, ONNX (.onnx), CoreML (.mlmodel) or TensorFlow Lite (.tflite). The
    /// output is checked: the builtin MobileNet against the reference output, a vector against
    /// its golden values and, when it has them, its golden logits bit for bit
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Bench(BenchArgs),
    /// Serve the device on a socket (what `nnhal bench --transport rpc` starts when no
    /// nnhal-service binary is beside this one)
    #[command(hide = true)]
    Serve {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[arg(long, value_name = "N", default_value_t = 0)]
        threads: usize,
        #[arg(long, value_name = "NAME", default_value = "default")]
        instance: String,
    },
}

#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct Workload {
    /// A model built into this program instead of a vector file
    #[arg(long, value_name = "NAME", value_parser = [nnhal_cli::bench::BUILTIN_MOBILENET_F32])]
    builtin: Option<String>,
    /// Golden vector file (.json; format in docs/vector-format.md), whose first example is
    /// run, or a model file, ONNX (.onnx), CoreML (.mlmodel) or TensorFlow Lite (.tflite), run on a seeded random input
    #[arg(value_name = "VECTOR.json|MODEL.onnx|MODEL.mlmodel|MODEL.tflite")]
    vector: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct BenchArgs {
    #[command(flatten)]
    workload: Workload,
    /// Kernel worker threads (0 = one per core)
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// Timed executions
    #[arg(long, value_name = "K", default_value_t = 100)]
    iterations: usize,
    /// Untimed executions before the timed ones
    #[arg(long, value_name = "W", default_value_t = 10)]
    warmup: usize,
    /// Where executions go
    #[arg(long, value_enum, default_value = "inproc")]
    transport: Transport,
    /// rpc: a running service's socket [default: start an own service]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Micro-kernel instruction set [default: the best this processor supports, or
    /// $NNHAL_ISA]
    #[arg(long, value_name = "LEVEL",
          value_parser = ["generic", "avx2", "avx512", "avx512vnni", "avx512amx", "neon", "dotprod"])]
    isa: Option<String>,
    /// In-process A/B: also prepare the model with the micro-kernels of LEVEL (on the same
    /// worker threads) and time both plans alternately; prints both medians, both outputs'
    /// checks and the ratio B/A ("ab" in the JSON line)
    #[arg(long, value_name = "LEVEL",
          value_parser = ["generic", "avx2", "avx512", "avx512vnni", "avx512amx", "neon", "dotprod"])]
    ab_isa: Option<String>,
    /// Also time every operation, over K more executions (median per operation; in-process
    /// only)
    #[arg(long)]
    profile: bool,
    /// Prepare through a compilation cache kept in DIR: the first run prepares and writes
    /// it (cold), later runs restore from it (warm); prepare_ms shows the difference
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// End with one line of JSON (median_ms, p10_ms, p90_ms, min_ms, prepare_ms, ...)
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Transport {
    /// The driver library in this process
    Inproc,
    /// The HAL service over binder RPC (a child service unless --socket is given)
    Rpc,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Constants {
    /// Inline in the model (CONSTANT_COPY)
    Copy,
    /// In a shared-memory pool (CONSTANT_REFERENCE)
    Reference,
}

/// Every way a command can fail, as the user reads it; [`CliError::exit_status`] is the one
/// place where a failure becomes an exit status.
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// Nothing serves the instance on the socket.
    #[error("{reason}\nstart the service with: nnhal-service{}", start_hint(.socket, .instance))]
    NoService {
        socket: PathBuf,
        instance: String,
        reason: String,
    },
    /// The vector file cannot be read or is not a vector.
    #[error(transparent)]
    Vector(#[from] nnhal_vts::vector::VectorError),
    /// Bad arguments or input.
    #[error("{0}")]
    Usage(String),
    /// A run that went wrong: a call failed or an output was wrong.
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    fn exit_status(&self) -> u8 {
        match self {
            CliError::NoService { .. } | CliError::Vector(_) | CliError::Usage(_) => {
                nnhal::cli::EXIT_USAGE
            }
            CliError::Failed(_) => nnhal::cli::EXIT_FAILED,
        }
    }
}

impl From<String> for CliError {
    fn from(why: String) -> CliError {
        CliError::Failed(why)
    }
}

/// The arguments that start a service where the client looked for one.
fn start_hint(socket: &Path, instance: &str) -> String {
    let mut hint = String::new();
    if socket != binder::default_socket_path(instance) {
        hint += &format!(" --socket {}", socket.display());
    }
    if instance != "default" {
        hint += &format!(" --instance {instance}");
    }
    hint
}

impl Target {
    /// The socket this target names: `--socket`, else the instance's default.
    fn socket(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(|| binder::default_socket_path(&self.instance))
    }
}

fn connect(target: &Target) -> Result<RemoteDevice, CliError> {
    let socket = target.socket();
    let options = ConnectOptions {
        instance: target.instance.clone(),
        ..ConnectOptions::default()
    };
    binder::connect_with(&socket, &options).map_err(|e| CliError::NoService {
        socket,
        instance: target.instance.clone(),
        reason: e.message().to_string(),
    })
}

fn perf(p: PerformanceInfo) -> String {
    if p == binder::NO_PERFORMANCE {
        "not supported (FLT_MAX)".into()
    } else {
        format!(
            "execTime {:.3}, powerUsage {:.3}",
            p.exec_time, p.power_usage
        )
    }
}

/// `writeln!` into the command's output text (a `String` cannot fail to take it).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

fn perf_json(p: PerformanceInfo) -> serde_json::Value {
    if p == binder::NO_PERFORMANCE {
        serde_json::Value::Null
    } else {
        serde_json::json!({"exec_time": p.exec_time, "power_usage": p.power_usage})
    }
}

fn info(target: &Target, json: bool, out: &mut String) -> Result<(), CliError> {
    let device = connect(target)?;
    let e = |e: nnhal::hal::HalError| CliError::Failed(e.to_string());
    let socket = target.socket();
    let service = binder::service_name(&target.instance);
    let version = device.version_string().map_err(e)?;
    let kind = device.device_type().map_err(e)?.to_string();
    let interface_version = device.interface_version().map_err(e)?;
    let interface_hash = device.interface_hash().map_err(e)?;
    let caps = device.capabilities_full().map_err(e)?;
    let extensions = device.supported_extensions().map_err(e)?;
    let (model_cache, data_cache) = device.number_of_cache_files().map_err(e)?;
    // Each operation is probed with getSupportedOperations on a small model of it (a
    // conformance model for the operations beyond NNAPI 1.0).
    let operations: Vec<(String, Result<bool, String>)> = probe::operation_probes()
        .into_iter()
        .map(|(op, model)| {
            let answer = match device.supported_operations(&model) {
                // A later operation's probe may hold others beside it (an IF's branches
                // are in the model; a few conformance models add a CAST): all must run.
                Ok(v) => Ok(!v.is_empty() && v.iter().all(|&s| s)),
                Err(err) => Err(err.to_string()),
            };
            (op.name().to_string(), answer)
        })
        .collect();
    let probed = operations.len();
    let supported = operations.iter().filter(|(_, a)| *a == Ok(true)).count();
    let operand_name =
        |ty: i32| OperandType::from_raw(ty).map_or_else(|| format!("type {ty}"), |t| t.to_string());

    if json {
        let operand_performance: serde_json::Map<String, serde_json::Value> = caps
            .operand_performance
            .iter()
            .map(|(ty, p)| (operand_name(*ty), perf_json(*p)))
            .collect();
        let ops: serde_json::Map<String, serde_json::Value> = operations
            .iter()
            .map(|(name, answer)| {
                let v = match answer {
                    Ok(yes) => serde_json::json!(yes),
                    Err(why) => serde_json::json!({ "error": why }),
                };
                (name.clone(), v)
            })
            .collect();
        let value = serde_json::json!({
            "socket": socket.display().to_string(),
            "service": service,
            "version": version,
            "type": kind,
            "interface_version": interface_version,
            "interface_hash": interface_hash,
            "capabilities": {
                "relaxed_float32_to_float16_scalar":
                    perf_json(caps.relaxed_float32_to_float16_scalar),
                "relaxed_float32_to_float16_tensor":
                    perf_json(caps.relaxed_float32_to_float16_tensor),
                "operand_performance": operand_performance,
                "if_performance": perf_json(caps.if_performance),
                "while_performance": perf_json(caps.while_performance),
            },
            "extensions": extensions,
            "cache_files": { "model": model_cache, "data": data_cache },
            "operations": ops,
            "operations_supported": supported,
            "operations_probed": probed,
        });
        outln!(out, "{value}");
        return Ok(());
    }

    outln!(out, "socket       {}", socket.display());
    outln!(out, "service      {service}");
    outln!(out, "version      {version}");
    outln!(out, "type         {kind}");
    outln!(
        out,
        "interface    android.hardware.neuralnetworks V{interface_version} (hash {interface_hash})"
    );
    outln!(
        out,
        "capabilities (relative to the CPU path; lower is better)"
    );
    outln!(
        out,
        "  relaxed float32→float16 scalar  {}",
        perf(caps.relaxed_float32_to_float16_scalar)
    );
    outln!(
        out,
        "  relaxed float32→float16 tensor  {}",
        perf(caps.relaxed_float32_to_float16_tensor)
    );
    for (ty, p) in &caps.operand_performance {
        outln!(out, "  {:<31} {}", operand_name(*ty), perf(*p));
    }
    outln!(
        out,
        "  IF                              {}",
        perf(caps.if_performance)
    );
    outln!(
        out,
        "  WHILE                           {}",
        perf(caps.while_performance)
    );
    outln!(
        out,
        "extensions   {}",
        if extensions.is_empty() {
            "none".into()
        } else {
            extensions.join(", ")
        }
    );
    outln!(out, "cache files  model {model_cache}, data {data_cache}");
    outln!(
        out,
        "operations   (getSupportedOperations on a small model of each)"
    );
    for (name, answer) in &operations {
        let answer = match answer {
            Ok(true) => "supported".to_string(),
            Ok(false) => "not supported".to_string(),
            Err(err) => format!("error: {err}"),
        };
        outln!(out, "  {name:<31} {answer}");
    }
    outln!(
        out,
        "  {:<31} not probed (no defined semantics)",
        OperationType::OemOperation.name()
    );
    outln!(
        out,
        "  {supported} of {probed} operations supported (NNAPI 1.0–1.3)"
    );
    Ok(())
}

fn bench(
    target: &Target,
    iterations: usize,
    warmup: usize,
    out: &mut String,
) -> Result<(), CliError> {
    let device = connect(target)?;
    let e = |e: nnhal::hal::HalError| e.to_string();
    let prepared = device.prepare_model(probe::add_model()).map_err(e)?;
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [0.5, -1.0, 10.0, 0.25];
    let run = AddRun::new(&a, &b).map_err(|err| err.to_string())?;

    run.clear_output(f32::NAN).map_err(|err| err.to_string())?;
    prepared.execute(&run.request).map_err(e)?;
    let got = run.output().map_err(|err| err.to_string())?;
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    if got[..] != want[..] {
        return Err(CliError::Failed(format!(
            "ADD returned {got:?}, expected {want:?}"
        )));
    }

    for _ in 0..warmup {
        device.ping().map_err(e)?;
        prepared.execute(&run.request).map_err(e)?;
    }
    // Interleaved, so both kinds see the same machine conditions.
    let mut ping = Vec::with_capacity(iterations);
    let mut exec = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        device.ping().map_err(e)?;
        ping.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        prepared.execute(&run.request).map_err(e)?;
        exec.push(t.elapsed().as_secs_f64() * 1e6);
    }
    // Where the time of an execution goes: the service's own measurement of it.
    let mut driver = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let (_, timing) = prepared.execute_timed(&run.request).map_err(e)?;
        if let Some(d) = timing.in_driver {
            driver.push(d.as_secs_f64() * 1e6);
        }
    }
    // The same execution in this process, without binder: what the driver alone costs.
    let local = nnhal::Driver::new(1)
        .and_then(|d| d.prepare_model(probe::add_model()))
        .map_err(e)?;
    let mut inproc = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        local.execute(&run.request).map_err(e)?;
        inproc.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (ping_med, ping_p99) = probe::median_p99(&mut ping);
    let (inproc_med, inproc_p99) = probe::median_p99(&mut inproc);
    let (driver_med, driver_p99) = probe::median_p99(&mut driver);
    let (exec_med, exec_p99) = probe::median_p99(&mut exec);
    outln!(out, "{iterations} round trips each, after {warmup} warm-up");
    outln!(
        out,
        "bare call (getType)             median {ping_med:8.1} µs   p99 {ping_p99:8.1} µs"
    );
    outln!(
        out,
        "execute ADD [1,2,2,1] float32   median {exec_med:8.1} µs   p99 {exec_p99:8.1} µs"
    );
    outln!(
        out,
        "  of which inside the service   median {driver_med:8.1} µs   p99 {driver_p99:8.1} µs   \
         (measureTiming: request conversion, validation, pools, kernel)"
    );
    outln!(
        out,
        "in-process execute (no binder)  median {inproc_med:8.1} µs   p99 {inproc_p99:8.1} µs"
    );
    outln!(
        out,
        "execute / bare call             {:.2}x",
        exec_med / ping_med
    );
    Ok(())
}

/// The first `show` values of an output, decoded for display.
fn preview(values: &[f64], show: usize) -> String {
    // Integers as integers; float32 values at float32 precision (they were decoded to f64).
    let show_one = |v: &f64| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{}", *v as i64)
        } else {
            format!("{}", *v as f32)
        }
    };
    let mut text: Vec<String> = values.iter().take(show).map(show_one).collect();
    if values.len() > show {
        text.push(format!("… ({} values)", values.len()));
    }
    format!("[{}]", text.join(", "))
}

/// How one example of `nnhal run` ended.
enum Verdict {
    Pass,
    /// The outputs were computed but the vector gives no expected values to compare them with.
    Unchecked(Vec<usize>),
    Fail(String),
}

fn run(
    target: &Target,
    constants: Constants,
    show: usize,
    json: bool,
    path: &Path,
    out: &mut String,
) -> Result<(), CliError> {
    let v = Vector::from_file(path)?;
    let mode = match constants {
        Constants::Copy => ConstantMode::Copy,
        Constants::Reference => ConstantMode::Reference,
    };
    let model = to_model(&v, mode).map_err(|e| {
        CliError::Usage(format!(
            "{} is not a valid vector: {}: {e}",
            path.display(),
            v.name
        ))
    })?;
    let device = connect(target)?;
    fn e(what: &'static str) -> impl Fn(nnhal::hal::HalError) -> CliError {
        move |e| CliError::Failed(format!("{what}: {e}"))
    }
    let supported = device
        .supported_operations(&model)
        .map_err(e("getSupportedOperations"))?;
    let mut text = String::new();
    outln!(
        text,
        "{}: {} operations ({} supported), {} examples, constants {mode}",
        v.name,
        supported.len(),
        supported.iter().filter(|s| **s).count(),
        v.examples.len()
    );
    let prepared = device.prepare_model(model).map_err(e("prepareModel"))?;
    let (mut failed, mut unchecked) = (0, 0);
    let mut examples_json = Vec::new();
    for (k, example) in v.examples.iter().enumerate() {
        let built = build_request(&v, mode, example)
            .map_err(|e| CliError::Usage(format!("{}: example {k}: {e}", path.display())))?;
        let mut outputs_json = Vec::new();
        let verdict = (|| -> Result<Verdict, String> {
            prepared
                .execute(&built.request)
                .map_err(|e| format!("executeSynchronously: {e}"))?;
            let actual = built
                .read_outputs()
                .map_err(|e| format!("reading outputs: {e}"))?;
            let mut problems = Vec::new();
            let mut no_expected = Vec::new();
            for (slot, bytes) in built.outputs.iter().zip(&actual) {
                let ignored = v.tolerance.ignored_outputs.contains(&slot.position);
                let expected = example.output(slot.position);
                let values = decode(slot.operand_type, bytes);
                let note = if ignored {
                    " (not compared)"
                } else if expected.is_none() {
                    " (no expected values)"
                } else {
                    ""
                };
                outln!(
                    text,
                    "  example {k} output {} {} {:?}{note}: {}",
                    slot.position,
                    slot.operand_type,
                    slot.dimensions,
                    preview(&values, show)
                );
                let mut mismatch = None;
                match expected {
                    _ if ignored => {}
                    None => no_expected.push(slot.position),
                    Some(expected) => {
                        let c = compare(slot.operand_type, expected, bytes, &v.tolerance);
                        if !c.passed() {
                            mismatch = Some(c.describe());
                            problems.push(format!("output {}: {}", slot.position, c.describe()));
                        }
                    }
                }
                outputs_json.push(serde_json::json!({
                    "position": slot.position,
                    "type": slot.operand_type.to_string(),
                    "dimensions": slot.dimensions,
                    "compared": !ignored && expected.is_some(),
                    "mismatch": mismatch,
                    "values": values,
                }));
            }
            Ok(if !problems.is_empty() {
                Verdict::Fail(problems.join("; "))
            } else if !no_expected.is_empty() {
                Verdict::Unchecked(no_expected)
            } else {
                Verdict::Pass
            })
        })()
        .unwrap_or_else(Verdict::Fail);
        let (word, why) = match &verdict {
            Verdict::Pass => ("pass", None),
            Verdict::Unchecked(positions) => {
                unchecked += 1;
                let why = format!(
                    "the vector has no expected values for output(s) {positions:?}; printed, \
                     not compared"
                );
                ("unchecked", Some(why))
            }
            Verdict::Fail(why) => {
                failed += 1;
                ("fail", Some(why.clone()))
            }
        };
        match &why {
            None => outln!(text, "PASS example {k}"),
            Some(why) if word == "unchecked" => outln!(text, "UNCHECKED example {k}: {why}"),
            Some(why) => outln!(text, "FAIL example {k}: {why}"),
        }
        examples_json.push(serde_json::json!({
            "example": k,
            "verdict": word,
            "reason": why,
            "outputs": outputs_json,
        }));
    }
    let total = v.examples.len();
    let passed = total - failed - unchecked;
    if unchecked > 0 {
        outln!(
            text,
            "{passed} passed, {failed} failed, {unchecked} unchecked"
        );
    } else {
        outln!(text, "{passed} passed, {failed} failed");
    }
    if json {
        let value = serde_json::json!({
            "vector": v.name,
            "file": path.display().to_string(),
            "socket": target.socket().display().to_string(),
            "constants": mode.to_string(),
            "examples": examples_json,
            "passed": passed,
            "failed": failed,
            "unchecked": unchecked,
        });
        outln!(out, "{value}");
    } else {
        out.push_str(&text);
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "{failed} of {total} examples failed"
        )))
    }
}

fn model_err(e: nnhal_cli::modelfile::ModelFileError) -> CliError {
    match e {
        nnhal_cli::modelfile::ModelFileError::Input(why) => CliError::Usage(why),
        nnhal_cli::modelfile::ModelFileError::Failed(why) => CliError::Failed(why),
    }
}

/// `nnhal run MODEL.onnx`: import, feed the .npy inputs (or a seeded random one), execute in
/// this process or through the service, write or summarize the outputs.
fn run_model(
    target: &Target,
    transport: Option<Transport>,
    path: &Path,
    inputs: &[PathBuf],
    output_dir: Option<&Path>,
    start_at: &[String],
    out: &mut String,
) -> Result<(), CliError> {
    use nnhal_cli::modelfile::{self, npy, ModelRequest};
    let imported = modelfile::import_with(path, start_at).map_err(model_err)?;
    let arrays = if inputs.is_empty() {
        outln!(
            out,
            "no --input: feeding a seeded random input (seed 1) to each of the {} graph input(s)",
            imported.inputs.len()
        );
        imported
            .inputs
            .iter()
            .enumerate()
            .map(|(k, e)| modelfile::random_input(e, 1 + k as u64))
            .collect()
    } else {
        inputs
            .iter()
            .map(|p| npy::read(p).map_err(CliError::Usage))
            .collect::<Result<Vec<_>, _>>()?
    };
    let request = ModelRequest::new(&imported, &arrays).map_err(model_err)?;
    let e = |what: &'static str| {
        move |e: nnhal::hal::HalError| CliError::Failed(format!("{what}: {e}"))
    };
    let how = match transport.unwrap_or(Transport::Inproc) {
        Transport::Inproc => {
            let driver = nnhal::Driver::new(0).map_err(e("cannot start the driver"))?;
            let prepared = driver
                .prepare_model(imported.model.clone())
                .map_err(e("prepareModel"))?;
            prepared.execute(&request.request).map_err(e("execute"))?;
            "in-process".to_string()
        }
        Transport::Rpc => {
            let device = connect(target)?;
            let prepared = device
                .prepare_model(imported.model.clone())
                .map_err(e("prepareModel"))?;
            prepared.execute(&request.request).map_err(e("execute"))?;
            format!("through the service on {}", target.socket().display())
        }
    };
    let outputs = request.outputs(&imported).map_err(model_err)?;
    outln!(
        out,
        "{}: {} NNAPI operations, run {how}",
        path.display(),
        imported.model.operations.len()
    );
    if let (Some(labels), Some(nnhal_cli::modelfile::ArrayData::F32(p))) =
        (&imported.class_labels, outputs.first().map(|a| &a.data))
    {
        let mut order: Vec<usize> = (0..p.len().min(labels.len())).collect();
        order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
        for &i in order.iter().take(5) {
            outln!(out, "class '{}': {}", labels[i], p[i]);
        }
    }
    match output_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", dir.display())))?;
            for (k, (edge, array)) in imported.outputs.iter().zip(&outputs).enumerate() {
                let file = dir.join(format!("output_{k}.npy"));
                npy::write(&file, array).map_err(CliError::Usage)?;
                outln!(out, "output {k} '{}' → {}", edge.name, file.display());
            }
        }
        None => {
            for (k, (edge, array)) in imported.outputs.iter().zip(&outputs).enumerate() {
                outln!(
                    out,
                    "output {k} '{}': {}",
                    edge.name,
                    modelfile::describe(array)
                );
            }
        }
    }
    Ok(())
}

/// `nnhal import MODEL.onnx`: the summary and, with --out, the lowered model as a vector.
fn import(
    path: &Path,
    to: Option<&Path>,
    start_at: &[String],
    out: &mut String,
) -> Result<(), CliError> {
    let imported = nnhal_cli::modelfile::import_with(path, start_at).map_err(model_err)?;
    for line in &imported.summary {
        outln!(out, "{line}");
    }
    let m = &imported.model;
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for op in &m.operations {
        let name =
            OperationType::from_raw(op.operation_type).map_or("?".into(), |t| t.name().to_string());
        *counts.entry(name).or_default() += 1;
    }
    outln!(
        out,
        "{} {} → {} NNAPI operations ({}), {} operands, {} bytes of constants",
        imported.summary.len(),
        if path.extension().is_some_and(|e| e == "tflite") {
            "TFLite operators"
        } else if path.extension().is_some_and(|e| e == "xmodel") {
            "XIR operators"
        } else {
            "ONNX nodes"
        },
        m.operations.len(),
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        m.operands.len(),
        m.operand_values.len()
    );
    for (k, e) in imported.inputs.iter().enumerate() {
        outln!(
            out,
            "input {k} '{}' {:?} {:?}{}",
            e.name,
            e.shape,
            e.layout,
            e.quantized.map_or(String::new(), |(s, z)| format!(
                ", quantized on the host (scale {s}, zero point {z})"
            ))
        );
    }
    for (k, e) in imported.outputs.iter().enumerate() {
        outln!(out, "output {k} '{}' {:?} {:?}", e.name, e.shape, e.layout);
    }
    if let Some(to) = to {
        let name = path
            .file_stem()
            .map_or("model".into(), |s| s.to_string_lossy().into_owned());
        let json = nnhal_vts::vector::from_model(&name, m).map_err(CliError::Failed)?;
        std::fs::write(to, json)
            .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", to.display())))?;
        outln!(out, "wrote {}", to.display());
    }
    Ok(())
}

fn bench_model(a: &BenchArgs, out: &mut String) -> Result<(), CliError> {
    use nnhal_cli::bench::{self, BenchError, Source};
    let source = match (&a.workload.builtin, &a.workload.vector) {
        (Some(name), _) => Source::Builtin(name.clone()),
        (None, Some(path)) if nnhal_cli::modelfile::is_model_file(path) => {
            Source::Model(path.clone())
        }
        (None, Some(path)) => Source::Vector(path.clone()),
        (None, None) => {
            return Err(CliError::Usage(
                "give --builtin NAME or a vector file".into(),
            ))
        }
    };
    let options = bench::Options {
        source,
        threads: a.threads,
        iterations: a.iterations,
        warmup: a.warmup,
        transport: match a.transport {
            Transport::Inproc => bench::Transport::Inproc,
            Transport::Rpc => bench::Transport::Rpc,
        },
        socket: a.socket.clone(),
        isa: a.isa.clone(),
        profile: a.profile,
        cache: a.cache.clone(),
        ab_isa: a.ab_isa.clone(),
    };
    let report = bench::run(&options).map_err(|e| match e {
        BenchError::Usage(why) => CliError::Usage(why),
        BenchError::Failed(why) => CliError::Failed(why),
    })?;
    out.push_str(&report.text());
    if a.json {
        outln!(out, "{}", report.json());
    }
    if report.passed() {
        Ok(())
    } else if !report.output.ok {
        Err(CliError::Failed("the output is wrong".into()))
    } else if report.ab.as_ref().is_some_and(|b| !b.output.ok) {
        Err(CliError::Failed("the output of the B plan is wrong".into()))
    } else if report.logits.as_ref().is_none_or(|l| l.ok) {
        Err(CliError::Failed(
            "the logits of the B plan are not bit-exact".into(),
        ))
    } else {
        Err(CliError::Failed("the logits are not bit-exact".into()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // rsbinder reports the end of our own session (closed when the client exits) as a warning.
    nnhal::cli::init_logging(cli.log_level.as_deref(), "warn,rsbinder=error");
    let mut out = String::new();
    let result = match &cli.command {
        Command::Info { target, json } => info(target, *json, &mut out),
        Command::Run {
            json: true, vector, ..
        } if nnhal_cli::modelfile::is_model_file(vector) => Err(CliError::Usage(
            "--json is for vectors; a model file's outputs go to --output-dir".into(),
        )),
        Command::Run {
            target,
            vector,
            inputs,
            output_dir,
            transport,
            start_at,
            ..
        } if nnhal_cli::modelfile::is_model_file(vector) => run_model(
            target,
            *transport,
            vector,
            inputs,
            output_dir.as_deref(),
            start_at,
            &mut out,
        ),
        Command::Run {
            target,
            constants,
            show,
            json,
            vector,
            inputs,
            output_dir,
            transport,
            start_at,
        } => {
            if !inputs.is_empty()
                || output_dir.is_some()
                || transport.is_some()
                || !start_at.is_empty()
            {
                Err(CliError::Usage(
                    "--input, --output-dir and --transport are for model files (.onnx); a \
                     vector carries its inputs and runs through the service"
                        .into(),
                ))
            } else {
                run(target, *constants, *show, *json, vector, &mut out)
            }
        }
        Command::Import {
            out: to,
            start_at,
            model,
        } => import(model, to.as_deref(), start_at, &mut out),
        Command::BenchRpc {
            target,
            iterations,
            warmup,
        } => bench(target, *iterations, *warmup, &mut out),
        Command::Bench(args) => bench_model(args, &mut out),
        Command::Serve {
            socket,
            threads,
            instance,
        } => binder::serve_until_signal(socket, instance, *threads).map_err(CliError::from),
    };
    // A closed pipe (`nnhal info | head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    match result {
        Ok(()) => ExitCode::from(nnhal::cli::EXIT_OK),
        Err(err) => {
            eprintln!("nnhal: {err}");
            ExitCode::from(err.exit_status())
        }
    }
}
