//! Lowering of an ONNX graph to NNAPI operations (README "ONNX models" lists what is
//! accepted). Nodes are taken in their (topological) order; each ONNX value becomes either a
//! constant known at import time (folded further when its consumers allow) or an NNAPI operand.
//! Rank-4 operands are NHWC; everything else keeps ONNX's order.

use crate::decode::{self, element_count, Data, Tensor};
use crate::proto::{AttributeProto, GraphProto, ModelProto, NodeProto};
use crate::OnnxError;
use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, ModelBuilder, SourceType};
use nnhal_hal::{FusedActivationFunc, OperandType, OperationType};
use std::collections::{HashMap, HashSet};

type R<T> = Result<T, String>;

macro_rules! bail {
    ($($arg:tt)*) => { return Err(format!($($arg)*)) };
}

mod later;
mod logic;

/// A runtime value: an NNAPI operand and how it maps to the ONNX tensor.
#[derive(Clone, Debug)]
struct Dyn {
    operand: u32,
    /// ONNX shape.
    shape: Vec<usize>,
    layout: EdgeLayout,
    /// TENSOR_QUANT8_ASYMM (scale, zero point); `None`: TENSOR_FLOAT32.
    quant: Option<(f32, i32)>,
    /// The activation scalar of the operation that produced it, while a following Relu/Clip
    /// can still be fused there.
    act: Option<u32>,
}

#[derive(Clone, Debug)]
enum Value {
    /// Known at import time (ONNX layout).
    Const(Tensor),
    /// A uint8 constant with its quantization (DequantizeLinear of an initializer).
    QConst(Tensor, f32, i32),
    Dyn(Dyn),
    /// The float32 value `DequantizeLinear(q)`, emitted as DEQUANTIZE only if a float consumer
    /// needs it (QDQ-style consumers use `q` itself).
    Deq(Dyn),
    /// An image `[N, C, H, W]` viewed as `[N, G, C/G, H, W]` (`split` = (G, C/G)), or its
    /// transpose `[N, C/G, G, H, W]`: the middle of a channel shuffle (Reshape → Transpose →
    /// Reshape), which only a reshape back to 4-D may consume.
    Shuffle {
        d: Dyn,
        split: (usize, usize),
        transposed: bool,
    },
}

/// The NHWC dimensions of an ONNX NCHW shape.
fn nhwc(shape: &[usize]) -> Vec<u32> {
    let s: Vec<u32> = shape.iter().map(|&d| d as u32).collect();
    if s.len() == 4 {
        vec![s[0], s[2], s[3], s[1]]
    } else {
        s
    }
}

/// The ONNX shape of an operand's dimensions (NHWC rank 4 → NCHW).
fn onnx_shape(dims: &[u32]) -> Vec<usize> {
    let d: Vec<usize> = dims.iter().map(|&x| x as usize).collect();
    if d.len() == 4 {
        vec![d[0], d[3], d[1], d[2]]
    } else {
        d
    }
}

/// Values of an NCHW tensor in NHWC order.
fn to_nhwc<T: Copy>(v: &[T], s: &[usize]) -> Vec<T> {
    let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
    let mut out = Vec::with_capacity(v.len());
    for ni in 0..n {
        for y in 0..h {
            for x in 0..w {
                for ci in 0..c {
                    out.push(v[((ni * c + ci) * h + y) * w + x]);
                }
            }
        }
    }
    out
}

fn layout_of<T>(shape: &[T]) -> EdgeLayout {
    if shape.len() == 4 {
        EdgeLayout::Nhwc
    } else {
        EdgeLayout::Same
    }
}

fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        bail!("axis {axis} out of range for rank {rank}");
    }
    Ok(((axis + r) % r.max(1)) as usize)
}

/// The newest opset of the default domain (onnx 1.23.2 defines 1–28).
pub const MAX_OPSET: i64 = 28;

struct Attrs<'a>(&'a [AttributeProto]);

impl Attrs<'_> {
    fn get(&self, name: &str) -> Option<&AttributeProto> {
        self.0.iter().find(|a| a.name.as_deref() == Some(name))
    }
    fn i(&self, name: &str, default: i64) -> i64 {
        self.get(name).and_then(|a| a.i).unwrap_or(default)
    }
    fn f(&self, name: &str, default: f32) -> f32 {
        self.get(name).and_then(|a| a.f).unwrap_or(default)
    }
    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    fn s(&self, name: &str) -> Option<String> {
        self.get(name)
            .and_then(|a| a.s.as_ref())
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
    /// Refuses attributes the lowering does not know: ignoring one could change the result.
    fn only(&self, known: &[&str]) -> R<()> {
        for a in self.0 {
            let name = a.name.as_deref().unwrap_or("");
            // `consumed_inputs` (opsets 1–5) only marked in-place updates: no effect on values.
            if !known.contains(&name) && name != "consumed_inputs" {
                bail!("attribute '{name}' is not supported");
            }
        }
        Ok(())
    }
}

struct Lowering<'a> {
    b: ModelBuilder,
    values: HashMap<String, Value>,
    /// Uses of each name as a node input (graph outputs count once more).
    uses: HashMap<String, usize>,
    graph_outputs: HashSet<String>,
    nodes: &'a [NodeProto],
    /// Node index consuming each name (the last one), for look-ahead fusions.
    consumer: HashMap<String, usize>,
    /// Nodes already absorbed into an earlier one.
    absorbed: HashSet<usize>,
    /// NHWC graph inputs taken as they are, their Transpose [0, 3, 1, 2] uses being aliases.
    transposed_inputs: HashSet<String>,
    /// Integer and boolean runtime tensors (int64 or int32 graph inputs, held as TENSOR_INT32
    /// since NNAPI has no int64; bool inputs, comparison, ArgMax and Cast results as
    /// TENSOR_INT32 / TENSOR_BOOL8), in ONNX order: operand and shape. Only the lowerings
    /// that take such operands read them; every other use is refused.
    ints: HashMap<String, (u32, Vec<usize>)>,
    opset: i64,
    summary: Vec<String>,
    /// Bytes made by constant folding so far, charged against `fold_budget`.
    folded_bytes: usize,
    /// The bytes all folds of this import may make: [`fold_budget`] of the file's size.
    fold_budget: usize,
}

/// Constant folding turns a few bytes of file into data (ConstantOfShape, Gather, Tile), so
/// unlike a stored initializer its size is not bounded by the file. Every import may fold
/// [`FOLD_FLOOR`] bytes, more in proportion to the file (a model that transposes or reshapes
/// all its weights at load folds about the file's size once), and never more than
/// [`FOLD_CAP`]: a 1 GiB file of weights (decode's [`crate::decode::MAX_FILE_BYTES`]) folds
/// within it.
pub const FOLD_FLOOR: usize = 64 << 20;
/// The multiple of the file's size all folds of one import may make.
pub const FOLD_PER_FILE_BYTE: usize = 2;
/// The most all folds of one import may make, whatever the file.
pub const FOLD_CAP: usize = 2 << 30;

/// The folding budget of a file of `file_bytes` bytes.
pub fn fold_budget(file_bytes: usize) -> usize {
    file_bytes
        .saturating_mul(FOLD_PER_FILE_BYTE)
        .clamp(FOLD_FLOOR, FOLD_CAP)
}

impl Lowering<'_> {
    /// The element count of a tensor of `elem`-byte elements about to be folded, refused
    /// when it would pass what is left of the budget, before anything is allocated.
    fn folded_count(&self, dims: &[usize], elem: usize) -> R<usize> {
        let left = self.fold_budget.saturating_sub(self.folded_bytes);
        crate::decode::bounded_count(dims, left / elem.max(1)).ok_or_else(|| {
            format!(
                "folding would make a tensor of dimensions {dims:?}, more than the {left} bytes \
                 left of the {}-byte folding budget",
                self.fold_budget
            )
        })
    }
}

pub fn lower(model: &ModelProto, file_bytes: usize) -> Result<ImportedModel, OnnxError> {
    let graph: &GraphProto = model.graph.as_ref().expect("decode checked the graph");
    let mut opset = None;
    for o in &model.opset_import {
        let domain = o.domain.as_deref().unwrap_or("");
        let version = o.version.unwrap_or(0);
        match domain {
            "" | "ai.onnx" => opset = Some(version),
            "com.microsoft" => {}
            other => {
                if graph
                    .node
                    .iter()
                    .any(|n| n.domain.as_deref() == Some(other))
                {
                    return Err(OnnxError::Unsupported(format!(
                        "operator domain '{other}' is not supported (only the default domain and \
                         com.microsoft's quantized operators)"
                    )));
                }
            }
        }
    }
    let opset = opset.unwrap_or(1);
    if !(1..=MAX_OPSET).contains(&opset) {
        return Err(OnnxError::Unsupported(format!(
            "opset {opset} of the default domain is outside the supported 1–{MAX_OPSET}"
        )));
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(OnnxError::Unsupported(
            "sparse initializers are not supported".into(),
        ));
    }
    let mut l = Lowering {
        b: ModelBuilder::new(),
        values: HashMap::new(),
        uses: HashMap::new(),
        graph_outputs: graph.output.iter().filter_map(|o| o.name.clone()).collect(),
        nodes: &graph.node,
        consumer: HashMap::new(),
        absorbed: HashSet::new(),
        transposed_inputs: HashSet::new(),
        ints: HashMap::new(),
        opset,
        summary: Vec::new(),
        folded_bytes: 0,
        fold_budget: fold_budget(file_bytes),
    };
    for (k, node) in graph.node.iter().enumerate() {
        for i in node.input.iter().filter(|i| !i.is_empty()) {
            *l.uses.entry(i.clone()).or_default() += 1;
            l.consumer.insert(i.clone(), k);
        }
    }
    for o in &l.graph_outputs {
        *l.uses.entry(o.clone()).or_default() += 1;
    }
    for (k, t) in graph.initializer.iter().enumerate() {
        let name = t.name.clone().unwrap_or_default();
        let tensor = decode::tensor(t, &format!("initializer {k} '{name}'"))?;
        l.values.insert(name, Value::Const(tensor));
    }
    let inputs = l.graph_inputs(graph)?;

    let producer: HashMap<&str, usize> = graph
        .node
        .iter()
        .enumerate()
        .flat_map(|(k, n)| n.output.iter().map(move |o| (o.as_str(), k)))
        .collect();
    // Results are bound to their node's first output name (also across fused and absorbed
    // nodes), so a node without one is malformed, whatever its operator.
    let unnamed = |n: &NodeProto| n.output.first().is_none_or(|o| o.is_empty());
    if let Some((k, node)) = graph.node.iter().enumerate().find(|(_, n)| unnamed(n)) {
        return Err(OnnxError::Node {
            index: k,
            name: node.name.clone().unwrap_or_default(),
            op_type: node.op_type.clone().unwrap_or_default(),
            why: "the node has no output".into(),
        });
    }
    for (k, node) in graph.node.iter().enumerate() {
        let op_type = node.op_type.clone().unwrap_or_default();
        let err = |why: String| OnnxError::Node {
            index: k,
            name: node.name.clone().unwrap_or_default(),
            op_type: op_type.clone(),
            why,
        };
        if l.absorbed.contains(&k) {
            l.summary.push(format!(
                "node {k} '{}' ({op_type}) → absorbed into the operation above",
                node.name.as_deref().unwrap_or("")
            ));
            continue;
        }
        for i in node.input.iter().filter(|i| !i.is_empty()) {
            if !l.values.contains_key(i) && !l.ints.contains_key(i) {
                return Err(err(match producer.get(i.as_str()) {
                    Some(&p) if p >= k => format!(
                        "input '{i}' comes from node {p}, which is not earlier: the graph has a \
                         cycle or is not topologically sorted"
                    ),
                    Some(&p) => format!("input '{i}' of node {p} is not available"),
                    None => format!(
                        "input '{i}' is not produced by any node, initializer or graph input"
                    ),
                }));
            }
        }
        let before = l.b.model().operations.len();
        let note = l.node(k, node).map_err(err)?;
        let added: Vec<String> = l.b.model().operations[before..]
            .iter()
            .map(|o| {
                OperationType::from_raw(o.operation_type)
                    .map_or("?".into(), |t| t.name().to_string())
            })
            .collect();
        let what = match (note, added.is_empty()) {
            (Some(note), true) => note,
            (Some(note), false) => format!("{} ({note})", added.join(" + ")),
            (None, false) => added.join(" + "),
            (None, true) => "removed".into(),
        };
        l.summary.push(format!(
            "node {k} '{}' ({op_type}) → {what}",
            node.name.as_deref().unwrap_or("")
        ));
    }
    let outputs = l.graph_outputs_edges(graph)?;
    let model = l.b.finish();
    nnhal_hal::validate::validate_model(&model)
        .map_err(|e| OnnxError::Invalid(e.message().to_string()))?;
    Ok(ImportedModel {
        model,
        inputs,
        outputs,
        summary: l.summary,
        class_labels: None,
    })
}

impl Lowering<'_> {
    fn graph_inputs(&mut self, graph: &GraphProto) -> Result<Vec<Edge>, OnnxError> {
        let mut edges = Vec::new();
        for (k, vi) in graph.input.iter().enumerate() {
            let name = vi.name.clone().unwrap_or_default();
            if self.values.contains_key(&name) {
                continue; // an initializer also listed as input (IR < 4)
            }
            let bad =
                |why: String| OnnxError::Unsupported(format!("graph input {k} '{name}': {why}"));
            let tensor = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(crate::proto::type_proto::Value::TensorType(t)) => t,
                _ => return Err(bad("not a tensor".into())),
            };
            let elem = tensor.elem_type.unwrap_or(0);
            let shape: Vec<usize> = match &tensor.shape {
                None => return Err(bad("no shape: a static shape is needed".into())),
                Some(s) => {
                    s.dim
                        .iter()
                        .map(|d| match d.value {
                            Some(crate::proto::tensor_shape_proto::dimension::Value::DimValue(
                                v,
                            )) if v > 0 => Ok(v as usize),
                            // A symbolic (batch) dimension runs as 1; the runner checks what it is fed.
                            Some(crate::proto::tensor_shape_proto::dimension::Value::DimParam(
                                _,
                            )) => Ok(1),
                            _ => Err(bad("a dimension is not a positive static size".into())),
                        })
                        .collect::<Result<_, _>>()?
                }
            };
            element_count(&shape).map_err(bad)?;
            let (source_type, quant) = match elem {
                1 => (SourceType::Float32, self.input_quantization(&name)),
                2 => (SourceType::UInt8, self.input_quantization(&name)),
                6 | 7 | 9 => {
                    // NNAPI has no int64: an integer input is fed as TENSOR_INT32 (the caller
                    // narrows int64 data, refusing values outside int32); bool as TENSOR_BOOL8.
                    let dims: Vec<u32> = if shape.is_empty() {
                        vec![1]
                    } else {
                        shape.iter().map(|&d| d as u32).collect()
                    };
                    let (ty, source_type) = if elem == 9 {
                        (OperandType::TensorBool8, SourceType::Bool8)
                    } else {
                        (OperandType::TensorInt32, SourceType::Int32)
                    };
                    let operand = self.b.temporary(ty, &dims, 0.0, 0);
                    self.b.mark_input(operand);
                    self.ints.insert(name.clone(), (operand, shape.clone()));
                    edges.push(Edge {
                        name: name.clone(),
                        shape: shape.clone(),
                        layout: EdgeLayout::Same,
                        source_type,
                        quantized: None,
                    });
                    continue;
                }
                other => {
                    return Err(bad(format!(
                        "element type {} (only float32, uint8, int32, int64 and bool inputs)",
                        decode::type_name(other)
                    )))
                }
            };
            if source_type == SourceType::UInt8 && quant.is_none() {
                return Err(bad(
                    "a uint8 input must feed QuantizeLinear-free quantized operators with \
                     constant scale and zero point"
                        .into(),
                ));
            }
            let ty = if quant.is_some() {
                OperandType::TensorQuant8Asymm
            } else {
                OperandType::TensorFloat32
            };
            let (scale, zp) = quant.unwrap_or((0.0, 0));
            // An NHWC graph input whose every use is Transpose [0, 3, 1, 2] (tf2onnx's form) is
            // already the operand NNAPI wants: the transposes become aliases of it.
            let pre_transposed = shape.len() == 4
                && quant.is_none()
                && !self.graph_outputs.contains(&name)
                && self
                    .nodes
                    .iter()
                    .filter(|n| n.input.contains(&name))
                    .all(|n| {
                        n.op_type.as_deref() == Some("Transpose")
                            && Attrs(&n.attribute).ints("perm").as_deref() == Some(&[0, 3, 1, 2])
                            && !n.output.iter().any(|o| self.graph_outputs.contains(o))
                    });
            let (dims, logical, layout) = if pre_transposed {
                let nchw = vec![shape[0], shape[3], shape[1], shape[2]];
                self.transposed_inputs.insert(name.clone());
                (nhwc(&nchw), nchw, EdgeLayout::Same)
            } else if shape.len() > 4 {
                // NNAPI operations take rank 4 at most: a higher-rank input is held as
                // [N, C, rest] (the same elements in the same order), which the per-channel
                // and element-wise lowerings take as it is.
                let rest = element_count(&shape[2..]).map_err(bad)?;
                let dims = [shape[0], shape[1], rest].map(|d| d as u32).to_vec();
                (dims, shape.clone(), EdgeLayout::Same)
            } else {
                (nhwc(&shape), shape.clone(), layout_of(&shape))
            };
            let operand = self.b.temporary(ty, &dims, scale, zp);
            self.b.mark_input(operand);
            self.values.insert(
                name.clone(),
                Value::Dyn(Dyn {
                    operand,
                    layout: layout_of(&logical),
                    shape: logical,
                    quant,
                    act: None,
                }),
            );
            edges.push(Edge {
                name,
                shape: shape.clone(),
                layout,
                source_type,
                quantized: quant.filter(|_| source_type == SourceType::Float32),
            });
        }
        Ok(edges)
    }

    /// The quantization a graph input is used with: every consumer is a QuantizeLinear (float
    /// input) or takes it as its quantized first input (uint8 input) with the same constant
    /// per-tensor uint8 scale and zero point.
    fn input_quantization(&self, name: &str) -> Option<(f32, i32)> {
        let mut found: Option<(f32, i32)> = None;
        for node in self.nodes {
            let Some(pos) = node.input.iter().position(|i| i == name) else {
                continue;
            };
            let op = node.op_type.as_deref().unwrap_or("");
            let (s, z) = match op {
                "QuantizeLinear" if pos == 0 => (1, 2),
                "QLinearConv"
                | "QLinearMatMul"
                | "QLinearGlobalAveragePool"
                | "QLinearSoftmax"
                | "QLinearAdd"
                | "QLinearMul"
                    if pos == 0 =>
                {
                    (1, 2)
                }
                _ => return None,
            };
            let q = self.quant_params(node, s, z).ok()?;
            if found.is_some_and(|f| f != q) {
                return None;
            }
            found = Some(q);
        }
        found.filter(|_| !self.graph_outputs.contains(name))
    }

    /// A per-tensor (scale, zero point) pair from inputs `s` and `z` of `node`.
    fn quant_params(&self, node: &NodeProto, s: usize, z: usize) -> R<(f32, i32)> {
        let scale = match node.input.get(s).and_then(|n| self.values.get(n)) {
            Some(Value::Const(t)) if t.data.len() == 1 => match &t.data {
                Data::F32(v) => v[0],
                _ => bail!("input {s}: the scale is not float32"),
            },
            Some(Value::Const(_)) => {
                bail!("input {s}: per-axis scales are not expressible in NNAPI 1.0")
            }
            _ => bail!("input {s}: the scale is not a constant"),
        };
        let zp = match node
            .input
            .get(z)
            .filter(|n| !n.is_empty())
            .map(|n| self.values.get(n))
        {
            None => 0,
            Some(Some(Value::Const(t))) if t.data.len() == 1 => match &t.data {
                Data::U8(v) => i32::from(v[0]),
                // An int8 tensor q is held as the uint8 q + 128 with its zero point moved by
                // 128: the same real values and the same saturation bounds, exactly.
                Data::I8(v) => i32::from(v[0]) + 128,
                _ => bail!("input {z}: the zero point is not uint8 or int8"),
            },
            Some(_) => bail!("input {z}: the zero point is not a per-tensor constant"),
        };
        if !(scale > 0.0 && scale.is_finite()) {
            bail!("scale {scale} is not a positive number");
        }
        Ok((scale, zp))
    }

    fn graph_outputs_edges(&mut self, graph: &GraphProto) -> Result<Vec<Edge>, OnnxError> {
        let mut edges = Vec::new();
        let mut seen = HashSet::new();
        for (k, vi) in graph.output.iter().enumerate() {
            let name = vi.name.clone().unwrap_or_default();
            let bad =
                |why: String| OnnxError::Unsupported(format!("graph output {k} '{name}': {why}"));
            if let Some((operand, shape)) = self.ints.get(&name).cloned() {
                let lifetime = self.b.operand_at(operand).lifetime;
                if lifetime != nnhal_hal::OperandLifeTime::TemporaryVariable.raw()
                    || !seen.insert(operand)
                {
                    return Err(bad(
                        "the same tensor as a graph input or another output is not supported"
                            .into(),
                    ));
                }
                self.b.mark_output(operand);
                let bool8 =
                    self.b.operand_at(operand).operand_type == OperandType::TensorBool8.raw();
                edges.push(Edge {
                    name,
                    shape,
                    layout: EdgeLayout::Same,
                    source_type: if bool8 {
                        SourceType::Bool8
                    } else {
                        SourceType::Int32
                    },
                    quantized: None,
                });
                continue;
            }
            let value = self
                .values
                .get(&name)
                .cloned()
                .ok_or_else(|| bad("not produced by any node".into()))?;
            let d = match value {
                Value::Dyn(d) => d,
                Value::Deq(q) => self.dequantize(&q).map_err(bad)?,
                Value::Const(_) | Value::QConst(..) => {
                    return Err(bad("a constant output is not supported".into()))
                }
                Value::Shuffle { .. } => {
                    return Err(bad(
                        "a 5-D channel-shuffle view is not supported as an output".into(),
                    ))
                }
            };
            let declared = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(crate::proto::type_proto::Value::TensorType(t)) => t.elem_type.unwrap_or(0),
                _ => 0,
            };
            if d.quant.is_some() && declared == 3 {
                // Held as its uint8 view (q + 128): the runner would return uint8 data.
                return Err(bad(
                    "an int8 quantized graph output is not supported (DequantizeLinear it)".into(),
                ));
            }
            let operand = self.b.operand_at(d.operand);
            if operand.lifetime != nnhal_hal::OperandLifeTime::TemporaryVariable.raw()
                || !seen.insert(d.operand)
            {
                return Err(bad(
                    "the same tensor as a graph input or another output is not supported".into(),
                ));
            }
            self.b.mark_output(d.operand);
            edges.push(Edge {
                name,
                shape: d.shape.clone(),
                layout: d.layout.clone(),
                source_type: if d.quant.is_some() {
                    SourceType::UInt8
                } else {
                    SourceType::Float32
                },
                quantized: None,
            });
        }
        Ok(edges)
    }

    // ---- values ----------------------------------------------------------------------------

    fn input<'n>(&self, node: &'n NodeProto, k: usize) -> Option<&Value> {
        let name: &'n String = node.input.get(k).filter(|n| !n.is_empty())?;
        self.values.get(name)
    }

    fn need(&self, node: &NodeProto, k: usize) -> R<Value> {
        self.input(node, k)
            .cloned()
            .ok_or_else(|| format!("input {k} is missing"))
    }

    fn constant(&self, node: &NodeProto, k: usize, what: &str) -> R<Tensor> {
        match self.input(node, k) {
            Some(Value::Const(t)) => Ok(t.clone()),
            Some(Value::QConst(t, s, z)) => Ok(dequantized(t, *s, *z)),
            Some(_) => bail!("input {k} ({what}) must be a constant"),
            None => bail!("input {k} ({what}) is missing"),
        }
    }

    fn set(&mut self, node: &NodeProto, value: Value) {
        if let Some(out) = node.output.first() {
            self.values.insert(out.clone(), value);
        }
    }

    fn single_use(&self, name: &str) -> bool {
        self.uses.get(name) == Some(&1) && !self.graph_outputs.contains(name)
    }

    /// A float32 operand for `v`: constants become CONSTANT_COPY (rank 4 in NHWC order).
    fn float(&mut self, v: &Value) -> R<Dyn> {
        match v {
            Value::Dyn(d) if d.quant.is_none() => Ok(d.clone()),
            Value::Dyn(_) => bail!("a quantized tensor where float32 is needed (a QuantizeLinear without its DequantizeLinear?)"),
            Value::Deq(q) => self.dequantize(q),
            Value::Shuffle { .. } => bail!("a 5-D view of an image is only supported as the middle of a channel shuffle (Reshape → Transpose [0, 2, 1, 3, 4] → Reshape)"),
            Value::QConst(t, s, z) => self.float(&Value::Const(dequantized(t, *s, *z))),
            Value::Const(t) => {
                let Data::F32(values) = &t.data else {
                    bail!("a {} constant where float32 is needed", t.data.type_name());
                };
                let values = if t.dims.len() == 4 {
                    to_nhwc(values, &t.dims)
                } else {
                    values.clone()
                };
                let dims = nhwc(&t.dims);
                let dims = if dims.is_empty() { vec![1] } else { dims };
                let operand = self.b.f32_tensor(&dims, &values);
                Ok(Dyn {
                    operand,
                    shape: if t.dims.is_empty() { vec![1] } else { t.dims.clone() },
                    layout: layout_of(&t.dims),
                    quant: None,
                    act: None,
                })
            }
        }
    }

    /// The quantized operand behind `v` (a quant8 tensor or the input of a pending
    /// DequantizeLinear).
    fn quantized(&self, v: &Value) -> R<Dyn> {
        match v {
            Value::Dyn(d) if d.quant.is_some() => Ok(d.clone()),
            Value::Deq(q) => Ok(q.clone()),
            Value::Shuffle { .. } => bail!("a 5-D view of an image is only supported as the middle of a channel shuffle (Reshape → Transpose [0, 2, 1, 3, 4] → Reshape)"),
            _ => bail!("a float32 tensor where a quantized (uint8) one is needed"),
        }
    }

    fn dequantize(&mut self, q: &Dyn) -> R<Dyn> {
        let (operand, dims) = self.emit(OperationType::Dequantize, &[q.operand], None)?;
        Ok(Dyn {
            operand,
            shape: onnx_shape(&dims),
            layout: q.layout.clone(),
            quant: None,
            act: None,
        })
    }

    /// Adds `op` with one output whose dimensions shape inference gives.
    fn emit(
        &mut self,
        op: OperationType,
        inputs: &[u32],
        quant: Option<(f32, i32)>,
    ) -> R<(u32, Vec<u32>)> {
        let dims = self.b.infer(op, inputs)?;
        let dims = dims.into_iter().next().ok_or("no output")?;
        let (ty, (scale, zp)) = match quant {
            Some(q) => (OperandType::TensorQuant8Asymm, q),
            None => (OperandType::TensorFloat32, (0.0, 0)),
        };
        let out = self.b.temporary(ty, &dims, scale, zp);
        self.b.operation(op, inputs, &[out]);
        Ok((out, dims))
    }

    /// `emit` for an image operation whose output is rank 4 (NHWC).
    fn emit_image(
        &mut self,
        op: OperationType,
        inputs: &[u32],
        quant: Option<(f32, i32)>,
        act: Option<u32>,
    ) -> R<Dyn> {
        let (operand, dims) = self.emit(op, inputs, quant)?;
        Ok(Dyn {
            operand,
            shape: onnx_shape(&dims),
            layout: layout_of(&dims),
            quant,
            act,
        })
    }

    fn act(&mut self) -> u32 {
        self.b.int(FusedActivationFunc::None.raw())
    }

    fn rank4(&self, d: &Dyn) -> R<()> {
        if d.shape.len() != 4 || d.layout != EdgeLayout::Nhwc {
            bail!(
                "input shape {:?}: only 4-D (N, C, H, W) images are supported",
                d.shape
            );
        }
        Ok(())
    }

    // ---- nodes -----------------------------------------------------------------------------

    /// Lowers one node; `Some(note)` is what the summary says beyond the added operations.
    fn node(&mut self, k: usize, node: &NodeProto) -> R<Option<String>> {
        let op = node.op_type.as_deref().unwrap_or("");
        let domain = node.domain.as_deref().unwrap_or("");
        let a = Attrs(&node.attribute);
        if domain == "com.microsoft" {
            return match op {
                "QLinearAdd" | "QLinearMul" => self.qlinear_binary(node, op == "QLinearAdd"),
                "QLinearConcat" => self.qlinear_concat(node, &a),
                "QLinearGlobalAveragePool" => self.qlinear_gap(node, &a),
                "QLinearSoftmax" => self.qlinear_softmax(node, &a),
                _ => bail!("com.microsoft operator {op} is not supported"),
            };
        }
        if !(domain.is_empty() || domain == "ai.onnx") {
            bail!("domain '{domain}' is not supported");
        }
        if node.input.iter().any(|i| self.ints.contains_key(i)) {
            return self.int_node(node, &a, op);
        }
        // Constant folding: any foldable operator whose inputs are all known.
        let all_const = node
            .input
            .iter()
            .filter(|i| !i.is_empty())
            .all(|i| matches!(self.values.get(i), Some(Value::Const(_))));
        if all_const && !node.input.is_empty() {
            if let Some(t) = self.fold(op, node, &a)? {
                self.folded_bytes += t.data.len() * t.data.elem_size();
                if self.folded_bytes > self.fold_budget {
                    bail!(
                        "constant folding has made more than the {}-byte folding budget in all",
                        self.fold_budget
                    );
                }
                self.set(node, Value::Const(t));
                return Ok(Some("folded".into()));
            }
        }
        if matches!(
            op,
            "Conv"
                | "Gemm"
                | "MatMul"
                | "Softmax"
                | "Add"
                | "Mul"
                | "MaxPool"
                | "AveragePool"
                | "GlobalAveragePool"
                | "Concat"
        ) && matches!(self.input(node, 0), Some(Value::Deq(_)))
            && !(matches!(op, "Conv" | "Gemm" | "MatMul")
                && matches!(self.input(node, 1), Some(Value::Const(_))))
        {
            if let Some((y, qk)) = self.qdq_target(k, node) {
                return self.qdq(node, &a, op, y, qk);
            }
            if matches!(op, "Conv" | "Add" | "Mul") {
                if let Some((y, rk, qk)) = self.qdq_relu_target(k, node) {
                    return self.qdq_relu(node, &a, op, y, rk, qk);
                }
            }
        }
        if matches!(
            op,
            "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" | "LpPool"
        ) {
            match self.input(node, 0).map(value_shape).map(|s| s.len()) {
                Some(3) => return self.one_d(k, node, op),
                Some(r) if r >= 5 => bail!(
                    "a {}-D convolution or pooling: NNAPI has only 1-D (as 2-D) and 2-D ones",
                    r - 2
                ),
                _ => {}
            }
        }
        match op {
            "Conv" => self.conv(k, node, &a),
            "ConvTranspose" => self.conv_transpose(node, &a),
            "MatMul"
                if self
                    .input(node, 0)
                    .map(value_shape)
                    .is_some_and(|s| s.len() > 2) =>
            {
                self.matmul_nd(k, node)
            }
            "Gemm" | "MatMul" => self.gemm(k, node, &a, op == "MatMul"),
            "Add" | "Mul" | "Sum" | "Sub" | "Div" | "Pow" | "Max" | "Min" => {
                self.binary_any(node, &a, op)
            }
            "Relu" | "Clip" => self.relu(node, &a, op),
            "Sigmoid" | "Tanh" | "Floor" | "Neg" | "Exp" | "Log" | "Sqrt" | "Abs" | "Sin"
            | "Sign" | "HardSwish" | "Reciprocal" | "Elu" | "Selu" | "LeakyRelu" | "Softplus"
            | "Softsign" | "HardSigmoid" | "Mish" => self.unary(node, &a, op),
            "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
                self.compare(node, &a, op)
            }
            "Not" | "And" | "Or" | "Xor" => self.logical(node, &a, op),
            "Where" => self.where_(node, &a),
            "ArgMax" | "ArgMin" => self.arg(node, &a, op),
            "Cast" => self.cast(node, &a),
            "PRelu" => self.prelu(node, &a),
            "Shrink" => self.shrink(node, &a),
            "InstanceNormalization" => self.instance_norm(node, &a),
            "Pad" => self.pad(node, &a),
            "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" => {
                self.reduce(node, &a, op)
            }
            "Split" => self.split(node, &a),
            "Slice" => self.slice(node, &a),
            "Tile" | "Expand" => self.tile(node, &a, op),
            "LogSoftmax" => self.softmax_any(node, &a, true),
            "MaxPool" | "AveragePool" | "LpPool" => self.pool(node, &a, op),
            "GlobalLpPool" => {
                a.only(&["p"])?;
                if a.i("p", 2) != 2 {
                    bail!("p {}: only p = 2 (L2_POOL_2D)", a.i("p", 2));
                }
                let x = self.need(node, 0)?;
                let x = self.float(&x)?;
                self.rank4(&x)?;
                let (h, w) = (x.shape[2] as i32, x.shape[3] as i32);
                let mut ins = vec![x.operand];
                for v in [0, 0, 0, 0, 1, 1, w, h] {
                    ins.push(self.b.int(v));
                }
                let act = self.act();
                ins.push(act);
                let d = self.emit_image(OperationType::L2Pool2d, &ins, None, None)?;
                // L2_POOL_2D is √(Σx²/n); LpPool is √(Σx²).
                let k = self.b.f32_tensor(&[1], &[((h * w) as f32).sqrt()]);
                let act = self.act();
                let (operand, _) = self.emit(OperationType::Mul, &[d.operand, k, act], None)?;
                self.set(
                    node,
                    Value::Dyn(Dyn {
                        operand,
                        act: Some(act),
                        ..d
                    }),
                );
                Ok(None)
            }
            "GlobalAveragePool" | "GlobalMaxPool" => {
                a.only(&[])?;
                let x = self.need(node, 0)?;
                let x = self.float(&x)?;
                self.rank4(&x)?;
                let (h, w) = (x.shape[2] as i32, x.shape[3] as i32);
                let ty = if op == "GlobalAveragePool" {
                    OperationType::AveragePool2d
                } else {
                    OperationType::MaxPool2d
                };
                let mut ins = vec![x.operand];
                for v in [0, 0, 0, 0, 1, 1, w, h] {
                    ins.push(self.b.int(v));
                }
                let act = self.act();
                ins.push(act);
                let d = self.emit_image(ty, &ins, None, Some(act))?;
                self.set(node, Value::Dyn(d));
                Ok(None)
            }
            "Concat" => self.concat(node, &a),
            "Reshape" if self.pixel_shuffle(k, node, &a)?.is_some() => {
                Ok(Some("PixelShuffle: DEPTH_TO_SPACE".into()))
            }
            "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => {
                let x = self.need(node, 0)?;
                let shape = self.target_shape(node, &a, op, value_shape(&x))?;
                let out = self.reshape(&x, &shape)?;
                self.set(node, out);
                Ok(None)
            }
            "Softmax" => self.softmax_any(node, &a, false),
            "LRN" => {
                a.only(&["size", "alpha", "beta", "bias"])?;
                let size = a.i("size", 0);
                if size <= 0 || size % 2 == 0 {
                    bail!("size {size}: only an odd window is symmetric as NNAPI's radius");
                }
                let x = self.need(node, 0)?;
                let x = self.float(&x)?;
                self.rank4(&x)?;
                let ins = [
                    x.operand,
                    self.b.int(((size - 1) / 2) as i32),
                    self.b.float(a.f("bias", 1.0)),
                    self.b.float(a.f("alpha", 1e-4) / size as f32),
                    self.b.float(a.f("beta", 0.75)),
                ];
                let d =
                    self.emit_image(OperationType::LocalResponseNormalization, &ins, None, None)?;
                self.set(node, Value::Dyn(d));
                Ok(None)
            }
            "LpNormalization" => {
                a.only(&["p", "axis"])?;
                if a.i("p", 2) != 2 {
                    bail!("p {}: only p = 2 (L2_NORMALIZATION)", a.i("p", 2));
                }
                let x = self.need(node, 0)?;
                let x = self.float(&x)?;
                self.rank4(&x)?;
                if norm_axis(a.i("axis", -1), 4)? != 1 {
                    bail!(
                        "axis {}: only the channel axis (1) of an NCHW image",
                        a.i("axis", -1)
                    );
                }
                let d =
                    self.emit_image(OperationType::L2Normalization, &[x.operand], None, None)?;
                self.set(node, Value::Dyn(d));
                Ok(None)
            }
            "DepthToSpace" | "SpaceToDepth" => {
                a.only(&["blocksize", "mode"])?;
                if op == "DepthToSpace" && a.s("mode").is_some_and(|m| m != "DCR") {
                    bail!(
                        "mode {:?}: only DCR is NNAPI's DEPTH_TO_SPACE",
                        a.s("mode").unwrap_or_default()
                    );
                }
                let x = self.need(node, 0)?;
                let quant = matches!(x, Value::Dyn(Dyn { quant: Some(_), .. }));
                let x = if quant {
                    self.quantized(&x)?
                } else {
                    self.float(&x)?
                };
                self.rank4(&x)?;
                let ty = if op == "DepthToSpace" {
                    OperationType::DepthToSpace
                } else {
                    OperationType::SpaceToDepth
                };
                let bs = self.b.int(a.i("blocksize", 0) as i32);
                let d = self.emit_image(ty, &[x.operand, bs], x.quant, None)?;
                self.set(node, Value::Dyn(d));
                Ok(None)
            }
            "Resize" | "Upsample" => self.resize(node, &a, op),
            "Transpose" => self.transpose(node, &a),
            "BatchNormalization" => self.batchnorm_any(node),
            "Dropout" | "Identity" => {
                if node
                    .output
                    .get(1)
                    .is_some_and(|m| !m.is_empty() && self.uses.contains_key(m))
                {
                    bail!("the dropout mask output is used; only inference (no mask) is supported");
                }
                let x = self.need(node, 0)?;
                self.set(node, x);
                Ok(Some("removed".into()))
            }
            "Constant" => {
                let t = constant_attr(&a)?;
                self.set(node, Value::Const(t));
                Ok(Some("folded".into()))
            }
            "QuantizeLinear" => self.quantize_linear(node, &a),
            "DequantizeLinear" => self.dequantize_linear(node, &a),
            "QLinearConv" => self.qlinear_conv(k, node, &a),
            "QLinearMatMul" => self.qlinear_matmul(node, &a),
            "Shape" => {
                // Static shapes: the shape of a runtime tensor is known at import.
                a.only(&["start", "end"])?;
                let shape = value_shape(&self.need(node, 0)?);
                let r = shape.len() as i64;
                let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
                let (start, end) = (clamp(a.i("start", 0)), clamp(a.i("end", r)));
                let dims: Vec<i64> = shape[start..end.max(start)]
                    .iter()
                    .map(|&d| d as i64)
                    .collect();
                self.set(
                    node,
                    Value::Const(Tensor {
                        dims: vec![dims.len()],
                        data: Data::I64(dims),
                    }),
                );
                Ok(Some("folded (static shape)".into()))
            }
            "Gather" => self.gather(node, &a),
            "ConstantOfShape" => {
                bail!("only foldable when its inputs are static (a runtime shape computation is not expressible)")
            }
            _ => bail!("operator not supported by the NNAPI lowering"),
        }
    }

    /// The dilations of a convolution (1, 1 when absent), NNAPI order (w, h).
    fn dilations(a: &Attrs) -> R<[i32; 2]> {
        let d = a.ints("dilations").unwrap_or(vec![1, 1]);
        if d.len() != 2 || d.iter().any(|&v| !(1..=i64::from(u16::MAX)).contains(&v)) {
            bail!("dilations {d:?}: two positive values expected");
        }
        Ok([d[1] as i32, d[0] as i32])
    }

    fn conv_params(&self, a: &Attrs, x: &Dyn, kh: usize, kw: usize) -> R<[i32; 6]> {
        let dil = Self::dilations(a)?;
        let (kh, kw) = (
            (kh - 1) * dil[1] as usize + 1,
            (kw - 1) * dil[0] as usize + 1,
        );
        if let Some(ks) = a.ints("kernel_shape") {
            let dk = |k: i64, d: i32| (k - 1) * i64::from(d) + 1;
            if ks.len() != 2 || [dk(ks[0], dil[1]), dk(ks[1], dil[0])] != [kh as i64, kw as i64] {
                bail!("kernel_shape {ks:?} disagrees with the weight");
            }
        }
        let strides = a.ints("strides").unwrap_or(vec![1, 1]);
        if strides.len() != 2 || strides.iter().any(|&s| s < 1) {
            bail!("strides {strides:?}: two positive strides expected");
        }
        let pads = pads(a, &x.shape[2..4], &[kh, kw], &strides)?;
        // NNAPI order: left, right, top, bottom, stride w, stride h.
        Ok([
            pads[1],
            pads[3],
            pads[0],
            pads[2],
            strides[1] as i32,
            strides[0] as i32,
        ])
    }

    fn conv(&mut self, k: usize, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "pads",
            "strides",
        ])?;
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        self.rank4(&x)?;
        let w = self.constant(node, 1, "weight")?;
        let Some(wv) = w.f32s() else {
            bail!("the weight is not float32")
        };
        if w.dims.len() != 4 {
            bail!("weight shape {:?}: only 2-D convolutions", w.dims);
        }
        let (m, cg, kh, kw) = (w.dims[0], w.dims[1], w.dims[2], w.dims[3]);
        let mut bias = match self.input(node, 2) {
            None => vec![0.0; m],
            Some(_) => {
                let b = self.constant(node, 2, "bias")?;
                match b.f32s() {
                    Some(v) if v.len() == m => v.to_vec(),
                    _ => bail!("bias shape {:?} is not [{m}] float32", b.dims),
                }
            }
        };
        let mut wv = wv.to_vec();
        let note = self.fold_batchnorm(k, node, &mut wv, &mut bias, m)?;
        let c = x.shape[1];
        let group = a.i("group", 1) as usize;
        let params = self.conv_params(a, &x, kh, kw)?;
        let bias_op = self.b.f32_tensor(&[m as u32], &bias);
        let act = self.act();
        let dil = Self::dilations(a)?;
        let dilated = dil != [1, 1];
        let d = if group == 1 {
            if cg != c {
                bail!("weight has {cg} input channels, the input {c}");
            }
            let filter = to_nhwc(&wv, &[m, c, kh, kw]);
            let f = self
                .b
                .f32_tensor(&[m as u32, kh as u32, kw as u32, c as u32], &filter);
            let mut ins = vec![x.operand, f, bias_op];
            for p in params {
                ins.push(self.b.int(p));
            }
            ins.push(act);
            if dilated {
                ins.push(self.b.constant(OperandType::Bool, &[], &[0]));
                ins.push(self.b.int(dil[0]));
                ins.push(self.b.int(dil[1]));
            }
            self.emit_image(OperationType::Conv2d, &ins, None, Some(act))?
        } else if group == c && cg == 1 && m % c == 0 {
            // [M, 1, kh, kw] → [1, kh, kw, M]: output channel m reads input m / multiplier,
            // as in ONNX.
            let filter = to_nhwc(&wv, &[1, m, kh, kw]);
            let f = self
                .b
                .f32_tensor(&[1, kh as u32, kw as u32, m as u32], &filter);
            let mut ins = vec![x.operand, f, bias_op];
            for p in params {
                ins.push(self.b.int(p));
            }
            ins.push(self.b.int((m / c) as i32));
            ins.push(act);
            if dilated {
                ins.push(self.b.constant(OperandType::Bool, &[], &[0]));
                ins.push(self.b.int(dil[0]));
                ins.push(self.b.int(dil[1]));
            }
            self.emit_image(OperationType::DepthwiseConv2d, &ins, None, Some(act))?
        } else if group > 1 && c % group == 0 && cg * group == c && m % group == 0 && !dilated {
            // GROUPED_CONV_2D: filter [M, kh, kw, C/G], output channels in group order as ONNX.
            let filter = to_nhwc(&wv, &[m, cg, kh, kw]);
            let f = self
                .b
                .f32_tensor(&[m as u32, kh as u32, kw as u32, cg as u32], &filter);
            let mut ins = vec![x.operand, f, bias_op];
            for p in params {
                ins.push(self.b.int(p));
            }
            ins.push(self.b.int(group as i32));
            ins.push(act);
            ins.push(self.b.constant(OperandType::Bool, &[], &[0]));
            self.emit_image(OperationType::GroupedConv2d, &ins, None, Some(act))?
        } else {
            bail!("group {group} with {c} input channels and weight {:?}{}: not a grouping NNAPI expresses", w.dims, if dilated { " dilated (GROUPED_CONV_2D has no dilation)" } else { "" });
        };
        self.set_output(k, node, d, note.is_some())?;
        Ok(note)
    }

    /// Folds a BatchNormalization that alone consumes node `k`'s output into its weights
    /// (`m` output channels, weights rows of equal length) and bias.
    fn fold_batchnorm(
        &mut self,
        k: usize,
        node: &NodeProto,
        w: &mut [f32],
        bias: &mut [f32],
        m: usize,
    ) -> R<Option<String>> {
        let Some(out) = node.output.first() else {
            return Ok(None);
        };
        if !self.single_use(out) {
            return Ok(None);
        }
        let Some(&next) = self.consumer.get(out) else {
            return Ok(None);
        };
        let bn = &self.nodes[next];
        if bn.op_type.as_deref() != Some("BatchNormalization")
            || bn.input.first() != Some(out)
            || next <= k
        {
            return Ok(None);
        }
        let Some((scale, shift)) = self.bn_params(bn)? else {
            return Ok(None);
        };
        if scale.len() != m {
            return Ok(None);
        }
        let row = w.len() / m;
        for (o, (s, t)) in scale.iter().zip(&shift).enumerate() {
            for v in &mut w[o * row..(o + 1) * row] {
                *v *= s;
            }
            bias[o] = bias[o] * s + t;
        }
        self.absorbed.insert(next);
        Ok(Some(format!(
            "BatchNormalization node {next} '{}' folded in",
            bn.name.as_deref().unwrap_or("")
        )))
    }

    /// Per-channel (scale, shift) of an inference BatchNormalization with constant parameters.
    fn bn_params(&self, bn: &NodeProto) -> R<Option<(Vec<f32>, Vec<f32>)>> {
        let a = Attrs(&bn.attribute);
        a.only(&["epsilon", "momentum", "spatial", "training_mode", "is_test"])?;
        if a.i("training_mode", 0) != 0 || a.i("spatial", 1) != 1 {
            bail!("BatchNormalization in training mode or non-spatial form is not supported");
        }
        // `is_test` 0 (opsets 1–6) normalizes with the batch's own statistics (training).
        if a.get("is_test").is_some() && a.i("is_test", 0) == 0 {
            bail!("BatchNormalization with is_test 0 (training mode) is not supported");
        }
        if bn.output.iter().skip(1).any(|o| !o.is_empty()) {
            bail!("BatchNormalization with running-statistics outputs is not supported");
        }
        let eps = a.f("epsilon", 1e-5);
        let mut p = Vec::new();
        for i in 1..5 {
            match bn.input.get(i).and_then(|n| self.values.get(n)) {
                Some(Value::Const(t)) => match t.f32s() {
                    Some(v) => p.push(v.to_vec()),
                    None => return Ok(None),
                },
                _ => return Ok(None),
            }
        }
        let (gamma, beta, mean, var) = (&p[0], &p[1], &p[2], &p[3]);
        let c = gamma.len();
        if [beta.len(), mean.len(), var.len()] != [c, c, c] {
            bail!("BatchNormalization parameters of unequal lengths");
        }
        let scale: Vec<f32> = (0..c).map(|i| gamma[i] / (var[i] + eps).sqrt()).collect();
        let shift: Vec<f32> = (0..c).map(|i| beta[i] - mean[i] * scale[i]).collect();
        Ok(Some((scale, shift)))
    }

    /// Binds node `k`'s result; when a BatchNormalization was folded in, to its output instead.
    /// Binds the result of node `k` (or, when an activation after it was folded in, of that
    /// activation's node) to its output name. A node without an output is malformed.
    fn set_output(&mut self, k: usize, node: &NodeProto, d: Dyn, folded: bool) -> R<()> {
        let first = |n: &NodeProto| n.output.first().filter(|o| !o.is_empty()).cloned();
        let Some(own) = first(node) else {
            bail!("the node has no output");
        };
        let name = if folded {
            let next = self.consumer.get(&own).copied();
            match next.filter(|&n| n > k).and_then(|n| first(&self.nodes[n])) {
                Some(name) => name,
                None => bail!("the activation folded into this node has no output"),
            }
        } else {
            own
        };
        self.values.insert(name, Value::Dyn(d));
        Ok(())
    }

    fn gemm(&mut self, k: usize, node: &NodeProto, a: &Attrs, matmul: bool) -> R<Option<String>> {
        if matmul {
            a.only(&[])?;
        } else {
            // `broadcast` (opsets 1–6) allowed C to broadcast, as it always may since 7.
            a.only(&["alpha", "beta", "transA", "transB", "broadcast"])?;
        }
        let const_b = matches!(
            self.input(node, 1),
            Some(Value::Const(_) | Value::QConst(..))
        );
        if !const_b || (!matmul && a.i("transA", 0) != 0) {
            return self.gemm_runtime(node, a, matmul);
        }
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        if x.shape.len() != 2 {
            bail!("input shape {:?}: only a 2-D input", x.shape);
        }
        let b = self.constant(node, 1, "B")?;
        let Some(bv) = b.f32s() else {
            bail!("B is not float32")
        };
        if b.dims.len() != 2 {
            bail!("B shape {:?}: only 2-D", b.dims);
        }
        let trans_b = !matmul && a.i("transB", 0) != 0;
        let (kk, n) = if trans_b {
            (b.dims[1], b.dims[0])
        } else {
            (b.dims[0], b.dims[1])
        };
        if kk != x.shape[1] {
            bail!("B has {kk} rows, the input {} columns", x.shape[1]);
        }
        let alpha = if matmul { 1.0 } else { a.f("alpha", 1.0) };
        // NNAPI weights: [N, K] rows, in the order the input's elements really are.
        let column = |p: usize| -> usize {
            match x.layout {
                EdgeLayout::FlatNhwc { c, h, w } => {
                    let (pix, ch) = (p / c, p % c);
                    ch * h * w + pix
                }
                _ => p,
            }
        };
        let mut w = vec![0f32; n * kk];
        for o in 0..n {
            for p in 0..kk {
                let q = column(p);
                let v = if trans_b {
                    bv[o * kk + q]
                } else {
                    bv[q * n + o]
                };
                w[o * kk + p] = alpha * v;
            }
        }
        let mut bias = vec![0f32; n];
        if !matmul && self.input(node, 2).is_some() {
            let c = self.constant(node, 2, "C")?;
            let Some(cv) = c.f32s() else {
                bail!("C is not float32")
            };
            let beta = a.f("beta", 1.0);
            let ok = match cv.len() {
                1 => {
                    bias.iter_mut().for_each(|v| *v = beta * cv[0]);
                    true
                }
                l if l == n && c.dims.iter().rev().skip(1).all(|&d| d == 1) && x.shape[0] >= 1 => {
                    bias.iter_mut().zip(cv).for_each(|(v, c)| *v = beta * c);
                    true
                }
                _ => false,
            };
            if !ok {
                bail!("C shape {:?}: only a scalar or a [N] row broadcast", c.dims);
            }
        }
        let note = self.fold_batchnorm(k, node, &mut w, &mut bias, n)?;
        let wt = self.b.f32_tensor(&[n as u32, kk as u32], &w);
        let bt = self.b.f32_tensor(&[n as u32], &bias);
        let act = self.act();
        let (operand, dims) = self.emit(
            OperationType::FullyConnected,
            &[x.operand, wt, bt, act],
            None,
        )?;
        let d = Dyn {
            operand,
            shape: onnx_shape(&dims),
            layout: EdgeLayout::Same,
            quant: None,
            act: Some(act),
        };
        self.set_output(k, node, d, note.is_some())?;
        Ok(note)
    }

    /// An operand for one side of a broadcasting operation whose result has `rank`: a constant
    /// is expanded to that rank (and NHWC when 4); a runtime tensor must already fit.
    fn broadcast_operand(&mut self, v: &Value, rank: usize) -> R<Dyn> {
        match v {
            Value::Const(t) | Value::QConst(t, ..) => {
                let t = match v {
                    Value::QConst(t, s, z) => dequantized(t, *s, *z),
                    _ => t.clone(),
                };
                let mut dims = vec![1; rank.saturating_sub(t.dims.len())];
                dims.extend(&t.dims);
                self.float(&Value::Const(Tensor { dims, data: t.data }))
            }
            _ => {
                let d = self.float(v)?;
                // A runtime tensor of lower rank would need its dimensions re-laid-out.
                if d.shape.len() != rank {
                    bail!(
                        "broadcasting a runtime tensor of shape {:?} to rank {rank} is not expressible without TRANSPOSE",
                        d.shape
                    );
                }
                if matches!(d.layout, EdgeLayout::FlatNhwc { .. }) {
                    bail!("an elementwise operation on a flattened NCHW image is not supported");
                }
                Ok(d)
            }
        }
    }

    fn relu(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        let func = if op == "Relu" {
            a.only(&[])?;
            FusedActivationFunc::Relu
        } else {
            a.only(&["min", "max"])?;
            let bound = |i: usize, attr: &str, default: f32| -> R<f32> {
                if self.opset < 11 {
                    return Ok(a.f(attr, default));
                }
                match self.input(node, i) {
                    None => Ok(default),
                    Some(Value::Const(t)) => t
                        .scalar_f32()
                        .ok_or_else(|| format!("{attr} is not a float32 scalar")),
                    Some(_) => bail!("{attr} must be a constant"),
                }
            };
            let (lo, hi) = (bound(1, "min", f32::MIN)?, bound(2, "max", f32::MAX)?);
            let lo = if lo == f32::MIN {
                f32::NEG_INFINITY
            } else {
                lo
            };
            let hi = if hi == f32::MAX { f32::INFINITY } else { hi };
            match (lo, hi) {
                (0.0, 6.0) => FusedActivationFunc::Relu6,
                (-1.0, 1.0) => FusedActivationFunc::Relu1,
                (0.0, f32::INFINITY) => FusedActivationFunc::Relu,
                _ => return self.clip_general(node, lo, hi),
            }
        };
        let x = self.need(node, 0)?;
        let input = node.input[0].clone();
        if let Value::Dyn(d) = &x {
            if let (Some(act), true) = (d.act, self.single_use(&input)) {
                self.b.rewrite_constant(act, &func.raw().to_le_bytes());
                self.set(
                    node,
                    Value::Dyn(Dyn {
                        act: None,
                        ..d.clone()
                    }),
                );
                return Ok(Some(format!("fused as {} into the producer", func.name())));
            }
        }
        let d = match &x {
            Value::Dyn(d) if d.quant.is_some() => d.clone(),
            _ => self.float(&x)?,
        };
        let ty = match func {
            FusedActivationFunc::Relu6 => OperationType::Relu6,
            FusedActivationFunc::Relu1 => OperationType::Relu1,
            _ => OperationType::Relu,
        };
        let (operand, _) = self.emit(ty, &[d.operand], d.quant)?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                act: None,
                ..d
            }),
        );
        Ok(None)
    }

    fn pool(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        let d = self.pool_on(node, a, op, x)?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    /// MAX/AVERAGE/L2 pooling of `x` (float32 or, for the first two, quant8).
    fn pool_on(&mut self, node: &NodeProto, a: &Attrs, op: &str, x: Dyn) -> R<Dyn> {
        a.only(&[
            "auto_pad",
            "ceil_mode",
            "count_include_pad",
            "dilations",
            "kernel_shape",
            "pads",
            "strides",
            "storage_order",
            "p",
        ])?;
        if node.output.get(1).is_some_and(|o| !o.is_empty()) {
            bail!("the Indices output is not supported");
        }
        if a.i("storage_order", 0) != 0 {
            bail!("storage_order 1 is not supported");
        }
        self.rank4(&x)?;
        if let Some(d) = a.ints("dilations") {
            if d.iter().any(|&v| v != 1) {
                if op != "MaxPool" || x.quant.is_some() {
                    bail!("dilations {d:?}: NNAPI 1.3's pools have no dilation (a dilated float MaxPool alone is lowered, as slices)");
                }
                return self.dilated_max_pool(a, x, &d);
            }
        }
        let ks = a.ints("kernel_shape").ok_or("kernel_shape is required")?;
        if ks.len() != 2 || ks.iter().any(|&v| v < 1) {
            bail!("kernel_shape {ks:?}: two positive sizes expected");
        }
        let strides = a.ints("strides").unwrap_or(vec![1, 1]);
        if strides.len() != 2 || strides.iter().any(|&s| s < 1) {
            bail!("strides {strides:?}: two positive strides expected");
        }
        let (kh, kw) = (ks[0] as usize, ks[1] as usize);
        let mut p = pads(a, &x.shape[2..4], &[kh, kw], &strides)?;
        if a.i("ceil_mode", 0) != 0 {
            // The ceiling's extra window is end padding (which NNAPI's pools leave out of the
            // maximum and the average, as ONNX leaves the part past the input out); a last
            // window that would start in the end padding is dropped, as onnxruntime does.
            for i in 0..2 {
                let (n, s, k) = (x.shape[2 + i] as i64, strides[i], ks[i]);
                let (pb, pe) = (i64::from(p[i]), i64::from(p[i + 2]));
                let span = n + pb + pe - k;
                if span < 0 {
                    continue;
                }
                let mut out = (span + s - 1) / s + 1;
                if (out - 1) * s >= n + pb {
                    out -= 1;
                }
                let extra = (out - 1) * s + k - (n + pb + pe);
                if extra > 0 {
                    p[i + 2] = i32::try_from(pe + extra).map_err(|_| "padding overflows")?;
                }
            }
        }
        let padded = p.iter().any(|&v| v != 0);
        let ty = match op {
            "MaxPool" => OperationType::MaxPool2d,
            "AveragePool" => {
                if a.i("count_include_pad", 0) != 0 && padded {
                    bail!("count_include_pad 1 with padding: NNAPI's average excludes padding");
                }
                OperationType::AveragePool2d
            }
            _ => {
                if a.i("p", 2) != 2 {
                    bail!("p {}: only p = 2", a.i("p", 2));
                }
                if padded {
                    bail!("LpPool with padding: NNAPI's L2_POOL_2D averages over the valid elements only");
                }
                OperationType::L2Pool2d
            }
        };
        let mut ins = vec![x.operand];
        for v in [
            p[1],
            p[3],
            p[0],
            p[2],
            strides[1] as i32,
            strides[0] as i32,
            kw as i32,
            kh as i32,
        ] {
            ins.push(self.b.int(v));
        }
        let act = self.act();
        ins.push(act);
        let d = self.emit_image(ty, &ins, x.quant, Some(act))?;
        if ty == OperationType::L2Pool2d {
            if x.quant.is_some() {
                bail!("LpPool on a quantized tensor is not supported");
            }
            // L2_POOL_2D is √(Σx²/n); LpPool is √(Σx²).
            let k = self.b.f32_tensor(&[1], &[((kh * kw) as f32).sqrt()]);
            let act = self.act();
            let (operand, _) = self.emit(OperationType::Mul, &[d.operand, k, act], None)?;
            return Ok(Dyn {
                operand,
                act: Some(act),
                ..d
            });
        }
        Ok(d)
    }

    fn concat(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis"])?;
        let ins: Vec<Value> = (0..node.input.len())
            .map(|i| self.need(node, i))
            .collect::<R<_>>()?;
        let rank = value_shape(&ins[0]).len();
        if rank > 4 {
            bail!("rank {rank}: NNAPI's CONCATENATION takes rank 4 at most");
        }
        let axis = norm_axis(a.i("axis", 1), rank)?;
        let mut ops = Vec::new();
        for v in &ins {
            let d = self.float(v)?;
            if d.shape.len() != rank || matches!(d.layout, EdgeLayout::FlatNhwc { .. }) {
                bail!("inputs of different ranks or layouts");
            }
            ops.push(d.operand);
        }
        let nn_axis = if rank == 4 { [0, 3, 1, 2][axis] } else { axis };
        ops.push(self.b.int(nn_axis as i32));
        let (operand, dims) = self.emit(OperationType::Concatenation, &ops, None)?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape: onnx_shape(&dims),
                layout: layout_of(&dims),
                quant: None,
                act: None,
            }),
        );
        Ok(None)
    }

    fn softmax_axis(&self, x: &Dyn, a: &Attrs) -> R<usize> {
        let rank = x.shape.len();
        let default = if self.opset < 13 { 1 } else { -1 };
        let axis = norm_axis(a.i("axis", default), rank)?;
        let ok = match (rank, self.opset < 13) {
            // Softmax over everything from `axis` on (opset < 13) or along `axis`.
            (2, _) => axis == 1,
            (4, false) => axis == 1 && x.layout == EdgeLayout::Nhwc,
            (4, true) => axis == 1 && x.shape[2] * x.shape[3] == 1,
            _ => false,
        };
        if !ok {
            bail!("axis {axis} of a rank-{rank} input {:?} is not NNAPI's softmax along the last (NHWC) axis", x.shape);
        }
        Ok(axis)
    }

    /// The shape Reshape/Flatten/Squeeze/Unsqueeze produce from `shape`.
    fn target_shape(
        &self,
        node: &NodeProto,
        a: &Attrs,
        op: &str,
        shape: Vec<usize>,
    ) -> R<Vec<usize>> {
        let ints = |k: usize, attr: &str| -> R<Option<Vec<i64>>> {
            if self.opset >= 13 || op == "Reshape" {
                match self.input(node, k) {
                    None => Ok(None),
                    Some(Value::Const(t)) => Ok(Some(
                        t.data.to_i64().ok_or(format!("input {k} is not integer"))?,
                    )),
                    Some(_) => bail!("input {k} ({attr}) must be a constant"),
                }
            } else {
                Ok(a.ints(attr))
            }
        };
        let rank = shape.len();
        match op {
            "Reshape" if self.opset < 5 => {
                a.only(&["shape"])?;
                let spec = a.ints("shape").ok_or("the shape attribute is missing")?;
                reshape_spec(&shape, &spec, false)
            }
            "Reshape" => {
                a.only(&["allowzero"])?;
                let spec = ints(1, "shape")?.ok_or("the shape input is missing")?;
                reshape_spec(&shape, &spec, a.i("allowzero", 0) != 0)
            }
            "Flatten" => {
                a.only(&["axis"])?;
                let axis = a.i("axis", 1);
                let axis = if axis == rank as i64 {
                    rank
                } else {
                    norm_axis(axis, rank)?
                };
                Ok(vec![
                    element_count(&shape[..axis])?,
                    element_count(&shape[axis..])?,
                ])
            }
            "Squeeze" => {
                a.only(&["axes"])?;
                let axes = match ints(1, "axes")? {
                    Some(axes) => axes
                        .iter()
                        .map(|&x| norm_axis(x, rank))
                        .collect::<R<Vec<_>>>()?,
                    None => (0..rank).filter(|&i| shape[i] == 1).collect(),
                };
                if axes.iter().any(|&i| shape[i] != 1) {
                    bail!("squeezing an axis whose size is not 1");
                }
                Ok((0..rank)
                    .filter(|i| !axes.contains(i))
                    .map(|i| shape[i])
                    .collect())
            }
            _ => {
                a.only(&["axes"])?;
                let axes = ints(1, "axes")?.ok_or("axes are required")?;
                let out_rank = rank + axes.len();
                let axes: Vec<usize> = axes
                    .iter()
                    .map(|&x| norm_axis(x, out_rank))
                    .collect::<R<_>>()?;
                let mut it = shape.iter();
                Ok((0..out_rank)
                    .map(|i| {
                        if axes.contains(&i) {
                            1
                        } else {
                            *it.next().unwrap_or(&1)
                        }
                    })
                    .collect())
            }
        }
    }

    /// `x` with the ONNX shape `shape` (same elements in ONNX order).
    fn reshape(&mut self, x: &Value, shape: &[usize]) -> R<Value> {
        if let Value::Const(t) = x {
            return Ok(Value::Const(Tensor {
                dims: shape.to_vec(),
                data: t.data.clone(),
            }));
        }
        let d = match x {
            Value::Dyn(d) if d.quant.is_some() => d.clone(),
            Value::Deq(q) => {
                return match self.reshape(&Value::Dyn(q.clone()), shape)? {
                    Value::Dyn(r) => Ok(Value::Deq(r)),
                    _ => bail!("a channel shuffle of a dequantized tensor is not supported"),
                };
            }
            Value::Shuffle {
                d,
                split,
                transposed,
            } => {
                if shape != d.shape {
                    bail!(
                        "a channel-shuffle view reshaped to {shape:?} instead of back to {:?}",
                        d.shape
                    );
                }
                return Ok(Value::Dyn(if *transposed {
                    self.channel_permutation(d, *split)?
                } else {
                    Dyn {
                        act: None,
                        ..d.clone()
                    }
                }));
            }
            _ => self.float(x)?,
        };
        if d.layout == EdgeLayout::Nhwc
            && shape.len() == 5
            && [shape[0], shape[1] * shape[2], shape[3], shape[4]] == d.shape[..]
        {
            return Ok(Value::Shuffle {
                d,
                split: (shape[1], shape[2]),
                transposed: false,
            });
        }
        if d.shape == shape {
            return Ok(Value::Dyn(Dyn { act: None, ..d }));
        }
        // Whether the operand's element order is the ONNX order of its shape.
        let plain_order = match &d.layout {
            EdgeLayout::Same => true,
            EdgeLayout::Nhwc => d.shape[1] == 1 || d.shape[2] * d.shape[3] == 1,
            EdgeLayout::FlatNhwc { .. } | EdgeLayout::Chw => false,
        };
        let (dims, layout) = if plain_order {
            if shape.len() == 4 {
                if !(shape[1] == 1 || shape[2] * shape[3] == 1) {
                    return Ok(Value::Dyn(self.reshape_general(&d, shape)?));
                }
                (nhwc(shape), EdgeLayout::Nhwc)
            } else {
                (nhwc(shape), EdgeLayout::Same)
            }
        } else {
            match (&d.layout, shape) {
                (EdgeLayout::Nhwc, [n, chw])
                    if *n == d.shape[0] && *chw == d.shape[1] * d.shape[2] * d.shape[3] =>
                {
                    (
                        nhwc(shape),
                        EdgeLayout::FlatNhwc {
                            c: d.shape[1],
                            h: d.shape[2],
                            w: d.shape[3],
                        },
                    )
                }
                (EdgeLayout::FlatNhwc { c, h, w }, [n, c2, h2, w2])
                    if (c, h, w) == (c2, h2, w2) && *n == d.shape[0] =>
                {
                    (nhwc(shape), EdgeLayout::Nhwc)
                }
                _ => return Ok(Value::Dyn(self.reshape_general(&d, shape)?)),
            }
        };
        if dims.len() > 4 {
            bail!(
                "reshaping to rank {}: NNAPI's RESHAPE takes rank 4 at most",
                dims.len()
            );
        }
        let bytes: Vec<u8> = dims
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect();
        let s = self
            .b
            .constant(OperandType::TensorInt32, &[dims.len() as u32], &bytes);
        let (operand, _) = self.emit(OperationType::Reshape, &[d.operand, s], d.quant)?;
        Ok(Value::Dyn(Dyn {
            operand,
            shape: shape.to_vec(),
            layout,
            quant: d.quant,
            act: None,
        }))
    }

    /// The channel shuffle `[N, G, C/G, H, W]` → transpose → `[N, C, H, W]`: NNAPI 1.2's
    /// CHANNEL_SHUFFLE with G groups along the NHWC channel axis, whose output channel
    /// a·G + b is input channel b·C/G + a, exactly the transposed split (float32 and quant8,
    /// the quantization kept).
    fn channel_permutation(&mut self, d: &Dyn, (g, _cg): (usize, usize)) -> R<Dyn> {
        let groups = self.b.int(i32::try_from(g).map_err(|_| "too many groups")?);
        let axis = self.b.int(3);
        self.emit_image(
            OperationType::ChannelShuffle,
            &[d.operand, groups, axis],
            d.quant,
            None,
        )
    }

    fn transpose(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["perm"])?;
        let perm = a.ints("perm");
        let input = node.input.first().cloned().unwrap_or_default();
        if self.transposed_inputs.contains(&input) {
            let x = self.need(node, 0)?;
            self.set(node, x);
            return Ok(Some(
                "the NHWC graph input is taken as NNAPI's NHWC operand".into(),
            ));
        }
        let output = node.output.first().cloned().unwrap_or_default();
        match self.need(node, 0)? {
            // NCHW → NHWC straight into a graph output: the NHWC operand is that output.
            Value::Dyn(d)
                if perm.as_deref() == Some(&[0, 2, 3, 1])
                    && d.layout == EdgeLayout::Nhwc
                    && self.uses.get(&output) == Some(&1)
                    && self.graph_outputs.contains(&output) =>
            {
                let shape = vec![d.shape[0], d.shape[2], d.shape[3], d.shape[1]];
                self.set(
                    node,
                    Value::Dyn(Dyn {
                        shape,
                        layout: EdgeLayout::Same,
                        act: None,
                        ..d
                    }),
                );
                Ok(Some("the graph output is the NHWC operand".into()))
            }
            Value::Shuffle {
                d,
                split,
                transposed,
            } if perm.as_deref() == Some(&[0, 2, 1, 3, 4]) => {
                self.set(
                    node,
                    Value::Shuffle {
                        d,
                        split,
                        transposed: !transposed,
                    },
                );
                Ok(Some(
                    "channel shuffle (CHANNEL_SHUFFLE at the reshape back)".into(),
                ))
            }
            Value::Const(t) => {
                let rank = t.dims.len();
                let perm: Vec<usize> = match perm {
                    Some(p) => p.iter().map(|&x| norm_axis(x, rank)).collect::<R<_>>()?,
                    None => (0..rank).rev().collect(),
                };
                let mut sorted = perm.clone();
                sorted.sort_unstable();
                if sorted != (0..rank).collect::<Vec<_>>() {
                    bail!("perm {perm:?} is not a permutation");
                }
                let dims: Vec<usize> = perm.iter().map(|&p| t.dims[p]).collect();
                let n = t.data.len();
                let mut strides = vec![1usize; rank];
                for i in (0..rank.saturating_sub(1)).rev() {
                    strides[i] = strides[i + 1] * t.dims[i + 1];
                }
                let mut pick = Vec::with_capacity(n);
                let mut index = vec![0usize; rank];
                for _ in 0..n {
                    pick.push(index.iter().zip(&perm).map(|(&i, &p)| i * strides[p]).sum());
                    for ax in (0..rank).rev() {
                        index[ax] += 1;
                        if index[ax] < dims[ax] {
                            break;
                        }
                        index[ax] = 0;
                    }
                }
                self.set(
                    node,
                    Value::Const(Tensor {
                        dims,
                        data: t.data.pick(&pick),
                    }),
                );
                Ok(Some("folded".into()))
            }
            v => {
                let y = self.transpose_any(&v, perm)?;
                self.set(node, y);
                Ok(None)
            }
        }
    }

    fn resize(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        a.only(&[
            "mode",
            "coordinate_transformation_mode",
            "scales",
            "cubic_coeff_a",
            "exclude_outside",
            "extrapolation_value",
            "nearest_mode",
            "antialias",
            "keep_aspect_ratio_policy",
            "axes",
        ])?;
        let mode = a.s("mode").unwrap_or_else(|| "nearest".into());
        if mode != "linear" && mode != "bilinear" {
            bail!("mode '{mode}': only linear (RESIZE_BILINEAR) is in NNAPI 1.0");
        }
        if op == "Resize" {
            let ctm = a
                .s("coordinate_transformation_mode")
                .unwrap_or_else(|| "half_pixel".into());
            if self.opset >= 11 && ctm != "asymmetric" {
                bail!("coordinate_transformation_mode '{ctm}': only asymmetric is NNAPI 1.0's RESIZE_BILINEAR");
            }
            if a.s("keep_aspect_ratio_policy")
                .is_some_and(|p| p != "stretch")
            {
                bail!("keep_aspect_ratio_policy other than stretch is not supported");
            }
            if a.i("antialias", 0) != 0 || a.get("axes").is_some() {
                bail!("antialias and axes are not supported");
            }
        }
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        self.rank4(&x)?;
        let (h, w) = (x.shape[2], x.shape[3]);
        let (scales_at, sizes_at) = match (op, self.opset) {
            ("Upsample", 7 | 8) => (None, None),
            ("Upsample", _) | ("Resize", 10) => (Some(1), None),
            _ => (Some(2), Some(3)),
        };
        let mut out = None;
        if let Some(i) = sizes_at.filter(|&i| self.input(node, i).is_some()) {
            let s = self
                .constant(node, i, "sizes")?
                .data
                .to_i64()
                .ok_or("sizes not integer")?;
            out = Some(s.iter().map(|&v| v as usize).collect::<Vec<_>>());
        } else {
            let scales: Vec<f32> = match scales_at {
                None => a
                    .get("scales")
                    .map(|s| s.floats.clone())
                    .ok_or("scales are required")?,
                Some(i) => self
                    .constant(node, i, "scales")?
                    .f32s()
                    .ok_or("scales are not float32")?
                    .to_vec(),
            };
            if scales.len() != 4 || scales[0] != 1.0 || scales[1] != 1.0 {
                bail!("scales {scales:?}: only spatial scaling of an NCHW image");
            }
            let (oh, ow) = (
                (h as f32 * scales[2]).floor() as usize,
                (w as f32 * scales[3]).floor() as usize,
            );
            // NNAPI samples at out·in/out_size; ONNX at out/scale: the same only when the
            // scale is the size ratio.
            if oh as f32 != h as f32 * scales[2] || ow as f32 != w as f32 * scales[3] {
                bail!("scales {scales:?} do not give whole output sizes");
            }
            out = out.or(Some(vec![x.shape[0], x.shape[1], oh, ow]));
        }
        let out = out.unwrap_or_default();
        if out.len() != 4
            || out[0] != x.shape[0]
            || out[1] != x.shape[1]
            || out[2] == 0
            || out[3] == 0
        {
            bail!("output size {out:?}: only spatial resizing of an NCHW image");
        }
        let (ow, oh) = (self.b.int(out[3] as i32), self.b.int(out[2] as i32));
        let d = self.emit_image(
            OperationType::ResizeBilinear,
            &[x.operand, ow, oh],
            None,
            None,
        )?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    // ---- quantized ------------------------------------------------------------------------

    fn quantize_linear(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&[
            "axis",
            "saturate",
            "block_size",
            "output_dtype",
            "precision",
        ])?;
        let q = self.quant_params(node, 1, 2)?;
        match self.need(node, 0)? {
            Value::Dyn(d) if d.quant == Some(q) => {
                self.set(node, Value::Dyn(d));
                Ok(Some("the model input is quantized on the host".into()))
            }
            Value::Deq(d) if d.quant == Some(q) => {
                self.set(node, Value::Dyn(d));
                Ok(Some(
                    "DequantizeLinear → QuantizeLinear with equal parameters removed".into(),
                ))
            }
            Value::Const(t) => {
                let Some(v) = t.f32s() else {
                    bail!("not float32")
                };
                let data = v
                    .iter()
                    .map(|&x| ((x / q.0).round_ties_even() + q.1 as f32).clamp(0.0, 255.0) as u8)
                    .collect();
                self.set(
                    node,
                    Value::QConst(
                        Tensor {
                            dims: t.dims.clone(),
                            data: Data::U8(data),
                        },
                        q.0,
                        q.1,
                    ),
                );
                Ok(Some("folded".into()))
            }
            v => {
                // A runtime float32 tensor: QUANTIZE (round to nearest, ties away from zero in
                // NNAPI; onnxruntime rounds ties to even, so exact halves may differ by a step).
                let d = self.float(&v)?;
                let (operand, _) = self.emit(OperationType::Quantize, &[d.operand], Some(q))?;
                self.set(
                    node,
                    Value::Dyn(Dyn {
                        operand,
                        quant: Some(q),
                        act: None,
                        ..d
                    }),
                );
                Ok(None)
            }
        }
    }

    fn dequantize_linear(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis", "block_size"])?;
        if let Some(Value::Const(
            t @ Tensor {
                data: Data::I32(_), ..
            },
        )) = self.input(node, 0).cloned()
        {
            // An int32 bias: zero point int32 (0 when absent).
            let scale = match self.input(node, 1) {
                Some(Value::Const(Tensor {
                    data: Data::F32(v), ..
                })) if v.len() == 1 => v[0],
                Some(Value::Const(s)) if s.data.len() > 1 => {
                    return self.dequantize_per_axis(node, a, &t);
                }
                _ => bail!("the scale must be a float32 scalar constant"),
            };
            let zp = match self.input(node, 2) {
                None => 0,
                Some(Value::Const(Tensor {
                    data: Data::I32(v), ..
                })) if v.len() == 1 => v[0],
                _ => bail!("the zero point of an int32 tensor must be an int32 scalar constant"),
            };
            self.set(node, Value::QConst(t, scale, zp));
            return Ok(Some("folded".into()));
        }
        if let (Some(Value::Const(t)), Some(Value::Const(s))) =
            (self.input(node, 0).cloned(), self.input(node, 1))
        {
            if s.data.len() > 1 {
                return self.dequantize_per_axis(node, a, &t);
            }
        }
        let mut q = self.quant_params(node, 1, 2)?;
        if matches!(
            self.input(node, 0),
            Some(Value::Const(Tensor {
                data: Data::I8(_),
                ..
            }))
        ) && node.input.get(2).is_none_or(|z| z.is_empty())
        {
            // int8 data without a zero point: zero point 0 of int8, 128 of its uint8 view.
            q.1 += 128;
        }
        match self.need(node, 0)? {
            Value::Dyn(d) if d.quant == Some(q) => {
                self.set(node, Value::Deq(d));
                Ok(Some(
                    "pending (a DEQUANTIZE only where a float32 consumer or graph output needs it)"
                        .into(),
                ))
            }
            Value::Const(t) => {
                let t = match t.data {
                    Data::I8(v) => Tensor {
                        dims: t.dims,
                        data: Data::U8(v.iter().map(|&x| (i32::from(x) + 128) as u8).collect()),
                    },
                    _ => t,
                };
                self.set(node, Value::QConst(t, q.0, q.1));
                Ok(Some("folded".into()))
            }
            _ => bail!("input 0 is not a uint8 tensor with these quantization parameters"),
        }
    }

    /// DequantizeLinear of a constant with per-axis scales (per-channel weights and their
    /// int32 biases): folded to float32, `(q − z[i]) · s[i]` along `axis`. NNAPI 1.0's quant8
    /// operations take one weight scale, so the consumer runs in float32 between a DEQUANTIZE
    /// and a QUANTIZE of its activations.
    fn dequantize_per_axis(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        t: &Tensor,
    ) -> R<Option<String>> {
        if a.i("block_size", 0) != 0 {
            bail!("blocked quantization is not supported");
        }
        let scales = match self.input(node, 1) {
            Some(Value::Const(Tensor {
                data: Data::F32(v),
                dims,
            })) if dims.len() == 1 => v.clone(),
            _ => bail!("per-axis scales must be a 1-D float32 constant"),
        };
        let rank = t.dims.len();
        let axis = norm_axis(a.i("axis", 1), rank.max(1))?;
        if rank == 0 || t.dims[axis] != scales.len() {
            bail!(
                "{} scales along axis {axis} of a tensor of shape {:?}",
                scales.len(),
                t.dims
            );
        }
        let zeros: Vec<i64> = match self.input(node, 2) {
            None => vec![0; scales.len()],
            Some(Value::Const(z)) if z.data.len() == scales.len() => {
                z.data.to_i64().ok_or("the zero points are not integers")?
            }
            Some(_) => bail!("per-axis zero points must be a constant of one value per scale"),
        };
        let q = t
            .data
            .to_i64()
            .ok_or("per-axis dequantization of a non-integer tensor")?;
        let inner: usize = t.dims[axis + 1..].iter().product();
        let n = scales.len();
        let v: Vec<f32> = q
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let c = (i / inner) % n;
                (x - zeros[c]) as f32 * scales[c]
            })
            .collect();
        self.folded_bytes += v.len() * 4;
        self.set(
            node,
            Value::Const(Tensor {
                dims: t.dims.clone(),
                data: Data::F32(v),
            }),
        );
        Ok(Some(
            "folded to float32 (per-axis scales: the consumer runs in float32)".into(),
        ))
    }

    /// The quantized operand for input `k` of a QLinear operator, checked against the
    /// declared scale and zero point in inputs `s` and `z`.
    fn q_input(&self, node: &NodeProto, k: usize, s: usize, z: usize) -> R<Dyn> {
        let declared = self.quant_params(node, s, z)?;
        let d = self.quantized(&self.need(node, k)?)?;
        if d.quant != Some(declared) {
            bail!(
                "input {k} is quantized with {:?}, the operator declares {declared:?}",
                d.quant
            );
        }
        Ok(d)
    }

    fn qlinear_conv(&mut self, _k: usize, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        let x = self.q_input(node, 0, 1, 2)?;
        let Some(Value::Const(w)) = self.input(node, 3).cloned() else {
            bail!("the weight must be a constant")
        };
        let (ws, wz) = self.weight_quant(node, 4, 5)?;
        let y = self.quant_params(node, 6, 7)?;
        let bias = match self.input(node, 8) {
            None => None,
            Some(Value::Const(Tensor {
                data: Data::I32(v), ..
            })) => Some(v.clone()),
            Some(_) => bail!("bias must be an int32 constant"),
        };
        let d = self.quant_conv(a, &x, &w, ws, wz, bias, y)?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    /// A quant8 CONV_2D / DEPTHWISE_CONV_2D: `w` uint8 (or int8, shifted exactly) with
    /// per-tensor (`ws`, `wz`), `bias` int32 at scale input·weight, output quantized as `y`.
    #[allow(clippy::too_many_arguments)]
    fn quant_conv(
        &mut self,
        a: &Attrs,
        x: &Dyn,
        w: &Tensor,
        ws: f32,
        wz: i32,
        bias: Option<Vec<i32>>,
        y: (f32, i32),
    ) -> R<Dyn> {
        a.only(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "pads",
            "strides",
        ])?;
        self.rank4(x)?;
        let wq = as_u8(&w.data)?;
        let wz = wz
            + if matches!(w.data, Data::I8(_)) {
                128
            } else {
                0
            };
        if w.dims.len() != 4 {
            bail!("weight shape {:?}: only 2-D convolutions", w.dims);
        }
        let (m, cg, kh, kw) = (w.dims[0], w.dims[1], w.dims[2], w.dims[3]);
        if Self::dilations(a)? != [1, 1] {
            bail!("a dilated quantized convolution is not supported");
        }
        let bias_scale = x.quant.ok_or("the input is not quantized")?.0 * ws;
        let bias = bias.unwrap_or(vec![0; m]);
        if bias.len() != m {
            bail!("bias has {} values for {m} output channels", bias.len());
        }
        let c = x.shape[1];
        let group = a.i("group", 1) as usize;
        let params = self.conv_params(a, x, kh, kw)?;
        let bias_op = self.b.i32_tensor(&[m as u32], &bias, bias_scale);
        let act = self.act();
        if group == 1 && cg == c {
            let f = to_nhwc(&wq, &[m, c, kh, kw]);
            let f = self
                .b
                .u8_tensor(&[m as u32, kh as u32, kw as u32, c as u32], &f, ws, wz);
            let mut ins = vec![x.operand, f, bias_op];
            for p in params {
                ins.push(self.b.int(p));
            }
            ins.push(act);
            self.emit_image(OperationType::Conv2d, &ins, Some(y), Some(act))
        } else if group == c && cg == 1 && m % c == 0 {
            let f = to_nhwc(&wq, &[1, m, kh, kw]);
            let f = self
                .b
                .u8_tensor(&[1, kh as u32, kw as u32, m as u32], &f, ws, wz);
            let mut ins = vec![x.operand, f, bias_op];
            for p in params {
                ins.push(self.b.int(p));
            }
            ins.push(self.b.int((m / c) as i32));
            ins.push(act);
            self.emit_image(OperationType::DepthwiseConv2d, &ins, Some(y), Some(act))
        } else {
            bail!("group {group} with {c} input channels: only 1 or depthwise is expressible in NNAPI 1.0");
        }
    }

    /// The QuantizeLinear that alone consumes node `k`'s output, with its constant parameters:
    /// the Q end of a DequantizeLinear → op → QuantizeLinear pattern.
    fn qdq_target(&self, k: usize, node: &NodeProto) -> Option<((f32, i32), usize)> {
        let out = node.output.first()?;
        if node.output.len() > 1 || !self.single_use(out) {
            return None;
        }
        let next = *self.consumer.get(out)?;
        let q = &self.nodes[next];
        if next <= k
            || q.op_type.as_deref() != Some("QuantizeLinear")
            || q.input.first() != Some(out)
        {
            return None;
        }
        let params = self.quant_params(q, 1, 2).ok()?;
        Some((params, next))
    }

    /// A Relu alone between node `k` and the QuantizeLinear of a QDQ pattern (Conv → Relu →
    /// QuantizeLinear): the QuantizeLinear's parameters, the Relu's index and the
    /// QuantizeLinear's.
    fn qdq_relu_target(&self, k: usize, node: &NodeProto) -> Option<((f32, i32), usize, usize)> {
        let out = node.output.first()?;
        if node.output.len() > 1 || !self.single_use(out) {
            return None;
        }
        let rk = *self.consumer.get(out)?;
        let r = &self.nodes[rk];
        if rk <= k
            || r.op_type.as_deref() != Some("Relu")
            || !r.domain.as_deref().unwrap_or("").is_empty()
            || !r.attribute.is_empty()
            || r.input.first() != Some(out)
        {
            return None;
        }
        let (y, qk) = self.qdq_target(rk, r)?;
        Some((y, rk, qk))
    }

    /// The QDQ pattern with a Relu before its QuantizeLinear: one quant8 operation with a fused
    /// RELU, which clamps at the output's zero point, the quantized zero a Relu makes.
    fn qdq_relu(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        op: &str,
        y: (f32, i32),
        rk: usize,
        qk: usize,
    ) -> R<Option<String>> {
        let note = self.qdq(node, a, op, y, qk)?;
        let out = self.nodes[qk].output[0].clone();
        let Some(Value::Dyn(d)) = self.values.get(&out).cloned() else {
            bail!("no quantized result");
        };
        let act = d.act.ok_or("no activation to fuse the Relu into")?;
        self.b
            .rewrite_constant(act, &FusedActivationFunc::Relu.raw().to_le_bytes());
        self.values.insert(out, Value::Dyn(Dyn { act: None, ..d }));
        self.absorbed.insert(rk);
        Ok(note.map(|n| format!("{n}, Relu node {rk} fused as RELU")))
    }

    /// Lowers `op` of a QDQ pattern as one quant8 operation: its runtime inputs are pending
    /// DequantizeLinears, its weights dequantized constants, its result quantized as `y` by
    /// the QuantizeLinear `qk`, which is absorbed.
    fn qdq(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        op: &str,
        y: (f32, i32),
        qk: usize,
    ) -> R<Option<String>> {
        let x = self.quantized(&self.need(node, 0)?)?;
        let d = match op {
            "Conv" => {
                let Some(Value::QConst(w, ws, wz)) = self.input(node, 1).cloned() else {
                    bail!("a QDQ Conv needs a DequantizeLinear'd constant weight");
                };
                let bias = match self.input(node, 2).cloned() {
                    None => None,
                    Some(b) => Some(self.quant_bias(&b, x.quant.unwrap().0 * ws)?),
                };
                self.quant_conv(a, &x, &w, ws, wz, bias, y)?
            }
            "Gemm" | "MatMul" => {
                if op == "Gemm" {
                    a.only(&["alpha", "beta", "transA", "transB"])?;
                    if a.i("transA", 0) != 0 || a.f("alpha", 1.0) != 1.0 || a.f("beta", 1.0) != 1.0
                    {
                        bail!("a QDQ Gemm with transA, alpha or beta is not supported");
                    }
                } else {
                    a.only(&[])?;
                }
                let Some(Value::QConst(w, ws, wz)) = self.input(node, 1).cloned() else {
                    bail!("a QDQ {op} needs a DequantizeLinear'd constant B");
                };
                let bias = match self.input(node, 2).cloned() {
                    Some(b) if op == "Gemm" => Some(self.quant_bias(&b, x.quant.unwrap().0 * ws)?),
                    _ => None,
                };
                let trans_b = op == "Gemm" && a.i("transB", 0) != 0;
                self.quant_fc(&x, &w, ws, wz, trans_b, bias, y)?
            }
            "Softmax" => {
                a.only(&["axis"])?;
                if y != (1.0 / 256.0, 0) {
                    bail!("output quantization {y:?}: NNAPI 1.0's SOFTMAX outputs scale 1/256, zero point 0");
                }
                self.softmax_axis(&x, a)?;
                let beta = self.b.float(1.0);
                let (operand, _) =
                    self.emit(OperationType::Softmax, &[x.operand, beta], Some(y))?;
                Dyn {
                    operand,
                    quant: Some(y),
                    act: None,
                    ..x.clone()
                }
            }
            "Add" | "Mul" => {
                a.only(&[])?;
                let other = self.quantized(&self.need(node, 1)?)?;
                if other.shape.len() != x.shape.len() || other.layout != x.layout {
                    bail!(
                        "inputs of ranks {} and {}: only equal ranks",
                        x.shape.len(),
                        other.shape.len()
                    );
                }
                let ty = if op == "Add" {
                    OperationType::Add
                } else {
                    OperationType::Mul
                };
                let act = self.act();
                let (operand, dims) = self.emit(ty, &[x.operand, other.operand, act], Some(y))?;
                Dyn {
                    operand,
                    shape: onnx_shape(&dims),
                    layout: layout_of(&dims),
                    quant: Some(y),
                    act: Some(act),
                }
            }
            "MaxPool" | "AveragePool" | "GlobalAveragePool" | "GlobalMaxPool" => {
                if op == "GlobalAveragePool" {
                    a.only(&[])?;
                    self.quant_gap(&x, y)?
                } else {
                    if x.quant != Some(y) {
                        bail!("a quantized pool whose output is quantized unlike its input: NNAPI 1.0 keeps the scale");
                    }
                    self.pool_on(node, a, op, x.clone())?
                }
            }
            "Concat" => {
                a.only(&["axis"])?;
                let mut ops = Vec::new();
                for i in 0..node.input.len() {
                    // NNAPI 1.2's CONCATENATION requantizes inputs quantized unlike the output.
                    let d = self.quantized(&self.need(node, i)?)?;
                    if d.shape.len() != x.shape.len()
                        || d.layout != x.layout
                        || matches!(d.layout, EdgeLayout::FlatNhwc { .. })
                    {
                        bail!("inputs of different ranks or layouts");
                    }
                    ops.push(d.operand);
                }
                let rank = x.shape.len();
                let axis = norm_axis(a.i("axis", 1), rank)?;
                ops.push(
                    self.b
                        .int(if rank == 4 { [0, 3, 1, 2][axis] } else { axis } as i32),
                );
                let (operand, dims) = self.emit(OperationType::Concatenation, &ops, Some(y))?;
                Dyn {
                    operand,
                    shape: onnx_shape(&dims),
                    layout: layout_of(&dims),
                    quant: Some(y),
                    act: None,
                }
            }
            _ => bail!("no quantized form"),
        };
        let q = &self.nodes[qk];
        self.values.insert(q.output[0].clone(), Value::Dyn(d));
        self.absorbed.insert(qk);
        Ok(Some(format!(
            "QDQ: with its DequantizeLinear inputs and QuantizeLinear node {qk} '{}' as one quant8 operation",
            q.name.as_deref().unwrap_or("")
        )))
    }

    /// An int32 bias at `scale` from a DequantizeLinear'd int32 constant (used as is when its
    /// scale is `scale`) or a float32 constant (quantized).
    fn quant_bias(&self, b: &Value, scale: f32) -> R<Vec<i32>> {
        match b {
            Value::QConst(
                Tensor {
                    data: Data::I32(v), ..
                },
                s,
                0,
            ) if (s - scale).abs() <= scale * 1e-6 => Ok(v.clone()),
            Value::QConst(t, s, z) => Ok(dequantized(t, *s, *z)
                .f32s()
                .unwrap_or_default()
                .iter()
                .map(|&v| (v / scale).round() as i32)
                .collect()),
            Value::Const(Tensor {
                data: Data::F32(v), ..
            }) => Ok(v.iter().map(|&v| (v / scale).round() as i32).collect()),
            _ => bail!("the bias must be a constant"),
        }
    }

    /// A weight's per-tensor (scale, zero point), int8 zero points shifted to uint8 later.
    fn weight_quant(&self, node: &NodeProto, s: usize, z: usize) -> R<(f32, i32)> {
        let scale = match node.input.get(s).and_then(|n| self.values.get(n)) {
            Some(Value::Const(Tensor {
                data: Data::F32(v), ..
            })) if v.len() == 1 => v[0],
            Some(Value::Const(_)) => {
                bail!("per-channel weight scales are not expressible in NNAPI 1.0")
            }
            _ => bail!("the weight scale must be a constant"),
        };
        let zp = match node.input.get(z).and_then(|n| self.values.get(n)) {
            Some(Value::Const(Tensor {
                data: Data::U8(v), ..
            })) if v.len() == 1 => i32::from(v[0]),
            Some(Value::Const(Tensor {
                data: Data::I8(v), ..
            })) if v.len() == 1 => i32::from(v[0]),
            None => 0,
            _ => bail!("the weight zero point must be a per-tensor constant"),
        };
        Ok((scale, zp))
    }

    fn qlinear_matmul(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&[])?;
        let x = self.q_input(node, 0, 1, 2)?;
        let Some(Value::Const(b)) = self.input(node, 3).cloned() else {
            bail!("B must be a constant")
        };
        let (bs, bz) = self.weight_quant(node, 4, 5)?;
        let y = self.quant_params(node, 6, 7)?;
        let d = self.quant_fc(&x, &b, bs, bz, false, None, y)?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    /// A quant8 FULLY_CONNECTED: `x` 2-D (a flattened image's columns re-laid-out), `b` the
    /// uint8/int8 `[K, N]` matrix (`[N, K]` when `trans_b`), int32 `bias` at input·weight scale.
    #[allow(clippy::too_many_arguments)]
    fn quant_fc(
        &mut self,
        x: &Dyn,
        b: &Tensor,
        bs: f32,
        bz: i32,
        trans_b: bool,
        bias: Option<Vec<i32>>,
        y: (f32, i32),
    ) -> R<Dyn> {
        if x.shape.len() != 2 {
            bail!("input shape {:?}: only a 2-D input", x.shape);
        }
        let bq = as_u8(&b.data)?;
        let bz = bz
            + if matches!(b.data, Data::I8(_)) {
                128
            } else {
                0
            };
        if b.dims.len() != 2 {
            bail!("B shape {:?}: only 2-D", b.dims);
        }
        let (kk, n) = if trans_b {
            (b.dims[1], b.dims[0])
        } else {
            (b.dims[0], b.dims[1])
        };
        if kk != x.shape[1] {
            bail!("B shape {:?} does not fit the input {:?}", b.dims, x.shape);
        }
        let column = |p: usize| -> usize {
            match x.layout {
                EdgeLayout::FlatNhwc { c, h, w } => (p % c) * h * w + p / c,
                _ => p,
            }
        };
        let mut w = vec![0u8; n * kk];
        for o in 0..n {
            for p in 0..kk {
                let q = column(p);
                w[o * kk + p] = if trans_b {
                    bq[o * kk + q]
                } else {
                    bq[q * n + o]
                };
            }
        }
        let bias = bias.unwrap_or(vec![0; n]);
        if bias.len() != n {
            bail!("bias has {} values for {n} outputs", bias.len());
        }
        let wt = self.b.u8_tensor(&[n as u32, kk as u32], &w, bs, bz);
        let scale = x.quant.ok_or("the input is not quantized")?.0 * bs;
        let bt = self.b.i32_tensor(&[n as u32], &bias, scale);
        let act = self.act();
        let (operand, dims) = self.emit(
            OperationType::FullyConnected,
            &[x.operand, wt, bt, act],
            Some(y),
        )?;
        Ok(Dyn {
            operand,
            shape: onnx_shape(&dims),
            layout: EdgeLayout::Same,
            quant: Some(y),
            act: Some(act),
        })
    }

    fn qlinear_binary(&mut self, node: &NodeProto, add: bool) -> R<Option<String>> {
        Attrs(&node.attribute).only(&[])?;
        let x = self.q_input(node, 0, 1, 2)?;
        let y = self.q_input(node, 3, 4, 5)?;
        let out = self.quant_params(node, 6, 7)?;
        if x.shape.len() != y.shape.len() || x.layout != y.layout {
            bail!(
                "inputs of shapes {:?} and {:?}: only equal ranks",
                x.shape,
                y.shape
            );
        }
        let ty = if add {
            OperationType::Add
        } else {
            OperationType::Mul
        };
        let act = self.act();
        let (operand, dims) = self.emit(ty, &[x.operand, y.operand, act], Some(out))?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape: onnx_shape(&dims),
                layout: layout_of(&dims),
                quant: Some(out),
                act: Some(act),
            }),
        );
        Ok(None)
    }

    fn qlinear_concat(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis"])?;
        let y = self.quant_params(node, 0, 1)?;
        let mut ops = Vec::new();
        let mut rank = 0;
        for i in (2..node.input.len()).step_by(3) {
            let d = self.q_input(node, i, i + 1, i + 2)?;
            if d.quant != Some(y) {
                bail!("input {i} is quantized unlike the output: NNAPI 1.0 CONCATENATION keeps one scale");
            }
            if (rank != 0 && d.shape.len() != rank)
                || matches!(d.layout, EdgeLayout::FlatNhwc { .. })
            {
                bail!("inputs of different ranks or layouts");
            }
            rank = d.shape.len();
            ops.push(d.operand);
        }
        let axis = norm_axis(a.i("axis", 1), rank)?;
        let nn_axis = if rank == 4 { [0, 3, 1, 2][axis] } else { axis };
        ops.push(self.b.int(nn_axis as i32));
        let (operand, dims) = self.emit(OperationType::Concatenation, &ops, Some(y))?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape: onnx_shape(&dims),
                layout: layout_of(&dims),
                quant: Some(y),
                act: None,
            }),
        );
        Ok(None)
    }

    fn qlinear_gap(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["channels_last"])?;
        if a.i("channels_last", 0) != 0 {
            bail!("channels_last 1 is not supported");
        }
        let x = self.q_input(node, 0, 1, 2)?;
        self.rank4(&x)?;
        let y = self.quant_params(node, 3, 4)?;
        let d = self.quant_gap(&x, y)?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    /// A quant8 global average: AVERAGE_POOL_2D when the output keeps the input's
    /// quantization, else a depthwise convolution whose weights are all 1/(h·w) (quantized
    /// exactly as 1 × scale 1/(h·w)), which averages and requantizes in one step.
    fn quant_gap(&mut self, x: &Dyn, y: (f32, i32)) -> R<Dyn> {
        self.rank4(x)?;
        let (c, h, w) = (x.shape[1], x.shape[2], x.shape[3]);
        let act = self.act();
        if Some(y) == x.quant {
            let mut ins = vec![x.operand];
            for v in [0, 0, 0, 0, 1, 1, w as i32, h as i32] {
                ins.push(self.b.int(v));
            }
            ins.push(act);
            self.emit_image(OperationType::AveragePool2d, &ins, Some(y), Some(act))
        } else {
            // A different output scale: a depthwise convolution whose weights are all 1/(h·w)
            // (quantized exactly as 1 × scale 1/(h·w)) averages and requantizes in one step.
            let n = (h * w) as f32;
            let f = self.b.u8_tensor(
                &[1, h as u32, w as u32, c as u32],
                &vec![1; h * w * c],
                1.0 / n,
                0,
            );
            let bias = self
                .b
                .i32_tensor(&[c as u32], &vec![0; c], x.quant.unwrap().0 / n);
            let mut ins = vec![x.operand, f, bias];
            for v in [0, 0, 0, 0, 1, 1, 1] {
                ins.push(self.b.int(v));
            }
            ins.push(act);
            self.emit_image(OperationType::DepthwiseConv2d, &ins, Some(y), Some(act))
        }
    }

    fn qlinear_softmax(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis", "opset"])?;
        let x = self.q_input(node, 0, 1, 2)?;
        let y = self.quant_params(node, 3, 4)?;
        if y != (1.0 / 256.0, 0) {
            bail!(
                "output quantization {y:?}: NNAPI 1.0's SOFTMAX outputs scale 1/256, zero point 0"
            );
        }
        let rank = x.shape.len();
        let opset = a.i("opset", 1);
        let default = if opset < 13 { 1 } else { -1 };
        let axis = norm_axis(a.i("axis", default), rank)?;
        if !(rank == 2 && axis == 1
            || rank == 4
                && axis == 1
                && x.layout == EdgeLayout::Nhwc
                && (opset >= 13 || x.shape[2] * x.shape[3] == 1))
        {
            bail!(
                "axis {axis} of shape {:?}: only the last NHWC axis",
                x.shape
            );
        }
        let beta = self.b.float(1.0);
        let (operand, _) = self.emit(OperationType::Softmax, &[x.operand, beta], Some(y))?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                quant: Some(y),
                act: None,
                ..x
            }),
        );
        Ok(None)
    }

    // ---- constant folding ---------------------------------------------------------------------

    /// The value of `op` on constant inputs, when it is one the importer folds.
    fn fold(&self, op: &str, node: &NodeProto, a: &Attrs) -> R<Option<Tensor>> {
        let c = |k: usize| -> R<Tensor> { self.constant(node, k, "constant") };
        Ok(Some(match op {
            "Identity" | "Dropout" => c(0)?,
            "Cast" => {
                let t = c(0)?;
                let data = match a.i("to", 0) {
                    1 => Data::F32(t.data.to_f64().iter().map(|&v| v as f32).collect()),
                    6 => Data::I32(t.data.to_f64().iter().map(|&v| v as i32).collect()),
                    7 => Data::I64(t.data.to_f64().iter().map(|&v| v as i64).collect()),
                    _ => bail!("Cast to type {} is not folded", a.i("to", 0)),
                };
                Tensor { dims: t.dims, data }
            }
            "Shape" => {
                let t = c(0)?;
                Tensor {
                    dims: vec![t.dims.len()],
                    data: Data::I64(t.dims.iter().map(|&d| d as i64).collect()),
                }
            }
            "ConstantOfShape" => {
                let dims: Vec<usize> = c(0)?
                    .data
                    .to_i64()
                    .ok_or("shape not integer")?
                    .iter()
                    .map(|&d| d.max(0) as usize)
                    .collect();
                let value = match a.get("value").and_then(|v| v.t.as_ref()) {
                    Some(t) => decode::tensor(t, "value").map_err(|e| e.to_string())?.data,
                    None => Data::F32(vec![0.0]),
                };
                let n = self.folded_count(&dims, value.elem_size())?;
                if value.is_empty() {
                    bail!("empty value");
                }
                let data = value.repeat_first(n);
                Tensor { dims, data }
            }
            "Gather" => {
                let (t, idx) = (c(0)?, c(1)?);
                let axis = norm_axis(a.i("axis", 0), t.dims.len())?;
                let ix = idx.data.to_i64().ok_or("indices not integer")?;
                let outer = element_count(&t.dims[..axis])?;
                let inner = element_count(&t.dims[axis + 1..])?;
                let n = t.dims[axis] as i64;
                let picked = outer
                    .checked_mul(ix.len())
                    .and_then(|p| p.checked_mul(inner))
                    .ok_or("the gathered size overflows")?;
                self.folded_count(&[picked], t.data.elem_size())?;
                let mut pick = Vec::with_capacity(picked);
                for o in 0..outer {
                    for &i in &ix {
                        let i = if i < 0 { i + n } else { i };
                        if !(0..n).contains(&i) {
                            bail!("index {i} out of range");
                        }
                        for j in 0..inner {
                            pick.push((o * n as usize + i as usize) * inner + j);
                        }
                    }
                }
                let mut dims = t.dims[..axis].to_vec();
                dims.extend(&idx.dims);
                dims.extend(&t.dims[axis + 1..]);
                Tensor {
                    dims,
                    data: t.data.pick(&pick),
                }
            }
            "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" => {
                let t = c(0)?;
                let dims = self.target_shape(node, a, op, t.dims.clone())?;
                Tensor { dims, data: t.data }
            }
            "Concat" => {
                let ts: Vec<Tensor> = (0..node.input.len()).map(c).collect::<R<_>>()?;
                if ts.iter().all(|t| t.dims.len() == 1) {
                    self.folded_count(&[ts.iter().map(|t| t.data.len()).sum()], 8)?;
                    let mut all = Vec::new();
                    for t in &ts {
                        all.extend(t.data.to_f64());
                    }
                    let n = all.len();
                    let data = match &ts[0].data {
                        Data::I64(_) => Data::I64(all.iter().map(|&v| v as i64).collect()),
                        Data::F32(_) => Data::F32(all.iter().map(|&v| v as f32).collect()),
                        _ => return Ok(None),
                    };
                    Tensor {
                        dims: vec![n],
                        data,
                    }
                } else {
                    return Ok(None);
                }
            }
            "Add" | "Mul" | "Sub" | "Div" if node.input.len() == 2 => {
                let (x, y) = (c(0)?, c(1)?);
                let (xv, yv) = (x.data.to_f64(), y.data.to_f64());
                let fits = |small: &Tensor, big: &Tensor| {
                    small.data.len() == 1 && small.dims.len() <= big.dims.len()
                };
                if !(x.dims == y.dims || fits(&y, &x) || fits(&x, &y)) {
                    return Ok(None);
                }
                let n = xv.len().max(yv.len());
                let dims = if xv.len() >= yv.len() {
                    x.dims.clone()
                } else {
                    y.dims.clone()
                };
                let f = |i: usize| -> (f64, f64) {
                    (
                        xv[if xv.len() == 1 { 0 } else { i }],
                        yv[if yv.len() == 1 { 0 } else { i }],
                    )
                };
                let integer = !matches!(x.data, Data::F32(_));
                let vals: Vec<f64> = (0..n)
                    .map(|i| {
                        let (p, q) = f(i);
                        match op {
                            "Add" => p + q,
                            "Mul" => p * q,
                            "Sub" => p - q,
                            _ if integer => (p / q).trunc(),
                            _ => p / q,
                        }
                    })
                    .collect();
                let data = match x.data {
                    Data::F32(_) => Data::F32(vals.iter().map(|&v| v as f32).collect()),
                    Data::I32(_) => Data::I32(vals.iter().map(|&v| v as i32).collect()),
                    _ => Data::I64(vals.iter().map(|&v| v as i64).collect()),
                };
                Tensor { dims, data }
            }
            _ => return Ok(None),
        }))
    }
}

fn value_shape(v: &Value) -> Vec<usize> {
    match v {
        Value::Const(t) | Value::QConst(t, ..) => t.dims.clone(),
        Value::Dyn(d) | Value::Deq(d) => d.shape.clone(),
        Value::Shuffle {
            d,
            split: (g, cg),
            transposed,
        } => {
            let (a, b) = if *transposed { (*cg, *g) } else { (*g, *cg) };
            vec![d.shape[0], a, b, d.shape[2], d.shape[3]]
        }
    }
}

fn dequantized(t: &Tensor, scale: f32, zp: i32) -> Tensor {
    let v = t.data.to_f64();
    Tensor {
        dims: t.dims.clone(),
        data: Data::F32(v.iter().map(|&q| (q as f32 - zp as f32) * scale).collect()),
    }
}

/// uint8 weights; int8 ones shifted by +128 (the zero point moves with them, exactly).
fn as_u8(d: &Data) -> R<Vec<u8>> {
    match d {
        Data::U8(v) => Ok(v.clone()),
        Data::I8(v) => Ok(v.iter().map(|&x| (i32::from(x) + 128) as u8).collect()),
        other => bail!(
            "a {} weight where uint8 or int8 is needed",
            other.type_name()
        ),
    }
}

/// Explicit padding [top, left, bottom, right] from `pads` or `auto_pad`.
fn pads(a: &Attrs, input: &[usize], kernel: &[usize], strides: &[i64]) -> R<[i32; 4]> {
    let auto = a.s("auto_pad").unwrap_or_else(|| "NOTSET".into());
    match auto.as_str() {
        "NOTSET" => {
            let p = a.ints("pads").unwrap_or(vec![0; 4]);
            if p.len() != 4 || p.iter().any(|&v| !(0..=i64::from(i32::MAX)).contains(&v)) {
                bail!("pads {p:?}: four non-negative values expected");
            }
            Ok([p[0] as i32, p[1] as i32, p[2] as i32, p[3] as i32])
        }
        "VALID" => Ok([0; 4]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut out = [0i32; 4];
            for i in 0..2 {
                let (n, k, s) = (input[i] as i64, kernel[i] as i64, strides[i]);
                let total = (((n + s - 1) / s - 1) * s + k - n).max(0);
                let small = total / 2;
                let (begin, end) = if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                out[i] = begin as i32;
                out[i + 2] = end as i32;
            }
            Ok(out)
        }
        other => bail!("auto_pad '{other}' is not known"),
    }
}

/// Reshape's output shape from its `shape` input (0 copies, -1 infers).
fn reshape_spec(input: &[usize], spec: &[i64], allowzero: bool) -> R<Vec<usize>> {
    let total = element_count(input)?;
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            0 if !allowzero => {
                out.push(*input.get(i).ok_or("0 copies a dimension the input lacks")?)
            }
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            s if s >= 0 => out.push(s as usize),
            s => bail!("shape value {s} is not valid"),
        }
    }
    // Bounded like every other shape, so a spec of huge sizes is refused, not wrapped around.
    let known = element_count(&out)?;
    if let Some(i) = infer {
        if known == 0 || !total.is_multiple_of(known) {
            bail!("cannot infer -1 in {spec:?} for {input:?}");
        }
        out[i] = total / known;
    }
    if element_count(&out)? != total {
        bail!("shape {spec:?} does not hold the {total} elements of {input:?}");
    }
    Ok(out)
}

/// The tensor of a Constant node.
fn constant_attr(a: &Attrs) -> R<Tensor> {
    a.only(&[
        "value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
    ])?;
    if let Some(t) = a.get("value").and_then(|v| v.t.as_ref()) {
        return decode::tensor(t, "value").map_err(|e| e.to_string());
    }
    if let Some(v) = a.get("value_float").and_then(|v| v.f) {
        return Ok(Tensor {
            dims: vec![],
            data: Data::F32(vec![v]),
        });
    }
    if let Some(v) = a.get("value_floats") {
        return Ok(Tensor {
            dims: vec![v.floats.len()],
            data: Data::F32(v.floats.clone()),
        });
    }
    if let Some(v) = a.get("value_int").and_then(|v| v.i) {
        return Ok(Tensor {
            dims: vec![],
            data: Data::I64(vec![v]),
        });
    }
    if let Some(v) = a.get("value_ints") {
        return Ok(Tensor {
            dims: vec![v.ints.len()],
            data: Data::I64(v.ints.clone()),
        });
    }
    bail!("no value attribute this importer reads (sparse and string constants are not supported)")
}
