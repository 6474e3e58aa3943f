//! Every document the repository cites must be in the repository: a `*.md` named in a source
//! file, a build file or another document (with a path, or a bare file name) has to exist,
//! either relative to the repository root, relative to the citing file, or — for a bare name —
//! somewhere in the tree. Citations of notes kept elsewhere are what this guards against.

use std::path::{Path, PathBuf};

/// Files whose citations are fixed by someone else's change (they are being edited in
/// parallel); their citations are reported but do not fail the test. Keep this list short and
/// explicit.
const NOT_CHECKED: &[&str] = &[];

/// The kinds of file that cite documents.
const CHECKED_EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "bp", "aidl", "rc", "xml", "te", "py", "sh", "patch",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            // vendor/ holds a published crate as it was released; its documents cite its own
            // repository.
            if name != "target" && name != "vendor" && !name.starts_with('.') || name == ".ci" {
                walk(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// The `….md` names in `text`: runs of path characters that end in `.md` at a word boundary.
/// URLs (`https://…/README.md`) are not citations of this repository and are left out.
fn cited_documents(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(".md") {
        let end = from + at + 3;
        from = end;
        if text[end..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let mut start = end - 3;
        while start > 0 && is_path_char(bytes[start - 1] as char) {
            start -= 1;
        }
        let token = &text[start..end];
        let stem = token.trim_start_matches("./").trim_end_matches(".md");
        if stem.is_empty() || stem.ends_with('/') || text[..start].ends_with(':') {
            continue;
        }
        found.push(token.trim_start_matches("./").to_string());
    }
    found
}

fn exists(root: &Path, citing: &Path, token: &str, all: &[PathBuf]) -> bool {
    if token.starts_with('/') {
        return false;
    }
    let dir = citing.parent().unwrap();
    if root.join(token).is_file() || dir.join(token).is_file() {
        return true;
    }
    !token.contains('/')
        && all
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == token))
}

#[test]
fn the_scanner_finds_citations_with_and_without_paths() {
    let text = "see (docs/design.md §3), bad.md, x.mdx, https://example.org/README.md, *.md";
    assert_eq!(cited_documents(text), ["docs/design.md", "bad.md"]);
}

#[test]
fn every_cited_document_is_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(root, &mut files);
    let mut missing = Vec::new();
    let mut excused = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let checked = file
            .extension()
            .is_some_and(|e| CHECKED_EXTENSIONS.contains(&e.to_string_lossy().as_ref()))
            || relative == ".ci/run";
        if !checked || relative == "tests/doc_citations.rs" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for token in cited_documents(&text) {
            if exists(root, file, &token, &files) {
                continue;
            }
            let line = format!("{relative}: {token}");
            if NOT_CHECKED.iter().any(|p| relative.starts_with(p)) {
                excused.push(line);
            } else {
                missing.push(line);
            }
        }
    }
    for line in &excused {
        eprintln!("not checked (fixed elsewhere): {line}");
    }
    assert!(
        missing.is_empty(),
        "documents cited but not in the repository:\n{}",
        missing.join("\n")
    );
    for doc in [
        "docs/design.md",
        "docs/vector-format.md",
        "docs/hal-contract.md",
        "docs/transport.md",
    ] {
        assert!(root.join(doc).is_file(), "{doc} is missing");
    }
}
