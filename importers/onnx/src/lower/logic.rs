//! ONNX's comparison, logical and selection operators and the runtime integer and boolean
//! tensors they make: Equal, Less, Greater, LessOrEqual, GreaterOrEqual (NNAPI 1.2 EQUAL …
//! GREATER_EQUAL), Not, And, Or, Xor (LOGICAL_NOT / AND / OR, NOT_EQUAL on booleans), Where
//! (SELECT), ArgMax / ArgMin (ARGMAX / ARGMIN) and Cast of a runtime tensor (CAST, or a
//! comparison / SELECT where CAST has no boolean form). README "ONNX models" lists the forms.
//!
//! Integer and boolean runtime tensors are kept in ONNX element order (TENSOR_INT32,
//! TENSOR_BOOL8) beside the float values: NNAPI 1.3's TRANSPOSE and RESHAPE take neither type,
//! so they are never re-laid-out as NHWC images are. A float operand meeting them is put in
//! ONNX order first.

use super::later::broadcast_shape;
use super::{Attrs, Dyn, Lowering, Value, R};
use crate::decode::{element_count, Data, Tensor};
use crate::proto::NodeProto;
use nnhal_hal::{OperandType, OperationType};

/// What an ONNX-order operand holds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Float,
    Int,
    Bool,
}

impl Kind {
    fn operand_type(self) -> OperandType {
        match self {
            Kind::Float => OperandType::TensorFloat32,
            Kind::Int => OperandType::TensorInt32,
            Kind::Bool => OperandType::TensorBool8,
        }
    }
}

/// An operand in ONNX element order with its ONNX shape (a scalar's operand is `[1]`).
struct Plain {
    operand: u32,
    shape: Vec<usize>,
    kind: Kind,
}

impl Lowering<'_> {
    /// Adds `op` with one output of type `ty` whose dimensions shape inference gives.
    fn emit_typed(&mut self, op: OperationType, inputs: &[u32], ty: OperandType) -> R<u32> {
        let dims = self.b.infer(op, inputs)?;
        let dims = dims.into_iter().next().ok_or("no output")?;
        let out = self.b.temporary(ty, &dims, 0.0, 0);
        self.b.operation(op, inputs, &[out]);
        Ok(out)
    }

    /// Input `k` of `node` in ONNX order.
    fn plain(&mut self, node: &NodeProto, k: usize) -> R<Plain> {
        let name = node
            .input
            .get(k)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("input {k} is missing"))?;
        if let Some((operand, shape)) = self.ints.get(name).cloned() {
            let kind = if self.b.operand_at(operand).operand_type == OperandType::TensorBool8.raw()
            {
                Kind::Bool
            } else {
                Kind::Int
            };
            return Ok(Plain {
                operand,
                shape,
                kind,
            });
        }
        match self.need(node, k)? {
            Value::Const(t) => self.plain_const(&t),
            v => {
                let d = self.float(&v)?;
                let operand = self.onnx_order(&d)?;
                Ok(Plain {
                    operand,
                    shape: d.shape,
                    kind: Kind::Float,
                })
            }
        }
    }

    /// A constant as an ONNX-order operand: float32, or integers narrowed to int32.
    fn plain_const(&mut self, t: &Tensor) -> R<Plain> {
        let dims: Vec<u32> = if t.dims.is_empty() {
            vec![1]
        } else {
            t.dims.iter().map(|&d| d as u32).collect()
        };
        let (operand, kind) = match &t.data {
            Data::F32(v) => (self.b.f32_tensor(&dims, v), Kind::Float),
            Data::I32(_) | Data::I64(_) => {
                let v: Vec<i32> = t
                    .data
                    .to_i64()
                    .ok_or("an integer constant")?
                    .iter()
                    .map(|&x| {
                        i32::try_from(x).map_err(|_| format!("constant {x} is outside int32"))
                    })
                    .collect::<R<_>>()?;
                (self.b.i32_tensor(&dims, &v, 0.0), Kind::Int)
            }
            d => bail!(
                "a {} constant in a comparison, logical or selection operator",
                d.type_name()
            ),
        };
        Ok(Plain {
            operand,
            shape: t.dims.clone(),
            kind,
        })
    }

    /// A constant of `kind` filled with `v`, of ONNX shape `shape`.
    fn filled(&mut self, kind: Kind, shape: &[usize], v: i32) -> R<u32> {
        let n = element_count(shape)?;
        let dims: Vec<u32> = if shape.is_empty() {
            vec![1]
        } else {
            shape.iter().map(|&d| d as u32).collect()
        };
        Ok(match kind {
            Kind::Float => self.b.f32_tensor(&dims, &vec![v as f32; n]),
            Kind::Int => self.b.i32_tensor(&dims, &vec![v; n], 0.0),
            Kind::Bool => {
                self.b
                    .constant(OperandType::TensorBool8, &dims, &vec![u8::from(v != 0); n])
            }
        })
    }

    /// `p` broadcast to the full `shape` (SELECT takes equal shapes): the broadcasting ADD of
    /// zeros, or LOGICAL_OR with false for booleans — exact either way.
    fn widen(&mut self, p: &Plain, shape: &[usize]) -> R<u32> {
        if p.shape == shape {
            return Ok(p.operand);
        }
        let fill = self.filled(p.kind, shape, 0)?;
        match p.kind {
            Kind::Bool => self.emit_typed(
                OperationType::LogicalOr,
                &[p.operand, fill],
                OperandType::TensorBool8,
            ),
            kind => {
                let act = self.act();
                self.emit_typed(
                    OperationType::Add,
                    &[p.operand, fill, act],
                    kind.operand_type(),
                )
            }
        }
    }

    /// Makes `p` the value of the node's first output.
    fn set_plain(&mut self, node: &NodeProto, p: Plain) -> R<()> {
        let name = node.output.first().ok_or("no output")?.clone();
        if p.kind == Kind::Float {
            let shape = if p.shape.is_empty() { vec![1] } else { p.shape };
            let d: Dyn = self.nnapi_order(p.operand, &shape, None)?;
            self.values.insert(name, Value::Dyn(d));
        } else {
            self.ints.insert(name, (p.operand, p.shape));
        }
        Ok(())
    }

    fn rank_at_most_4(shape: &[usize]) -> R<()> {
        if shape.len() > 4 {
            bail!("rank {}: NNAPI takes rank 4 at most", shape.len());
        }
        Ok(())
    }

    /// Equal / Less / Greater / LessOrEqual / GreaterOrEqual: the NNAPI comparison with
    /// numpy broadcasting, to a boolean tensor.
    pub(super) fn compare(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        a.only(&[])?;
        let ty = match op {
            "Equal" => OperationType::Equal,
            "Less" => OperationType::Less,
            "Greater" => OperationType::Greater,
            "LessOrEqual" => OperationType::LessEqual,
            "GreaterOrEqual" => OperationType::GreaterEqual,
            _ => bail!("not a comparison"),
        };
        let (x, y) = (self.plain(node, 0)?, self.plain(node, 1)?);
        if x.kind != y.kind {
            bail!("operands of kinds {:?} and {:?}", x.kind, y.kind);
        }
        let shape = broadcast_shape(&x.shape, &y.shape)?;
        Self::rank_at_most_4(&shape)?;
        let operand = self.emit_typed(ty, &[x.operand, y.operand], OperandType::TensorBool8)?;
        self.set_plain(
            node,
            Plain {
                operand,
                shape,
                kind: Kind::Bool,
            },
        )?;
        Ok(None)
    }

    /// Not / And / Or / Xor of booleans (Xor as NOT_EQUAL, which NNAPI defines on TENSOR_BOOL8).
    pub(super) fn logical(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        a.only(&[])?;
        let n = if op == "Not" { 1 } else { 2 };
        let ins: Vec<Plain> = (0..n).map(|k| self.plain(node, k)).collect::<R<_>>()?;
        if ins.iter().any(|p| p.kind != Kind::Bool) {
            bail!("{op} of a non-boolean tensor");
        }
        let ty = match op {
            "Not" => OperationType::LogicalNot,
            "And" => OperationType::LogicalAnd,
            "Or" => OperationType::LogicalOr,
            "Xor" => OperationType::NotEqual,
            _ => bail!("not a logical operator"),
        };
        let shape = match ins.as_slice() {
            [x] => x.shape.clone(),
            [x, y] => broadcast_shape(&x.shape, &y.shape)?,
            _ => bail!("wrong input count"),
        };
        Self::rank_at_most_4(&shape)?;
        let operands: Vec<u32> = ins.iter().map(|p| p.operand).collect();
        let operand = self.emit_typed(ty, &operands, OperandType::TensorBool8)?;
        self.set_plain(
            node,
            Plain {
                operand,
                shape,
                kind: Kind::Bool,
            },
        )?;
        Ok(None)
    }

    /// Where(condition, X, Y): SELECT over the broadcast shape of the three.
    pub(super) fn where_(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&[])?;
        let c = self.plain(node, 0)?;
        let (x, y) = (self.plain(node, 1)?, self.plain(node, 2)?);
        if c.kind != Kind::Bool {
            bail!(
                "a condition of kind {:?}: a boolean tensor is needed",
                c.kind
            );
        }
        if x.kind != y.kind {
            bail!("X and Y of kinds {:?} and {:?}", x.kind, y.kind);
        }
        let shape = broadcast_shape(&broadcast_shape(&c.shape, &x.shape)?, &y.shape)?;
        Self::rank_at_most_4(&shape)?;
        let ops = [
            self.widen(&c, &shape)?,
            self.widen(&x, &shape)?,
            self.widen(&y, &shape)?,
        ];
        let kind = x.kind;
        let operand = self.emit_typed(OperationType::Select, &ops, kind.operand_type())?;
        self.set_plain(
            node,
            Plain {
                operand,
                shape,
                kind,
            },
        )?;
        Ok(None)
    }

    /// ArgMax / ArgMin: NNAPI's ARGMAX / ARGMIN drop the axis (keepdims = 0); keepdims = 1
    /// puts it back with EXPAND_DIMS. The result is int32 where ONNX's is int64.
    pub(super) fn arg(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        a.only(&["axis", "keepdims", "select_last_index"])?;
        if a.i("select_last_index", 0) != 0 {
            bail!("select_last_index = 1: NNAPI's ARGMAX / ARGMIN take the first extreme index");
        }
        let x = self.plain(node, 0)?;
        if x.kind == Kind::Bool {
            bail!("{op} of a boolean tensor");
        }
        let rank = x.shape.len();
        Self::rank_at_most_4(&x.shape)?;
        if rank == 0 {
            bail!("{op} of a scalar");
        }
        let axis = super::norm_axis(a.i("axis", 0), rank)?;
        let keep = a.i("keepdims", 1) != 0;
        if rank <= 1 && !keep {
            bail!("a scalar result: NNAPI's ARGMAX / ARGMIN keep at least one dimension");
        }
        let ty = if op == "ArgMax" {
            OperationType::Argmax
        } else {
            OperationType::Argmin
        };
        let ax = self.b.int(axis as i32);
        let mut operand = self.emit_typed(ty, &[x.operand, ax], OperandType::TensorInt32)?;
        let mut shape = x.shape.clone();
        if keep {
            shape[axis] = 1;
            if rank > 1 {
                let ax = self.b.int(axis as i32);
                operand = self.emit_typed(
                    OperationType::ExpandDims,
                    &[operand, ax],
                    OperandType::TensorInt32,
                )?;
            }
        } else {
            shape.remove(axis);
        }
        self.set_plain(
            node,
            Plain {
                operand,
                shape,
                kind: Kind::Int,
            },
        )?;
        Ok(None)
    }

    /// Cast of a runtime tensor between float32, int32/int64 (held as int32) and bool: CAST
    /// between float and integers (truncating toward zero, as ONNX does), NOT_EQUAL 0 to bool
    /// (NaN is true, as in ONNX), SELECT of ones and zeros from bool.
    pub(super) fn cast(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["to", "saturate", "round_mode"])?;
        let to = match a.i("to", 0) {
            1 => Kind::Float,
            6 | 7 => Kind::Int,
            9 => Kind::Bool,
            t => bail!(
                "Cast to {} of a runtime tensor: float32, int32, int64 and bool are supported",
                crate::decode::type_name(t as i32)
            ),
        };
        let x = self.plain(node, 0)?;
        Self::rank_at_most_4(&x.shape)?;
        let operand = match (x.kind, to) {
            (from, to) if from == to => x.operand,
            (Kind::Bool, to) => {
                let ones = self.filled(to, &x.shape, 1)?;
                let zeros = self.filled(to, &x.shape, 0)?;
                self.emit_typed(
                    OperationType::Select,
                    &[x.operand, ones, zeros],
                    to.operand_type(),
                )?
            }
            (from, Kind::Bool) => {
                let zero = self.filled(from, &[1], 0)?;
                self.emit_typed(
                    OperationType::NotEqual,
                    &[x.operand, zero],
                    OperandType::TensorBool8,
                )?
            }
            (_, to) => self.emit_typed(OperationType::Cast, &[x.operand], to.operand_type())?,
        };
        self.set_plain(
            node,
            Plain {
                operand,
                shape: x.shape,
                kind: to,
            },
        )?;
        Ok(None)
    }
}
