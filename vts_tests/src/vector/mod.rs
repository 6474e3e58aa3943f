//! Golden test vectors: the file format (`docs/vector-format.md`: one JSON object per test model
//! with its operands, operations, examples and the harness tolerance), [`model`] (the HAL model
//! and requests a vector stands for) and [`compare`] (the AOSP harness tolerance rule), and
//! where this crate keeps its vectors ([`bundled_dir`], [`later_archive`]). Shared by the
//! conformance suite, `nnhal run` and `nnhal bench` (crate `nnhal-cli`).
//!
//! The loader keeps the schema's spelling (operand types and lifetimes as `types.hal` names) and
//! ignores fields it does not know, so newer converter output still loads. Every number is read
//! as `f64`: that represents every INT32/UINT32/uint8 value exactly, and the float values are the
//! shortest decimals that round to the intended float32 from float64 as well.

pub mod compare;
pub mod model;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A problem with a vector file (unreadable, malformed, or inconsistent with itself). The
/// messages name the file and say what it should have been.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("cannot read {}: {}", path.display(), io_words(source))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a vector file: {}", path.display(), json_words(source))]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// An I/O error without the errno number a reader has no use for.
fn io_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    text.split(" (os error")
        .next()
        .unwrap_or(&text)
        .to_lowercase()
}

/// Why JSON text is not a vector: not JSON at all, or JSON of another shape.
fn json_words(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof => format!(
            "it is not JSON ({e}); a vector is one JSON object as described in \
             docs/vector-format.md"
        ),
        Category::Data => format!(
            "{e}; a vector is one JSON object with name, model and examples, as described in \
             docs/vector-format.md"
        ),
        Category::Io => e.to_string(),
    }
}

/// One test model with its examples.
#[derive(Clone, Debug, Deserialize)]
pub struct Vector {
    /// AOSP test name (`GeneratedTests.<name>`).
    pub name: String,
    #[serde(default)]
    pub spec: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    pub model: VectorModel,
    pub examples: Vec<Example>,
    #[serde(default)]
    pub tolerance: Tolerance,
    #[serde(default)]
    pub aosp: Aosp,
    /// The oldest NNAPI version the test model belongs to (`V1_0`…`V1_3`, `UNKNOWN`).
    #[serde(default, rename = "minSupportedVersion")]
    pub min_supported_version: Option<String>,
    /// The variation names joined into the test name ("" for none).
    #[serde(default)]
    pub variant: String,
    /// `Model.relaxComputationFloat32toFloat16`.
    #[serde(default)]
    pub relaxed: bool,
    /// The harness expects preparation or execution to fail; VTS runs such a model only in
    /// its validation suites.
    #[serde(default, rename = "expectFailure")]
    pub expect_failure: bool,
    /// For a `_dynamic_output_shape` file: the base test it was derived from.
    #[serde(default, rename = "derivedFrom")]
    pub derived_from: Option<String>,
    /// The AIDL VTS suites that instantiate this model.
    #[serde(default, rename = "vtsSuites")]
    pub vts_suites: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorModel {
    pub operands: Vec<VectorOperand>,
    pub operations: Vec<VectorOperation>,
    /// Model inputs in request order; omitted optional inputs are not listed.
    pub input_indexes: Vec<u32>,
    pub output_indexes: Vec<u32>,
    /// Subgraphs named by SUBGRAPH operands (IF branches, WHILE condition and body).
    #[serde(default)]
    pub referenced: Vec<VectorSubgraph>,
}

/// A referenced subgraph; its MODEL_INPUT / MODEL_OUTPUT operands are its own inputs and
/// outputs, and its constants are written inline like the main model's.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorSubgraph {
    pub operands: Vec<VectorOperand>,
    pub operations: Vec<VectorOperation>,
    pub input_indexes: Vec<u32>,
    pub output_indexes: Vec<u32>,
}

/// Per-channel quantization parameters (`SymmPerChannelQuantParams`).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorChannelQuant {
    pub scales: Vec<f32>,
    pub channel_dim: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorOperand {
    /// `OperandType` name, e.g. `TENSOR_FLOAT32`.
    #[serde(rename = "type")]
    pub operand_type: String,
    #[serde(default)]
    pub dimensions: Vec<u32>,
    #[serde(default)]
    pub scale: f32,
    #[serde(default)]
    pub zero_point: i32,
    /// `OperandLifeTime` name; `NO_VALUE` marks an omitted optional input.
    pub lifetime: String,
    /// Constant contents (CONSTANT_COPY only); scalars are one-element lists. For a SUBGRAPH
    /// operand, `[k]`: the index of the referenced subgraph.
    #[serde(default)]
    pub value: Option<Vec<f64>>,
    #[serde(default)]
    pub channel_quant: Option<VectorChannelQuant>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct VectorOperation {
    /// `OperationType` name, e.g. `CONV_2D`.
    #[serde(rename = "type")]
    pub operation_type: String,
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
}

/// Input values and expected outputs; keys are positions in the model's input/output lists.
#[derive(Clone, Debug, Deserialize)]
pub struct Example {
    pub inputs: BTreeMap<String, Vec<f64>>,
    pub outputs: BTreeMap<String, Vec<f64>>,
}

impl Example {
    /// Values for position `pos` of `model.inputIndexes`.
    pub fn input(&self, pos: usize) -> Option<&[f64]> {
        self.inputs.get(&pos.to_string()).map(Vec::as_slice)
    }

    /// Expected values for position `pos` of `model.outputIndexes`.
    pub fn output(&self, pos: usize) -> Option<&[f64]> {
        self.outputs.get(&pos.to_string()).map(Vec::as_slice)
    }
}

/// The AOSP harness comparison rule for this test.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tolerance {
    #[serde(default)]
    pub float32: Float32Tolerance,
    /// TENSOR_FLOAT16 outputs (the relaxed limits).
    #[serde(default = "Float32Tolerance::half")]
    pub float16: Float32Tolerance,
    #[serde(default)]
    pub quant8: IntTolerance<1>,
    #[serde(default)]
    pub quant8_signed: IntTolerance<1>,
    #[serde(default)]
    pub quant8_symm: IntTolerance<1>,
    #[serde(default)]
    pub quant16_asymm: IntTolerance<1>,
    #[serde(default)]
    pub quant16_symm: IntTolerance<1>,
    #[serde(default)]
    pub int32: IntTolerance<0>,
    /// Output positions the harness does not compare (scratch buffers, some states).
    #[serde(default)]
    pub ignored_outputs: Vec<usize>,
    /// RANDOM_MULTINOMIAL: its output is random and ignored element by element; instead each
    /// class's frequency among the samples must be within this of the softmax of the logits
    /// (see [`compare::check_multinomial`]).
    #[serde(default)]
    pub multinomial: Option<MultinomialTolerance>,
}

/// The statistical rule of RANDOM_MULTINOMIAL's output.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct MultinomialTolerance {
    pub tolerance: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            float32: Float32Tolerance::default(),
            float16: Float32Tolerance::half(),
            quant8: IntTolerance::default(),
            quant8_signed: IntTolerance::default(),
            quant8_symm: IntTolerance::default(),
            quant16_asymm: IntTolerance::default(),
            quant16_symm: IntTolerance::default(),
            int32: IntTolerance::default(),
            ignored_outputs: Vec::new(),
            multinomial: None,
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Float32Tolerance {
    pub atol: f32,
    pub rtol: f32,
}

impl Float32Tolerance {
    /// The harness limits for float16 (and relaxed float32): `atol = rtol = 5 · 2⁻¹⁰`.
    pub fn half() -> Self {
        Float32Tolerance {
            atol: 0.0048828125,
            rtol: 0.0048828125,
        }
    }
}

impl Default for Float32Tolerance {
    /// The harness defaults: `fpAtol = 1e-5f`, `fpRtol = 5 * FLT_EPSILON`.
    fn default() -> Self {
        Float32Tolerance {
            atol: 1e-5,
            rtol: 5.0 * f32::EPSILON,
        }
    }
}

/// An absolute limit on integer differences; `D` is the harness default.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntTolerance<const D: i64> {
    pub max_abs_diff: i64,
}

impl<const D: i64> Default for IntTolerance<D> {
    fn default() -> Self {
        IntTolerance { max_abs_diff: D }
    }
}

/// Traceability back to the AOSP test; only the omitted-input lists matter for running.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Aosp {
    #[serde(default)]
    pub test_name: Option<String>,
    /// AOSP's own input list, omitted optional inputs included.
    #[serde(default)]
    pub input_indexes: Option<Vec<u32>>,
    /// Operands AOSP declares as inputs but never feeds (`hasNoValue` in every request).
    #[serde(default)]
    pub omitted_inputs: Vec<u32>,
    #[serde(default)]
    pub constant_lifetime: Option<String>,
}

impl Vector {
    /// The AOSP "all tensors as inputs" variant: every constant tensor (filters, biases, shape
    /// and lookup tensors; not scalars) becomes a model input appended after the existing ones,
    /// and every example supplies the constant's values there. The driver then sees weights
    /// only at execution time. `None` when the vector has no constant tensor.
    pub fn tensors_as_inputs(&self) -> Option<Vector> {
        let mut v = self.clone();
        let mut moved = Vec::new();
        for (index, operand) in v.model.operands.iter_mut().enumerate() {
            if operand.lifetime == "CONSTANT_COPY" && operand.operand_type.starts_with("TENSOR_") {
                operand.lifetime = "MODEL_INPUT".into();
                moved.push((index as u32, operand.value.take()?));
            }
        }
        if moved.is_empty() {
            return None;
        }
        for (index, values) in moved {
            let position = v.model.input_indexes.len().to_string();
            v.model.input_indexes.push(index);
            for example in &mut v.examples {
                example.inputs.insert(position.clone(), values.clone());
            }
        }
        v.name = format!("{}_all_tensors_as_inputs", self.name);
        // AOSP's own input list describes the original model only.
        v.aosp = Aosp::default();
        Some(v)
    }

    /// Parses one vector from JSON text; `origin` names it in errors.
    pub fn from_json(text: &str, origin: &Path) -> Result<Vector, VectorError> {
        serde_json::from_str(text).map_err(|source| VectorError::Json {
            path: origin.to_path_buf(),
            source,
        })
    }

    /// Reads one vector file.
    pub fn from_file(path: &Path) -> Result<Vector, VectorError> {
        let text = std::fs::read_to_string(path).map_err(|source| VectorError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Vector::from_json(&text, path)
    }
}

/// The files `path` stands for: itself if it is a file, otherwise the `*.json` files inside
/// it and its subdirectories (the later-version set keeps one directory per NNAPI version),
/// sorted by path so runs are reproducible.
pub fn vector_files(path: &Path) -> Result<Vec<PathBuf>, VectorError> {
    let io = |source| VectorError::Io {
        path: path.to_path_buf(),
        source,
    };
    if !path.is_dir() {
        // Report a missing file now rather than as a confusing parse error later.
        std::fs::metadata(path).map_err(io)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let p = entry.map_err(io)?.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.is_file() && p.extension().is_some_and(|e| e == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Loads a JSON file or every `*.json` file of a directory (sorted by file name).
pub fn load(path: &Path) -> Result<Vec<Vector>, VectorError> {
    vector_files(path)?
        .iter()
        .map(|p| Vector::from_file(p))
        .collect()
}

/// A model in this format (no examples): what `nnhal import --out` writes. Constants are
/// written inline as values (CONSTANT_COPY), whatever pool they came from.
pub fn from_model(name: &str, m: &nnhal_hal::Model) -> Result<String, String> {
    use nnhal_hal::{OperandLifeTime, OperandType, OperationType};
    let mut operands = Vec::with_capacity(m.operands.len());
    for (i, o) in m.operands.iter().enumerate() {
        let ty = OperandType::from_raw(o.operand_type)
            .ok_or_else(|| format!("operand {i}: type {}", o.operand_type))?;
        let lifetime = OperandLifeTime::from_raw(o.lifetime)
            .ok_or_else(|| format!("operand {i}: lifetime {}", o.lifetime))?;
        let mut v = serde_json::json!({
            "type": ty.name(),
            "dimensions": o.dimensions,
            "scale": o.scale,
            "zeroPoint": o.zero_point,
            "lifetime": lifetime.name(),
        });
        if lifetime == OperandLifeTime::ConstantCopy {
            let start = o.location.offset as usize;
            let bytes = m
                .operand_values
                .get(start..start + o.location.length as usize)
                .ok_or_else(|| format!("operand {i}: constant outside operandValues"))?;
            v["value"] = serde_json::json!(model::decode(ty, bytes));
        }
        operands.push(v);
    }
    let operations: Vec<serde_json::Value> = m
        .operations
        .iter()
        .map(|op| {
            serde_json::json!({
                "type": OperationType::from_raw(op.operation_type).map_or("?", |t| t.name()),
                "inputs": op.inputs,
                "outputs": op.outputs,
            })
        })
        .collect();
    let value = serde_json::json!({
        "name": name,
        "model": {
            "operands": operands,
            "operations": operations,
            "inputIndexes": m.input_indexes,
            "outputIndexes": m.output_indexes,
        },
        "examples": [],
    });
    serde_json::to_string(&value).map_err(|e| e.to_string())
}

/// The vectors shipped with this crate (`vts_tests/vectors`).
pub fn bundled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

/// The NNAPI 1.1–1.3 vectors (`vts_tests/later/vectors.tar.xz`, see its README).
pub fn later_archive() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("later/vectors.tar.xz")
}

/// Unpacks [`later_archive`] into `dir` (with the system `tar`, which needs `xz`) unless a
/// previous call already did, and returns `dir`. Each call unpacks into a staging
/// directory of its own and renames it into place, so concurrent callers (parallel tests,
/// other processes) never read a half-written tree; a marker file tells a complete one.
pub fn unpack_later(dir: &Path) -> std::io::Result<PathBuf> {
    static STAGING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let marker = dir.join(".unpacked");
    if marker.exists() {
        return Ok(dir.to_path_buf());
    }
    let n = STAGING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staging = dir.with_extension(format!("part-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    let status = std::process::Command::new("tar")
        .arg("-xJf")
        .arg(later_archive())
        .arg("-C")
        .arg(&staging)
        .status()?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(std::io::Error::other(format!(
            "tar -xJf {} failed ({status})",
            later_archive().display()
        )));
    }
    std::fs::write(staging.join(".unpacked"), b"")?;
    if let Err(e) = std::fs::rename(&staging, dir) {
        let _ = std::fs::remove_dir_all(&staging);
        // Another caller got there first; its tree is complete.
        if !marker.exists() {
            return Err(e);
        }
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundled(name: &str) -> Vector {
        Vector::from_file(&bundled_dir().join(format!("{name}.json"))).unwrap()
    }

    #[test]
    fn tensors_as_inputs_feeds_every_constant_tensor_and_keeps_scalars() {
        let v = bundled("conv_float");
        let t = v.tensors_as_inputs().unwrap();
        let constants = |v: &Vector| {
            v.model
                .operands
                .iter()
                .filter(|o| o.lifetime == "CONSTANT_COPY")
                .map(|o| o.operand_type.clone())
                .collect::<Vec<_>>()
        };
        // Filter and bias move; the padding/stride/activation scalars stay constant.
        assert!(constants(&t).iter().all(|ty| !ty.starts_with("TENSOR_")));
        assert_eq!(constants(&t).len() + 2, constants(&v).len());
        assert_eq!(t.model.input_indexes.len(), v.model.input_indexes.len() + 2);
        for (k, example) in t.examples.iter().enumerate() {
            for (pos, &operand) in t.model.input_indexes.iter().enumerate() {
                let given = example.input(pos).unwrap();
                if let Some(constant) = &v.model.operands[operand as usize].value {
                    assert_eq!(given, constant.as_slice(), "example {k} input {pos}");
                }
            }
        }
        assert!(t.name.ends_with("_all_tensors_as_inputs"));
    }

    #[test]
    fn a_vector_without_constant_tensors_has_no_such_variant() {
        assert!(bundled("relu_float_1").tensors_as_inputs().is_none());
    }
}
