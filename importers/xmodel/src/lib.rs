//! nnhal-xmodel: Vitis AI XIR graphs (`.xmodel`) as NNAPI models.
//!
//! An `.xmodel` file is one serialized protobuf message `serial_v2.Graph` (the schema is
//! `proto/graph_proto_v2.proto`; format facts in `docs/xmodel.md`). [`decode()`] reads and checks
//! it (bounds before allocation, unique names, resolvable arguments, acyclic, constant byte
//! lengths against their shapes, compiled files refused); [`lower`] turns the operators into
//! NNAPI operations through [`nnhal_hal::builder::ModelBuilder`]; [`mod@reference`] computes the
//! same graph in float64 from the XIR operator definitions (the test oracle). The README
//! ("XModel models") lists every XIR operator and what it becomes; the damaged-file classes
//! BI-85…BI-89 are in `docs/bad-inputs.md`.

pub mod decode;
pub mod lower;
pub mod reference;
pub mod writer;

/// The messages generated from `proto/graph_proto_v2.proto`.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/serial_v2.rs"));
}

pub use decode::{decode, Graph, Op};
pub use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, SourceType};

/// Why a model cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum XmodelError {
    /// BI-85: the bytes are not a `serial_v2.Graph` (truncated, not protobuf, too large).
    #[error("not an XIR graph: {0}")]
    NotXmodel(String),
    /// BI-86 and BI-87: a graph whose structure or constants are damaged (duplicate names, an
    /// argument naming no operator, a cycle, constant bytes disagreeing with the shape).
    #[error("malformed XIR graph: {0}")]
    Malformed(String),
    /// BI-88: a DPU-compiled graph, whose weights live only in DPU register blobs.
    #[error(
        "compiled xmodel ({0}): its weights are only in DPU parameter blobs; import the \
         quantizer's *_int.xmodel instead"
    )]
    Compiled(String),
    /// BI-89 and the rest: operators that cannot be lowered, each named with its reason.
    #[error("{count} operator(s) cannot be lowered:\n{}", report.join("\n"))]
    Operators { count: usize, report: Vec<String> },
    /// The graph as a whole is outside what the importer takes (no output, a bad --start-at).
    #[error("{0}")]
    Unsupported(String),
    /// The lowered model failed NNAPI validation (an importer defect).
    #[error("the lowered model does not validate: {0}")]
    Invalid(String),
}

/// How to import: operators to start the graph at (their outputs become model inputs).
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub start_at: Vec<String>,
}

/// Imports an XIR graph from its bytes.
pub fn import(bytes: &[u8], options: &Options) -> Result<ImportedModel, XmodelError> {
    let graph = decode::decode(bytes)?;
    lower::lower(&graph, options)
}

/// Imports an `.xmodel` file.
pub fn import_file(
    path: &std::path::Path,
    options: &Options,
) -> Result<ImportedModel, XmodelError> {
    let bytes = std::fs::read(path)
        .map_err(|e| XmodelError::NotXmodel(format!("cannot read {}: {e}", path.display())))?;
    import(&bytes, options)
}
