//! What a user reads when something is wrong, through the real `nnhal` and `nnhal-service`
//! binaries: every failure in words (socket, file, cause), the documented exit status, no raw
//! status codes (`NameNotFound`, `Errno(-111)`) and no parser jargon without a "not a vector
//! file" in front of it.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A private runtime directory: `XDG_RUNTIME_DIR` for the binaries, so default sockets land
/// here and never meet a service of the user's.
struct Runtime(PathBuf);

impl Runtime {
    fn new() -> Runtime {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nnhal-cli-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Runtime(dir)
    }

    fn command(&self, exe: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(exe);
        c.env("XDG_RUNTIME_DIR", &self.0)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        c
    }

    fn nnhal(&self, args: &[&str]) -> Output {
        self.command(env!("CARGO_BIN_EXE_nnhal"))
            .args(args)
            .output()
            .unwrap()
    }

    fn service(&self, args: &[&str]) -> Command {
        let mut c = self.command(common::service_exe());
        c.args(args);
        c
    }

    /// The default socket of the default instance under this runtime directory.
    fn default_socket(&self) -> PathBuf {
        self.0.join("nnhal/default.sock")
    }

    /// Starts a service on the default socket and waits until it listens.
    fn start_service(&self) -> Running {
        let child = self
            .service(&["--log-level", "warn"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let running = Running(child);
        let start = Instant::now();
        while !self.default_socket().exists() {
            assert!(start.elapsed() < Duration::from_secs(20), "no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        running
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// No raw binder status or errno reaches the user.
fn in_words(text: &str) {
    for code in ["NameNotFound", "Errno(", "StatusCode", "os error"] {
        assert!(!text.contains(code), "`{code}` in: {text}");
    }
}

#[test]
fn no_service_names_the_socket_and_how_to_start_one() {
    let rt = Runtime::new();
    let out = rt.nnhal(&["info"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let socket = rt.default_socket();
    assert!(
        err.contains(&format!(
            "no service is listening on {} (no such socket)",
            socket.display()
        )),
        "{err}"
    );
    // The default socket needs no --socket to start a service on it.
    assert!(
        err.contains("start the service with: nnhal-service\n"),
        "{err}"
    );
    in_words(&err);

    let other = rt.0.join("elsewhere.sock");
    let out = rt.nnhal(&["info", "--socket", other.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("nnhal-service --socket {}", other.display())),
        "{err}"
    );
}

#[test]
fn a_stale_socket_is_connection_refused_in_words() {
    let rt = Runtime::new();
    let stale = rt.0.join("stale.sock");
    // Binding and closing leaves the file without a listener, as a killed service does.
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let out = rt.nnhal(&["info", "--socket", stale.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "no service is listening on {} (connection refused",
            stale.display()
        )),
        "{err}"
    );
    in_words(&err);
}

#[test]
fn a_second_service_on_the_same_socket_says_another_is_serving() {
    let rt = Runtime::new();
    let _first = rt.start_service();
    let out = rt.service(&["--log-level", "off"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "nnhal-service: another nnhal-service is already serving on {}",
            rt.default_socket().display()
        )),
        "{err}"
    );
    in_words(&err);
}

#[test]
fn files_that_are_not_vectors_say_so() {
    let rt = Runtime::new();
    let readme = common::repo_root().join("README.md");
    let empty = rt.0.join("empty.json");
    std::fs::write(&empty, "{}").unwrap();
    let missing = rt.0.join("missing.json");
    let cases = [
        (readme.clone(), "is not a vector file: it is not JSON"),
        (empty.clone(), "is not a vector file: missing field `name`"),
        (missing.clone(), "cannot read"),
    ];
    for (file, words) in cases {
        let out = rt.nnhal(&["run", file.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", file.display());
        assert!(
            err.contains(&format!("{}", file.display())) && err.contains(words),
            "{}: {err}",
            file.display()
        );
        in_words(&err);
    }
}

#[test]
fn log_levels_are_checked() {
    let rt = Runtime::new();
    let service = rt.service(&["--log-level", "bogus"]).output().unwrap();
    let client = rt.nnhal(&["info", "--log-level", "bogus"]);
    for out in [service, client] {
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains("unknown log level `bogus`"),
            "{}",
            stderr(&out)
        );
    }
    // A level and TARGET=LEVEL directives are accepted (the client then fails for want of a
    // service, which is status 2 too, but says so).
    let out = rt.nnhal(&["info", "--log-level", "debug,rsbinder=off"]);
    assert!(
        stderr(&out).contains("no service is listening"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn versions_and_help_name_each_program_its_defaults_and_exit_statuses() {
    let rt = Runtime::new();
    let out = rt.service(&["--version"]).output().unwrap();
    assert!(
        stdout(&out).starts_with("nnhal-service "),
        "{}",
        stdout(&out)
    );
    let out = rt.nnhal(&["--version"]);
    assert!(stdout(&out).starts_with("nnhal "), "{}", stdout(&out));

    let socket = rt.default_socket().display().to_string();
    let service_help = stdout(&rt.service(&["--help"]).output().unwrap());
    for help in [
        service_help,
        stdout(&rt.nnhal(&["--help"])),
        stdout(&rt.nnhal(&["info", "--help"])),
        stdout(&rt.nnhal(&["run", "--help"])),
    ] {
        assert!(help.contains(&socket), "default socket missing: {help}");
        assert!(help.contains("Exit status:"), "{help}");
        assert!(help.contains("2  usage or input error"), "{help}");
    }
}

/// Every subcommand that reads a model names each format it takes: golden vectors (`.json`),
/// ONNX (`.onnx`) and CoreML (`.mlmodel`); `import` reads the two model formats and writes
/// `.json`.
#[test]
fn model_commands_name_every_format_in_their_help() {
    let rt = Runtime::new();
    for command in ["run", "import", "bench"] {
        let out = rt.nnhal(&[command, "--help"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let help = stdout(&out);
        for format in [".json", "ONNX", ".onnx", "CoreML", ".mlmodel"] {
            assert!(
                help.contains(format),
                "`nnhal {command} --help` does not name {format}:\n{help}"
            );
        }
    }
}

#[test]
fn info_and_run_say_which_socket_and_speak_json() {
    let rt = Runtime::new();
    let _service = rt.start_service();
    let socket = rt.default_socket().display().to_string();

    let out = rt.nnhal(&["info"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = stdout(&out).lines().next().unwrap_or_default().to_string();
    assert_eq!(first, format!("socket       {socket}"));

    let out = rt.nnhal(&["info", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(info["socket"], socket.as_str());
    assert_eq!(info["type"], "CPU");
    assert_eq!(info["operations"]["CONV_2D"], true);

    let vectors = common::repo_root().join("vts_tests/vectors");
    let relu = vectors.join("relu_float_1.json");
    let out = rt.nnhal(&["run", "--json", relu.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(run["passed"], 1);
    assert_eq!(run["failed"], 0);
    assert_eq!(run["examples"][0]["verdict"], "pass");
    assert_eq!(run["socket"], socket.as_str());

    // Without expected values the outputs are printed and the example is "unchecked", not a
    // failure.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&relu).unwrap()).unwrap();
    v["examples"][0]["outputs"] = serde_json::json!({});
    let file = rt.0.join("no_expected.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let out = rt.nnhal(&["run", file.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(
        text.contains("(no expected values): [0, 0, 0.5, 10]"),
        "{text}"
    );
    assert!(text.contains("UNCHECKED example 0"), "{text}");
    assert!(
        text.ends_with("0 passed, 0 failed, 1 unchecked\n"),
        "{text}"
    );
}
