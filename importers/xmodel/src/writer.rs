//! Writing XIR graphs with the `serial_v2` messages: what the fixture generator
//! (`examples/make_fixtures.rs`), the tests and the fuzz seeds build their `.xmodel` files with,
//! laid out as XIR's own serializer writes them (`data`/`const` with `shape` and `data_type`,
//! one `OpArg` per argument, the output tensor's dimensions, `{w, h}` and `{l, r, t, b}`
//! attribute order).

use crate::proto::{self, attr_value::Value};
use prost::Message;

/// An attribute value.
pub fn ints(v: &[i64]) -> Value {
    Value::Int32VecValue(proto::Int32Vec {
        value: v.iter().map(|&x| x as i32).collect(),
    })
}

pub fn int(v: i64) -> Value {
    Value::Int32Value(v as i32)
}

pub fn boolean(v: bool) -> Value {
    Value::BoolValue(v)
}

pub fn string(v: &str) -> Value {
    Value::StringValue(v.into())
}

pub fn float(v: f32) -> Value {
    Value::FloatValue(v)
}

pub fn floats(v: &[f32]) -> Value {
    Value::FloatVecValue(proto::FloatVec { value: v.to_vec() })
}

/// A graph under construction.
#[derive(Default)]
pub struct GraphWriter {
    pub graph: proto::Graph,
}

impl GraphWriter {
    pub fn new(name: &str) -> Self {
        let mut graph = proto::Graph {
            graph_name: name.into(),
            ..Default::default()
        };
        graph.subg_root = Some(proto::SubGraph {
            subgraph_name: "root".into(),
            ..Default::default()
        });
        GraphWriter { graph }
    }

    /// Appends an operator: type, `(arg_name, producers)`, attributes, output shape.
    pub fn op(
        &mut self,
        name: &str,
        ty: &str,
        args: &[(&str, &[&str])],
        attrs: Vec<(&str, Value)>,
        shape: &[usize],
    ) -> String {
        let node = proto::OpNode {
            op_name: name.into(),
            op_type: ty.into(),
            op_attr: attrs
                .into_iter()
                .map(|(k, v)| (k.to_string(), proto::AttrValue { value: Some(v) }))
                .collect(),
            args: args
                .iter()
                .map(|(a, p)| proto::OpArg {
                    arg_name: a.to_string(),
                    arg_ops: p.iter().map(|s| s.to_string()).collect(),
                })
                .collect(),
            output_tensor: Some(proto::Tensor {
                tensor_name: name.into(),
                tensor_dim: shape.iter().map(|&d| d as u32).collect(),
                data_type: 4,
                tensor_bit_width: 32,
                tensor_attr: Default::default(),
            }),
        };
        self.graph.op_node.push(node);
        if let Some(root) = self.graph.subg_root.as_mut() {
            root.op_name.push(name.into());
        }
        name.into()
    }

    /// A float32 `data` operator.
    pub fn data(&mut self, name: &str, shape: &[usize]) -> String {
        let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        self.op(
            name,
            "data",
            &[],
            vec![("shape", ints(&s)), ("data_type", string("FLOAT32"))],
            shape,
        )
    }

    /// A float32 `const` operator.
    pub fn constant(&mut self, name: &str, shape: &[usize], values: &[f32]) -> String {
        let s: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.op(
            name,
            "const",
            &[],
            vec![
                ("shape", ints(&s)),
                ("data_type", string("float32")),
                ("data", Value::BytesValue(proto::Bytes { value: bytes })),
            ],
            shape,
        )
    }

    /// A signed 8-bit `fix` (DPU_ROUND) of `input`.
    pub fn fix(&mut self, name: &str, input: &str, fix_point: i64, shape: &[usize]) -> String {
        self.fix_with(name, input, fix_point, 8, true, shape)
    }

    /// A `fix` (DPU_ROUND) of `input` of any bit width and signedness.
    pub fn fix_with(
        &mut self,
        name: &str,
        input: &str,
        fix_point: i64,
        bit_width: i64,
        signed: bool,
        shape: &[usize],
    ) -> String {
        self.op(
            name,
            "fix",
            &[("input", &[input])],
            vec![
                ("fix_point", int(fix_point)),
                ("bit_width", int(bit_width)),
                ("if_signed", boolean(signed)),
                ("round_mode", string("DPU_ROUND")),
            ],
            shape,
        )
    }

    /// `graph_attr.return_ops`.
    pub fn returns(&mut self, names: &[&str]) {
        self.graph.graph_attr.insert(
            "return_ops".into(),
            proto::AttrValue {
                value: Some(Value::StringVecValue(proto::StringVec {
                    value: names.iter().map(|s| s.to_string()).collect(),
                })),
            },
        );
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.graph.encode_to_vec()
    }
}
