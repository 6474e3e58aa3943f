//! `nnhal-service`: the Neural Networks HAL service. Serves
//! `android.hardware.neuralnetworks.IDevice/<instance>` (frozen AIDL version 1;
//! docs/transport.md).
//!
//! - Linux host (cargo): binder RPC on a Unix-domain socket until SIGINT or SIGTERM, then the
//!   socket is removed. Default socket: `$XDG_RUNTIME_DIR/nnhal/<instance>.sock`, or
//!   `/tmp/nnhal-<uid>/<instance>.sock` when `XDG_RUNTIME_DIR` is unset. Logs go to stderr.
//! - Android (Soong, cargo feature `aosp`; installed as
//!   `/vendor/bin/hw/android.hardware.neuralnetworks-service.nnhal` and started by init from
//!   `service/*.rc`): registered with servicemanager, serving calls on the binder thread pool
//!   until the process is killed. Logs go to logcat under the tag `nnhal`. With `--lazy` it
//!   registers as a lazy HAL (`service/*-lazy.rc`): servicemanager has init start it when a
//!   client asks for the device and lets it exit once no client holds it.

use clap::Parser;
use nnhal::binder;
use nnhal::limits::Limits;
#[cfg(feature = "aosp")]
use {nnhal::Driver, std::sync::Arc};

#[derive(Parser, Debug)]
#[command(
    name = "nnhal-service",
    version,
    about = "Neural Networks HAL service (NNAPI 1.0 operations)",
    after_help = nnhal::cli::EXIT_STATUS_HELP
)]
struct Args {
    #[cfg(not(feature = "aosp"))]
    #[arg(long, value_name = "PATH", help = nnhal::cli::socket_help("Unix socket to listen on"))]
    socket: Option<std::path::PathBuf>,
    /// Binder threads serving calls, besides the main thread
    #[cfg(feature = "aosp")]
    #[arg(long, value_name = "N", default_value_t = 4)]
    binder_threads: u32,
    /// Kernel worker threads (0 = one per core)
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Register as a lazy HAL (Android: started on demand by servicemanager, exits when no
    /// client holds the device; use the `-lazy.rc` file). A host has no servicemanager:
    /// there the flag is refused
    #[arg(long)]
    lazy: bool,
    /// Instance name; the device is published as
    /// `android.hardware.neuralnetworks.IDevice/NAME`
    #[arg(long, value_name = "NAME", default_value = "default")]
    instance: String,
    /// Log level: off, error, warn, info, debug or trace (on a host also TARGET=LEVEL
    /// directives, comma-separated) [default: on a host $RUST_LOG, else info]
    #[arg(long, value_name = "LEVEL", value_parser = nnhal::cli::parse_log_level)]
    log_level: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Resource limits (docs/limits.md); the defaults suit a 2-core device with a few GB.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Resource limits (docs/limits.md)")]
struct LimitArgs {
    /// Connections served at once; more clients wait until one closes [host RPC only]
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_connections,
          value_parser = parse_positive)]
    max_connections: usize,
    /// Constant bytes one model may declare (operandValues plus its pools)
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_model_bytes)]
    max_model_bytes: u64,
    /// Operands plus operations of one model
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_operands)]
    max_operands: usize,
    /// Estimated memory all prepared models may hold together
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_prepared_bytes)]
    max_prepared_bytes: u64,
    /// Estimated memory the prepared models of one client process may hold
    #[arg(long, value_name = "BYTES",
          default_value_t = Limits::default().max_prepared_bytes_per_client)]
    max_prepared_bytes_per_client: u64,
    /// Bytes the input and output arguments of one execution may span
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_execution_bytes)]
    max_execution_bytes: u64,
    /// Seconds a new connection has to complete its handshake [host RPC only]
    #[arg(long, value_name = "SECONDS", default_value_t = Limits::default().handshake_timeout.as_secs_f64(),
          value_parser = parse_seconds)]
    handshake_timeout: f64,
    /// Seconds a connection that holds nothing (no call, no prepared model, burst or callback;
    /// the device does not count) may stay silent before it is closed; 0: never. At the
    /// connection limit the one silent longest (at least 1 s) is closed for a waiting client
    /// [host RPC only]
    #[arg(long, value_name = "SECONDS",
          default_value_t = Limits::default().idle_timeout.map_or(0.0, |d| d.as_secs_f64()),
          value_parser = parse_seconds_or_zero)]
    idle_timeout: f64,
    /// Seconds the service waits for a client to take a reply before it ends that client's
    /// session [host RPC only]
    #[arg(long, value_name = "SECONDS", default_value_t = Limits::default().send_timeout.as_secs_f64(),
          value_parser = parse_seconds)]
    send_timeout: f64,
    /// Longest wait for the fences of a fenced execution that gave no deadline or duration
    #[arg(long, value_name = "SECONDS", default_value_t = Limits::default().max_fence_wait.as_secs_f64(),
          value_parser = parse_seconds)]
    max_fence_wait: f64,
}

fn parse_positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{text}: a positive whole number")),
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(s),
        _ => Err(format!("{text}: a positive number of seconds")),
    }
}

fn parse_seconds_or_zero(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s == 0.0 => Ok(s),
        _ => parse_seconds(text).map_err(|_| format!("{text}: 0 or a positive number of seconds")),
    }
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections,
            max_model_bytes: self.max_model_bytes,
            max_operands: self.max_operands,
            max_prepared_bytes: self.max_prepared_bytes,
            max_prepared_bytes_per_client: self.max_prepared_bytes_per_client,
            max_execution_bytes: self.max_execution_bytes,
            handshake_timeout: std::time::Duration::from_secs_f64(self.handshake_timeout),
            idle_timeout: (self.idle_timeout > 0.0)
                .then(|| std::time::Duration::from_secs_f64(self.idle_timeout)),
            send_timeout: std::time::Duration::from_secs_f64(self.send_timeout),
            max_fence_wait: std::time::Duration::from_secs_f64(self.max_fence_wait),
        }
    }
}

fn main() {
    let args = Args::parse();
    #[cfg(not(feature = "aosp"))]
    if args.lazy {
        eprintln!(
            "nnhal-service: --lazy asks Android's servicemanager to start the service on demand \
             and stop it when unused; a host has no servicemanager, so run nnhal-service without \
             --lazy (it serves until SIGINT or SIGTERM)"
        );
        std::process::exit(nnhal::cli::EXIT_USAGE.into());
    }
    if let Err(e) = run(args) {
        // init discards a service's stderr: on Android the reason goes to logcat as well.
        #[cfg(feature = "aosp")]
        log::error!("{e}");
        eprintln!("nnhal-service: {e}");
        std::process::exit(nnhal::cli::EXIT_FAILED.into());
    }
}

#[cfg(not(feature = "aosp"))]
fn run(args: Args) -> Result<(), String> {
    nnhal::cli::init_logging(args.log_level.as_deref(), "info");

    let socket = args
        .socket
        .unwrap_or_else(|| binder::default_socket_path(&args.instance));
    binder::serve_until_signal_with_limits(
        &socket,
        &args.instance,
        args.threads,
        args.limits.limits(),
    )
}

#[cfg(feature = "aosp")]
fn run(args: Args) -> Result<(), String> {
    // logcat has no filter syntax of its own to pass through: one level for everything.
    let level = match args.log_level.as_deref() {
        None => log::LevelFilter::Info,
        Some(text) => text.parse().map_err(|_| {
            format!(
                "--log-level {text}: on Android one level for everything: {}",
                nnhal::cli::LOG_LEVELS.join(", ")
            )
        })?,
    };
    android_logger::init_once(
        android_logger::Config::default()
            .with_tag("nnhal")
            .with_max_level(level),
    );

    let driver = Arc::new(Driver::new(args.threads).map_err(|e| e.to_string())?);
    log::info!(
        "kernels: {} on {} thread(s)",
        driver.isa(),
        driver.threads()
    );
    binder::register(
        driver,
        &args.instance,
        args.binder_threads,
        args.limits.limits(),
        args.lazy,
    )?;
    binder::join_thread_pool();
    Err("the binder thread pool returned".into())
}
