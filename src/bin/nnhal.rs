//! `nnhal`: command-line client of the Neural Networks HAL service.
//!
//! ```text
//! nnhal info      [--socket PATH] [--instance NAME]        what the device reports through binder
//! nnhal run       [--socket PATH] [--instance NAME] [--constants copy|reference] VECTOR.json
//!                                                        a golden vector's examples through the
//!                                                        service, outputs and PASS/FAIL
//! nnhal bench-rpc [--socket PATH] [--instance NAME] [-n N]  round-trip latency: ADD vs bare call
//! nnhal bench     (--builtin mobilenet-v1-f32 | VECTOR.json) [--threads N] [--iterations K]
//!                 [--warmup W] [--transport inproc|rpc] [--socket PATH] [--isa LEVEL]
//!                 [--profile] [--json]
//!                                                        latency of one model, output checked
//! ```
//!
//! Exit status: 0 on success, 1 when something failed or an output was wrong, 2 for a usage
//! error (bad arguments, a file that is not a vector, an instruction set this processor lacks).

use clap::{Parser, Subcommand};
use nnhal::binder::{self, ConnectOptions, RemoteDevice};
use nnhal::hal::{OperandType, OperationType, PerformanceInfo};
use nnhal::probe::{self, AddRun};
use nnhal::vector::compare::compare;
use nnhal::vector::model::{build_request, decode, to_model, ConstantMode};
use nnhal::vector::Vector;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(version, about = "Client of the nnhal Neural Networks HAL service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct Target {
    /// Service socket [default: the nnhal-service default for the instance]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Service instance (android.hardware.neuralnetworks.IDevice/<NAME>)
    #[arg(long, value_name = "NAME", default_value = "default")]
    instance: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print capabilities, type, version and supported operations, as reported through binder
    Info {
        #[command(flatten)]
        target: Target,
    },
    /// Run a golden vector's examples through the service: print each output and PASS/FAIL
    /// against the expected values (the AOSP harness tolerance)
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
        /// Golden vector file (conformance JSON format)
        vector: PathBuf,
    },
    /// Median round trip of a one-operation ADD ([1,2,2,1] float32) executed through the
    /// service, beside the median of a bare binder call (getType) in the same run
    BenchRpc {
        #[command(flatten)]
        target: Target,
        /// Measured executions (and bare calls)
        #[arg(short = 'n', long, default_value_t = 1000)]
        iterations: usize,
        /// Unmeasured warm-up calls of each kind
        #[arg(long, default_value_t = 100)]
        warmup: usize,
    },
    /// Latency of one model prepared once and executed repeatedly, with its output checked
    /// (the builtin MobileNet against the reference output, a vector against its golden
    /// values and, when it has them, its golden logits bit for bit)
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
        /// Log filter (env_logger syntax), as nnhal-service takes it
        #[arg(long, value_name = "LEVEL")]
        log_level: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct Workload {
    /// A model built into this program instead of a vector file
    #[arg(long, value_name = "NAME", value_parser = [nnhal::bench::BUILTIN_MOBILENET_F32])]
    builtin: Option<String>,
    /// Golden vector file (conformance JSON format); its first example is run
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
          value_parser = ["generic", "avx2", "avx512", "avx512vnni", "neon", "dotprod"])]
    isa: Option<String>,
    /// Also time every operation, over K more executions (median per operation; in-process
    /// only)
    #[arg(long)]
    profile: bool,
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
    Copy,
    Reference,
}

fn connect(target: &Target) -> Result<RemoteDevice, String> {
    let socket = target
        .socket
        .clone()
        .unwrap_or_else(|| binder::default_socket_path(&target.instance));
    let options = ConnectOptions {
        instance: target.instance.clone(),
        ..ConnectOptions::default()
    };
    binder::connect_with(&socket, &options).map_err(|e| {
        format!(
            "{e}\n(is nnhal-service running? start it with: nnhal-service --socket {})",
            socket.display()
        )
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

fn info(target: &Target, out: &mut String) -> Result<(), String> {
    let device = connect(target)?;
    let e = |e: nnhal::hal::HalError| e.to_string();
    outln!(
        out,
        "service      {}",
        binder::service_name(&target.instance)
    );
    outln!(out, "version      {}", device.version_string().map_err(e)?);
    outln!(out, "type         {}", device.device_type().map_err(e)?);
    outln!(
        out,
        "interface    android.hardware.neuralnetworks V{} (hash {})",
        device.interface_version().map_err(e)?,
        device.interface_hash().map_err(e)?
    );
    let caps = device.capabilities_full().map_err(e)?;
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
        let name =
            OperandType::from_raw(*ty).map_or_else(|| format!("type {ty}"), |t| t.to_string());
        outln!(out, "  {name:<31} {}", perf(*p));
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
    let ext = device.supported_extensions().map_err(e)?;
    outln!(
        out,
        "extensions   {}",
        if ext.is_empty() {
            "none".into()
        } else {
            ext.join(", ")
        }
    );
    let (model_cache, data_cache) = device.number_of_cache_files().map_err(e)?;
    outln!(out, "cache files  model {model_cache}, data {data_cache}");

    // Each operation is probed with getSupportedOperations on a one-operation model.
    outln!(
        out,
        "operations   (getSupportedOperations on a one-operation model each)"
    );
    let probes = probe::operation_probes();
    let probed = probes.len();
    let mut supported = 0;
    for (op, model) in probes {
        let answer = match device.supported_operations(&model) {
            Ok(v) if v == [true] => {
                supported += 1;
                "supported".to_string()
            }
            Ok(v) => format!("not supported ({v:?})"),
            Err(err) => format!("error: {err}"),
        };
        outln!(out, "  {:<31} {answer}", op.name());
    }
    outln!(
        out,
        "  {:<31} not probed (no defined semantics)",
        OperationType::OemOperation.name()
    );
    outln!(
        out,
        "  {supported} of {probed} NNAPI 1.0 operations supported"
    );
    Ok(())
}

fn bench(
    target: &Target,
    iterations: usize,
    warmup: usize,
    out: &mut String,
) -> Result<(), String> {
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
        return Err(format!("ADD returned {got:?}, expected {want:?}"));
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

fn run(
    target: &Target,
    constants: Constants,
    show: usize,
    path: &Path,
    out: &mut String,
) -> Result<(), String> {
    let v = Vector::from_file(path).map_err(|e| e.to_string())?;
    let mode = match constants {
        Constants::Copy => ConstantMode::Copy,
        Constants::Reference => ConstantMode::Reference,
    };
    let model = to_model(&v, mode).map_err(|e| format!("{}: {e}", v.name))?;
    let device = connect(target)?;
    fn e(what: &'static str) -> impl Fn(nnhal::hal::HalError) -> String {
        move |e| format!("{what}: {e}")
    }
    let supported = device
        .supported_operations(&model)
        .map_err(e("getSupportedOperations"))?;
    outln!(
        out,
        "{}: {} operations ({} supported), {} examples, constants {mode}",
        v.name,
        supported.len(),
        supported.iter().filter(|s| **s).count(),
        v.examples.len()
    );
    let prepared = device.prepare_model(model).map_err(e("prepareModel"))?;
    let mut failed = 0;
    for (k, example) in v.examples.iter().enumerate() {
        let built = build_request(&v, mode, example).map_err(|e| e.to_string())?;
        let verdict = (|| -> Result<Vec<String>, String> {
            prepared
                .execute(&built.request)
                .map_err(e("executeSynchronously"))?;
            let actual = built
                .read_outputs()
                .map_err(|e| format!("reading outputs: {e}"))?;
            let mut problems = Vec::new();
            for (slot, bytes) in built.outputs.iter().zip(&actual) {
                let ignored = v.tolerance.ignored_outputs.contains(&slot.position);
                outln!(
                    out,
                    "  example {k} output {} {} {:?}{}: {}",
                    slot.position,
                    slot.operand_type,
                    slot.dimensions,
                    if ignored { " (not compared)" } else { "" },
                    preview(&decode(slot.operand_type, bytes), show)
                );
                if ignored {
                    continue;
                }
                let expected = example
                    .output(slot.position)
                    .ok_or_else(|| format!("output {} has no expected values", slot.position))?;
                let c = compare(slot.operand_type, expected, bytes, &v.tolerance);
                if !c.passed() {
                    problems.push(format!("output {}: {}", slot.position, c.describe()));
                }
            }
            Ok(problems)
        })();
        match verdict {
            Ok(problems) if problems.is_empty() => outln!(out, "PASS example {k}"),
            Ok(problems) => {
                failed += 1;
                outln!(out, "FAIL example {k}: {}", problems.join("; "));
            }
            Err(why) => {
                failed += 1;
                outln!(out, "FAIL example {k}: {why}");
            }
        }
    }
    outln!(out, "{} passed, {failed} failed", v.examples.len() - failed);
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} of {} examples failed", v.examples.len()))
    }
}

/// Why a command failed, and the exit status that says so.
enum Failure {
    /// A run that went wrong (status 1).
    Failed(String),
    /// Bad arguments or input files (status 2).
    Usage(String),
}

impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure::Failed(why)
    }
}

fn bench_model(a: &BenchArgs, out: &mut String) -> Result<(), Failure> {
    use nnhal::bench::{self, BenchError, Source};
    let source = match (&a.workload.builtin, &a.workload.vector) {
        (Some(name), _) => Source::Builtin(name.clone()),
        (None, Some(path)) => Source::Vector(path.clone()),
        (None, None) => {
            return Err(Failure::Usage(
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
    };
    let report = bench::run(&options).map_err(|e| match e {
        BenchError::Usage(why) => Failure::Usage(why),
        BenchError::Failed(why) => Failure::Failed(why),
    })?;
    out.push_str(&report.text());
    if a.json {
        outln!(out, "{}", report.json());
    }
    if report.passed() {
        Ok(())
    } else if !report.output.ok {
        Err(Failure::Failed("the output is wrong".into()))
    } else {
        Err(Failure::Failed("the logits are not bit-exact".into()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // rsbinder reports the end of our own session (closed when the client exits) as a warning.
    let mut logger = env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("warn,rsbinder=error"),
    );
    if let Command::Serve {
        log_level: Some(level),
        ..
    } = &cli.command
    {
        logger.parse_filters(level);
    }
    logger.init();
    let mut out = String::new();
    let result = match &cli.command {
        Command::Info { target } => info(target, &mut out).map_err(Failure::from),
        Command::Run {
            target,
            constants,
            show,
            vector,
        } => run(target, *constants, *show, vector, &mut out).map_err(Failure::from),
        Command::BenchRpc {
            target,
            iterations,
            warmup,
        } => bench(target, *iterations, *warmup, &mut out).map_err(Failure::from),
        Command::Bench(args) => bench_model(args, &mut out),
        Command::Serve {
            socket,
            threads,
            instance,
            log_level: _,
        } => binder::serve_until_signal(socket, instance, *threads).map_err(Failure::from),
    };
    // A closed pipe (`nnhal info | head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Failed(err)) => {
            eprintln!("nnhal: {err}");
            ExitCode::FAILURE
        }
        Err(Failure::Usage(err)) => {
            eprintln!("nnhal: {err}");
            ExitCode::from(2)
        }
    }
}
