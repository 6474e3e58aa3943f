//! `nnhal-vts`: runs the conformance suite against a driver from the command line.
//!
//! ```text
//! nnhal-vts vectors   [--transport inproc] [--threads N] [-v] PATH...
//! nnhal-vts mutations [--transport inproc] [--threads N] [--class N]... [--show N] [PATH...]
//! ```
//!
//! Each subcommand prints one `PASS`/`FAIL` line per item and ends with `N passed, M failed`;
//! the exit status is 1 when anything failed, 2 when the device could not be opened.
//! Transport selection is shared by every subcommand ([`TransportArgs`]), so a new transport
//! only adds a [`TransportKind`] variant.

use clap::{Args, Parser, Subcommand};
use nnhal_vts::mutations::{base_models, BaseModel, MODEL_MUTATORS, REQUEST_MUTATORS};
use nnhal_vts::runner::{run_model_class, run_request_class, run_vector, ClassReport};
use nnhal_vts::transport::{self, Device, TransportKind, TransportOptions};
use nnhal_vts::vector::{bundled_dir, vector_files, Vector};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "nnhal-vts",
    version,
    about = "Conformance suite for the nnhal NNAPI 1.0 driver"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run golden vectors (JSON files or directories of them) and compare the outputs.
    Vectors {
        #[command(flatten)]
        transport: TransportArgs,
        /// Also print per-vector quant8 exact-match counts.
        #[arg(short, long)]
        verbose: bool,
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Apply the VTS model and request mutations (BI-01…BI-26) to vectors and check that each
    /// malformed variant is rejected with INVALID_ARGUMENT.
    Mutations {
        #[command(flatten)]
        transport: TransportArgs,
        /// Only these classes (BI numbers, e.g. `--class 7 --class 23`).
        #[arg(long = "class")]
        classes: Vec<u8>,
        /// Failing variants listed per class.
        #[arg(long, default_value_t = 10)]
        show: usize,
        /// Vector files or directories; the bundled vectors when omitted.
        paths: Vec<PathBuf>,
    },
}

/// How to reach the driver; shared by every subcommand.
#[derive(Args)]
struct TransportArgs {
    #[arg(long, value_enum, default_value = "inproc")]
    transport: TransportKind,
    /// Kernel worker threads of an in-process driver (0 = one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

impl TransportArgs {
    fn open(&self) -> Result<Box<dyn Device>, ExitCode> {
        let options = TransportOptions {
            threads: self.threads,
        };
        transport::open(self.transport, &options).map_err(|e| {
            eprintln!("cannot open the device: {e}");
            ExitCode::from(2)
        })
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
    let device = match transport.open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let mut load_failures = Vec::new();
    let vectors = load_all(paths, &mut load_failures);
    for line in &load_failures {
        println!("{line}");
    }
    let (mut passed, mut failed) = (0usize, load_failures.len());
    let (mut exact, mut total) = (0usize, 0usize);
    for v in &vectors {
        let report = run_vector(device.as_ref(), v);
        match &report.failure {
            None => {
                passed += 1;
                println!("PASS {}", report.name);
            }
            Some(reason) => {
                failed += 1;
                println!("FAIL {}: {reason}", report.name);
            }
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
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn print_class(report: &ClassReport, show: usize) -> (usize, usize) {
    let failed = report.failures.len();
    let passed = report.variants.saturating_sub(failed);
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
    let device = match transport.open() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let paths = if paths.is_empty() {
        vec![bundled_dir()]
    } else {
        paths.to_vec()
    };
    let mut load_failures = Vec::new();
    let vectors = load_all(&paths, &mut load_failures);
    for line in &load_failures {
        println!("{line}");
    }
    let mut bases: Vec<BaseModel> = Vec::new();
    for v in &vectors {
        match base_models(v) {
            Ok(b) => bases.extend(b),
            Err(e) => load_failures.push(format!("FAIL {}: {e}", v.name)),
        }
    }
    let wanted = |bi: u8| classes.is_empty() || classes.contains(&bi);
    let (mut passed, mut failed) = (0usize, load_failures.len());
    for m in MODEL_MUTATORS.iter().filter(|m| wanted(m.bi.0)) {
        let (p, f) = print_class(&run_model_class(device.as_ref(), m, &bases), show);
        passed += p;
        failed += f;
    }
    for m in REQUEST_MUTATORS.iter().filter(|m| wanted(m.bi.0)) {
        let (p, f) = print_class(&run_request_class(device.as_ref(), m, &bases), show);
        passed += p;
        failed += f;
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    match &cli.command {
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
    }
}
