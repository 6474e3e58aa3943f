//! Reading a `.tflite` flatbuffer into owned, checked tables (BI-90…BI-92 of
//! `docs/bad-inputs.md`). Every offset and length of the file is checked by the generated
//! reader's verifier as the whole model is converted to owned values; this module then checks
//! what the schema cannot say: every tensor, buffer and operator-code index within its table,
//! and every constant buffer exactly as long as its tensor's shape × element size.

use crate::generated::tflite as fb;
use crate::TfliteError;

/// TensorFlow Lite's element types, as far as the importer distinguishes them.
pub use fb::TensorType;

/// Quantization of a tensor: `real = scale × (q − zero_point)`, per tensor (one entry) or per
/// slice along `dim`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quant {
    pub scales: Vec<f32>,
    pub zero_points: Vec<i64>,
    pub dim: usize,
}

/// One tensor of subgraph 0.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<u32>,
    pub ty: TensorType,
    /// The constant's bytes (little-endian, row-major), already checked against the shape.
    pub data: Option<Vec<u8>>,
    pub quant: Option<Quant>,
    /// A state tensor (an RNN's hidden state, an SVDF's memory): no buffer, zeros until the
    /// interpreter's first invocation writes it.
    pub is_variable: bool,
}

/// An operator's code: a builtin number or a custom name.
#[derive(Clone, Debug)]
pub enum Code {
    Builtin(i32),
    Custom(String),
}

/// One operator of subgraph 0, its tensor indexes checked.
#[derive(Clone, Debug)]
pub struct Operator {
    pub code: Code,
    /// `None`: an omitted optional input (-1 in the file).
    pub inputs: Vec<Option<usize>>,
    pub outputs: Vec<usize>,
    pub options: Option<fb::BuiltinOptions>,
}

/// Subgraph 0 of a model, decoded and checked.
#[derive(Clone, Debug)]
pub struct Decoded {
    pub tensors: Vec<Tensor>,
    pub inputs: Vec<usize>,
    pub outputs: Vec<usize>,
    pub operators: Vec<Operator>,
    /// How many subgraphs the file has (only the first is lowered).
    pub subgraphs: usize,
}

/// TensorFlow Lite's builtin operator names, by number (`BuiltinOperator`).
const BUILTIN_NAMES: &[&str] = &[
    "ADD",
    "AVERAGE_POOL_2D",
    "CONCATENATION",
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "DEPTH_TO_SPACE",
    "DEQUANTIZE",
    "EMBEDDING_LOOKUP",
    "FLOOR",
    "FULLY_CONNECTED",
    "HASHTABLE_LOOKUP",
    "L2_NORMALIZATION",
    "L2_POOL_2D",
    "LOCAL_RESPONSE_NORMALIZATION",
    "LOGISTIC",
    "LSH_PROJECTION",
    "LSTM",
    "MAX_POOL_2D",
    "MUL",
    "RELU",
    "RELU_N1_TO_1",
    "RELU6",
    "RESHAPE",
    "RESIZE_BILINEAR",
    "RNN",
    "SOFTMAX",
    "SPACE_TO_DEPTH",
    "SVDF",
    "TANH",
    "CONCAT_EMBEDDINGS",
    "SKIP_GRAM",
    "CALL",
    "CUSTOM",
    "EMBEDDING_LOOKUP_SPARSE",
    "PAD",
    "UNIDIRECTIONAL_SEQUENCE_RNN",
    "GATHER",
    "BATCH_TO_SPACE_ND",
    "SPACE_TO_BATCH_ND",
    "TRANSPOSE",
    "MEAN",
    "SUB",
    "DIV",
    "SQUEEZE",
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "STRIDED_SLICE",
    "BIDIRECTIONAL_SEQUENCE_RNN",
    "EXP",
    "TOPK_V2",
    "SPLIT",
    "LOG_SOFTMAX",
    "DELEGATE",
    "BIDIRECTIONAL_SEQUENCE_LSTM",
    "CAST",
    "PRELU",
    "MAXIMUM",
    "ARG_MAX",
    "MINIMUM",
    "LESS",
    "NEG",
    "PADV2",
    "GREATER",
    "GREATER_EQUAL",
    "LESS_EQUAL",
    "SELECT",
    "SLICE",
    "SIN",
    "TRANSPOSE_CONV",
    "SPARSE_TO_DENSE",
    "TILE",
    "EXPAND_DIMS",
    "EQUAL",
    "NOT_EQUAL",
    "LOG",
    "SUM",
    "SQRT",
    "RSQRT",
    "SHAPE",
    "POW",
    "ARG_MIN",
    "FAKE_QUANT",
    "REDUCE_PROD",
    "REDUCE_MAX",
    "PACK",
    "LOGICAL_OR",
    "ONE_HOT",
    "LOGICAL_AND",
    "LOGICAL_NOT",
    "UNPACK",
    "REDUCE_MIN",
    "FLOOR_DIV",
    "REDUCE_ANY",
    "SQUARE",
    "ZEROS_LIKE",
    "FILL",
    "FLOOR_MOD",
    "RANGE",
    "RESIZE_NEAREST_NEIGHBOR",
    "LEAKY_RELU",
    "SQUARED_DIFFERENCE",
    "MIRROR_PAD",
    "ABS",
    "SPLIT_V",
    "UNIQUE",
    "CEIL",
    "REVERSE_V2",
    "ADD_N",
    "GATHER_ND",
    "COS",
    "WHERE",
    "RANK",
    "ELU",
    "REVERSE_SEQUENCE",
    "MATRIX_DIAG",
    "QUANTIZE",
    "MATRIX_SET_DIAG",
    "ROUND",
    "HARD_SWISH",
    "IF",
    "WHILE",
    "NON_MAX_SUPPRESSION_V4",
    "NON_MAX_SUPPRESSION_V5",
    "SCATTER_ND",
    "SELECT_V2",
    "DENSIFY",
    "SEGMENT_SUM",
    "BATCH_MATMUL",
    "PLACEHOLDER_FOR_GREATER_OP_CODES",
    "CUMSUM",
    "CALL_ONCE",
    "BROADCAST_TO",
    "RFFT2D",
    "CONV_3D",
    "IMAG",
    "REAL",
    "COMPLEX_ABS",
    "HASHTABLE",
    "HASHTABLE_FIND",
    "HASHTABLE_IMPORT",
    "HASHTABLE_SIZE",
    "REDUCE_ALL",
    "CONV_3D_TRANSPOSE",
    "VAR_HANDLE",
    "READ_VARIABLE",
    "ASSIGN_VARIABLE",
    "BROADCAST_ARGS",
    "RANDOM_STANDARD_NORMAL",
    "BUCKETIZE",
    "RANDOM_UNIFORM",
    "MULTINOMIAL",
    "GELU",
    "DYNAMIC_UPDATE_SLICE",
    "RELU_0_TO_1",
    "UNSORTED_SEGMENT_PROD",
    "UNSORTED_SEGMENT_MAX",
    "UNSORTED_SEGMENT_SUM",
    "ATAN2",
    "UNSORTED_SEGMENT_MIN",
    "SIGN",
    "BITCAST",
    "BITWISE_XOR",
    "RIGHT_SHIFT",
];

/// The name of a builtin operator number.
pub fn builtin_name(code: i32) -> String {
    usize::try_from(code)
        .ok()
        .and_then(|c| BUILTIN_NAMES.get(c))
        .map_or_else(|| format!("builtin #{code}"), |n| (*n).to_string())
}

/// Bytes of one element of a type the importer may read as a constant.
pub fn element_size(ty: TensorType) -> Option<usize> {
    Some(match ty {
        TensorType::Float32 | TensorType::Int32 => 4,
        TensorType::Float16 | TensorType::Int16 => 2,
        TensorType::Uint8 | TensorType::Int8 | TensorType::Bool => 1,
        TensorType::Int64 => 8,
        _ => return None,
    })
}

/// The largest tensor the importer describes: 2 GiB, the most a flatbuffer can hold and more
/// than any operand the driver would allocate.
const MAX_TENSOR_BYTES: usize = 1 << 31;

fn malformed(why: impl Into<String>) -> TfliteError {
    TfliteError::Malformed(why.into())
}

fn index(value: i64, len: usize, what: &str) -> Result<usize, TfliteError> {
    usize::try_from(value)
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| {
            malformed(format!(
                "{what} {value} is out of range (the table has {len})"
            ))
        })
}

/// Decodes and checks subgraph 0 of a model.
pub fn decode(bytes: &[u8]) -> Result<Decoded, TfliteError> {
    // BI-90: a flatbuffer starts with the root table's offset, then the 4-byte identifier.
    if bytes.len() < 8 {
        return Err(TfliteError::NotTflite(format!(
            "{} bytes, fewer than a flatbuffer header",
            bytes.len()
        )));
    }
    if &bytes[4..8] != b"TFL3" {
        return Err(TfliteError::NotTflite(format!(
            "file identifier {:?}, not \"TFL3\"",
            String::from_utf8_lossy(&bytes[4..8])
        )));
    }
    let root = <fb::ModelRef as planus::ReadAsRoot>::read_as_root(bytes)
        .map_err(|e| TfliteError::NotTflite(format!("the root table is unreadable: {e}")))?;
    // BI-91: converting to owned values visits (and bounds-checks) every field once.
    let model = fb::Model::try_from(root).map_err(|e| malformed(e.to_string()))?;
    let buffers = model.buffers.unwrap_or_default();
    let codes = model.operator_codes.unwrap_or_default();
    let mut subgraphs = model.subgraphs.unwrap_or_default();
    let count = subgraphs.len();
    if subgraphs.is_empty() {
        return Err(TfliteError::Unsupported("the model has no subgraph".into()));
    }
    let graph = subgraphs.swap_remove(0);
    let raw_tensors = graph.tensors.unwrap_or_default();
    let n = raw_tensors.len();
    let mut tensors = Vec::with_capacity(n);
    for (k, t) in raw_tensors.into_iter().enumerate() {
        let name = t.name.unwrap_or_default();
        let what = |why: String| malformed(format!("tensor {k} '{name}': {why}"));
        let shape: Vec<u32> = t
            .shape
            .unwrap_or_default()
            .iter()
            .map(|&d| u32::try_from(d).map_err(|_| what(format!("dimension {d} is negative"))))
            .collect::<Result<_, _>>()?;
        if t.sparsity.is_some() {
            return Err(TfliteError::Unsupported(format!(
                "tensor {k} '{name}' is sparse, which the importer does not read"
            )));
        }
        let elements = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d as usize))
            .filter(|&e| e.saturating_mul(8) <= MAX_TENSOR_BYTES)
            .ok_or_else(|| what(format!("shape {shape:?} is larger than 2 GiB")))?;
        let b = index(i64::from(t.buffer), buffers.len().max(1), "buffer index")
            .map_err(|e| what(e.to_string()))?;
        let mut data = None;
        if let Some(buffer) = buffers.get(b) {
            if buffer.offset > 1 || buffer.size > 0 {
                return Err(TfliteError::Unsupported(format!(
                    "tensor {k} '{name}': its data lies outside the flatbuffer (a model over 2 GiB)"
                )));
            }
            if let Some(bytes) = buffer.data.as_ref().filter(|d| !d.is_empty()) {
                // BI-92: a constant must hold exactly its shape's elements.
                let size = element_size(t.type_).ok_or_else(|| {
                    TfliteError::Unsupported(format!(
                        "tensor {k} '{name}': constants of type {:?} are not read",
                        t.type_
                    ))
                })?;
                let want = elements * size;
                if bytes.len() != want {
                    return Err(what(format!(
                        "its buffer {b} holds {} bytes, its shape {shape:?} of {:?} needs {want}",
                        bytes.len(),
                        t.type_
                    )));
                }
                data = Some(bytes.clone());
            }
        }
        let quant = match t.quantization {
            Some(q) if q.details.is_some() => {
                return Err(TfliteError::Unsupported(format!(
                    "tensor {k} '{name}' uses custom quantization"
                )))
            }
            Some(q) if q.scale.as_ref().is_some_and(|s| !s.is_empty()) => {
                let scales = q.scale.unwrap_or_default();
                let zero_points = q.zero_point.unwrap_or_default();
                let dim = usize::try_from(q.quantized_dimension).unwrap_or(usize::MAX);
                if scales.len() > 1 && dim >= shape.len() {
                    return Err(what(format!(
                        "quantized dimension {} is outside its rank {}",
                        q.quantized_dimension,
                        shape.len()
                    )));
                }
                if zero_points.len() != scales.len() {
                    return Err(what(format!(
                        "{} scales and {} zero points",
                        scales.len(),
                        zero_points.len()
                    )));
                }
                if scales.len() > 1 && scales.len() != shape[dim] as usize {
                    return Err(what(format!(
                        "{} scales for dimension {dim} of extent {}",
                        scales.len(),
                        shape[dim]
                    )));
                }
                Some(Quant {
                    scales,
                    zero_points,
                    dim,
                })
            }
            _ => None,
        };
        tensors.push(Tensor {
            name,
            shape,
            ty: t.type_,
            data,
            quant,
            is_variable: t.is_variable,
        });
    }
    let list = |v: Option<Vec<i32>>, what: &str| -> Result<Vec<usize>, TfliteError> {
        v.unwrap_or_default()
            .iter()
            .map(|&i| index(i64::from(i), n, what))
            .collect()
    };
    let inputs = list(graph.inputs, "subgraph input tensor")?;
    let outputs = list(graph.outputs, "subgraph output tensor")?;
    let mut operators = Vec::new();
    for (k, op) in graph.operators.unwrap_or_default().into_iter().enumerate() {
        let c = index(
            i64::from(op.opcode_index),
            codes.len(),
            "operator code index",
        )
        .map_err(|e| malformed(format!("operator {k}: {e}")))?;
        let oc = &codes[c];
        // Files from before the 32-bit field keep the number in the byte field; 127 there
        // means "see builtin_code".
        let number = i32::from(oc.deprecated_builtin_code).max(oc.builtin_code);
        let code = match (&oc.custom_code, number) {
            (Some(name), 32) => Code::Custom(name.clone()),
            _ => Code::Builtin(number),
        };
        let inputs = op
            .inputs
            .unwrap_or_default()
            .iter()
            .map(|&i| match i {
                -1 => Ok(None),
                i => index(i64::from(i), n, "input tensor").map(Some),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| malformed(format!("operator {k}: {e}")))?;
        let outputs = list(op.outputs, "output tensor")
            .map_err(|e| malformed(format!("operator {k}: {e}")))?;
        operators.push(Operator {
            code,
            inputs,
            outputs,
            options: op.builtin_options,
        });
    }
    Ok(Decoded {
        tensors,
        inputs,
        outputs,
        operators,
        subgraphs: count,
    })
}
