//! From bytes to checked ONNX values: the `ModelProto` decode (protobuf wire format, onnx.proto)
//! with a size bound on the file, and `TensorProto` → [`Tensor`] with every claim checked
//! against the bytes that are really there before anything is allocated from it.

use crate::proto;
use crate::OnnxError;
use prost::Message;

/// Largest ONNX file read (1 GiB): protobuf itself caps messages at 2 GiB, and the weights of a
/// model NNAPI 1.0 can run fit far below.
pub const MAX_FILE_BYTES: usize = 1 << 30;
/// Largest element count of any tensor the importer builds (constant or folded), which keeps
/// a claimed multi-gigabyte tensor from ever being allocated.
pub const MAX_ELEMENTS: usize = 1 << 28;

/// Decodes a `ModelProto`.
pub fn model(bytes: &[u8]) -> Result<proto::ModelProto, OnnxError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(OnnxError::Malformed(format!(
            "{} bytes: larger than the {MAX_FILE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let model = proto::ModelProto::decode(bytes)
        .map_err(|e| OnnxError::Malformed(format!("not an ONNX ModelProto: {e}")))?;
    if model.graph.is_none() {
        return Err(OnnxError::Malformed(
            "the ModelProto has no graph (is this an ONNX model?)".into(),
        ));
    }
    Ok(model)
}

/// The element values of a tensor, in ONNX's own (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Data {
    pub fn len(&self) -> usize {
        match self {
            Data::F32(v) => v.len(),
            Data::U8(v) => v.len(),
            Data::I8(v) => v.len(),
            Data::I32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes per element.
    pub fn elem_size(&self) -> usize {
        match self {
            Data::U8(_) | Data::I8(_) => 1,
            Data::F32(_) | Data::I32(_) => 4,
            Data::I64(_) => 8,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Data::F32(_) => "float32",
            Data::U8(_) => "uint8",
            Data::I8(_) => "int8",
            Data::I32(_) => "int32",
            Data::I64(_) => "int64",
        }
    }

    /// Every value as f64 (exact for all these types but the largest int64s).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }

    /// Integer values (shape and index inputs); `None` for float data.
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        match self {
            Data::F32(_) => None,
            Data::U8(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Data::I8(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Data::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Data::I64(v) => Some(v.clone()),
        }
    }

    /// The values picked by `index` (a gather of elements).
    /// `n` copies of the first value (which must exist).
    pub fn repeat_first(&self, n: usize) -> Data {
        match self {
            Data::F32(v) => Data::F32(vec![v[0]; n]),
            Data::U8(v) => Data::U8(vec![v[0]; n]),
            Data::I8(v) => Data::I8(vec![v[0]; n]),
            Data::I32(v) => Data::I32(vec![v[0]; n]),
            Data::I64(v) => Data::I64(vec![v[0]; n]),
        }
    }

    pub fn pick(&self, index: &[usize]) -> Data {
        match self {
            Data::F32(v) => Data::F32(index.iter().map(|&i| v[i]).collect()),
            Data::U8(v) => Data::U8(index.iter().map(|&i| v[i]).collect()),
            Data::I8(v) => Data::I8(index.iter().map(|&i| v[i]).collect()),
            Data::I32(v) => Data::I32(index.iter().map(|&i| v[i]).collect()),
            Data::I64(v) => Data::I64(index.iter().map(|&i| v[i]).collect()),
        }
    }
}

/// A constant tensor: dimensions and values, ONNX layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dims: Vec<usize>,
    pub data: Data,
}

impl Tensor {
    pub fn scalar_f32(&self) -> Option<f32> {
        match &self.data {
            Data::F32(v) if v.len() == 1 => Some(v[0]),
            _ => None,
        }
    }

    pub fn f32s(&self) -> Option<&[f32]> {
        match &self.data {
            Data::F32(v) => Some(v),
            _ => None,
        }
    }
}

/// The element count of `dims`, refused beyond [`MAX_ELEMENTS`].
pub fn element_count(dims: &[usize]) -> Result<usize, String> {
    bounded_count(dims, MAX_ELEMENTS)
        .ok_or_else(|| format!("dimensions {dims:?} claim more than {MAX_ELEMENTS} elements"))
}

/// The product of `dims` when it neither overflows nor exceeds `limit`.
pub fn bounded_count(dims: &[usize], limit: usize) -> Option<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= limit)
}

fn fixed<const N: usize, T>(raw: &[u8], count: usize, from: fn([u8; N]) -> T) -> Vec<T> {
    raw.chunks_exact(N)
        .take(count)
        .map(|c| from(c.try_into().expect("chunks_exact gives N bytes")))
        .collect()
}

/// Converts a `TensorProto`; `what` names it in errors.
pub fn tensor(t: &proto::TensorProto, what: &str) -> Result<Tensor, OnnxError> {
    let bad = |why: String| OnnxError::Malformed(format!("{what}: {why}"));
    if t.data_location == Some(proto::tensor_proto::DataLocation::External as i32)
        || !t.external_data.is_empty()
    {
        return Err(bad(
            "its data is stored outside the model file (external data is not supported)".into(),
        ));
    }
    let dims: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("negative dimension {d}"))))
        .collect::<Result<_, _>>()?;
    let count = element_count(&dims).map_err(bad)?;
    let ty = t.data_type.unwrap_or(0);
    let elem = match ty {
        1 | 6 => 4,
        2 | 3 => 1,
        7 => 8,
        _ => {
            return Err(OnnxError::Unsupported(format!(
                "{what}: element type {} is not one of float32, uint8, int8, int32, int64",
                type_name(ty)
            )))
        }
    };
    let raw = t.raw_data.as_deref().unwrap_or_default();
    let data = if t.raw_data.is_some() {
        if raw.len() != count * elem {
            return Err(bad(format!(
                "dimensions {dims:?} need {} bytes of {}, raw_data holds {}",
                count * elem,
                type_name(ty),
                raw.len()
            )));
        }
        match ty {
            1 => Data::F32(fixed(raw, count, f32::from_le_bytes)),
            2 => Data::U8(raw.to_vec()),
            3 => Data::I8(raw.iter().map(|&b| b as i8).collect()),
            6 => Data::I32(fixed(raw, count, i32::from_le_bytes)),
            _ => Data::I64(fixed(raw, count, i64::from_le_bytes)),
        }
    } else {
        let have = match ty {
            1 => t.float_data.len(),
            7 => t.int64_data.len(),
            _ => t.int32_data.len(),
        };
        if have != count {
            return Err(bad(format!(
                "dimensions {dims:?} need {count} values, the tensor holds {have}"
            )));
        }
        let narrow = |lo: i32, hi: i32| -> Result<Vec<i32>, OnnxError> {
            match t.int32_data.iter().find(|&&v| v < lo || v > hi) {
                Some(v) => Err(bad(format!("value {v} out of range of {}", type_name(ty)))),
                None => Ok(t.int32_data.clone()),
            }
        };
        match ty {
            1 => Data::F32(t.float_data.clone()),
            2 => Data::U8(narrow(0, 255)?.into_iter().map(|v| v as u8).collect()),
            3 => Data::I8(narrow(-128, 127)?.into_iter().map(|v| v as i8).collect()),
            6 => Data::I32(t.int32_data.clone()),
            _ => Data::I64(t.int64_data.clone()),
        }
    };
    Ok(Tensor { dims, data })
}

/// The onnx.proto name of a `TensorProto.DataType` value.
pub fn type_name(ty: i32) -> String {
    proto::tensor_proto::DataType::try_from(ty)
        .map(|t| t.as_str_name().to_lowercase())
        .unwrap_or_else(|_| format!("data type {ty}"))
}
