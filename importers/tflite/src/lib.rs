//! nnhal-tflite: TensorFlow Lite models as NNAPI models, lowered the way TensorFlow Lite's
//! NNAPI delegate lowers them.
//!
//! [`import`] reads a `.tflite` flatbuffer (schema version 3, file identifier `TFL3`; the tables
//! read are declared in `schema/tflite.fbs`, the reader generated from it by planus in
//! [`generated`]) and lowers subgraph 0, operator by operator, to a [`nnhal_hal::Model`] built
//! with [`nnhal_hal::builder::ModelBuilder`] and checked by `validate_model`. TensorFlow Lite
//! images are NHWC like NNAPI's, so every graph edge keeps its layout and element type: an int8
//! model takes and gives int8. The builtins lowered and their constraints are listed in the
//! README ("TensorFlow Lite models"); the damaged-file classes BI-90…BI-92 are in
//! `docs/bad-inputs.md`.

pub mod decode;
mod lower;

/// The reader planus-cli generates from `schema/tflite.fbs` (`tools/generate.sh`).
#[allow(clippy::all, missing_docs, unused, rustdoc::all)]
#[rustfmt::skip]
pub mod generated;

pub use decode::{builtin_name, decode, Decoded};
pub use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, SourceType};

/// Why a model cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum TfliteError {
    /// BI-90: the bytes are not a TensorFlow Lite flatbuffer (too short, no `TFL3`
    /// identifier, a root offset outside the file).
    #[error("not a TensorFlow Lite model: {0}")]
    NotTflite(String),
    /// BI-91 and BI-92: a flatbuffer whose contents are damaged (an offset or length outside the
    /// file, an index past its table, a buffer that does not hold its tensor).
    #[error("malformed TensorFlow Lite model: {0}")]
    Malformed(String),
    /// The model as a whole is outside what the importer takes (no subgraph, an input type).
    #[error("{0}")]
    Unsupported(String),
    /// Operators that cannot be lowered: the report gives every operator's outcome.
    #[error("{count} operator(s) cannot be lowered:\n{}", report.join("\n"))]
    Operators { count: usize, report: Vec<String> },
    /// The lowered model failed NNAPI validation (an importer defect).
    #[error("the lowered model does not validate: {0}")]
    Invalid(String),
}

/// Imports a TensorFlow Lite model from its bytes.
pub fn import(bytes: &[u8]) -> Result<ImportedModel, TfliteError> {
    let model = decode::decode(bytes)?;
    lower::lower(&model)
}

/// Imports a `.tflite` file.
pub fn import_file(path: &std::path::Path) -> Result<ImportedModel, TfliteError> {
    let bytes = std::fs::read(path)
        .map_err(|e| TfliteError::NotTflite(format!("cannot read {}: {e}", path.display())))?;
    import(&bytes)
}
