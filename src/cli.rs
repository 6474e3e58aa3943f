//! What the three command-line programs (`nnhal`, `nnhal-service`, `nnhal-vts`) share, so that
//! they read alike: the exit-status convention and its help text, the `--log-level` check and
//! logger set-up, and the help line that shows where the default socket is. It sits in the
//! driver crate because `nnhal-service` is one of the three; `nnhal` (crate `nnhal-cli`) and
//! `nnhal-vts` reach it as `nnhal::cli`.

/// Exit status of a run that went through and whose checks passed.
pub const EXIT_OK: u8 = 0;
/// Exit status when a check failed (a wrong output, a failing test) or the service failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit status for a usage or input error: bad arguments, a file that cannot be read or is not
/// what it should be, or no service to talk to.
pub const EXIT_USAGE: u8 = 2;

/// The `--help` epilogue of every program: what its exit statuses mean.
pub const EXIT_STATUS_HELP: &str = "Exit status:
  0  success (every check passed)
  1  a check failed (a wrong output, a failing test) or the service failed
  2  usage or input error: bad arguments, a file that cannot be read or is not what it
     should be, no service listening on the socket";

/// The levels `--log-level` takes, least to most verbose.
pub const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// Checks a `--log-level` value: a level, or env_logger directives of the form
/// `LEVEL` / `TARGET=LEVEL` separated by commas (`info,rsbinder=warn`).
///
/// A bare word that is not a level is refused even though env_logger would take it as a module
/// name: a misspelt level (`--log-level bogus`) would otherwise silently mean "everything from
/// module bogus" and hide every line.
pub fn parse_log_level(text: &str) -> Result<String, String> {
    let is_level = |word: &str| LOG_LEVELS.iter().any(|l| l.eq_ignore_ascii_case(word));
    let expected = || {
        format!(
            "expected one of {} (or TARGET=LEVEL, …)",
            LOG_LEVELS.join(", ")
        )
    };
    if text.trim().is_empty() {
        return Err(format!("empty log level; {}", expected()));
    }
    // env_logger allows a trailing `/regex` filter on the message text.
    let directives = text.split('/').next().unwrap_or_default();
    for directive in directives.split(',').map(str::trim) {
        let level = match directive.split_once('=') {
            Some((target, level)) if !target.is_empty() => level,
            Some(_) => return Err(format!("`{directive}` has no target before `=`")),
            None => directive,
        };
        if !is_level(level) {
            return Err(format!("unknown log level `{level}`; {}", expected()));
        }
    }
    Ok(text.to_string())
}

/// Starts logging to stderr: `level` when given (already checked by [`parse_log_level`]), else
/// `$RUST_LOG`, else `default`.
#[cfg(feature = "host")]
pub fn init_logging(level: Option<&str>, default: &str) {
    let mut logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default));
    if let Some(level) = level {
        logger.parse_filters(level);
    }
    logger.init();
}

/// The help of a `--socket` option whose default is the instance's socket, naming the path
/// it stands for on this machine.
#[cfg(feature = "host")]
pub fn socket_help(what: &str) -> String {
    let default = crate::binder::default_socket_path("default");
    let dir = default
        .parent()
        .map_or_else(String::new, |d| d.display().to_string());
    format!(
        "{what} [default: {dir}/<INSTANCE>.sock, here {} for the default instance]",
        default.display()
    )
}

/// The `--help` epilogue of a client program: where it looks for the service, then the exit
/// statuses.
#[cfg(feature = "host")]
pub fn client_after_help() -> String {
    format!(
        "Service socket: {} unless --socket or --instance says otherwise.\n\n{EXIT_STATUS_HELP}",
        crate::binder::default_socket_path("default").display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_and_directives_are_accepted() {
        for ok in [
            "info",
            "WARN",
            "off",
            "info,rsbinder=error",
            "nnhal::binder=debug",
            "warn/x",
        ] {
            assert_eq!(parse_log_level(ok).as_deref(), Ok(ok), "{ok}");
        }
    }

    #[test]
    fn unknown_levels_are_refused() {
        for bad in ["bogus", "", "info,verbose", "=info", "nnhal=loud"] {
            assert!(parse_log_level(bad).is_err(), "{bad}");
        }
    }
}
