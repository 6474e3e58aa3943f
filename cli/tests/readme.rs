//! The README's shell blocks, run as written against the binaries this build produced, so the
//! README cannot drift from the commands again.
//!
//! A block is a fenced ```` ```sh ```` block. An HTML comment on the line before it changes how
//! it runs:
//! - `<!-- readme-test: skip (reason) -->`: not run (installing, the AOSP tree, a benchmark);
//!   the test prints each skipped block with its reason.
//! - `<!-- readme-test: background (reason) -->`: started and left running (the service); the
//!   test waits for its default socket and stops it at the end.
//!
//! Every other block runs in bash (`-euo pipefail`) from the repository root, with the build's
//! binary directory first on `PATH` (standing in for the README's `cargo install`) and a
//! private `XDG_RUNTIME_DIR`, so the default socket never meets a service of the user's.

mod common;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, PartialEq)]
enum Mode {
    Run,
    Background,
    Skip(String),
}

struct Block {
    line: usize,
    text: String,
    mode: Mode,
}

/// The ```` ```sh ```` blocks of `readme`, with the mode their marker comment gives them.
fn shell_blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut previous = "";
    let mut open: Option<Block> = None;
    for (n, line) in readme.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(block) = open.as_mut() {
            if trimmed == "```" {
                blocks.push(open.take().unwrap());
            } else {
                block.text.push_str(trimmed);
                block.text.push('\n');
            }
            continue;
        }
        if trimmed == "```sh" {
            let marker = previous
                .strip_prefix("<!-- readme-test:")
                .and_then(|m| m.strip_suffix("-->"))
                .map(str::trim);
            let mode = match marker {
                None => Mode::Run,
                Some(m) if m.starts_with("background") => Mode::Background,
                Some(m) if m.starts_with("skip") => {
                    Mode::Skip(m.trim_start_matches("skip").trim().to_string())
                }
                Some(m) => panic!("README line {}: unknown readme-test marker `{m}`", n + 1),
            };
            open = Some(Block {
                line: n + 1,
                text: String::new(),
                mode,
            });
        }
        if !trimmed.is_empty() {
            previous = trimmed;
        }
    }
    assert!(open.is_none(), "README ends inside a code block");
    blocks
}

/// A background block's process group, stopped (SIGTERM, then SIGKILL) when dropped.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let group = Pid::from_raw(self.0.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

#[test]
fn the_readme_markers_parse() {
    let text = "<!-- readme-test: skip (why) -->\n```sh\na\n```\n\n```sh\nb\n```\n";
    let blocks = shell_blocks(text);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].mode, Mode::Skip("(why)".into()));
    assert_eq!(blocks[1].mode, Mode::Run);
    assert_eq!(blocks[1].text, "b\n");
}

#[test]
fn readme_shell_blocks_run_as_written() {
    let root = common::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(
            "cargo install --locked --path . && cargo install --locked --path cli \
             && cargo install --locked --path vts_tests"
        ),
        "the README lost its install line"
    );
    // The three programs the README installs, side by side: nnhal-service and nnhal-vts belong
    // to other packages of the workspace and are built beside this package's `nnhal`.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_nnhal"))
        .parent()
        .unwrap()
        .to_path_buf();
    for exe in [common::service_exe(), common::vts_exe()] {
        assert!(exe.is_file(), "{} is missing", exe.display());
    }
    let runtime = std::env::temp_dir().join(format!("nnhal-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&runtime);
    std::fs::create_dir_all(&runtime).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin_dir.clone()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .unwrap();
    let bash = |text: &str| {
        let mut c = Command::new("bash");
        c.args(["-euo", "pipefail", "-c", text])
            .current_dir(&root)
            .env("PATH", &path)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env_remove("RUST_LOG")
            .env_remove("NNHAL_SERVICE")
            .env_remove("NNHAL_ISA")
            .stdin(Stdio::null());
        c
    };

    let blocks = shell_blocks(&readme);
    assert!(
        blocks.len() >= 5,
        "only {} shell blocks found",
        blocks.len()
    );
    let mut background: Vec<Background> = Vec::new();
    let mut ran = 0;
    for block in &blocks {
        let first = block.text.lines().next().unwrap_or_default();
        match &block.mode {
            Mode::Skip(why) => {
                eprintln!("skipped README line {} `{first}`: {why}", block.line);
            }
            Mode::Background => {
                let log =
                    std::fs::File::create(runtime.join(format!("bg-{}.log", block.line))).unwrap();
                let child = bash(&block.text)
                    .stdout(Stdio::null())
                    .stderr(log)
                    .process_group(0)
                    .spawn()
                    .unwrap();
                background.push(Background(child));
                // The README's service listens on the default socket of the default instance.
                let socket = runtime.join("nnhal/default.sock");
                let start = Instant::now();
                while !socket.exists() {
                    assert!(
                        start.elapsed() < Duration::from_secs(30),
                        "README line {}: `{first}` never created {}",
                        block.line,
                        socket.display()
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            Mode::Run => {
                let out = bash(&block.text).output().unwrap();
                assert!(
                    out.status.success(),
                    "README line {}: the block failed ({})\n{}\nstdout:\n{}\nstderr:\n{}",
                    block.line,
                    out.status,
                    block.text,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                ran += 1;
            }
        }
    }
    drop(background);
    let _ = std::fs::remove_dir_all(&runtime);
    assert!(ran >= 3, "only {ran} README blocks ran");
}
