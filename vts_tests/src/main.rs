//! `nnhal-vts`: runs the conformance suite against a driver from the command line.
//!
//! ```text
//! nnhal-vts vectors   [--transport rpc|inproc] [--socket PATH] [-v] [PATH...]
//! nnhal-vts mutations [--transport rpc|inproc] [--socket PATH] [--class N]... [--show N] [PATH...]
//! nnhal-vts basic     [--socket PATH]
//! nnhal-vts qos       [--socket PATH]
//! nnhal-vts dynamic   [--transport rpc|inproc] [--socket PATH] [PATH...]
//! nnhal-vts coupling  [--transport rpc|inproc] [--socket PATH] [PATH...]
//! nnhal-vts stress    [--socket PATH] [--clients C] [--executions E] [--duration S]
//! nnhal-vts faults    [--socket PATH] [--idle-connections N]
//! ```
//!
//! The default transport is the service over binder RPC: with `--socket` the suite talks to a
//! running `nnhal-service`, without it starts one on a temporary socket and stops it at the end.
//! Each subcommand prints one `PASS`/`FAIL`/`SKIP` line per item (a failure or skip with its
//! reason) and ends with `N passed, M failed` (`vectors`: `N passed, M failed, K skipped`; a
//! valid model the driver reports unsupported is skipped, never passed or failed); the exit status is 1 when anything failed, 2 when a path cannot be
//! read or the device could not be opened. Paths are checked before any service starts.

use clap::{Args, Parser, Subcommand};
use nnhal::hal::HalError;
use nnhal_vts::load;
use nnhal_vts::mutations::{base_models, BaseModel, MODEL_MUTATORS, REQUEST_MUTATORS};
use nnhal_vts::runner::{run_model_class, run_request_class, run_vector, ClassReport};
use nnhal_vts::suites::{self, Outcome};
use nnhal_vts::transport::{self, Device, RpcDevice, TransportKind, TransportOptions};
use nnhal_vts::vector::{bundled_dir, vector_files, Vector};
use nnhal_vts::{basic, caching};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "nnhal-vts",
    version,
    about = "Conformance suite for the nnhal NNAPI 1.0 driver",
    after_help = nnhal::cli::EXIT_STATUS_HELP
)]
struct Cli {
    /// Log level of this program: off, error, warn, info, debug or trace (also TARGET=LEVEL
    /// directives, comma-separated) [default: $RUST_LOG, else warn]. A service it starts logs
    /// at $NNHAL_SERVICE_LOG, else warn.
    #[arg(long, global = true, value_name = "LEVEL", value_parser = nnhal::cli::parse_log_level)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run golden vectors (JSON files or directories of them) and compare the outputs.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Vectors {
        #[command(flatten)]
        transport: TransportArgs,
        /// Also print per-vector quant8 exact-match counts.
        #[arg(short, long)]
        verbose: bool,
        /// Vector files or directories of them [default: the bundled vectors,
        /// vts_tests/vectors]
        paths: Vec<PathBuf>,
    },
    /// Apply the VTS model and request mutations (BI-01…BI-26) to vectors and check that each
    /// malformed variant is rejected with INVALID_ARGUMENT.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Mutations {
        #[command(flatten)]
        transport: TransportArgs,
        /// Only these classes (BI numbers, e.g. `--class 7 --class 23`) [default: all]
        #[arg(long = "class", value_name = "N")]
        classes: Vec<u8>,
        /// Failing variants listed per class.
        #[arg(long, value_name = "N", default_value_t = 10)]
        show: usize,
        /// Vector files or directories of them [default: the bundled vectors,
        /// vts_tests/vectors]
        paths: Vec<PathBuf>,
    },
    /// The deadline cases of the AIDL QualityOfServiceTests over binder: a passed deadline
    /// must launch prepareModel and report MISSED_DEADLINE through its callback, and fail
    /// every execution path with MISSED_DEADLINE; a deadline ahead changes nothing.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Qos {
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// DynamicOutputShapeTest: every vector again with its outputs' dimensions unspecified
    /// (the shapes must be reported), and with output 0 one byte short
    /// (OUTPUT_INSUFFICIENT_SIZE).
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Dynamic {
        #[command(flatten)]
        transport: TransportArgs,
        /// Vector files or directories of them [default: the bundled vectors,
        /// vts_tests/vectors]
        paths: Vec<PathBuf>,
    },
    /// CompilationCachingTest: every vector prepared with cache files, restored with
    /// prepareModelFromCache and executed (outputs as a fresh preparation's); wrong tokens,
    /// handle counts and modes, shrunk, grown and byte-flipped files (every byte of the
    /// smallest vector's cache, a sample of the largest's), shared handles, another kernel
    /// level.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Caching {
        #[command(flatten)]
        transport: TransportArgs,
        /// Vector files or directories of them [default: the bundled vectors,
        /// vts_tests/vectors]
        paths: Vec<PathBuf>,
    },
    /// QuantizationCouplingTest: every supported single-operation TENSOR_QUANT8_ASYMM vector
    /// must also be supported and correct as TENSOR_QUANT8_ASYMM_SIGNED.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Coupling {
        #[command(flatten)]
        transport: TransportArgs,
        /// Vector files or directories of them [default: the bundled vectors,
        /// vts_tests/vectors]
        paths: Vec<PathBuf>,
    },
    /// Serve the driver over binder RPC like nnhal-service (started by the rpc transport when no
    /// nnhal-service binary is at hand).
    #[command(hide = true)]
    Serve {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[arg(long, value_name = "NAME", default_value = "default")]
        instance: String,
        #[arg(long, value_name = "N", default_value_t = 0)]
        threads: usize,
    },
    /// The basic device tests over binder: status, capabilities, a cyclic model, null and
    /// out-of-range arguments, fenced and burst execution, cache and allocate refusals.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Basic {
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Load: C client processes × E executions of mixed vectors (float, quant8, recurrent,
    /// multi-operation) on shared and private prepared models, every output checked; reports
    /// the service's RSS, threads and fds before, during and after, and fails unless threads
    /// and fds return to their baseline and RSS stays within 10 % of its post-warm-up size.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Stress {
        #[command(flatten)]
        service: ServiceArgs,
        /// Client processes
        #[arg(long, value_name = "C", default_value_t = 4)]
        clients: usize,
        /// Executions per client
        #[arg(long, value_name = "E", default_value_t = 100)]
        executions: usize,
        /// Stop each client after this many seconds even if it has executions left
        #[arg(long, value_name = "S")]
        duration: Option<f64>,
    },
    /// Faults: clients killed mid-prepare and mid-execute, a callback dead before its notify,
    /// a client that never reads, a model released while it runs, a pool shrunk while read,
    /// 1,000 idle connections, garbage and lying lengths on the socket; after each, the next
    /// client must be served correctly and the service's threads and fds return to baseline.
    #[command(after_help = nnhal::cli::EXIT_STATUS_HELP)]
    Faults {
        #[command(flatten)]
        service: ServiceArgs,
        /// Idle connections opened before the normal client of that fault
        #[arg(long, value_name = "N", default_value_t = 1000)]
        idle_connections: usize,
    },
    /// One client process of `stress` (started by it).
    #[command(hide = true)]
    StressClient {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[arg(long, value_name = "NAME", default_value = "default")]
        instance: String,
        #[arg(long, value_name = "E")]
        executions: usize,
        #[arg(long, value_name = "K", default_value_t = 0)]
        index: usize,
        #[arg(long, value_name = "S")]
        duration: Option<f64>,
    },
    /// One client process of `faults` (started, and killed, by it).
    #[command(hide = true)]
    FaultClient {
        #[arg(long, value_name = "PATH")]
        socket: PathBuf,
        #[arg(long, value_name = "NAME", default_value = "default")]
        instance: String,
        #[arg(long, value_enum)]
        action: nnhal_vts::load::FaultAction,
    },
}

/// How to reach the driver; shared by every subcommand.
#[derive(Args)]
struct TransportArgs {
    /// rpc: the service over binder; inproc: the driver library in this process.
    #[arg(long, value_enum, default_value = "rpc")]
    transport: TransportKind,
    #[command(flatten)]
    service: ServiceArgs,
}

/// Where the service is, or how to start one.
#[derive(Args)]
struct ServiceArgs {
    /// Socket of a running nnhal-service [default: start one on a temporary socket]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Service instance name (`android.hardware.neuralnetworks.IDevice/NAME`)
    #[arg(long, value_name = "NAME", default_value = "default")]
    instance: String,
    /// The nnhal-service binary to start [default: $NNHAL_SERVICE, else next to nnhal-vts]
    #[arg(long, value_name = "PATH")]
    service: Option<PathBuf>,
    /// Kernel worker threads of the driver, started or in-process (0 = one per core)
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
}

impl ServiceArgs {
    fn options(&self) -> TransportOptions {
        TransportOptions {
            threads: self.threads,
            socket: self.socket.clone(),
            instance: Some(self.instance.clone()),
            service: self.service.clone(),
            self_serve: true,
        }
    }
}

fn cannot_open(e: HalError) -> ExitCode {
    eprintln!("nnhal-vts: cannot open the device: {}", e.message());
    ExitCode::from(nnhal::cli::EXIT_USAGE)
}

/// The paths to run: the ones given, else the bundled vectors. Every one must exist: a typo
/// is reported before a service is started for nothing.
fn resolve_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ExitCode> {
    let paths = if paths.is_empty() {
        vec![bundled_dir()]
    } else {
        paths.to_vec()
    };
    for path in &paths {
        if let Err(e) = std::fs::metadata(path) {
            let e = nnhal_vts::vector::VectorError::Io {
                path: path.clone(),
                source: e,
            };
            eprintln!("nnhal-vts: {e}");
            return Err(ExitCode::from(nnhal::cli::EXIT_USAGE));
        }
    }
    Ok(paths)
}

/// Why a vector cannot be checked: an example without expected values for an output that is
/// compared. Such a vector is skipped, not failed: the driver did nothing wrong.
fn missing_expected(v: &Vector) -> Option<String> {
    for (k, example) in v.examples.iter().enumerate() {
        for position in 0..v.model.output_indexes.len() {
            if !v.tolerance.ignored_outputs.contains(&position)
                && example.output(position).is_none()
            {
                return Some(format!(
                    "example {k} has no expected values for output {position}; nothing to \
                     compare against"
                ));
            }
        }
    }
    None
}

impl TransportArgs {
    fn open(&self) -> Result<Box<dyn Device>, ExitCode> {
        let device =
            transport::open(self.transport, &self.service.options()).map_err(cannot_open)?;
        eprintln!("device: {}", device.describe());
        Ok(device)
    }
}

/// A one-line progress display on stderr, only when stderr is a terminal: piped or captured
/// output (CI, tests) stays exactly the PASS/FAIL lines.
struct Progress {
    total: usize,
    shown: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        use std::io::IsTerminal;
        Progress {
            total,
            shown: std::io::stderr().is_terminal(),
        }
    }

    fn at(&self, done: usize, what: &str) {
        if self.shown {
            // `\r` and clear-to-end-of-line: the next update or result overwrites it.
            eprint!("\r\x1b[K[{done}/{}] {what}", self.total);
        }
    }

    fn clear(&self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}

/// Loads every vector the paths name; a file that cannot be loaded becomes a failure line.
fn load_all(paths: &[PathBuf], failures: &mut Vec<String>) -> Vec<Vector> {
    let mut out = Vec::new();
    for path in paths {
        let files = match vector_files(path) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("FAIL {e}"));
                continue;
            }
        };
        for file in files {
            match Vector::from_file(&file) {
                Ok(v) => out.push(v),
                Err(e) => failures.push(format!("FAIL {e}")),
            }
        }
    }
    out
}

fn vectors(transport: &TransportArgs, verbose: bool, paths: &[PathBuf]) -> ExitCode {
    let paths = match resolve_paths(paths) {
        Ok(p) => p,
        Err(code) => return code,
    };
    // Files are listed first and loaded one at a time: the later-version set is hundreds of
    // megabytes of JSON, more than is worth holding at once.
    let mut load_failures = Vec::new();
    let mut files = Vec::new();
    for path in &paths {
        match vector_files(path) {
            Ok(f) => files.extend(f),
            Err(e) => load_failures.push(format!("FAIL {e}")),
        }
    }
    let device = match transport.open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    for line in &load_failures {
        println!("{line}");
    }
    let (mut passed, mut failed, mut skipped) = (0usize, load_failures.len(), 0usize);
    let (mut exact, mut total) = (0usize, 0usize);
    // Per NNAPI version directory: passed, failed, skipped.
    let mut per_version: std::collections::BTreeMap<String, [usize; 3]> = Default::default();
    let progress = Progress::new(files.len());
    for (done, file) in files.iter().enumerate() {
        let v = match Vector::from_file(file) {
            Ok(v) => v,
            Err(e) => {
                failed += 1;
                println!("FAIL {e}");
                continue;
            }
        };
        progress.at(done, &v.name);
        let report = missing_expected(&v).map_or_else(
            || run_vector(device.as_ref(), &v),
            |why| nnhal_vts::VectorReport {
                name: v.name.clone(),
                skipped: Some(why),
                ..Default::default()
            },
        );
        progress.clear();
        let version = v.version.clone().unwrap_or_else(|| "V1_0".into());
        let counts = per_version.entry(version).or_default();
        if let Some(reason) = &report.failure {
            failed += 1;
            counts[1] += 1;
            println!("FAIL {}: {reason}", report.name);
        } else if let Some(why) = &report.skipped {
            skipped += 1;
            counts[2] += 1;
            println!("SKIP {}: {why}", report.name);
        } else {
            passed += 1;
            counts[0] += 1;
            println!("PASS {}", report.name);
        }
        if verbose && report.quant8_total > 0 {
            println!(
                "  quant8 exact: {} of {} elements",
                report.quant8_exact, report.quant8_total
            );
        }
        exact += report.quant8_exact;
        total += report.quant8_total;
    }
    println!("quant8 exact: {exact} of {total} elements");
    if per_version.len() > 1 {
        for (version, [p, f, k]) in &per_version {
            println!("{version}: {p} passed, {f} failed, {k} skipped");
        }
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print_class(report: &ClassReport, show: usize) -> (usize, usize) {
    let failed = report.failures.len();
    let passed = report.variants.saturating_sub(failed);
    if let Some(why) = &report.skipped {
        println!("SKIP {}: {why}", report.class);
        return (0, 0);
    }
    for why in &report.skipped_bases {
        println!("SKIP {}: {why}", report.class);
    }
    if report.passed() {
        println!(
            "PASS {}: {} variants on {} vectors",
            report.class,
            report.variants,
            report.vectors.len()
        );
    } else if report.variants == 0 {
        println!("FAIL {}: no variant generated", report.class);
    } else {
        println!(
            "FAIL {}: {failed} of {} variants on {} vectors failed",
            report.class,
            report.variants,
            report.vectors.len()
        );
        for line in report.describe_failures(show).lines() {
            println!("  {line}");
        }
    }
    (passed, failed.max(usize::from(report.variants == 0)))
}

fn mutations(
    transport: &TransportArgs,
    classes: &[u8],
    show: usize,
    paths: &[PathBuf],
) -> ExitCode {
    let paths = match resolve_paths(paths) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut load_failures = Vec::new();
    let vectors = load_all(&paths, &mut load_failures);
    let device = match transport.open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    for line in &load_failures {
        println!("{line}");
    }
    let mut bases: Vec<BaseModel> = Vec::new();
    let mut not_instantiated = 0usize;
    for v in &vectors {
        if !nnhal_vts::suites::validation_applies(v) {
            not_instantiated += 1;
            continue;
        }
        match base_models(v) {
            Ok(b) => bases.extend(b),
            Err(e) => load_failures.push(format!("FAIL {}: {e}", v.name)),
        }
    }
    let wanted = |bi: u8| classes.is_empty() || classes.contains(&bi);
    let (mut passed, mut failed) = (0usize, load_failures.len());
    let model_classes: Vec<_> = MODEL_MUTATORS.iter().filter(|m| wanted(m.bi.0)).collect();
    let request_classes: Vec<_> = REQUEST_MUTATORS.iter().filter(|m| wanted(m.bi.0)).collect();
    let progress = Progress::new(model_classes.len() + request_classes.len());
    for (done, m) in model_classes.iter().enumerate() {
        progress.at(done, &m.bi.to_string());
        let report = run_model_class(device.as_ref(), m, &bases);
        progress.clear();
        let (p, f) = print_class(&report, show);
        passed += p;
        failed += f;
    }
    for (done, m) in request_classes.iter().enumerate() {
        progress.at(model_classes.len() + done, &m.bi.to_string());
        let report = run_request_class(device.as_ref(), m, &bases);
        progress.clear();
        let (p, f) = print_class(&report, show);
        passed += p;
        failed += f;
    }
    if not_instantiated > 0 {
        println!(
            "({not_instantiated} vectors not mutated: VTS's ValidationTest does not instantiate \
             inputs_as_internal, all_tensors_as_inputs or dynamic-output-shape copies)"
        );
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs a derived-model suite over every vector the paths name, one line per vector.
fn derived_suite(
    transport: &TransportArgs,
    paths: &[PathBuf],
    run: fn(&dyn Device, &Vector) -> Outcome,
) -> ExitCode {
    let paths = match resolve_paths(paths) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut files = Vec::new();
    let mut failed = 0usize;
    for path in &paths {
        match vector_files(path) {
            Ok(f) => files.extend(f),
            Err(e) => {
                failed += 1;
                println!("FAIL {e}");
            }
        }
    }
    let device = match transport.open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let (mut passed, mut skipped) = (0usize, 0usize);
    let progress = Progress::new(files.len());
    for (done, file) in files.iter().enumerate() {
        let v = match Vector::from_file(file) {
            Ok(v) => v,
            Err(e) => {
                failed += 1;
                println!("FAIL {e}");
                continue;
            }
        };
        progress.at(done, &v.name);
        let outcome = run(device.as_ref(), &v);
        progress.clear();
        match outcome {
            Outcome::Pass => {
                passed += 1;
                println!("PASS {}", v.name);
            }
            Outcome::Fail(why) => {
                failed += 1;
                println!("FAIL {}: {why}", v.name);
            }
            Outcome::Skip(why) => {
                skipped += 1;
                println!("SKIP {}: {why}", v.name);
            }
        }
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn qos(service: &ServiceArgs) -> ExitCode {
    let device = match RpcDevice::open(&service.options()) {
        Ok(d) => d,
        Err(e) => return cannot_open(e),
    };
    eprintln!("device: {}", device.describe());
    let remote = device.remote().expect("an rpc device has a binder client");
    let (mut passed, mut failed) = (0usize, 0usize);
    for (name, outcome) in nnhal_vts::qos::run_all(remote) {
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("PASS {name}");
            }
            Err(reason) => {
                failed += 1;
                println!("FAIL {name}: {reason}");
            }
        }
    }
    println!("{passed} passed, {failed} failed, 0 skipped");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn caching(transport: &TransportArgs, paths: &[PathBuf]) -> ExitCode {
    let paths = match resolve_paths(paths) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut vectors = Vec::new();
    let mut failed = 0usize;
    for path in &paths {
        match nnhal_vts::vector::load(path) {
            Ok(v) => vectors.extend(v),
            Err(e) => {
                failed += 1;
                println!("FAIL {e}");
            }
        }
    }
    let device = match transport.open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let mut outcomes = caching::vectors(device.as_ref(), &vectors);
    // The smallest and the largest model that prepare, by constant bytes: every byte of the
    // first's cache is flipped, a sample of the second's.
    let size = |v: &Vector| {
        nnhal_vts::to_model(v, nnhal_vts::ConstantMode::Copy)
            .map(|m| m.operand_values.len() + m.operands.len() * 64)
            .unwrap_or(usize::MAX)
    };
    let plain: Vec<&Vector> = vectors
        .iter()
        .filter(|v| !v.expect_failure && v.model.referenced.is_empty())
        .collect();
    if let Some(small) = plain.iter().min_by_key(|v| size(v)) {
        outcomes.extend(caching::checks(device.as_ref(), small, true));
    }
    if let Some(large) = plain
        .iter()
        .filter(|v| size(v) != usize::MAX)
        .max_by_key(|v| size(v))
    {
        outcomes.extend(caching::checks(device.as_ref(), large, false));
    }
    let mut passed = 0usize;
    for (name, outcome) in outcomes {
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("PASS {name}");
            }
            Err(reason) => {
                failed += 1;
                println!("FAIL {name}: {reason}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn basic(service: &ServiceArgs) -> ExitCode {
    let device = match RpcDevice::open(&service.options()) {
        Ok(d) => d,
        Err(e) => return cannot_open(e),
    };
    eprintln!("device: {}", device.describe());
    let remote = device.remote().expect("an rpc device has a binder client");
    let (mut passed, mut failed) = (0usize, 0usize);
    for (name, outcome) in basic::run_all(remote) {
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("PASS {name}");
            }
            Err(reason) => {
                failed += 1;
                println!("FAIL {name}: {reason}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Opens the service for `stress` or `faults`: the one on `--socket`, or a child. The device
/// handle keeps a child alive and is dropped at the end.
fn load_target(service: &ServiceArgs) -> Result<(RpcDevice, load::Target), ExitCode> {
    let device = RpcDevice::open(&service.options()).map_err(cannot_open)?;
    eprintln!("device: {}", device.describe());
    let pid = match device.child_pid() {
        Some(pid) => pid,
        None => load::service_pid(device.socket()).map_err(|e| {
            eprintln!(
                "nnhal-vts: cannot find the service's process through {}: {e}",
                device.socket().display()
            );
            ExitCode::from(nnhal::cli::EXIT_USAGE)
        })?,
    };
    let exe = std::env::current_exe().map_err(|e| {
        eprintln!("nnhal-vts: cannot find this program: {e}");
        ExitCode::from(nnhal::cli::EXIT_USAGE)
    })?;
    let target = load::Target {
        socket: device.socket().to_path_buf(),
        instance: service.instance.clone(),
        pid,
        exe,
    };
    Ok((device, target))
}

fn report(outcomes: Vec<load::Outcome>) -> ExitCode {
    let (mut passed, mut failed) = (0usize, 0usize);
    for (name, result) in outcomes {
        match result {
            Ok(note) => {
                passed += 1;
                println!("PASS {name}: {note}");
            }
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // rsbinder reports the end of our own session (closed when the client exits) as a warning.
    nnhal::cli::init_logging(cli.log_level.as_deref(), "warn,rsbinder=error");
    match &cli.command {
        Command::Serve {
            socket,
            instance,
            threads,
            ..
        } => match nnhal::binder::serve_until_signal(socket, instance, *threads) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("nnhal-vts serve: {e}");
                ExitCode::from(nnhal::cli::EXIT_FAILED)
            }
        },
        Command::Vectors {
            transport,
            verbose,
            paths,
        } => vectors(transport, *verbose, paths),
        Command::Mutations {
            transport,
            classes,
            show,
            paths,
        } => mutations(transport, classes, *show, paths),
        Command::Basic { service } => basic(service),
        Command::Qos { service } => qos(service),
        Command::Dynamic { transport, paths } => derived_suite(transport, paths, suites::dynamic),
        Command::Coupling { transport, paths } => derived_suite(transport, paths, suites::coupling),
        Command::Caching { transport, paths } => caching(transport, paths),
        Command::Stress {
            service,
            clients,
            executions,
            duration,
        } => {
            let (device, target) = match load_target(service) {
                Ok(t) => t,
                Err(code) => return code,
            };
            let duration = duration.map(Duration::from_secs_f64);
            let outcomes = load::stress(&target, *clients, *executions, duration);
            drop(device);
            report(outcomes)
        }
        Command::Faults {
            service,
            idle_connections,
        } => {
            let (device, target) = match load_target(service) {
                Ok(t) => t,
                Err(code) => return code,
            };
            let outcomes = load::faults(&target, *idle_connections);
            drop(device);
            report(outcomes)
        }
        Command::StressClient {
            socket,
            instance,
            executions,
            index,
            duration,
        } => {
            let until = duration.map(|d| Instant::now() + Duration::from_secs_f64(d));
            match load::stress_client(socket, instance, *executions, *index, until) {
                Ok(n) => {
                    println!("{n} executions, all outputs as expected");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    println!("{e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::FaultClient {
            socket,
            instance,
            action,
        } => match load::fault_client(socket, instance, *action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fault client: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
