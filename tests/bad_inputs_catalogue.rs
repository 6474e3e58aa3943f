//! `docs/bad-inputs.md` accounts for every bad-input class, BI-01…BI-62, and every test it names
//! exists: a row whose test was renamed or removed fails here, so the catalogue cannot drift from
//! the suites.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && name != "vendor" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Every `fn name` and every `name =>` (the table-generated class tests) in the crates' sources.
fn defined_tests() -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in [
        "tests",
        "src",
        "hal",
        "kernels",
        "cli",
        "vts_tests",
        "fuzz",
        "importers",
    ] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.split("fn ").nth(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
            if let Some((name, _)) = line.split_once(" =>") {
                names.insert(name.trim().to_string());
            }
        }
    }
    names
}

/// The catalogue's rows: (BI number, the test names in its last column).
fn rows() -> Vec<(u32, Vec<String>)> {
    let text = std::fs::read_to_string(root().join("docs/bad-inputs.md")).unwrap();
    let mut rows = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("| BI-") else {
            continue;
        };
        let number: u32 = rest[..2].parse().expect("a two-digit class number");
        let tests_column = line.trim_end_matches('|').rsplit('|').next().unwrap();
        let names = tests_column
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        rows.push((number, names));
    }
    rows
}

#[test]
fn catalogue_has_one_row_per_class() {
    let numbers: Vec<u32> = rows().iter().map(|(n, _)| *n).collect();
    // BI-63…BI-66 are the classes of other NNAPI 1.2–1.3 operations; BI-73…BI-76 the
    // detection operations'; BI-77…BI-79 control flow; BI-80…BI-84 compilation caches;
    // BI-85…BI-89 damaged XModel files; BI-90…BI-92 damaged TensorFlow Lite files; BI-95…BI-97
    // ONNX models of the later lowerings; BI-98…BI-99 CoreML quantized weights and layer
    // parameters.
    assert_eq!(
        numbers,
        (1..=62).chain(67..=92).chain(95..=99).collect::<Vec<_>>()
    );
}

#[test]
fn every_test_the_catalogue_names_exists() {
    let defined = defined_tests();
    let mut missing = Vec::new();
    for (number, names) in rows() {
        assert!(!names.is_empty(), "BI-{number:02} names no test");
        for name in names {
            if !defined.contains(&name) {
                missing.push(format!("BI-{number:02}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named in docs/bad-inputs.md but not defined: {missing:#?}"
    );
}

#[test]
fn each_class_names_a_test_carrying_its_id() {
    for (number, names) in rows() {
        let prefix = format!("bi{number:02}_");
        assert!(
            names.iter().any(|n| n.starts_with(&prefix)),
            "BI-{number:02} names no `{prefix}…` test"
        );
    }
}
