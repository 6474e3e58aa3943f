//! `nnhal-service`: the Neural Networks HAL service on a Linux host. Serves
//! `android.hardware.neuralnetworks.IDevice/<instance>` (frozen AIDL version 1) over binder RPC
//! on a Unix-domain socket until SIGINT or SIGTERM, then removes the socket.
//!
//! Default socket: `$XDG_RUNTIME_DIR/nnhal/<instance>.sock`, or `/tmp/nnhal-<uid>/<instance>.sock`
//! when `XDG_RUNTIME_DIR` is unset.

use clap::Parser;
use nnhal::binder;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Neural Networks HAL service (NNAPI 1.0 operations) over binder RPC"
)]
struct Args {
    /// Unix socket to listen on [default: $XDG_RUNTIME_DIR/nnhal/<instance>.sock, else
    /// /tmp/nnhal-<uid>/<instance>.sock]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Kernel worker threads (0 = one per core)
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Instance name; the device is published as android.hardware.neuralnetworks.IDevice/<NAME>
    #[arg(long, value_name = "NAME", default_value = "default")]
    instance: String,
    /// Log filter (error, warn, info, debug, trace, or env_logger syntax) [default: $RUST_LOG,
    /// else info]
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
}

fn main() {
    let args = Args::parse();
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"));
    if let Some(level) = &args.log_level {
        logger.parse_filters(level);
    }
    logger.init();

    let socket = args
        .socket
        .unwrap_or_else(|| binder::default_socket_path(&args.instance));
    if let Err(e) = binder::serve_until_signal(&socket, &args.instance, args.threads) {
        eprintln!("nnhal-service: {e}");
        std::process::exit(1);
    }
}
