//! `nnhal-service`: the Neural Networks HAL service. Serves
//! `android.hardware.neuralnetworks.IDevice/<instance>` (frozen AIDL version 1; DESIGN.md §3).
//!
//! - Linux host (cargo): binder RPC on a Unix-domain socket until SIGINT or SIGTERM, then the
//!   socket is removed. Default socket: `$XDG_RUNTIME_DIR/nnhal/<instance>.sock`, or
//!   `/tmp/nnhal-<uid>/<instance>.sock` when `XDG_RUNTIME_DIR` is unset. Logs go to stderr.
//! - Android (Soong, cargo feature `aosp`; installed as
//!   `/vendor/bin/hw/android.hardware.neuralnetworks-service.nnhal` and started by init from
//!   `service/*.rc`): registered with servicemanager, serving calls on the binder thread pool
//!   until the process is killed. Logs go to logcat under the tag `nnhal`.

use clap::Parser;
use nnhal::binder;
#[cfg(feature = "aosp")]
use {nnhal::Driver, std::sync::Arc};

#[derive(Parser, Debug)]
#[command(version, about = "Neural Networks HAL service (NNAPI 1.0 operations)")]
struct Args {
    /// Unix socket to listen on [default: $XDG_RUNTIME_DIR/nnhal/<instance>.sock, else
    /// /tmp/nnhal-<uid>/<instance>.sock]
    #[cfg(not(feature = "aosp"))]
    #[arg(long, value_name = "PATH")]
    socket: Option<std::path::PathBuf>,
    /// Binder threads serving calls, besides the main thread
    #[cfg(feature = "aosp")]
    #[arg(long, value_name = "N", default_value_t = 4)]
    binder_threads: u32,
    /// Kernel worker threads (0 = one per core)
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Instance name; the device is published as android.hardware.neuralnetworks.IDevice/<NAME>
    #[arg(long, value_name = "NAME", default_value = "default")]
    instance: String,
    /// Log level: error, warn, info, debug or trace (on a host also env_logger filter syntax)
    /// [default: on a host $RUST_LOG, else info]
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        // init discards a service's stderr: on Android the reason goes to logcat as well.
        #[cfg(feature = "aosp")]
        log::error!("{e}");
        eprintln!("nnhal-service: {e}");
        std::process::exit(1);
    }
}

#[cfg(not(feature = "aosp"))]
fn run(args: Args) -> Result<(), String> {
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some(level) = &args.log_level {
        logger.parse_filters(level);
    }
    logger.init();

    let socket = args
        .socket
        .unwrap_or_else(|| binder::default_socket_path(&args.instance));
    binder::serve_until_signal(&socket, &args.instance, args.threads)
}

#[cfg(feature = "aosp")]
fn run(args: Args) -> Result<(), String> {
    // logcat has no filter syntax of its own to pass through: one level for everything.
    let level = match args.log_level.as_deref() {
        None => log::LevelFilter::Info,
        Some(text) => text.parse().map_err(|_| {
            format!("--log-level {text}: expected off, error, warn, info, debug or trace")
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
    binder::register(driver, &args.instance, args.binder_threads)?;
    binder::join_thread_pool();
    Err("the binder thread pool returned".into())
}
