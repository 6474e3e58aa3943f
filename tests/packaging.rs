//! Guards the Android packaging against drift (`docs/transport.md`): the
//! `Android.bp` modules, the init `.rc` file and the VINTF manifest fragment in `service/`, the
//! example SELinux files and the frozen AIDL version in `aidl/` must name the same binary,
//! instance and interface version. Nothing in the cargo build reads these files, so without
//! this test a mismatch would first show on a device (a refused registration, an unlabelled
//! binary).
//!
//! It also holds each Soong module's `rustlibs` to the Cargo build: a dependency the device
//! build has (not optional, or enabled by the `aosp` feature; `host` is off on the device) and
//! the module's sources use must be listed, and every listed crate must be such a dependency or
//! one of the platform crates only Soong supplies (libbinder_rs and the generated AIDL crates).
//!
//! `Android.bp` is read with a small Blueprint parser (modules of properties: strings, booleans,
//! integers, lists and maps; comments), so a check looks at a module's property rather than at
//! text that merely resembles it.

use std::path::PathBuf;

/// The service binary's Soong module, which is also its installed file name.
const SERVICE_MODULE: &str = "android.hardware.neuralnetworks-service.nnhal";
/// The same binary as a lazy HAL, with its own `.rc` file.
const LAZY_MODULE: &str = "android.hardware.neuralnetworks-service-lazy.nnhal";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

// ---- Blueprint ------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Int(i64),
    List(Vec<Value>),
    Map(Vec<(String, Value)>),
}

#[derive(Debug)]
struct Module {
    kind: String,
    props: Vec<(String, Value)>,
}

impl Module {
    fn get(&self, key: &str) -> Option<&Value> {
        self.props.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn name(&self) -> Option<&str> {
        self.str(self.get("name")?)
    }

    fn str<'a>(&self, v: &'a Value) -> Option<&'a str> {
        match v {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn string(&self, key: &str) -> Option<&str> {
        self.str(self.get(key)?)
    }

    fn bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A list of strings; `None` when absent or not such a list.
    fn strings(&self, key: &str) -> Option<Vec<&str>> {
        match self.get(key)? {
            Value::List(items) => items.iter().map(|v| self.str(v)).collect(),
            _ => None,
        }
    }
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn err<T>(&self, what: &str) -> Result<T, String> {
        let line = self.text[..self.pos]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        Err(format!("Android.bp line {line}: {what}"))
    }

    fn skip(&mut self) -> Result<(), String> {
        loop {
            while self.pos < self.text.len() && self.text[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
            if self.text[self.pos..].starts_with(b"//") {
                while self.pos < self.text.len() && self.text[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else if self.text[self.pos..].starts_with(b"/*") {
                let Some(end) = self.text[self.pos + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                else {
                    return self.err("unterminated comment");
                };
                self.pos += 2 + end + 2;
            } else {
                return Ok(());
            }
        }
    }

    fn peek(&mut self) -> Result<Option<u8>, String> {
        self.skip()?;
        Ok(self.text.get(self.pos).copied())
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek()? != Some(byte) {
            return self.err(&format!("expected `{}`", byte as char));
        }
        self.pos += 1;
        Ok(())
    }

    fn ident(&mut self) -> Result<String, String> {
        self.skip()?;
        let start = self.pos;
        while self.pos < self.text.len()
            && (self.text[self.pos].is_ascii_alphanumeric() || self.text[self.pos] == b'_')
        {
            self.pos += 1;
        }
        if start == self.pos {
            return self.err("expected an identifier");
        }
        Ok(String::from_utf8_lossy(&self.text[start..self.pos]).into_owned())
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.text.get(self.pos) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                Some(b'\\') => {
                    out.push(*self.text.get(self.pos + 1).unwrap_or(&b'\\'));
                    self.pos += 2;
                }
                Some(&b) => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    /// `{ key: value, … }` (the trailing comma is optional).
    fn map(&mut self) -> Result<Vec<(String, Value)>, String> {
        self.expect(b'{')?;
        let mut props = Vec::new();
        while self.peek()? != Some(b'}') {
            let key = self.ident()?;
            self.expect(b':')?;
            let value = self.value()?;
            if props.iter().any(|(k, _)| *k == key) {
                return self.err(&format!("property `{key}` given twice"));
            }
            props.push((key, value));
            if self.peek()? == Some(b',') {
                self.pos += 1;
            } else if self.peek()? != Some(b'}') {
                return self.err("expected `,` or `}`");
            }
        }
        self.pos += 1;
        Ok(props)
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek()? {
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'{') => Ok(Value::Map(self.map()?)),
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                while self.peek()? != Some(b']') {
                    items.push(self.value()?);
                    if self.peek()? == Some(b',') {
                        self.pos += 1;
                    } else if self.peek()? != Some(b']') {
                        return self.err("expected `,` or `]`");
                    }
                }
                self.pos += 1;
                Ok(Value::List(items))
            }
            Some(b) if b == b'-' || b.is_ascii_digit() => {
                let start = self.pos;
                self.pos += 1;
                while self.pos < self.text.len() && self.text[self.pos].is_ascii_digit() {
                    self.pos += 1;
                }
                let digits = String::from_utf8_lossy(&self.text[start..self.pos]).into_owned();
                match digits.parse() {
                    Ok(n) => Ok(Value::Int(n)),
                    Err(_) => self.err(&format!("bad integer {digits}")),
                }
            }
            _ => match self.ident()?.as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                // Variables and `+` are valid Blueprint but unused here; refusing them keeps
                // every value checkable.
                other => self.err(&format!("unsupported value `{other}`")),
            },
        }
    }
}

fn parse_blueprint(text: &str) -> Result<Vec<Module>, String> {
    let mut p = Parser {
        text: text.as_bytes(),
        pos: 0,
    };
    let mut modules = Vec::new();
    while p.peek()?.is_some() {
        let kind = p.ident()?;
        if p.peek()? != Some(b'{') {
            return p.err(&format!("expected a module body after `{kind}`"));
        }
        let props = p.map()?;
        modules.push(Module { kind, props });
    }
    Ok(modules)
}

// ---- the other formats -----------------------------------------------------------------------

/// One init `service` stanza: name, executable, arguments and option lines.
#[derive(Debug)]
struct RcService {
    path: String,
    args: Vec<String>,
    options: Vec<Vec<String>>,
}

fn parse_rc(text: &str) -> Result<Vec<RcService>, String> {
    let mut services: Vec<RcService> = Vec::new();
    let mut in_service = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        match words[0].as_str() {
            "service" => {
                if words.len() < 3 {
                    return Err(format!(
                        ".rc line {}: service needs a name and a path",
                        n + 1
                    ));
                }
                services.push(RcService {
                    path: words[2].clone(),
                    args: words[3..].to_vec(),
                    options: Vec::new(),
                });
                in_service = true;
            }
            "on" | "import" => in_service = false,
            _ if in_service => services.last_mut().unwrap().options.push(words),
            _ => return Err(format!(".rc line {}: option outside a service", n + 1)),
        }
    }
    Ok(services)
}

/// The text of every `<tag>…</tag>` in `xml`, trimmed.
fn tag_texts<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        out.push(after[..end].trim());
        rest = &after[end + close.len()..];
    }
    out
}

// ---- the lazy HAL variant --------------------------------------------------------------------

/// The lazy module is the service module with another `.rc`: the same sources, features,
/// crates, install directory and VINTF fragment; its `.rc` runs it with `--lazy` as the same
/// instance, declares that instance with `interface aidl`, and is `oneshot` and `disabled`.
fn check_lazy(
    files: &Files,
    modules: &[Module],
    service: &Module,
    instance: &str,
    lazy_path: &str,
    problems: &mut Vec<String>,
) {
    let Some(lazy) = modules.iter().find(|m| m.name() == Some(LAZY_MODULE)) else {
        problems.push(format!("Android.bp: no module named {LAZY_MODULE}"));
        return;
    };
    require(
        problems,
        lazy.kind == "rust_binary",
        format!("{LAZY_MODULE} is a {}, not a rust_binary", lazy.kind),
    );
    for key in [
        "srcs",
        "features",
        "rustlibs",
        "vintf_fragments",
        "defaults",
        "crate_name",
        "relative_install_path",
    ] {
        require(
            problems,
            lazy.get(key).is_some() && lazy.get(key) == service.get(key),
            format!("{LAZY_MODULE}: {key} differs from {SERVICE_MODULE}'s"),
        );
    }
    require(
        problems,
        lazy.bool("vendor") == Some(true),
        format!("{LAZY_MODULE}: not `vendor: true`"),
    );
    let rc_rel = single_file(lazy, "init_rc");
    let services = match parse_rc(files.get(&rc_rel)) {
        Ok(s) => s,
        Err(e) => {
            problems.push(e);
            return;
        }
    };
    let [s] = &services[..] else {
        problems.push(format!("{rc_rel}: {} services, expected 1", services.len()));
        return;
    };
    require(
        problems,
        s.path == lazy_path,
        format!(
            "{rc_rel}: runs {}, but {LAZY_MODULE} installs as {lazy_path}",
            s.path
        ),
    );
    let instance_arg = s
        .args
        .iter()
        .position(|a| a == "--instance")
        .and_then(|i| s.args.get(i + 1));
    require(
        problems,
        instance_arg.map(String::as_str) == Some(instance),
        format!("{rc_rel}: --instance {instance_arg:?}, but the plain .rc registers {instance}"),
    );
    require(
        problems,
        s.args.iter().any(|a| a == "--lazy"),
        format!("{rc_rel}: the service is not started with --lazy"),
    );
    let interface = nnhal::binder::service_name(instance);
    let mut wanted: Vec<Vec<&str>> = vec![
        vec!["interface", "aidl", interface.as_str()],
        vec!["oneshot"],
        vec!["disabled"],
    ];
    wanted.extend([["class", "hal"], ["user", "system"], ["group", "system"]].map(Vec::from));
    for option in wanted {
        require(
            problems,
            s.options.iter().any(|o| o[..] == option[..]),
            format!("{rc_rel}: no `{}` line", option.join(" ")),
        );
    }
}

// ---- rustlibs against Cargo -------------------------------------------------------------------

/// Crates only the Soong build supplies, by the name the sources use, with their Soong module.
/// The AIDL crates carry the frozen versions (`aidl_version` is filled in).
fn platform_crates(aidl_version: u32) -> Vec<(&'static str, String)> {
    vec![
        ("binder", "libbinder_rs".into()),
        (
            "android_hardware_neuralnetworks",
            format!("android.hardware.neuralnetworks-V{aidl_version}-rust"),
        ),
        // The version android.hardware.neuralnetworks V1 imports.
        (
            "android_hardware_common",
            "android.hardware.common-V2-rust".into(),
        ),
    ]
}

/// The Soong module AOSP gives a crates.io crate (or one of ours), from the name code uses.
fn soong_name(crate_name: &str) -> String {
    match crate_name {
        // external/rust/crates/log: `liblog` is taken by the C logging library.
        "log" => "liblog_rust".into(),
        other => format!("lib{other}"),
    }
}

/// The dependencies of the manifest `rel` that the device build compiles, as crate names
/// (`-` → `_`): the `[dependencies]` not marked optional plus those the `aosp` feature
/// enables, and with `dev` the `[dev-dependencies]` too. `Err` when the manifest does not parse.
fn device_dependencies(files: &Files, rel: &str, dev: bool) -> Result<Vec<String>, String> {
    let manifest: toml::Table =
        toml::from_str(files.get(rel)).map_err(|e| format!("{rel}: {e}"))?;
    let table = |key: &str| manifest.get(key).and_then(|v| v.as_table()).cloned();
    let aosp_enables: Vec<String> = table("features")
        .and_then(|f| f.get("aosp").and_then(|v| v.as_array()).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str())
        .map(|s| s.trim_start_matches("dep:").to_string())
        .collect();
    let mut out = Vec::new();
    let mut sections = vec![("dependencies", false)];
    if dev {
        sections.push(("dev-dependencies", true));
    }
    for (section, all) in sections {
        for (name, spec) in table(section).unwrap_or_default() {
            let optional = spec
                .get("optional")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            if all || !optional || aosp_enables.contains(&name) {
                out.push(name.replace('-', "_"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Every `.rs` file under `dir` (recursively), or `dir` itself when it is a file.
fn rust_files(dir: &std::path::Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The names a Rust file uses as the first segment of a path (`name::…`, `extern crate name`),
/// without the ones the file binds itself (`mod name`, `use a::name;`, `as name`). Comments are
/// skipped; a name behind `::` is a path segment, not a crate.
fn crates_named(text: &str) -> std::collections::BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let b = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut used = std::collections::BTreeSet::new();
    let mut bound = std::collections::BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        if !is_ident(b[i]) || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b'$')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        let word = &code[start..i];
        let before = code[..start].trim_end();
        if before.ends_with("::") {
            // A later segment: `use a::word;` binds it.
            if code[i..].trim_start().starts_with(';') && before.contains("use ") {
                bound.insert(word.to_string());
            }
            continue;
        }
        if before.ends_with(" mod") || before.ends_with("\nmod") || before.ends_with(" as") {
            bound.insert(word.to_string());
        } else if before.ends_with("extern crate") || code[i..].starts_with("::") {
            used.insert(word.to_string());
        }
    }
    for keyword in ["crate", "self", "super", "Self"] {
        bound.insert(keyword.to_string());
    }
    used.difference(&bound).cloned().collect()
}

/// The crate names used by the sources under `path` (relative to the root), but not under
/// `skip`.
fn crates_used(path: &str, skip: Option<&str>) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for file in rust_files(&root().join(path)) {
        if skip.is_some_and(|s| file.starts_with(root().join(s))) {
            continue;
        }
        out.extend(crates_named(&std::fs::read_to_string(&file).unwrap()));
    }
    out
}

/// A Soong module and the Cargo manifest it mirrors.
struct Mirror {
    name: &'static str,
    manifest: &'static str,
    /// Whether `[dev-dependencies]` count (a test module).
    dev: bool,
    /// The module's sources: a file or a directory.
    srcs: &'static str,
    /// Sources under `srcs` that belong to another module.
    skip: Option<&'static str>,
    /// The package's own library, which a binary module uses besides the dependencies.
    own: Option<&'static str>,
}

impl Mirror {
    fn lib(name: &'static str, manifest: &'static str, srcs: &'static str) -> Mirror {
        Mirror {
            name,
            manifest,
            dev: false,
            srcs,
            skip: None,
            own: None,
        }
    }

    fn with_dev(self) -> Mirror {
        Mirror { dev: true, ..self }
    }
}

/// Each Soong Rust module against the Cargo manifest it mirrors (see the module docs).
fn check_rustlibs(
    files: &Files,
    modules: &[Module],
    aidl_version: u32,
    problems: &mut Vec<String>,
) {
    let platform = platform_crates(aidl_version);
    let table = [
        Mirror::lib("libnnhal_hal", "hal/Cargo.toml", "hal/src"),
        Mirror::lib("nnhal_hal_unit_tests", "hal/Cargo.toml", "hal/src").with_dev(),
        Mirror::lib("libnnhal_kernels", "kernels/Cargo.toml", "kernels/src"),
        Mirror::lib(
            "nnhal_kernels_unit_tests",
            "kernels/Cargo.toml",
            "kernels/src",
        )
        .with_dev(),
        Mirror {
            skip: Some("src/bin"),
            ..Mirror::lib("libnnhal", "Cargo.toml", "src")
        },
        Mirror {
            own: Some("nnhal"),
            ..Mirror::lib(SERVICE_MODULE, "Cargo.toml", "src/bin/nnhal-service.rs")
        },
        Mirror {
            own: Some("nnhal"),
            ..Mirror::lib(LAZY_MODULE, "Cargo.toml", "src/bin/nnhal-service.rs")
        },
    ];
    // Per manifest, the device dependencies no module has claimed yet.
    let mut unclaimed: Vec<(&str, Vec<String>)> = Vec::new();
    for Mirror {
        name,
        manifest,
        dev,
        srcs,
        skip,
        own,
    } in table
    {
        let Some(module) = modules.iter().find(|m| m.name() == Some(name)) else {
            continue; // reported by `check`
        };
        let deps = match device_dependencies(files, manifest, dev) {
            Ok(d) => d,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        if !unclaimed.iter().any(|(m, _)| *m == manifest) {
            unclaimed.push((manifest, deps.clone()));
        }
        let used = crates_used(srcs, skip);
        let listed = module.strings("rustlibs").unwrap_or_default();
        let mut expected: Vec<String> = Vec::new();
        for dep in deps.iter().map(String::as_str).chain(own) {
            if used.contains(dep) {
                expected.push(soong_name(dep));
                if let Some((_, left)) = unclaimed.iter_mut().find(|(m, _)| *m == manifest) {
                    left.retain(|d| d != dep);
                }
            }
        }
        for (crate_name, soong) in &platform {
            if used.contains(*crate_name) && name == "libnnhal" {
                expected.push(soong.clone());
            }
        }
        for want in &expected {
            require(
                problems,
                listed.contains(&want.as_str()),
                format!(
                    "{name}: rustlibs lacks {want}, a dependency in {manifest} its sources use"
                ),
            );
        }
        for have in &listed {
            require(
                problems,
                expected.iter().any(|e| e == have),
                format!(
                    "{name}: rustlibs names {have}, which is no dependency of the device build \
                     in {manifest} that its sources use"
                ),
            );
        }
    }
    for (manifest, left) in unclaimed {
        require(
            problems,
            left.is_empty(),
            format!("{manifest}: the device build depends on {left:?}, which no Soong module's sources use"),
        );
    }
}

// ---- the checks ------------------------------------------------------------------------------

/// The files the checks read, by path relative to the repository root, so a test can hand in
/// altered copies.
struct Files(Vec<(String, String)>);

impl Files {
    fn from_repo() -> Files {
        let mut paths: Vec<String> = [
            "Android.bp",
            "build.rs",
            "Cargo.toml",
            "hal/Cargo.toml",
            "kernels/Cargo.toml",
            "README.md",
            "LICENSE",
            "service/sepolicy/file_contexts",
            "service/sepolicy/service_contexts",
            "service/sepolicy/hal_neuralnetworks_nnhal.te",
        ]
        .map(String::from)
        .to_vec();
        // The .rc and VINTF files are whichever the binary module names.
        paths.push(rc_path());
        paths.push(lazy_rc_path());
        paths.push(vintf_path());
        Files(
            paths
                .into_iter()
                .map(|p| {
                    let text = read(&p);
                    (p, text)
                })
                .collect(),
        )
    }

    fn get(&self, rel: &str) -> &str {
        self.0
            .iter()
            .find(|(p, _)| p == rel)
            .map(|(_, t)| t.as_str())
            .unwrap_or_else(|| panic!("{rel} not loaded"))
    }

    fn replace(&mut self, rel: &str, from: &str, to: &str) {
        let text = self.0.iter_mut().find(|(p, _)| *p == rel).unwrap();
        assert!(text.1.contains(from), "{rel} has no {from:?}");
        text.1 = text.1.replace(from, to);
    }
}

fn service_module(modules: &[Module]) -> Option<&Module> {
    modules.iter().find(|m| m.name() == Some(SERVICE_MODULE))
}

fn single_file(m: &Module, key: &str) -> String {
    match m.strings(key).as_deref() {
        Some([one]) => one.to_string(),
        _ => String::new(),
    }
}

/// The one file the service module lists under `key`.
fn service_file(key: &str) -> String {
    let modules = parse_blueprint(&read("Android.bp")).expect("Android.bp parses");
    let file = service_module(&modules).map_or(String::new(), |m| single_file(m, key));
    assert!(
        !file.is_empty(),
        "Android.bp: {SERVICE_MODULE} has no single {key} file"
    );
    file
}

fn lazy_rc_path() -> String {
    let modules = parse_blueprint(&read("Android.bp")).expect("Android.bp parses");
    let file = modules
        .iter()
        .find(|m| m.name() == Some(LAZY_MODULE))
        .map_or(String::new(), |m| single_file(m, "init_rc"));
    assert!(
        !file.is_empty(),
        "Android.bp: {LAZY_MODULE} has no single init_rc file"
    );
    file
}

fn rc_path() -> String {
    service_file("init_rc")
}

fn vintf_path() -> String {
    service_file("vintf_fragments")
}

/// Records `what` unless `cond` holds.
fn require(problems: &mut Vec<String>, cond: bool, what: String) {
    if !cond {
        problems.push(what);
    }
}

/// Every inconsistency between the packaging files, as readable sentences.
fn check(files: &Files) -> Vec<String> {
    let mut problems = Vec::new();

    let modules = match parse_blueprint(files.get("Android.bp")) {
        Ok(m) => m,
        Err(e) => return vec![e],
    };
    let by_name = |name: &str| modules.iter().find(|m| m.name() == Some(name));

    // The frozen interface version: build.rs stamps it into the stubs, every declaration in
    // aidl/ names it.
    let build_rs = files.get("build.rs");
    let aidl_version: Option<u32> = build_rs
        .lines()
        .find_map(|l| l.trim().strip_prefix("const NN_VERSION: i32 = "))
        .and_then(|v| v.trim_end_matches(';').parse().ok());
    require(
        &mut problems,
        aidl_version.is_some(),
        "build.rs: no `const NN_VERSION: i32 = N;`".into(),
    );
    let aidl_version = aidl_version.unwrap_or(0);
    let aidl_dir = root().join("aidl/android/hardware/neuralnetworks");
    let stated = format!("// Frozen API: android.hardware.neuralnetworks, version {aidl_version}.");
    let mut unstated: Vec<String> = std::fs::read_dir(&aidl_dir)
        .expect("aidl/ is readable")
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            !text.lines().any(|l| l.trim() == stated)
        })
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    unstated.sort();
    require(
        &mut problems,
        unstated.is_empty(),
        format!("aidl/android/hardware/neuralnetworks: {unstated:?} do not state `{stated}`"),
    );

    check_rustlibs(files, &modules, aidl_version, &mut problems);

    // The licence: Cargo.toml's SPDX id, the LICENSE text and Android.bp's license module.
    let spdx = toml::from_str::<toml::Table>(files.get("Cargo.toml"))
        .ok()
        .and_then(|t| {
            t.get("workspace")?
                .get("package")?
                .get("license")?
                .as_str()
                .map(String::from)
        });
    require(
        &mut problems,
        spdx.as_deref() == Some("Apache-2.0"),
        format!("Cargo.toml: workspace license {spdx:?}, but LICENSE is the Apache License 2.0"),
    );
    let license = files.get("LICENSE");
    require(
        &mut problems,
        license.contains("Apache License") && license.contains("Version 2.0, January 2004"),
        "LICENSE is not the Apache License 2.0 text".into(),
    );
    let license_module = modules.iter().find(|m| m.kind == "license");
    require(
        &mut problems,
        license_module.and_then(|m| m.strings("license_kinds"))
            == Some(vec!["SPDX-license-identifier-Apache-2.0"])
            && license_module.and_then(|m| m.strings("license_text")) == Some(vec!["LICENSE"]),
        "Android.bp: the license module must be Apache-2.0 with license_text [\"LICENSE\"]".into(),
    );

    // Android.bp: the service binary.
    let Some(service) = service_module(&modules) else {
        problems.push(format!("Android.bp: no module named {SERVICE_MODULE}"));
        return problems;
    };
    require(
        &mut problems,
        service.kind == "rust_binary",
        format!("{SERVICE_MODULE} is a {}, not a rust_binary", service.kind),
    );
    require(
        &mut problems,
        service.bool("vendor") == Some(true),
        format!("{SERVICE_MODULE}: not `vendor: true`"),
    );
    let install_dir = service.string("relative_install_path").unwrap_or("");
    require(
        &mut problems,
        install_dir == "hw",
        format!("{SERVICE_MODULE}: relative_install_path is {install_dir:?}, not \"hw\""),
    );
    let binary_path = format!("/vendor/bin/{install_dir}/{SERVICE_MODULE}");
    require(
        &mut problems,
        service.strings("features") == Some(vec!["aosp"]),
        format!("{SERVICE_MODULE}: features must be [\"aosp\"]"),
    );
    require(
        &mut problems,
        service.strings("srcs") == Some(vec!["src/bin/nnhal-service.rs"]),
        format!("{SERVICE_MODULE}: srcs must be the nnhal-service binary"),
    );
    let rc_rel = single_file(service, "init_rc");
    let vintf_rel = single_file(service, "vintf_fragments");
    require(
        &mut problems,
        rc_rel.starts_with("service/") && rc_rel.ends_with(".rc"),
        format!("{SERVICE_MODULE}: init_rc must be one service/*.rc file, is {rc_rel:?}"),
    );
    require(
        &mut problems,
        vintf_rel.starts_with("service/") && vintf_rel.ends_with(".xml"),
        format!("{SERVICE_MODULE}: vintf_fragments must be one service/*.xml, is {vintf_rel:?}"),
    );

    // The libraries: module names, crate roots and the driver's feature and AIDL crate.
    for (name, crate_name, root_file) in [
        ("libnnhal_hal", "nnhal_hal", "hal/src/lib.rs"),
        ("libnnhal_kernels", "nnhal_kernels", "kernels/src/lib.rs"),
        ("libnnhal", "nnhal", "src/lib.rs"),
        ("nnhal_hal_unit_tests", "nnhal_hal", "hal/src/lib.rs"),
        (
            "nnhal_kernels_unit_tests",
            "nnhal_kernels",
            "kernels/src/lib.rs",
        ),
    ] {
        let Some(m) = by_name(name) else {
            problems.push(format!("Android.bp: no module named {name}"));
            continue;
        };
        require(
            &mut problems,
            m.string("crate_name") == Some(crate_name),
            format!("{name}: crate_name must be {crate_name}"),
        );
        require(
            &mut problems,
            m.strings("srcs") == Some(vec![root_file]) && root().join(root_file).is_file(),
            format!("{name}: srcs must be [\"{root_file}\"], an existing file"),
        );
    }
    if let Some(lib) = by_name("libnnhal") {
        require(
            &mut problems,
            lib.strings("features") == Some(vec!["aosp"]),
            "libnnhal: features must be [\"aosp\"]".into(),
        );
        let aidl_crate = format!("android.hardware.neuralnetworks-V{aidl_version}-rust");
        require(
            &mut problems,
            lib.strings("rustlibs")
                .is_some_and(|libs| libs.contains(&aidl_crate.as_str())),
            format!("libnnhal: rustlibs must hold {aidl_crate}, the frozen version in aidl/"),
        );
    }
    require(
        &mut problems,
        files.get("Cargo.toml").contains("\naosp = ["),
        "Cargo.toml: no `aosp` feature for Android.bp to set".into(),
    );
    let pkg_version = by_name("nnhal_defaults").and_then(|m| m.string("cargo_pkg_version"));
    require(
        &mut problems,
        pkg_version == Some(env!("CARGO_PKG_VERSION")),
        format!(
            "nnhal_defaults: cargo_pkg_version {pkg_version:?} is not the crate version {}",
            env!("CARGO_PKG_VERSION")
        ),
    );

    // The init .rc file: one service running the installed binary as the VINTF instance.
    let mut instance = String::new();
    match parse_rc(files.get(&rc_rel)) {
        Err(e) => problems.push(e),
        Ok(services) if services.len() != 1 => {
            problems.push(format!("{rc_rel}: {} services, expected 1", services.len()))
        }
        Ok(services) => {
            let s = &services[0];
            require(
                &mut problems,
                s.path == binary_path,
                format!(
                    "{rc_rel}: runs {}, but the binary installs as {binary_path}",
                    s.path
                ),
            );
            match s.args.iter().position(|a| a == "--instance") {
                Some(i) if i + 1 < s.args.len() => instance = s.args[i + 1].clone(),
                _ => problems.push(format!("{rc_rel}: no `--instance NAME` argument")),
            }
            for option in [["class", "hal"], ["user", "system"], ["group", "system"]] {
                require(
                    &mut problems,
                    s.options.iter().any(|o| o[..] == option[..]),
                    format!("{rc_rel}: no `{}` line", option.join(" ")),
                );
            }
        }
    }

    // The VINTF fragment: the AIDL interface, its frozen version and the same instance.
    let xml = files.get(&vintf_rel);
    require(
        &mut problems,
        xml.contains("<hal format=\"aidl\">"),
        format!("{vintf_rel}: no <hal format=\"aidl\">"),
    );
    require(
        &mut problems,
        tag_texts(xml, "name") == ["android.hardware.neuralnetworks"],
        format!("{vintf_rel}: <name> must be android.hardware.neuralnetworks"),
    );
    let versions = tag_texts(xml, "version");
    require(
        &mut problems,
        versions == [aidl_version.to_string().as_str()],
        format!("{vintf_rel}: <version> {versions:?}, but aidl/ is version {aidl_version}"),
    );
    let fqnames = tag_texts(xml, "fqname");
    let expected_fqname = format!("IDevice/{instance}");
    require(
        &mut problems,
        fqnames == [expected_fqname.as_str()],
        format!("{vintf_rel}: <fqname> {fqnames:?}, but the .rc registers {expected_fqname}"),
    );

    // SELinux examples: the binary's label and the registered service name.
    let file_contexts = files.get("service/sepolicy/file_contexts");
    let labelled = file_contexts
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .map(|regex| regex.replace("\\.", "."))
        .collect::<Vec<_>>();
    let lazy_path = format!("/vendor/bin/{install_dir}/{LAZY_MODULE}");
    require(
        &mut problems,
        labelled == [binary_path.clone(), lazy_path.clone()],
        format!(
            "file_contexts labels {labelled:?}, but the binaries install as {binary_path} and \
             {lazy_path}"
        ),
    );
    check_lazy(
        files,
        &modules,
        service,
        &instance,
        &lazy_path,
        &mut problems,
    );
    let exec_type = "u:object_r:hal_neuralnetworks_nnhal_exec:s0";
    require(
        &mut problems,
        file_contexts.contains(exec_type)
            && files
                .get("service/sepolicy/hal_neuralnetworks_nnhal.te")
                .contains("type hal_neuralnetworks_nnhal_exec,"),
        format!("file_contexts must label the binary {exec_type}, a type the .te declares"),
    );
    let service_contexts = files.get("service/sepolicy/service_contexts");
    let expected_service = nnhal::binder::service_name(&instance);
    let named = service_contexts
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .collect::<Vec<_>>();
    require(
        &mut problems,
        named == [expected_service.as_str()],
        format!("service_contexts names {named:?}, but the service registers {expected_service}"),
    );

    // The README's build command names the module.
    require(
        &mut problems,
        files
            .get("README.md")
            .contains(&format!("m {SERVICE_MODULE}")),
        format!("README.md: no `m {SERVICE_MODULE}`"),
    );
    problems
}

#[test]
fn packaging_files_agree() {
    let problems = check(&Files::from_repo());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_service_binary_takes_the_instance_flag_the_rc_passes() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_nnhal-service"))
        .arg("--help")
        .output()
        .expect("nnhal-service runs");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--instance <NAME>"), "{help}");
    assert!(help.contains("--lazy"), "{help}");
}

/// A host has no servicemanager: `--lazy` is refused with a usage error that says why,
/// rather than silently serving for good.
#[test]
fn lazy_is_refused_on_a_host_with_the_reason() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nnhal-service"))
        .args(["--lazy", "--instance", "lazy-host-test"])
        .output()
        .expect("nnhal-service runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("servicemanager"), "{stderr}");
    assert!(stderr.contains("without --lazy"), "{stderr}");
}

/// The driver crate is the driver and the service: the host tools' crates (the importers, the
/// CLI, the golden-vector loader and its JSON) are no dependency of it, in either build, so
/// nothing pulls them towards the device library again (`docs/design.md`, section 2).
#[test]
fn the_driver_depends_on_no_host_tool() {
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).expect("Cargo.toml parses");
    let deps = manifest
        .get("dependencies")
        .and_then(|d| d.as_table())
        .expect("Cargo.toml has [dependencies]");
    for tool in [
        "nnhal-onnx",
        "nnhal-coreml",
        "nnhal-tflite",
        "planus",
        "nnhal-cli",
        "nnhal-vts",
        "prost",
        "serde",
        "serde_json",
    ] {
        assert!(
            !deps.contains_key(tool),
            "Cargo.toml: the driver depends on {tool}, a crate of the host tools"
        );
    }
}

/// Each kind of drift is caught: the checks are not vacuous.
#[test]
fn drift_is_reported() {
    let rc = rc_path();
    let lazy_rc = lazy_rc_path();
    let xml = vintf_path();
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("instance", xml.clone(), "IDevice/nnhal", "IDevice/other"),
        (
            "version",
            xml,
            "<version>1</version>",
            "<version>2</version>",
        ),
        ("binary path", rc.clone(), "/vendor/bin/hw/", "/vendor/bin/"),
        ("user", rc, "user system", "user root"),
        (
            "install dir",
            "Android.bp".into(),
            "relative_install_path: \"hw\"",
            "relative_install_path: \"hal\"",
        ),
        (
            "aidl crate",
            "Android.bp".into(),
            "android.hardware.neuralnetworks-V1-rust",
            "android.hardware.neuralnetworks-V2-rust",
        ),
        (
            "stamped version",
            "build.rs".into(),
            "const NN_VERSION: i32 = 1;",
            "const NN_VERSION: i32 = 2;",
        ),
        (
            "label",
            "service/sepolicy/file_contexts".into(),
            "service\\.nnhal",
            "service\\.other",
        ),
        (
            "service name",
            "service/sepolicy/service_contexts".into(),
            "IDevice/nnhal",
            "IDevice/default",
        ),
        (
            "lazy flag",
            lazy_rc.clone(),
            " --lazy\n",
            "\n",
        ),
        (
            "lazy interface",
            lazy_rc.clone(),
            "interface aidl android.hardware.neuralnetworks.IDevice/nnhal",
            "interface aidl android.hardware.neuralnetworks.IDevice/default",
        ),
        ("lazy oneshot", lazy_rc.clone(), "    oneshot\n", ""),
        ("lazy disabled", lazy_rc.clone(), "    disabled\n", ""),
        (
            "lazy instance",
            lazy_rc,
            "--instance nnhal --lazy",
            "--instance other --lazy",
        ),
        (
            "lazy module",
            "Android.bp".into(),
            "init_rc: [\"service/android.hardware.neuralnetworks-service-lazy.nnhal.rc\"],\n    vintf_fragments: [\"service/android.hardware.neuralnetworks-service.nnhal.xml\"],",
            "init_rc: [\"service/android.hardware.neuralnetworks-service-lazy.nnhal.rc\"],\n    vintf_fragments: [\"service/other.xml\"],",
        ),
        (
            "licence",
            "Cargo.toml".into(),
            "license = \"Apache-2.0\"",
            "license = \"MIT\"",
        ),
        (
            "licence text",
            "LICENSE".into(),
            "Apache License",
            "MIT License",
        ),
        (
            "syntax",
            "Android.bp".into(),
            "vendor: true,\n    relative_install_path",
            "vendor: true\n    relative_install_path",
        ),
    ];
    for (what, rel, from, to) in cases {
        let mut files = Files::from_repo();
        files.replace(&rel, from, to);
        assert!(
            !check(&files).is_empty(),
            "{what}: drift in {rel} went unnoticed"
        );
    }
}

/// Each way `rustlibs` and Cargo drift apart is reported, with the module and crate named: the
/// checks run on copies of the files, each broken one way.
#[test]
fn rustlibs_drift_is_reported() {
    let cases: [(&str, &str, &str, &str); 7] = [
        // A dependency the sources use, missing from its module.
        (
            "Android.bp",
            "\"libcrossbeam_queue\",\n",
            "",
            "libnnhal: rustlibs lacks libcrossbeam_queue",
        ),
        (
            "Android.bp",
            "\"libmemmap2\",\n",
            "",
            "libnnhal_hal: rustlibs lacks libmemmap2",
        ),
        // Host-only code compiled on the device again (how libnnhal once lacked serde_json).
        (
            "Cargo.toml",
            "env_logger = { workspace = true, optional = true }",
            "env_logger.workspace = true",
            "libnnhal: rustlibs lacks libenv_logger",
        ),
        (
            "Cargo.toml",
            "aosp = [\"dep:android_logger\", \"nnhal-hal/aosp\"]",
            "aosp = [\"dep:android_logger\", \"nnhal-hal/aosp\", \"dep:rsbinder\"]",
            "libnnhal: rustlibs lacks librsbinder",
        ),
        // A module naming a crate the Cargo build does not have (or the module does not use).
        (
            "Android.bp",
            "\"libclap\",",
            "\"libclap\", \"libserde_json\",",
            "android.hardware.neuralnetworks-service.nnhal: rustlibs names libserde_json",
        ),
        (
            "Android.bp",
            "\"libnnhal_kernels\",\n        \"libsmallvec\",",
            "\"libnnhal_kernels\",\n        \"libsmallvec\",\n        \"libitoa\",",
            "libnnhal: rustlibs names libitoa",
        ),
        // A Cargo dependency no module's sources use.
        (
            "kernels/Cargo.toml",
            "[dependencies]\n",
            "[dependencies]\nitoa = \"1\"\n",
            "kernels/Cargo.toml: the device build depends on [\"itoa\"]",
        ),
    ];
    for (rel, from, to, expected) in cases {
        let mut files = Files::from_repo();
        files.replace(rel, from, to);
        let problems = check(&files);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{rel}: {from:?} → {to:?} should report {expected:?}, got {problems:#?}"
        );
    }
}

/// Every difference between binder crates sits in `src/binder/ipc.rs` (the file `.ci/run`
/// type-checks against each stand-in in `android/standins/`): no other file the device
/// build compiles names the `binder` crate, and no file in `src/binder/` but `ipc.rs` builds
/// a `ParcelFileDescriptor` or reaches its descriptor other than through the shim.
#[test]
fn binder_api_differences_sit_in_ipc_rs() {
    // Host-only modules (feature `host`) never see AOSP's binder crate.
    let host_only = [
        "src/binder/client.rs",
        "src/binder/server.rs",
        "src/binder/child.rs",
    ];
    let ipc = root().join("src/binder/ipc.rs");
    let mut offenders = Vec::new();
    for file in rust_files(&root().join("src")) {
        if file == ipc {
            continue;
        }
        let rel = file
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let device = !host_only.iter().any(|h| rel.starts_with(h));
        if device && crates_named(&text).contains("binder") {
            offenders.push(format!("{rel} names the binder crate"));
        }
        if rel.starts_with("src/binder/") {
            for pattern in [
                "ParcelFileDescriptor::new",
                "AsRef<OwnedFd>",
                "AsRef<File>",
                ".as_ref().try_clone()",
                "fence.as_fd()",
            ] {
                if text.contains(pattern) {
                    offenders.push(format!("{rel} uses `{pattern}`; go through ipc.rs"));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
    // The checker sees a use when there is one.
    assert!(crates_named(&std::fs::read_to_string(&ipc).unwrap()).contains("binder"));
}

#[test]
fn crate_names_are_read_from_paths_not_from_local_names() {
    let used = crates_named(
        "use nnhal::binder;\nuse crate::vector::x;\nmod plan;\n// serde_json::x\n\
         extern crate rayon;\nfn f() { binder::go(); plan::x(); log::info!(\"\"); \
         crate::smallvec::S; self::serde::x; $crate::x(); }",
    );
    let used: Vec<&str> = used.iter().map(String::as_str).collect();
    assert_eq!(used, ["log", "nnhal", "rayon"]);
}

#[test]
fn blueprint_parser_reads_values_and_rejects_what_it_cannot_check() {
    let modules = parse_blueprint(
        "// c\nrust_test { name: \"t\", /* c */ n: -3, ok: false, l: [\"a\", \"b\",], \
         m: { x: [] } }",
    )
    .unwrap();
    assert_eq!(modules.len(), 1);
    assert_eq!(modules[0].kind, "rust_test");
    assert_eq!(modules[0].name(), Some("t"));
    assert_eq!(modules[0].get("n"), Some(&Value::Int(-3)));
    assert_eq!(modules[0].bool("ok"), Some(false));
    assert_eq!(modules[0].strings("l"), Some(vec!["a", "b"]));
    assert!(matches!(modules[0].get("m"), Some(Value::Map(_))));
    for bad in [
        "x { a: b }",
        "x { a: \"1\" \"2\" }",
        "x { a: 1, a: 2 }",
        "x = 1",
        "x { a: [1 2] }",
        "x { a: \"",
    ] {
        assert!(parse_blueprint(bad).is_err(), "{bad}");
    }
}
