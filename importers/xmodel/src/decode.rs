//! From bytes to a checked XIR graph: the `serial_v2.Graph` decode (protobuf wire format,
//! `proto/graph_proto_v2.proto`) with a size bound on the file, then the structural checks an
//! importer relies on — unique operator names, every argument naming an operator, no cycle,
//! shapes bounded, constant byte lengths equal to shape × element size — and the refusal of
//! DPU-compiled graphs. Constant values are read into f64 (exact for every element type the
//! quantizer writes) only after their length has been checked.

use crate::proto;
use crate::XmodelError;
use prost::Message;
use std::collections::HashMap;

/// Largest file read (1 GiB): protobuf caps messages at 2 GiB, and the weights of a model the
/// driver can run fit far below.
pub const MAX_FILE_BYTES: usize = 1 << 30;
/// Largest element count of any tensor (declared or constant), checked before allocation.
pub const MAX_ELEMENTS: usize = 1 << 28;
/// Largest tensor rank taken.
pub const MAX_RANK: usize = 8;

/// One operator of the graph, its arguments resolved to operator indexes.
#[derive(Clone, Debug)]
pub struct Op {
    pub name: String,
    pub ty: String,
    pub attrs: std::collections::BTreeMap<String, proto::AttrValue>,
    /// `(arg_name, producers)` in file order; no producers is an absent optional input.
    pub args: Vec<(String, Vec<usize>)>,
    /// The declared shape of its output tensor (NHWC for images).
    pub shape: Vec<usize>,
    /// A `const`'s values, row-major over `shape`.
    pub data: Option<Vec<f64>>,
}

/// A decoded and checked graph.
#[derive(Clone, Debug)]
pub struct Graph {
    pub name: String,
    pub ops: Vec<Op>,
    /// Every operator index, producers before consumers (file order where it allows).
    pub order: Vec<usize>,
    /// `graph_attr.return_ops`, when present.
    pub return_ops: Option<Vec<String>>,
}

impl Graph {
    pub fn index(&self, name: &str) -> Option<usize> {
        self.ops.iter().position(|o| o.name == name)
    }

    /// The operators reading operator `i`'s output, in file order.
    pub fn consumers(&self, i: usize) -> Vec<usize> {
        (0..self.ops.len())
            .filter(|&j| self.ops[j].args.iter().any(|(_, p)| p.contains(&i)))
            .collect()
    }
}

/// A typed view of one attribute value.
impl Op {
    pub fn attr(&self, key: &str) -> Option<&proto::attr_value::Value> {
        self.attrs.get(key).and_then(|a| a.value.as_ref())
    }

    /// An integer list attribute (int32/int64/uint32/uint64 vectors).
    pub fn ints(&self, key: &str) -> Option<Vec<i64>> {
        use proto::attr_value::Value as V;
        Some(match self.attr(key)? {
            V::Int32VecValue(v) => v.value.iter().map(|&x| i64::from(x)).collect(),
            V::Int64VecValue(v) => v.value.clone(),
            V::Uint32VecValue(v) => v.value.iter().map(|&x| i64::from(x)).collect(),
            V::Uint64VecValue(v) => v.value.iter().map(|&x| x as i64).collect(),
            _ => return None,
        })
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        use proto::attr_value::Value as V;
        Some(match self.attr(key)? {
            V::Int32Value(x) => i64::from(*x),
            V::Int64Value(x) => *x,
            V::Uint32Value(x) => i64::from(*x),
            V::Uint64Value(x) => *x as i64,
            _ => return None,
        })
    }

    pub fn bool(&self, key: &str) -> Option<bool> {
        match self.attr(key)? {
            proto::attr_value::Value::BoolValue(b) => Some(*b),
            _ => None,
        }
    }

    pub fn string(&self, key: &str) -> Option<&str> {
        match self.attr(key)? {
            proto::attr_value::Value::StringValue(s) => Some(s),
            _ => None,
        }
    }

    pub fn float(&self, key: &str) -> Option<f64> {
        use proto::attr_value::Value as V;
        Some(match self.attr(key)? {
            V::FloatValue(x) => f64::from(*x),
            V::DoubleValue(x) => *x,
            _ => return None,
        })
    }

    pub fn floats(&self, key: &str) -> Option<Vec<f64>> {
        use proto::attr_value::Value as V;
        Some(match self.attr(key)? {
            V::FloatVecValue(v) => v.value.iter().map(|&x| f64::from(x)).collect(),
            V::DoubleVecValue(v) => v.value.clone(),
            _ => return None,
        })
    }

    /// The producers of argument `arg` (empty when absent).
    pub fn arg(&self, arg: &str) -> &[usize] {
        self.args
            .iter()
            .find(|(n, _)| n == arg)
            .map_or(&[][..], |(_, p)| p)
    }
}

/// An element type as XIR spells it in a `data_type` string (`float32`, `FLOAT32`, `XINT8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    Float(u32),
    Int(u32),
    UInt(u32),
    XInt(u32),
    XUInt(u32),
}

impl Elem {
    pub fn parse(s: &str) -> Option<Elem> {
        let split = s.find(|c: char| c.is_ascii_digit())?;
        let (word, bits) = s.split_at(split);
        if !(word.chars().all(|c| c.is_ascii_uppercase())
            || word.chars().all(|c| c.is_ascii_lowercase()))
        {
            return None;
        }
        let bits: u32 = bits.parse().ok()?;
        Some(match word.to_ascii_lowercase().as_str() {
            "float" => Elem::Float(bits),
            "int" => Elem::Int(bits),
            "uint" => Elem::UInt(bits),
            "xint" => Elem::XInt(bits),
            "xuint" => Elem::XUInt(bits),
            _ => return None,
        })
    }

    fn bytes(self) -> Option<usize> {
        match self {
            Elem::Float(32) => Some(4),
            Elem::Float(64) => Some(8),
            Elem::Float(_) => None,
            Elem::Int(b) | Elem::UInt(b) | Elem::XInt(b) | Elem::XUInt(b) => {
                matches!(b, 8 | 16 | 32 | 64).then_some(b as usize / 8)
            }
        }
    }
}

fn malformed(why: impl Into<String>) -> XmodelError {
    XmodelError::Malformed(why.into())
}

/// The values of constant bytes, little-endian, row-major.
fn values(elem: Elem, bytes: &[u8]) -> Vec<f64> {
    macro_rules! read {
        ($t:ty, $n:expr) => {
            bytes
                .chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk size")) as f64)
                .collect()
        };
    }
    match elem {
        Elem::Float(32) => read!(f32, 4),
        Elem::Float(_) => read!(f64, 8),
        Elem::Int(8) | Elem::XInt(8) => bytes.iter().map(|&b| f64::from(b as i8)).collect(),
        Elem::UInt(8) | Elem::XUInt(8) => bytes.iter().map(|&b| f64::from(b)).collect(),
        Elem::Int(16) | Elem::XInt(16) => read!(i16, 2),
        Elem::UInt(16) | Elem::XUInt(16) => read!(u16, 2),
        Elem::Int(32) | Elem::XInt(32) => read!(i32, 4),
        Elem::UInt(32) | Elem::XUInt(32) => read!(u32, 4),
        Elem::Int(_) | Elem::XInt(_) => read!(i64, 8),
        Elem::UInt(_) | Elem::XUInt(_) => read!(u64, 8),
    }
}

/// Operator types that only a DPU compiler writes.
fn compiled_type(ty: &str) -> bool {
    ty.ends_with("-fix") || matches!(ty, "upload" | "download" | "fix2float" | "float2fix")
}

fn compiled_subgraph(s: &proto::SubGraph) -> Option<String> {
    use proto::attr_value::Value as V;
    for key in ["mc_code", "reg_id_to_parameter_value"] {
        if s.subg_attr.contains_key(key) {
            return Some(format!("subgraph '{}' carries {key}", s.subgraph_name));
        }
    }
    if let Some(Some(V::StringValue(d))) = s.subg_attr.get("device").map(|a| a.value.as_ref()) {
        if d == "DPU" {
            return Some(format!("subgraph '{}' runs on the DPU", s.subgraph_name));
        }
    }
    s.subg_child.iter().find_map(compiled_subgraph)
}

/// Decodes and checks a `serial_v2.Graph`.
pub fn decode(bytes: &[u8]) -> Result<Graph, XmodelError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(XmodelError::NotXmodel(format!(
            "{} bytes: larger than the {MAX_FILE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let g = proto::Graph::decode(bytes)
        .map_err(|e| XmodelError::NotXmodel(format!("not a serial_v2.Graph: {e}")))?;
    if g.op_node.is_empty() {
        return Err(XmodelError::NotXmodel("the graph has no operators".into()));
    }
    let mut index = HashMap::new();
    for (i, n) in g.op_node.iter().enumerate() {
        if n.op_name.is_empty() {
            return Err(malformed(format!("operator {i} has no name")));
        }
        if index.insert(n.op_name.clone(), i).is_some() {
            return Err(malformed(format!(
                "two operators are named '{}'",
                n.op_name
            )));
        }
    }
    // A compiled graph is refused before anything else about its operators is judged.
    if let Some(why) = g.subg_root.as_ref().and_then(compiled_subgraph) {
        return Err(XmodelError::Compiled(why));
    }
    if let Some(n) = g.op_node.iter().find(|n| compiled_type(&n.op_type)) {
        return Err(XmodelError::Compiled(format!(
            "operator '{}' is a DPU '{}'",
            n.op_name, n.op_type
        )));
    }
    let mut ops = Vec::with_capacity(g.op_node.len());
    for n in &g.op_node {
        let name = &n.op_name;
        if let Some((k, _)) = n.op_attr.iter().find(|(_, v)| v.value.is_none()) {
            return Err(malformed(format!(
                "'{name}': attribute '{k}' has no value (a serial_v1 file?)"
            )));
        }
        let mut args = Vec::with_capacity(n.args.len());
        for a in &n.args {
            let producers = a
                .arg_ops
                .iter()
                .map(|p| {
                    index.get(p).copied().ok_or_else(|| {
                        malformed(format!(
                            "'{name}': argument '{}' names '{p}', which is no operator",
                            a.arg_name
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            args.push((a.arg_name.clone(), producers));
        }
        let tensor = n
            .output_tensor
            .as_ref()
            .ok_or_else(|| malformed(format!("'{name}' has no output tensor")))?;
        if tensor.tensor_dim.len() > MAX_RANK {
            return Err(malformed(format!(
                "'{name}': rank {} (at most {MAX_RANK})",
                tensor.tensor_dim.len()
            )));
        }
        let shape: Vec<usize> = tensor.tensor_dim.iter().map(|&d| d as usize).collect();
        let count = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&c| c <= MAX_ELEMENTS)
            .ok_or_else(|| {
                malformed(format!(
                    "'{name}': shape {shape:?} holds more than {MAX_ELEMENTS} elements"
                ))
            })?;
        let mut op = Op {
            name: name.clone(),
            ty: n.op_type.clone(),
            attrs: n.op_attr.clone(),
            args,
            shape,
            data: None,
        };
        if matches!(op.ty.as_str(), "data" | "const") {
            if let Some(s) = op.ints("shape") {
                if s.iter().map(|&d| d as usize).ne(op.shape.iter().copied())
                    || s.iter().any(|&d| d < 0)
                {
                    return Err(malformed(format!(
                        "'{name}': shape attribute {s:?} disagrees with its tensor {:?}",
                        op.shape
                    )));
                }
            }
        }
        if op.ty == "const" {
            let dtype = op.string("data_type").unwrap_or("float32").to_string();
            let elem = Elem::parse(&dtype)
                .and_then(|e| e.bytes().map(|b| (e, b)))
                .ok_or_else(|| malformed(format!("'{name}': data type '{dtype}'")))?;
            let bytes = match op.attr("data") {
                Some(proto::attr_value::Value::BytesValue(b)) => &b.value,
                _ => return Err(malformed(format!("'{name}': a const without data"))),
            };
            if bytes.is_empty() && count > 0 {
                return Err(XmodelError::Compiled(format!("const '{name}' has no data")));
            }
            if bytes.len() != count * elem.1 {
                return Err(malformed(format!(
                    "'{name}': {} bytes of data for shape {:?} of {dtype} ({} bytes)",
                    bytes.len(),
                    op.shape,
                    count * elem.1
                )));
            }
            op.data = Some(values(elem.0, bytes));
            op.attrs.remove("data");
        }
        ops.push(op);
    }
    let order = topological(&ops)?;
    use proto::attr_value::Value as V;
    let return_ops = match g
        .graph_attr
        .get("return_ops")
        .and_then(|a| a.value.as_ref())
    {
        Some(V::StringVecValue(v)) => Some(v.value.clone()),
        _ => None,
    };
    Ok(Graph {
        name: g.graph_name,
        ops,
        order,
        return_ops,
    })
}

/// Kahn's order, smallest index first so file order is kept where the graph allows.
fn topological(ops: &[Op]) -> Result<Vec<usize>, XmodelError> {
    let mut pending: Vec<usize> = ops
        .iter()
        .map(|o| o.args.iter().map(|(_, p)| p.len()).sum())
        .collect();
    let mut consumers = vec![Vec::new(); ops.len()];
    for (j, o) in ops.iter().enumerate() {
        for (_, p) in &o.args {
            for &i in p {
                consumers[i].push(j);
            }
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..ops.len()).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(ops.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &j in &consumers[i] {
            pending[j] -= 1;
            if pending[j] == 0 {
                ready.insert(j);
            }
        }
    }
    if order.len() != ops.len() {
        let stuck = (0..ops.len()).find(|i| !order.contains(i)).unwrap_or(0);
        return Err(malformed(format!(
            "the graph has a cycle through '{}'",
            ops[stuck].name
        )));
    }
    Ok(order)
}
