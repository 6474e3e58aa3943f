//! Model files through the HAL: `nnhal run MODEL.onnx|MODEL.mlmodel|MODEL.tflite|MODEL.xmodel`, `nnhal
//! import`, and the model-file form of `nnhal bench`. The importer (crate nnhal-onnx for ONNX
//! `.onnx`, nnhal-coreml for CoreML `.mlmodel`, nnhal-tflite for TensorFlow Lite `.tflite`,
//! nnhal-xmodel for Vitis AI XIR `.xmodel`)
//! lowers the file to an NNAPI model and says how each graph input and output maps to its operand
//! ([`nnhal_hal::builder::Edge`]); this module does the host side of that contract: reads and
//! writes NumPy `.npy` arrays in the source model's layout and type, converts NCHW ⇄ NHWC,
//! quantizes inputs the model takes quantized, and builds the request (two sealed memfd pools,
//! as the vector runner does).

use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, SourceType};
use nnhal_hal::memory::create_memfd;
use nnhal_hal::{DataLocation, MappedPool, Memory, OperandType, Request, RequestArgument};
use nnhal_vts::vector::model::{align4, OUTPUT_POOL};
use std::path::Path;

/// Why a model file cannot be run; `Input` is a usage error (exit 2), `Failed` a failed run.
#[derive(Debug, thiserror::Error)]
pub enum ModelFileError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Failed(String),
}

fn input_err(why: impl Into<String>) -> ModelFileError {
    ModelFileError::Input(why.into())
}

/// An n-dimensional array as `.npy` files hold it (C order).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: ArrayData,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ArrayData {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    I32(Vec<i32>),
    /// NumPy `bool`: one byte per element, 0 or 1.
    Bool(Vec<bool>),
}

impl ArrayData {
    pub fn len(&self) -> usize {
        match self {
            ArrayData::F32(v) => v.len(),
            ArrayData::U8(v) => v.len(),
            ArrayData::I8(v) => v.len(),
            ArrayData::I32(v) => v.len(),
            ArrayData::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            ArrayData::F32(_) => "float32",
            ArrayData::U8(_) => "uint8",
            ArrayData::I8(_) => "int8",
            ArrayData::I32(_) => "int32",
            ArrayData::Bool(_) => "bool",
        }
    }
}

/// NumPy's `.npy` format (versions 1–3), little-endian float32 (`<f4`), uint8 (`|u1`), int8
/// (`|i1`), int32 (`<i4`) and bool (`|b1`) arrays in C order: what the runner reads and writes.
pub mod npy {
    use super::{Array, ArrayData};

    const MAGIC: &[u8] = b"\x93NUMPY";

    /// Parses `.npy` bytes.
    pub fn parse(bytes: &[u8]) -> Result<Array, String> {
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            return Err("not a .npy file (no \\x93NUMPY magic)".into());
        }
        let (len, start): (usize, usize) = match bytes[6] {
            1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
            2 | 3 if bytes.len() >= 12 => (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            ),
            v => return Err(format!(".npy version {v} is not supported")),
        };
        let header = bytes
            .get(start..start.saturating_add(len))
            .ok_or("truncated .npy header")?;
        let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
        let field = |key: &str| -> Result<&str, String> {
            let at = header
                .find(&format!("'{key}'"))
                .ok_or(format!("the .npy header has no '{key}'"))?;
            let rest = header[at + key.len() + 2..].trim_start();
            Ok(rest.strip_prefix(':').unwrap_or(rest).trim_start())
        };
        let descr = field("descr")?;
        let descr = descr
            .split(['\'', '"'])
            .nth(1)
            .ok_or("bad 'descr' in the .npy header")?;
        if field("fortran_order")?.starts_with("True") {
            return Err("Fortran-order arrays are not supported (save C order)".into());
        }
        let shape_text = field("shape")?;
        let inside = shape_text
            .strip_prefix('(')
            .and_then(|s| s.split(')').next())
            .ok_or("bad 'shape' in the .npy header")?;
        let shape: Vec<usize> = inside
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().map_err(|_| format!("bad dimension {s:?}")))
            .collect::<Result<_, _>>()?;
        let count = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or("the .npy shape overflows")?;
        let body = &bytes[start + len..];
        let data = match descr {
            "<f4" => {
                if body.len() != count * 4 {
                    return Err(format!(
                        "shape {shape:?} needs {} bytes of float32, the file has {}",
                        count * 4,
                        body.len()
                    ));
                }
                ArrayData::F32(
                    body.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                )
            }
            "|u1" | "<u1" => {
                if body.len() != count {
                    return Err(format!(
                        "shape {shape:?} needs {count} bytes of uint8, the file has {}",
                        body.len()
                    ));
                }
                ArrayData::U8(body.to_vec())
            }
            "|i1" | "<i1" => {
                if body.len() != count {
                    return Err(format!(
                        "shape {shape:?} needs {count} bytes of int8, the file has {}",
                        body.len()
                    ));
                }
                ArrayData::I8(body.iter().map(|&b| b as i8).collect())
            }
            "<i4" => {
                if body.len() != count * 4 {
                    return Err(format!(
                        "shape {shape:?} needs {} bytes of int32, the file has {}",
                        count * 4,
                        body.len()
                    ));
                }
                ArrayData::I32(
                    body.chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                )
            }
            "|b1" => {
                if body.len() != count {
                    return Err(format!(
                        "shape {shape:?} needs {count} bytes of bool, the file has {}",
                        body.len()
                    ));
                }
                // NumPy writes 0 and 1; any other byte is a damaged file, not a truth value.
                if let Some(b) = body.iter().find(|&&b| b > 1) {
                    return Err(format!("a bool element holds byte {b}, not 0 or 1"));
                }
                ArrayData::Bool(body.iter().map(|&b| b == 1).collect())
            }
            other => {
                return Err(format!(
                    "dtype {other:?}: only float32 ('<f4'), uint8 ('|u1'), int8 ('|i1'), \
                     int32 ('<i4') and bool ('|b1')"
                ))
            }
        };
        Ok(Array { shape, data })
    }

    /// `.npy` (version 1.0) bytes of `a`.
    pub fn to_bytes(a: &Array) -> Vec<u8> {
        let descr = match a.data {
            ArrayData::F32(_) => "<f4",
            ArrayData::U8(_) => "|u1",
            ArrayData::I8(_) => "|i1",
            ArrayData::I32(_) => "<i4",
            ArrayData::Bool(_) => "|b1",
        };
        let shape = match a.shape.len() {
            1 => format!("({},)", a.shape[0]),
            _ => format!(
                "({})",
                a.shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        // Magic, version, length and header padded with spaces to a multiple of 64, ending
        // in a newline.
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        match &a.data {
            ArrayData::F32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            ArrayData::U8(v) => out.extend_from_slice(v),
            ArrayData::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
            ArrayData::I32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            ArrayData::Bool(v) => out.extend(v.iter().map(|&x| u8::from(x))),
        }
        out
    }

    pub fn read(path: &std::path::Path) -> Result<Array, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn write(path: &std::path::Path, a: &Array) -> Result<(), String> {
        std::fs::write(path, to_bytes(a))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// Imports a model file by its extension.
pub fn import(path: &Path) -> Result<ImportedModel, ModelFileError> {
    import_with(path, &[])
}

/// Imports a model file by its extension, an XModel graph started at the `start_at` operators
/// (refused for the other formats).
pub fn import_with(path: &Path, start_at: &[String]) -> Result<ImportedModel, ModelFileError> {
    let ext = path.extension().and_then(|e| e.to_str());
    if !start_at.is_empty() && ext != Some("xmodel") {
        return Err(input_err("--start-at is for XModel files (.xmodel)"));
    }
    match ext {
        Some("xmodel") => {
            let options = nnhal_xmodel::Options {
                start_at: start_at.to_vec(),
            };
            nnhal_xmodel::import_file(path, &options)
                .map_err(|e| input_err(format!("{}: {e}", path.display())))
        }
        Some("onnx") => {
            nnhal_onnx::import_file(path).map_err(|e| input_err(format!("{}: {e}", path.display())))
        }
        Some("mlmodel") => nnhal_coreml::import_file(path)
            .map_err(|e| input_err(format!("{}: {e}", path.display()))),
        Some("tflite") => nnhal_tflite::import_file(path)
            .map_err(|e| input_err(format!("{}: {e}", path.display()))),
        _ => Err(input_err(format!(
            "{}: not a model file this program imports (.onnx, .mlmodel, .tflite, .xmodel)",
            path.display()
        ))),
    }
}

/// Whether `path` names a model file rather than a golden vector.
pub fn is_model_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("onnx" | "mlmodel" | "tflite" | "xmodel")
    )
}

/// Element permutation from the source layout to the operand's order: `perm[i]` is the source
/// index of the operand's i-th element.
fn permutation(edge: &Edge) -> Option<Vec<usize>> {
    let (n, c, h, w) = match edge.layout {
        EdgeLayout::Same => return None,
        EdgeLayout::Nhwc => (edge.shape[0], edge.shape[1], edge.shape[2], edge.shape[3]),
        EdgeLayout::FlatNhwc { c, h, w } => (
            edge.shape.iter().product::<usize>() / (c * h * w).max(1),
            c,
            h,
            w,
        ),
        EdgeLayout::Chw => {
            let r = edge.shape.len();
            (1, edge.shape[r - 3], edge.shape[r - 2], edge.shape[r - 1])
        }
    };
    let mut perm = Vec::with_capacity(n * c * h * w);
    for ni in 0..n {
        for y in 0..h {
            for x in 0..w {
                for ci in 0..c {
                    perm.push(((ni * c + ci) * h + y) * w + x);
                }
            }
        }
    }
    Some(perm)
}

/// The operand bytes for one input array, checked against its edge.
pub fn input_bytes(edge: &Edge, array: &Array) -> Result<Vec<u8>, ModelFileError> {
    if array.shape != edge.shape {
        return Err(input_err(format!(
            "input '{}': shape {:?}, the model takes {:?}",
            edge.name, array.shape, edge.shape
        )));
    }
    let perm = permutation(edge);
    let order = |i: usize| perm.as_ref().map_or(i, |p| p[i]);
    match (&array.data, edge.source_type, edge.quantized) {
        (ArrayData::F32(v), SourceType::Float32, None) => Ok((0..v.len())
            .flat_map(|i| v[order(i)].to_le_bytes())
            .collect()),
        (ArrayData::F32(v), SourceType::Float32, Some((scale, zp))) => Ok((0..v.len())
            .map(|i| ((v[order(i)] / scale).round_ties_even() + zp as f32).clamp(0.0, 255.0) as u8)
            .collect()),
        (ArrayData::U8(v), SourceType::UInt8, _) => Ok((0..v.len()).map(|i| v[order(i)]).collect()),
        (ArrayData::I8(v), SourceType::Int8, _) => {
            Ok((0..v.len()).map(|i| v[order(i)] as u8).collect())
        }
        (ArrayData::I32(v), SourceType::Int32, _) => Ok((0..v.len())
            .flat_map(|i| v[order(i)].to_le_bytes())
            .collect()),
        (ArrayData::Bool(v), SourceType::Bool8, _) => {
            Ok((0..v.len()).map(|i| u8::from(v[order(i)])).collect())
        }
        (data, _, _) => Err(input_err(format!(
            "input '{}': {} data, the model takes {}",
            edge.name,
            data.type_name(),
            edge.source_type.name()
        ))),
    }
}

/// The output array of an edge from its operand bytes (`ty` the operand's type).
pub fn output_array(edge: &Edge, ty: OperandType, bytes: &[u8]) -> Array {
    let perm = permutation(edge);
    let data = match ty {
        OperandType::TensorQuant8Asymm => {
            let mut out = vec![0u8; bytes.len()];
            for (i, &b) in bytes.iter().enumerate() {
                out[perm.as_ref().map_or(i, |p| p[i])] = b;
            }
            ArrayData::U8(out)
        }
        OperandType::TensorQuant8AsymmSigned => {
            let mut out = vec![0i8; bytes.len()];
            for (i, &b) in bytes.iter().enumerate() {
                out[perm.as_ref().map_or(i, |p| p[i])] = b as i8;
            }
            ArrayData::I8(out)
        }
        OperandType::TensorInt32 => {
            let mut out = vec![0i32; bytes.len() / 4];
            for (i, c) in bytes.chunks_exact(4).enumerate() {
                out[perm.as_ref().map_or(i, |p| p[i])] =
                    i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            ArrayData::I32(out)
        }
        OperandType::TensorBool8 => {
            // NNAPI's TENSOR_BOOL8 reads any nonzero byte as true.
            let mut out = vec![false; bytes.len()];
            for (i, &b) in bytes.iter().enumerate() {
                out[perm.as_ref().map_or(i, |p| p[i])] = b != 0;
            }
            ArrayData::Bool(out)
        }
        _ => {
            let mut out = vec![0f32; bytes.len() / 4];
            for (i, c) in bytes.chunks_exact(4).enumerate() {
                out[perm.as_ref().map_or(i, |p| p[i])] =
                    f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            ArrayData::F32(out)
        }
    };
    Array {
        shape: edge.shape.clone(),
        data,
    }
}

/// A seeded pseudo-random input for an edge (xorshift; floats in [0, 1), bytes 0–255, int8
/// −128–127, int32 0–7 (small enough to be an index or a lookup key of a small table),
/// booleans even odds).
pub fn random_input(edge: &Edge, seed: u64) -> Array {
    let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n: usize = edge.shape.iter().product();
    let data = match edge.source_type {
        SourceType::Float32 => ArrayData::F32(
            (0..n)
                .map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32)
                .collect(),
        ),
        SourceType::UInt8 => ArrayData::U8((0..n).map(|_| (next() >> 56) as u8).collect()),
        SourceType::Int8 => ArrayData::I8((0..n).map(|_| (next() >> 56) as u8 as i8).collect()),
        SourceType::Int32 => ArrayData::I32((0..n).map(|_| (next() >> 61) as i32).collect()),
        SourceType::Bool8 => ArrayData::Bool((0..n).map(|_| next() >> 63 == 1).collect()),
    };
    Array {
        shape: edge.shape.clone(),
        data,
    }
}

/// A request for an imported model: its input and output pools and where each output is.
pub struct ModelRequest {
    pub request: Request,
    outputs: Vec<(OperandType, DataLocation)>,
}

fn sealed_pool(name: &str, data: &[u8]) -> Result<Memory, ModelFileError> {
    let size = data.len().max(4) as u64;
    let fd = create_memfd(name, data, size, true)
        .map_err(|e| ModelFileError::Failed(format!("cannot create the {name} pool: {e}")))?;
    Ok(Memory::shared(fd, size))
}

impl ModelRequest {
    /// Builds the request feeding `inputs` (one per model input, source layout).
    pub fn new(m: &ImportedModel, inputs: &[Array]) -> Result<ModelRequest, ModelFileError> {
        if inputs.len() != m.inputs.len() {
            return Err(input_err(format!(
                "{} input file(s) for a model with {} input(s) ({})",
                inputs.len(),
                m.inputs.len(),
                m.inputs
                    .iter()
                    .map(|e| format!("'{}' {:?}", e.name, e.shape))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let mut request = Request::default();
        let mut data = Vec::new();
        for (edge, array) in m.inputs.iter().zip(inputs) {
            let bytes = input_bytes(edge, array)?;
            let offset = data.len();
            data.extend_from_slice(&bytes);
            data.resize(align4(data.len()), 0);
            request.inputs.push(RequestArgument {
                has_no_value: false,
                location: DataLocation {
                    pool_index: 0,
                    offset: offset as u32,
                    length: bytes.len() as u32,
                },
                dimensions: Vec::new(),
            });
        }
        let mut outputs = Vec::new();
        let mut size = 0usize;
        for &index in &m.model.output_indexes {
            let operand = &m.model.operands[index as usize];
            let ty = OperandType::from_raw(operand.operand_type)
                .ok_or_else(|| ModelFileError::Failed("bad output type".into()))?;
            let length = nnhal_hal::validate::byte_size(ty, &operand.dimensions)
                .map_err(|e| ModelFileError::Failed(e.to_string()))?
                as usize;
            let location = DataLocation {
                pool_index: OUTPUT_POOL,
                offset: size as u32,
                length: length as u32,
            };
            size += align4(length);
            request.outputs.push(RequestArgument {
                has_no_value: false,
                location,
                dimensions: Vec::new(),
            });
            outputs.push((ty, location));
        }
        request
            .pools
            .push(sealed_pool("nnhal-model-inputs", &data)?);
        request
            .pools
            .push(sealed_pool("nnhal-model-outputs", &vec![0u8; size])?);
        Ok(ModelRequest { request, outputs })
    }

    /// The outputs after an execution, in the source model's layout and type.
    pub fn outputs(&self, m: &ImportedModel) -> Result<Vec<Array>, ModelFileError> {
        let pool = MappedPool::map(&self.request.pools[OUTPUT_POOL as usize], "output pool")
            .map_err(|e| ModelFileError::Failed(e.to_string()))?;
        m.outputs
            .iter()
            .zip(&self.outputs)
            .map(|(edge, (ty, loc))| {
                let bytes = pool
                    .read_vec(u64::from(loc.offset), loc.length as usize)
                    .map_err(|e| ModelFileError::Failed(e.to_string()))?;
                Ok(output_array(edge, *ty, &bytes))
            })
            .collect()
    }

    /// The raw operand bytes of every output (for checks that compare runs).
    pub fn output_bytes(&self) -> Result<Vec<Vec<u8>>, ModelFileError> {
        let pool = MappedPool::map(&self.request.pools[OUTPUT_POOL as usize], "output pool")
            .map_err(|e| ModelFileError::Failed(e.to_string()))?;
        self.outputs
            .iter()
            .map(|(_, loc)| {
                pool.read_vec(u64::from(loc.offset), loc.length as usize)
                    .map_err(|e| ModelFileError::Failed(e.to_string()))
            })
            .collect()
    }
}

/// A one-line description of an output array: shape, type, range and the largest elements.
pub fn describe(a: &Array) -> String {
    let values: Vec<f64> = match &a.data {
        ArrayData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        ArrayData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
    };
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let mut top: Vec<usize> = (0..values.len()).collect();
    top.sort_by(|&i, &j| values[j].total_cmp(&values[i]));
    let top: Vec<String> = top
        .iter()
        .take(5)
        .map(|&i| format!("[{i}] {:.6}", values[i]))
        .collect();
    format!(
        "{:?} {}, min {lo:.6}, max {hi:.6}, largest {}",
        a.shape,
        a.data.type_name(),
        top.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        for a in [
            Array {
                shape: vec![1, 3, 2, 2],
                data: ArrayData::F32((0..12).map(|i| i as f32 * 0.5).collect()),
            },
            Array {
                shape: vec![5],
                data: ArrayData::U8(vec![1, 2, 3, 4, 255]),
            },
            Array {
                shape: vec![2, 2],
                data: ArrayData::I8(vec![-128, -1, 0, 127]),
            },
            Array {
                shape: vec![3],
                data: ArrayData::I32(vec![i32::MIN, -1, i32::MAX]),
            },
            Array {
                shape: vec![1, 3],
                data: ArrayData::Bool(vec![true, false, true]),
            },
        ] {
            assert_eq!(npy::parse(&npy::to_bytes(&a)).unwrap(), a);
        }
        assert!(npy::parse(b"\x93NUMPY\x01\x00\x05\x00{'des").is_err());
        // A bool array holding a byte other than 0 or 1 is refused.
        let mut bytes = npy::to_bytes(&Array {
            shape: vec![2],
            data: ArrayData::Bool(vec![true, false]),
        });
        *bytes.last_mut().unwrap() = 2;
        assert!(npy::parse(&bytes).unwrap_err().contains("byte 2"));
    }

    #[test]
    fn nchw_inputs_are_transposed() {
        let edge = Edge {
            name: "x".into(),
            shape: vec![1, 2, 1, 2],
            layout: EdgeLayout::Nhwc,
            source_type: SourceType::Float32,
            quantized: None,
        };
        // NCHW [c0: 1 2 | c1: 3 4] → NHWC [1 3 2 4].
        let a = Array {
            shape: vec![1, 2, 1, 2],
            data: ArrayData::F32(vec![1.0, 2.0, 3.0, 4.0]),
        };
        let bytes = input_bytes(&edge, &a).unwrap();
        let back = output_array(&edge, OperandType::TensorFloat32, &bytes);
        let f: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(f, vec![1.0, 3.0, 2.0, 4.0]);
        assert_eq!(back, a);
    }
}
