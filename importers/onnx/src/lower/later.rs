//! Lowerings to the operations NNAPI 1.1–1.3 added (types.hal 1.1/1.2/1.3, all in the AIDL
//! interface V1): TRANSPOSE between the NHWC operands and ONNX's element order (so any
//! Reshape/Flatten/Squeeze/Unsqueeze and Transpose is exact), element-wise math and
//! activations, softmax on any axis, constant padding, reductions, slicing, splitting, tiling,
//! and the dilated, grouped and transposed convolutions, 1-D convolutions and pools run as 2-D
//! ones over a unit height; dilated max pooling as slices, Sign as comparisons and SELECT, and
//! the integer (TENSOR_INT32) graph inputs NNAPI takes for ONNX's int64 ones. README "ONNX
//! models" lists them with their opset notes.

use super::*;
use crate::proto::AttributeProto;

/// The physical (operand) axis holding ONNX axis `axis` of a value laid out as `layout`.
fn phys(layout: &EdgeLayout, axis: usize) -> usize {
    if *layout == EdgeLayout::Nhwc {
        [0, 3, 1, 2][axis]
    } else {
        axis
    }
}

/// The ONNX axis each physical axis holds.
fn phys_order(layout: &EdgeLayout, rank: usize) -> Vec<usize> {
    if *layout == EdgeLayout::Nhwc {
        vec![0, 2, 3, 1]
    } else {
        (0..rank).collect()
    }
}

/// The attributes of a 1-D operator run as 2-D: a unit kernel, stride and dilation for the
/// new height axis, and no padding there.
fn attrs_2d(attrs: &[AttributeProto]) -> Vec<AttributeProto> {
    attrs
        .iter()
        .map(|a| {
            let mut a = a.clone();
            match a.name.as_deref() {
                Some("kernel_shape") | Some("strides") | Some("dilations") if a.ints.len() == 1 => {
                    a.ints.insert(0, 1);
                }
                Some("pads") | Some("output_padding") if a.ints.len() == 2 => {
                    a.ints = vec![0, a.ints[0], 0, a.ints[1]];
                }
                Some("output_padding") if a.ints.len() == 1 => a.ints.insert(0, 0),
                _ => {}
            }
            a
        })
        .collect()
}

impl Lowering<'_> {
    fn int_vec(&mut self, v: &[i32]) -> u32 {
        self.b.i32_tensor(&[v.len().max(1) as u32], v, 0.0)
    }

    /// `emit` for a comparison, whose output is TENSOR_BOOL8.
    fn emit_bool(&mut self, op: OperationType, inputs: &[u32]) -> R<(u32, Vec<u32>)> {
        let dims = self.b.infer(op, inputs)?;
        let dims = dims.into_iter().next().ok_or("no output")?;
        let out = self.b.temporary(OperandType::TensorBool8, &dims, 0.0, 0);
        self.b.operation(op, inputs, &[out]);
        Ok((out, dims))
    }

    fn bool_scalar(&mut self, v: bool) -> u32 {
        self.b.constant(OperandType::Bool, &[], &[u8::from(v)])
    }

    fn transpose_raw(&mut self, operand: u32, perm: &[usize], quant: Option<(f32, i32)>) -> R<u32> {
        let p: Vec<i32> = perm.iter().map(|&x| x as i32).collect();
        let p = self.int_vec(&p);
        Ok(self.emit(OperationType::Transpose, &[operand, p], quant)?.0)
    }

    fn reshape_raw(&mut self, operand: u32, dims: &[usize], quant: Option<(f32, i32)>) -> R<u32> {
        let s: Vec<i32> = dims.iter().map(|&x| x as i32).collect();
        let s = self.int_vec(&s);
        Ok(self.emit(OperationType::Reshape, &[operand, s], quant)?.0)
    }

    /// `d`'s operand with its elements in ONNX order (dimensions = the ONNX shape).
    pub(super) fn onnx_order(&mut self, d: &Dyn) -> R<u32> {
        match &d.layout {
            EdgeLayout::Same => Ok(d.operand),
            EdgeLayout::Nhwc => self.transpose_raw(d.operand, &[0, 3, 1, 2], d.quant),
            EdgeLayout::FlatNhwc { c, h, w } => {
                let (c, h, w) = (*c, *h, *w);
                let r = self.reshape_raw(d.operand, &[d.shape[0], h, w, c], d.quant)?;
                let t = self.transpose_raw(r, &[0, 3, 1, 2], d.quant)?;
                self.reshape_raw(t, &d.shape, d.quant)
            }
            EdgeLayout::Chw => bail!("a channel-first layout the ONNX importer does not make"),
        }
    }

    /// The value of ONNX shape `shape` whose operand, in ONNX order, is `operand`: a rank-4
    /// image is transposed to NHWC.
    pub(super) fn nnapi_order(
        &mut self,
        operand: u32,
        shape: &[usize],
        quant: Option<(f32, i32)>,
    ) -> R<Dyn> {
        if shape.len() == 4 {
            let t = self.transpose_raw(operand, &[0, 2, 3, 1], quant)?;
            return Ok(Dyn {
                operand: t,
                shape: shape.to_vec(),
                layout: EdgeLayout::Nhwc,
                quant,
                act: None,
            });
        }
        Ok(Dyn {
            operand,
            shape: shape.to_vec(),
            layout: EdgeLayout::Same,
            quant,
            act: None,
        })
    }

    /// A runtime operand (float32, or quant8 as it is) whose physical axes map to ONNX axes by
    /// [`phys`]: a flattened image is put back in ONNX order.
    fn runtime(&mut self, v: &Value) -> R<Dyn> {
        let d = match v {
            Value::Dyn(d) if d.quant.is_some() => d.clone(),
            _ => self.float(v)?,
        };
        if matches!(d.layout, EdgeLayout::FlatNhwc { .. } | EdgeLayout::Chw) {
            let operand = self.onnx_order(&d)?;
            return Ok(Dyn {
                operand,
                layout: EdgeLayout::Same,
                act: None,
                ..d
            });
        }
        Ok(d)
    }

    /// ONNX Transpose of a runtime value: one TRANSPOSE whose permutation composes the
    /// operand layouts of input and output with `perm`.
    pub(super) fn transpose_dyn(&mut self, d: &Dyn, perm: &[usize]) -> R<Dyn> {
        let rank = d.shape.len();
        let inv_in = {
            let order = phys_order(&d.layout, rank);
            let mut inv = vec![0; rank];
            for (p, &l) in order.iter().enumerate() {
                inv[l] = p;
            }
            inv
        };
        let shape: Vec<usize> = perm.iter().map(|&p| d.shape[p]).collect();
        let out_layout = layout_of(&shape);
        let q = phys_order(&out_layout, rank);
        let nn: Vec<usize> = q.iter().map(|&j| inv_in[perm[j]]).collect();
        let operand = if nn.iter().enumerate().all(|(i, &p)| i == p) {
            d.operand
        } else {
            if rank > 4 {
                bail!("a transpose of rank {rank}: NNAPI's TRANSPOSE takes rank 4 at most");
            }
            self.transpose_raw(d.operand, &nn, d.quant)?
        };
        Ok(Dyn {
            operand,
            shape,
            layout: out_layout,
            quant: d.quant,
            act: None,
        })
    }

    /// Reshape of a runtime value through ONNX order (TRANSPOSE out of and back into NHWC
    /// where an image is involved).
    pub(super) fn reshape_general(&mut self, d: &Dyn, shape: &[usize]) -> R<Dyn> {
        if shape.len() > 4 || d.shape.len() > 4 {
            bail!(
                "reshaping {:?} to {shape:?}: NNAPI's RESHAPE and TRANSPOSE take rank 4 at most",
                d.shape
            );
        }
        let plain = self.onnx_order(d)?;
        let r = self.reshape_raw(plain, shape, d.quant)?;
        self.nnapi_order(r, shape, d.quant)
    }

    /// The result of an element-wise unary operation on `x` (same shape and layout).
    fn same_as(&self, x: &Dyn, operand: u32) -> Value {
        Value::Dyn(Dyn {
            operand,
            act: None,
            ..x.clone()
        })
    }

    pub(super) fn unary(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        let simple = |op: &str| {
            Some(match op {
                "Neg" => OperationType::Neg,
                "Exp" => OperationType::Exp,
                "Log" => OperationType::Log,
                "Sqrt" => OperationType::Sqrt,
                "Abs" => OperationType::Abs,
                "Sin" => OperationType::Sin,
                "Floor" => OperationType::Floor,
                "Sigmoid" => OperationType::Logistic,
                "Tanh" => OperationType::Tanh,
                "HardSwish" => OperationType::HardSwish,
                _ => return None,
            })
        };
        if let Some(ty) = simple(op) {
            a.only(&[])?;
            let (operand, _) = self.emit(ty, &[x.operand], None)?;
            self.set(node, self.same_as(&x, operand));
            return Ok(None);
        }
        let operand = match op {
            "Sign" => {
                // SELECT(x > 0, 1, SELECT(x < 0, −1, x)): exact, with 0 and NaN passed through
                // (NNAPI has no SIGN, and SELECT takes equal shapes, so the ±1 are full-size).
                a.only(&[])?;
                let dims = self.b.operand_at(x.operand).dimensions.clone();
                let n = element_count(&dims.iter().map(|&d| d as usize).collect::<Vec<_>>())?;
                let zero = self.b.f32_tensor(&[1], &[0.0]);
                let (gt, _) = self.emit_bool(OperationType::Greater, &[x.operand, zero])?;
                let (lt, _) = self.emit_bool(OperationType::Less, &[x.operand, zero])?;
                let ones = self.b.f32_tensor(&dims, &vec![1.0; n]);
                let minus = self.b.f32_tensor(&dims, &vec![-1.0; n]);
                let (neg, _) = self.emit(OperationType::Select, &[lt, minus, x.operand], None)?;
                self.emit(OperationType::Select, &[gt, ones, neg], None)?.0
            }
            "Reciprocal" => {
                a.only(&[])?;
                let one = self.b.f32_tensor(&[1], &[1.0]);
                let act = self.act();
                self.emit(OperationType::Div, &[one, x.operand, act], None)?
                    .0
            }
            "Elu" | "Selu" => {
                let (alpha, gamma) = if op == "Elu" {
                    a.only(&["alpha"])?;
                    (a.f("alpha", 1.0), 1.0)
                } else {
                    a.only(&["alpha", "gamma"])?;
                    (a.f("alpha", 1.673_263_2), a.f("gamma", 1.050_701))
                };
                let al = self.b.float(alpha);
                let (e, _) = self.emit(OperationType::Elu, &[x.operand, al], None)?;
                if gamma == 1.0 {
                    e
                } else {
                    let g = self.b.f32_tensor(&[1], &[gamma]);
                    let act = self.act();
                    self.emit(OperationType::Mul, &[e, g, act], None)?.0
                }
            }
            "LeakyRelu" => {
                a.only(&["alpha"])?;
                let alpha = self.b.f32_tensor(&[1], &[a.f("alpha", 0.01)]);
                self.emit(OperationType::Prelu, &[x.operand, alpha], None)?
                    .0
            }
            "Softplus" => {
                a.only(&[])?;
                self.softplus(x.operand)?
            }
            "Mish" => {
                // x · tanh(softplus(x)) (opset 18).
                a.only(&[])?;
                let sp = self.softplus(x.operand)?;
                let (th, _) = self.emit(OperationType::Tanh, &[sp], None)?;
                let act = self.act();
                self.emit(OperationType::Mul, &[x.operand, th, act], None)?
                    .0
            }
            "Softsign" => {
                a.only(&[])?;
                let (ab, _) = self.emit(OperationType::Abs, &[x.operand], None)?;
                let one = self.b.f32_tensor(&[1], &[1.0]);
                let act = self.act();
                let (den, _) = self.emit(OperationType::Add, &[ab, one, act], None)?;
                let act = self.act();
                self.emit(OperationType::Div, &[x.operand, den, act], None)?
                    .0
            }
            "HardSigmoid" => {
                a.only(&["alpha", "beta"])?;
                let al = self.b.f32_tensor(&[1], &[a.f("alpha", 0.2)]);
                let act = self.act();
                let (m, _) = self.emit(OperationType::Mul, &[x.operand, al, act], None)?;
                let be = self.b.f32_tensor(&[1], &[a.f("beta", 0.5)]);
                let act = self.act();
                let (s, _) = self.emit(OperationType::Add, &[m, be, act], None)?;
                let one = self.b.f32_tensor(&[1], &[1.0]);
                let (lo, _) = self.emit(OperationType::Minimum, &[s, one], None)?;
                let zero = self.b.f32_tensor(&[1], &[0.0]);
                self.emit(OperationType::Maximum, &[lo, zero], None)?.0
            }
            _ => bail!("not an element-wise operator"),
        };
        self.set(node, self.same_as(&x, operand));
        Ok(None)
    }

    /// log(1 + e^x), written as max(x, 0) + log(1 + e^-|x|) so large inputs do not overflow
    /// the exponential.
    fn softplus(&mut self, x: u32) -> R<u32> {
        let (ab, _) = self.emit(OperationType::Abs, &[x], None)?;
        let (ng, _) = self.emit(OperationType::Neg, &[ab], None)?;
        let (ex, _) = self.emit(OperationType::Exp, &[ng], None)?;
        let one = self.b.f32_tensor(&[1], &[1.0]);
        let act = self.act();
        let (p1, _) = self.emit(OperationType::Add, &[ex, one, act], None)?;
        let (lg, _) = self.emit(OperationType::Log, &[p1], None)?;
        let (rl, _) = self.emit(OperationType::Relu, &[x], None)?;
        let act = self.act();
        Ok(self.emit(OperationType::Add, &[rl, lg, act], None)?.0)
    }

    /// Add/Sub/Mul/Div/Pow/Max/Min/Sum: numpy broadcasting (opset ≥ 7) or the
    /// `broadcast`/`axis` attributes of opsets 1–6.
    pub(super) fn binary_any(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        op: &str,
    ) -> R<Option<String>> {
        let legacy = self.opset < 7 && matches!(op, "Add" | "Sub" | "Mul" | "Div");
        if legacy {
            a.only(&["broadcast", "axis"])?;
        } else {
            a.only(&[])?;
        }
        let (ty, fused) = match op {
            "Add" | "Sum" => (OperationType::Add, true),
            "Sub" => (OperationType::Sub, true),
            "Mul" => (OperationType::Mul, true),
            "Div" => (OperationType::Div, true),
            "Pow" => (OperationType::Pow, false),
            "Max" => (OperationType::Maximum, false),
            "Min" => (OperationType::Minimum, false),
            _ => bail!("not a binary operator"),
        };
        let mut ins: Vec<Value> = (0..node.input.len())
            .map(|i| self.need(node, i))
            .collect::<R<_>>()?;
        if ins.is_empty() {
            bail!("no inputs");
        }
        if legacy && ins.len() == 2 {
            let (ra, rb) = (value_shape(&ins[0]).len(), value_shape(&ins[1]).len());
            if a.i("broadcast", 0) != 0 {
                // B's dimensions line up with A's from `axis` (default: the trailing ones).
                let axis = a.i("axis", (ra as i64) - (rb as i64));
                // A scalar B sits past A's last axis (axis = rank of A).
                let axis = if axis == ra as i64 && rb == 0 {
                    ra
                } else {
                    norm_axis(axis, ra.max(1))?
                };
                let bs = value_shape(&ins[1]);
                if axis + bs.len() > ra {
                    bail!("broadcast axis {axis} with B of shape {bs:?} overruns A's rank {ra}");
                }
                let mut dims = vec![1; axis];
                dims.extend(&bs);
                dims.resize(ra, 1);
                ins[1] = self.reshape(&ins[1], &dims)?;
            } else if value_shape(&ins[0]) != value_shape(&ins[1]) {
                bail!(
                    "inputs of shapes {:?} and {:?} without broadcast = 1",
                    value_shape(&ins[0]),
                    value_shape(&ins[1])
                );
            }
        }
        let mut acc = ins[0].clone();
        if ins.len() == 1 {
            self.set(node, acc);
            return Ok(None);
        }
        for v in &ins[1..] {
            let rank = value_shape(&acc).len().max(value_shape(v).len());
            if rank > 4 {
                bail!("element-wise operands of rank {rank}: NNAPI takes rank 4 at most");
            }
            let x = self.broadcast_any(&acc, rank)?;
            let y = self.broadcast_any(v, rank)?;
            let mut inputs = vec![x.operand, y.operand];
            let act = fused.then(|| self.act());
            inputs.extend(act);
            let (operand, dims) = self.emit(ty, &inputs, None)?;
            acc = Value::Dyn(Dyn {
                operand,
                shape: onnx_shape(&dims),
                layout: layout_of(&dims),
                quant: None,
                act,
            });
        }
        self.set(node, acc);
        Ok(None)
    }

    /// One side of a broadcasting operation of result rank `rank`: lower ranks get leading
    /// unit dimensions (a runtime tensor by a reshape).
    fn broadcast_any(&mut self, v: &Value, rank: usize) -> R<Dyn> {
        if matches!(v, Value::Const(_) | Value::QConst(..)) {
            return self.broadcast_operand(v, rank);
        }
        let d = self.runtime(v)?;
        if d.quant.is_some() {
            bail!("a quantized tensor where float32 is needed");
        }
        if d.shape.len() == rank {
            return Ok(d);
        }
        let mut dims = vec![1; rank - d.shape.len()];
        dims.extend(&d.shape);
        self.reshape_general(&d, &dims)
    }

    /// Softmax / LogSoftmax: along one axis (opset ≥ 13), or over everything from `axis` on
    /// (opsets 1–12, as a 2-D view when that is more than one axis).
    pub(super) fn softmax_any(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        log: bool,
    ) -> R<Option<String>> {
        a.only(&["axis"])?;
        let x = self.need(node, 0)?;
        let x = self.runtime(&x)?;
        if x.quant.is_some() {
            bail!("a quantized softmax outside a QDQ pattern is not supported");
        }
        let rank = x.shape.len();
        let default = if self.opset < 13 { 1 } else { -1 };
        let axis = norm_axis(a.i("axis", default), rank.max(1))?;
        let flat = self.opset < 13 && x.shape[axis + 1..].iter().any(|&d| d != 1);
        let (y, ax) = if flat {
            let rows = element_count(&x.shape[..axis])?;
            let cols = element_count(&x.shape[axis..])?;
            (self.reshape_general(&x, &[rows, cols])?, 1)
        } else {
            (x.clone(), axis)
        };
        if y.shape.len() > 4 {
            bail!(
                "rank {}: NNAPI's softmax takes rank 4 at most",
                y.shape.len()
            );
        }
        let beta = self.b.float(1.0);
        let nn_axis = self.b.int(phys(&y.layout, ax) as i32);
        let ty = if log {
            OperationType::LogSoftmax
        } else {
            OperationType::Softmax
        };
        let (operand, _) = self.emit(ty, &[y.operand, beta, nn_axis], None)?;
        let out = Dyn {
            operand,
            act: None,
            ..y
        };
        let out = if flat {
            self.reshape_general(&out, &x.shape)?
        } else {
            out
        };
        self.set(node, Value::Dyn(out));
        Ok(None)
    }

    /// PRelu: the slope broadcast numpy-style (opset ≥ 7) or, in opsets 1–6, a 1-D slope of
    /// one value per channel applied along axis 1.
    pub(super) fn prelu(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&[])?;
        let x = self.need(node, 0)?;
        let x = self.runtime(&x)?;
        let rank = x.shape.len();
        let mut slope = self.need(node, 1)?;
        let ss = value_shape(&slope);
        if self.opset < 7 && ss.len() == 1 && rank >= 2 && ss[0] == x.shape[1] && ss[0] != 1 {
            let mut dims = vec![ss[0]];
            dims.resize(rank - 1, 1);
            slope = self.reshape(&slope, &dims)?;
        }
        let (x4, back) = self.rank4_view(&x)?;
        let s = self.broadcast_any(&slope_view(&slope, rank, x4.shape.len())?, x4.shape.len())?;
        let (operand, _) = self.emit(OperationType::Prelu, &[x4.operand, s.operand], None)?;
        let y = Dyn {
            operand,
            act: None,
            ..x4
        };
        let y = Self::unview(y, back);
        self.set(node, Value::Dyn(y));
        Ok(None)
    }

    /// A rank-5+ value `[N, C, ...]`, held as an operand `[N, C, rest]` (graph inputs of rank
    /// above 4 are), viewed at that shape for per-channel operations (with the shape the
    /// result is labelled back with); ranks ≤ 4 as they are.
    fn rank4_view(&mut self, x: &Dyn) -> R<(Dyn, Option<Vec<usize>>)> {
        if x.shape.len() <= 4 {
            return Ok((x.clone(), None));
        }
        let rest = element_count(&x.shape[2..])?;
        let view = vec![x.shape[0], x.shape[1], rest];
        let dims: Vec<usize> = self
            .b
            .operand_at(x.operand)
            .dimensions
            .iter()
            .map(|&d| d as usize)
            .collect();
        if dims != view || x.layout != EdgeLayout::Same {
            bail!("a rank-{} tensor not held as [N, C, rest]", x.shape.len());
        }
        let d = Dyn {
            shape: view,
            act: None,
            ..x.clone()
        };
        Ok((d, Some(x.shape.clone())))
    }

    /// `y` (a `[N, C, rest]` view) labelled with its rank-5+ shape again.
    fn unview(y: Dyn, back: Option<Vec<usize>>) -> Dyn {
        match back {
            Some(shape) => Dyn {
                shape,
                act: None,
                ..y
            },
            None => y,
        }
    }

    /// BatchNormalization on a runtime input of rank 2–5+ (per channel, axis 1).
    pub(super) fn batchnorm_any(&mut self, node: &NodeProto) -> R<Option<String>> {
        let Some((scale, shift)) = self.bn_params(node)? else {
            bail!("the scale, bias, mean and variance must be float32 constants");
        };
        let x = self.need(node, 0)?;
        let x = self.runtime(&x)?;
        let c = scale.len();
        if x.shape.len() < 2 || x.shape[1] != c {
            bail!("input shape {:?} with {c} channels", x.shape);
        }
        let (x4, back) = self.rank4_view(&x)?;
        let rank = x4.shape.len();
        let mut dims = vec![c];
        dims.resize(rank - 1, 1);
        let s = self.broadcast_operand(
            &Value::Const(Tensor {
                dims: dims.clone(),
                data: Data::F32(scale),
            }),
            rank,
        )?;
        let t = self.broadcast_operand(
            &Value::Const(Tensor {
                dims,
                data: Data::F32(shift),
            }),
            rank,
        )?;
        let act = self.act();
        let (mul, _) = self.emit(OperationType::Mul, &[x4.operand, s.operand, act], None)?;
        let act = self.act();
        let (operand, _) = self.emit(OperationType::Add, &[mul, t.operand, act], None)?;
        let y = Dyn {
            operand,
            act: back.is_none().then_some(act),
            ..x4
        };
        let y = Self::unview(y, back);
        self.set(node, Value::Dyn(y));
        Ok(None)
    }

    /// InstanceNormalization: NNAPI's INSTANCE_NORMALIZATION with unit scale and zero shift,
    /// then ONNX's per-channel scale and bias (NNAPI's are scalars).
    pub(super) fn instance_norm(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["epsilon"])?;
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        self.rank4(&x)?;
        let c = x.shape[1];
        let get = |s: &Self, k: usize, what: &str| -> R<Vec<f32>> {
            let t = s.constant(node, k, what)?;
            match t.f32s() {
                Some(v) if v.len() == c => Ok(v.to_vec()),
                _ => bail!("{what} is not [{c}] float32"),
            }
        };
        let (scale, bias) = (get(self, 1, "scale")?, get(self, 2, "B")?);
        let ins = [
            x.operand,
            self.b.float(1.0),
            self.b.float(0.0),
            self.b.float(a.f("epsilon", 1e-5)),
            self.bool_scalar(false),
        ];
        let (n, _) = self.emit(OperationType::InstanceNormalization, &ins, None)?;
        let s = self.b.f32_tensor(&[1, 1, 1, c as u32], &scale);
        let act = self.act();
        let (m, _) = self.emit(OperationType::Mul, &[n, s, act], None)?;
        let t = self.b.f32_tensor(&[1, 1, 1, c as u32], &bias);
        let act = self.act();
        let (operand, _) = self.emit(OperationType::Add, &[m, t, act], None)?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                act: Some(act),
                ..x
            }),
        );
        Ok(None)
    }

    /// ONNX Transpose of any runtime value.
    pub(super) fn transpose_any(&mut self, v: &Value, perm: Option<Vec<i64>>) -> R<Value> {
        let d = self.runtime(v)?;
        let rank = d.shape.len();
        let perm: Vec<usize> = match perm {
            Some(p) => p.iter().map(|&x| norm_axis(x, rank)).collect::<R<_>>()?,
            None => (0..rank).rev().collect(),
        };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..rank).collect::<Vec<_>>() {
            bail!("perm {perm:?} is not a permutation");
        }
        Ok(Value::Dyn(self.transpose_dyn(&d, &perm)?))
    }

    /// Pad: constant mode (PAD / PAD_V2). The pads are the `paddings` attribute (opset 1),
    /// the `pads` attribute (2–10) or inputs (≥ 11, with `axes` from 18).
    pub(super) fn pad(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["mode", "pads", "paddings", "value"])?;
        let mode = a.s("mode").unwrap_or_else(|| "constant".into());
        if !matches!(mode.as_str(), "constant" | "reflect" | "edge" | "wrap") {
            bail!("mode '{mode}' is not one of constant, reflect, edge, wrap");
        }
        let x = self.need(node, 0)?;
        let x = self.runtime(&x)?;
        let rank = x.shape.len();
        let (pads, value): (Vec<i64>, f32) = if self.opset < 11 {
            let p = a
                .ints(if self.opset < 2 { "paddings" } else { "pads" })
                .ok_or("the pads attribute is missing")?;
            (p, a.f("value", 0.0))
        } else {
            let p = self
                .constant(node, 1, "pads")?
                .data
                .to_i64()
                .ok_or("pads are not integer")?;
            let value = match self.input(node, 2) {
                None => 0.0,
                Some(_) => self
                    .constant(node, 2, "constant_value")?
                    .scalar_f32()
                    .ok_or("constant_value is not a float32 scalar")?,
            };
            let p = match self.input(node, 3) {
                None => p,
                Some(_) => {
                    let axes = self
                        .constant(node, 3, "axes")?
                        .data
                        .to_i64()
                        .ok_or("axes are not integer")?;
                    if p.len() != 2 * axes.len() {
                        bail!("{} pads for {} axes", p.len(), axes.len());
                    }
                    let mut full = vec![0; 2 * rank];
                    for (i, &ax) in axes.iter().enumerate() {
                        let ax = norm_axis(ax, rank)?;
                        full[ax] = p[i];
                        full[rank + ax] = p[axes.len() + i];
                    }
                    full
                }
            };
            (p, value)
        };
        if pads.len() != 2 * rank {
            bail!("{} pads for a rank-{rank} input", pads.len());
        }
        if pads
            .iter()
            .any(|&p| !(0..=i64::from(u16::MAX)).contains(&p))
        {
            bail!("pads {pads:?}: only non-negative pads (cropping is Slice's)");
        }
        if rank > 4 {
            bail!("rank {rank}: NNAPI's PAD takes rank 4 at most");
        }
        if mode != "constant" {
            // reflect / edge / wrap: NNAPI 1.3 has no MIRROR_PAD, but each padded axis is a
            // GATHER of the source index every output position reads.
            let mut d = x.clone();
            for ax in 0..rank {
                let (b, e) = (pads[ax] as usize, pads[rank + ax] as usize);
                if b == 0 && e == 0 {
                    continue;
                }
                let n = d.shape[ax] as i64;
                if mode == "reflect" && (n < 2 || b as i64 >= n || e as i64 >= n) {
                    bail!("reflect pads {b}, {e} on an axis of size {n}: reflection needs more elements than the pad");
                }
                let src: Vec<i32> = (-(b as i64)..n + e as i64)
                    .map(|i| {
                        (match mode.as_str() {
                            "edge" => i.clamp(0, n - 1),
                            "wrap" => i.rem_euclid(n),
                            _ if i < 0 => -i,
                            _ if i >= n => 2 * (n - 1) - i,
                            _ => i,
                        }) as i32
                    })
                    .collect();
                let it = self.int_vec(&src);
                let axis = self.b.int(phys(&d.layout, ax) as i32);
                let (operand, dims) =
                    self.emit(OperationType::Gather, &[d.operand, axis, it], d.quant)?;
                d = Dyn {
                    operand,
                    shape: onnx_shape_of(&dims, &d.layout),
                    act: None,
                    ..d
                };
            }
            self.set(node, Value::Dyn(d));
            return Ok(Some(format!("{mode} padding as GATHER")));
        }
        let mut paddings = vec![0i32; 2 * rank];
        for ax in 0..rank {
            let p = phys(&x.layout, ax);
            paddings[2 * p] = pads[ax] as i32;
            paddings[2 * p + 1] = pads[rank + ax] as i32;
        }
        let pt = self.b.i32_tensor(&[rank as u32, 2], &paddings, 0.0);
        let (operand, dims) = if value == 0.0 {
            self.emit(OperationType::Pad, &[x.operand, pt], x.quant)?
        } else {
            if x.quant.is_some() {
                bail!("a quantized pad with a non-zero value is not supported");
            }
            let v = self.b.float(value);
            self.emit(OperationType::PadV2, &[x.operand, pt, v], None)?
        };
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape: onnx_shape_of(&dims, &x.layout),
                act: None,
                ..x
            }),
        );
        Ok(None)
    }

    /// An integer list from input `k` (opsets where it is an input) or attribute `attr`.
    fn ints_in(
        &self,
        node: &NodeProto,
        a: &Attrs,
        k: usize,
        attr: &str,
        from_input: bool,
    ) -> R<Option<Vec<i64>>> {
        if from_input {
            match self.input(node, k) {
                None => Ok(None),
                Some(Value::Const(t)) => Ok(Some(
                    t.data
                        .to_i64()
                        .ok_or(format!("input {k} ({attr}) is not integer"))?,
                )),
                Some(_) => bail!("input {k} ({attr}) must be a constant"),
            }
        } else {
            Ok(a.ints(attr))
        }
    }

    /// ReduceMean/Sum/Max/Min/Prod (and ReduceSumSquare/L1/L2/LogSumExp are refused by name).
    pub(super) fn reduce(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        a.only(&["axes", "keepdims", "noop_with_empty_axes"])?;
        let x = self.need(node, 0)?;
        let x = self.runtime(&x)?;
        let rank = x.shape.len();
        let from_input = self.opset >= if op == "ReduceSum" { 13 } else { 18 };
        let axes = self.ints_in(node, a, 1, "axes", from_input)?;
        let keep = a.i("keepdims", 1) != 0;
        let mut axes: Vec<usize> = match axes {
            Some(v) if !v.is_empty() => v.iter().map(|&x| norm_axis(x, rank)).collect::<R<_>>()?,
            _ if a.i("noop_with_empty_axes", 0) != 0 => {
                self.set(node, Value::Dyn(x));
                return Ok(Some("removed (no axes)".into()));
            }
            _ => (0..rank).collect(),
        };
        axes.sort_unstable();
        axes.dedup();
        if rank > 4 {
            bail!("rank {rank}: NNAPI's reductions take rank 4 at most");
        }
        let shape: Vec<usize> = (0..rank)
            .filter_map(|i| {
                if axes.contains(&i) {
                    keep.then_some(1)
                } else {
                    Some(x.shape[i])
                }
            })
            .collect();
        // Without keepdims the remaining physical axes must be in ONNX order.
        let x = if !keep && x.layout == EdgeLayout::Nhwc {
            let remain: Vec<usize> = phys_order(&x.layout, rank)
                .into_iter()
                .filter(|l| !axes.contains(l))
                .collect();
            if remain.windows(2).all(|w| w[0] < w[1]) {
                x
            } else {
                let operand = self.onnx_order(&x)?;
                Dyn {
                    operand,
                    layout: EdgeLayout::Same,
                    ..x
                }
            }
        } else {
            x
        };
        let nn_axes: Vec<i32> = axes.iter().map(|&ax| phys(&x.layout, ax) as i32).collect();
        let at = self.int_vec(&nn_axes);
        let (operand, dims) = if op == "ReduceMean" {
            let k = self.b.int(i32::from(keep));
            self.emit(OperationType::Mean, &[x.operand, at, k], x.quant)?
        } else {
            let ty = match op {
                "ReduceSum" => OperationType::ReduceSum,
                "ReduceMax" => OperationType::ReduceMax,
                "ReduceMin" => OperationType::ReduceMin,
                "ReduceProd" => OperationType::ReduceProd,
                _ => bail!("no NNAPI reduction for {op}"),
            };
            let k = self.bool_scalar(keep);
            self.emit(ty, &[x.operand, at, k], x.quant)?
        };
        let layout = if keep {
            x.layout.clone()
        } else {
            EdgeLayout::Same
        };
        let layout = if shape.len() == 4 && layout != EdgeLayout::Nhwc {
            bail!("a 4-D reduction result not in NHWC")
        } else {
            layout
        };
        if dims.iter().product::<u32>() as usize != shape.iter().product::<usize>() {
            bail!("the reduction's output {dims:?} is not the ONNX shape {shape:?}");
        }
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape,
                layout,
                quant: x.quant,
                act: None,
            }),
        );
        Ok(None)
    }

    /// Split: sizes from the `split` input (opset 1, ≥ 13) or attribute (2–12), or equal
    /// parts (`num_outputs` from 18): SPLIT when equal, else one SLICE per output.
    pub(super) fn split(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis", "split", "num_outputs"])?;
        let x = self.need(node, 0)?;
        let x = self.runtime(&x)?;
        let rank = x.shape.len();
        let axis = norm_axis(a.i("axis", 0), rank)?;
        let n = node.output.len();
        let from_input = self.opset >= 13 || self.opset < 2;
        let dim = x.shape[axis];
        let sizes: Vec<usize> = match self.ints_in(node, a, 1, "split", from_input)? {
            Some(s) => s
                .iter()
                .map(|&v| usize::try_from(v).map_err(|_| format!("split size {v}")))
                .collect::<R<_>>()?,
            None => {
                if n == 0 {
                    bail!("no outputs");
                }
                let part = dim.div_ceil(n);
                (0..n)
                    .map(|i| part.min(dim.saturating_sub(i * part)))
                    .collect()
            }
        };
        if sizes.len() != n || sizes.iter().sum::<usize>() != dim {
            bail!(
                "split sizes {sizes:?} do not cut axis {axis} of {:?} into {n} outputs",
                x.shape
            );
        }
        if rank > 4 {
            bail!("rank {rank}: NNAPI's SPLIT takes rank 4 at most");
        }
        let p = phys(&x.layout, axis);
        let pdims: Vec<u32> = self.b.operand_at(x.operand).dimensions.clone();
        let equal = sizes.iter().all(|&s| s == sizes[0]) && sizes[0] > 0;
        let mut outs = Vec::new();
        if equal {
            let ax = self.b.int(p as i32);
            let num = self.b.int(n as i32);
            let ins = [x.operand, ax, num];
            let dims = self.b.infer(OperationType::Split, &ins)?;
            let (ty, (s, z)) = match x.quant {
                Some(q) => (OperandType::TensorQuant8Asymm, q),
                None => (OperandType::TensorFloat32, (0.0, 0)),
            };
            for d in &dims {
                outs.push(self.b.temporary(ty, d, s, z));
            }
            self.b.operation(OperationType::Split, &ins, &outs);
        } else {
            let mut start = 0;
            for &s in &sizes {
                if s == 0 {
                    bail!("an empty split part is not expressible (NNAPI has no empty tensors)");
                }
                let mut begin = vec![0i32; rank];
                begin[p] = start as i32;
                let mut size: Vec<i32> = pdims.iter().map(|&d| d as i32).collect();
                size[p] = s as i32;
                let (bt, st) = (self.int_vec(&begin), self.int_vec(&size));
                outs.push(
                    self.emit(OperationType::Slice, &[x.operand, bt, st], x.quant)?
                        .0,
                );
                start += s;
            }
        }
        for (i, (&o, &s)) in outs.iter().zip(&sizes).enumerate() {
            let mut shape = x.shape.clone();
            shape[axis] = s;
            if let Some(name) = node.output.get(i).filter(|n| !n.is_empty()) {
                self.values.insert(
                    name.clone(),
                    Value::Dyn(Dyn {
                        operand: o,
                        shape,
                        layout: x.layout.clone(),
                        quant: x.quant,
                        act: None,
                    }),
                );
            }
        }
        Ok(None)
    }

    /// Slice: starts/ends/axes attributes (opsets 1–9) or inputs with steps (≥ 10), clamped as
    /// ONNX clamps them, as one STRIDED_SLICE.
    pub(super) fn slice(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["starts", "ends", "axes"])?;
        let x = self.need(node, 0)?;
        let from_input = self.opset >= 10;
        let starts = self
            .ints_in(node, a, 1, "starts", from_input)?
            .ok_or("starts are missing")?;
        let ends = self
            .ints_in(node, a, 2, "ends", from_input)?
            .ok_or("ends are missing")?;
        let shape = value_shape(&x);
        let rank = shape.len();
        let axes: Vec<usize> = match self.ints_in(node, a, 3, "axes", from_input)? {
            Some(v) => v.iter().map(|&ax| norm_axis(ax, rank)).collect::<R<_>>()?,
            None => (0..starts.len()).collect(),
        };
        let steps = if from_input {
            self.ints_in(node, a, 4, "steps", true)?
        } else {
            None
        }
        .unwrap_or(vec![1; starts.len()]);
        if [ends.len(), axes.len(), steps.len()] != [starts.len(); 3] {
            bail!("starts, ends, axes and steps of unequal lengths");
        }
        let mut begin: Vec<i64> = vec![0; rank];
        let mut end: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let mut stride = vec![1i64; rank];
        let mut end_to_front = vec![false; rank];
        for i in 0..starts.len() {
            let (ax, st) = (axes[i], steps[i]);
            let dim = shape[ax] as i64;
            if st == 0 {
                bail!("step 0");
            }
            let fix = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
            let (s, e) = (fix(starts[i]), fix(ends[i]));
            if st > 0 {
                begin[ax] = s.clamp(0, dim);
                end[ax] = e.clamp(0, dim);
            } else {
                begin[ax] = s.clamp(0, dim - 1);
                end[ax] = e.clamp(-1, dim - 1);
                end_to_front[ax] = end[ax] == -1;
            }
            stride[ax] = st;
        }
        let out: Vec<usize> = (0..rank)
            .map(|ax| {
                let (b, e, s) = (begin[ax], end[ax], stride[ax]);
                let n = if s > 0 {
                    (e - b + s - 1) / s
                } else {
                    (b - e + (-s) - 1) / (-s)
                };
                n.max(0) as usize
            })
            .collect();
        if out.contains(&0) {
            bail!("the slice is empty: NNAPI has no empty tensors");
        }
        if let Value::Const(t) = &x {
            // Fold: pick the elements.
            let mut strides_in = vec![1usize; rank];
            for i in (0..rank.saturating_sub(1)).rev() {
                strides_in[i] = strides_in[i + 1] * shape[i + 1];
            }
            let total = self.folded_count(&out, t.data.elem_size())?;
            let mut pick = Vec::with_capacity(total);
            let mut idx = vec![0usize; rank];
            for _ in 0..total {
                let off: i64 = (0..rank)
                    .map(|ax| (begin[ax] + idx[ax] as i64 * stride[ax]) * strides_in[ax] as i64)
                    .sum();
                pick.push(off as usize);
                for ax in (0..rank).rev() {
                    idx[ax] += 1;
                    if idx[ax] < out[ax] {
                        break;
                    }
                    idx[ax] = 0;
                }
            }
            self.set(
                node,
                Value::Const(Tensor {
                    dims: out,
                    data: t.data.pick(&pick),
                }),
            );
            return Ok(Some("folded".into()));
        }
        let d = self.runtime(&x)?;
        if rank > 4 {
            bail!("rank {rank}: NNAPI's STRIDED_SLICE takes rank 4 at most");
        }
        let mut pb = vec![0i32; rank];
        let mut pe = vec![0i32; rank];
        let mut ps = vec![1i32; rank];
        let mut end_mask = 0i32;
        for ax in 0..rank {
            let p = phys(&d.layout, ax);
            pb[p] = begin[ax] as i32;
            pe[p] = end[ax] as i32;
            ps[p] = stride[ax] as i32;
            if end_to_front[ax] {
                end_mask |= 1 << p;
            }
        }
        let ins = [
            d.operand,
            self.int_vec(&pb),
            self.int_vec(&pe),
            self.int_vec(&ps),
            self.b.int(0),
            self.b.int(end_mask),
            self.b.int(0),
        ];
        let (operand, _) = self.emit(OperationType::StridedSlice, &ins, d.quant)?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape: out,
                act: None,
                ..d
            }),
        );
        Ok(None)
    }

    /// Tile (repeats a constant input) and Expand (a constant shape): TILE, after a reshape
    /// to the output rank for Expand.
    pub(super) fn tile(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        a.only(&[])?;
        let x = self.need(node, 0)?;
        let spec = self
            .constant(node, 1, if op == "Tile" { "repeats" } else { "shape" })?
            .data
            .to_i64()
            .ok_or("the second input is not integer")?;
        let xs = value_shape(&x);
        let (x, reps, out) = if op == "Tile" {
            if spec.len() != xs.len() || spec.iter().any(|&r| r < 1) {
                bail!("repeats {spec:?} for a rank-{} input", xs.len());
            }
            let out: Vec<usize> = xs
                .iter()
                .zip(&spec)
                .map(|(&d, &r)| d * r as usize)
                .collect();
            (x, spec.iter().map(|&r| r as usize).collect::<Vec<_>>(), out)
        } else {
            let rank = xs.len().max(spec.len());
            let mut xd = vec![1; rank - xs.len()];
            xd.extend(&xs);
            let mut sd = vec![1i64; rank - spec.len()];
            sd.extend(&spec);
            let mut out = Vec::with_capacity(rank);
            for (&d, &s) in xd.iter().zip(&sd) {
                let s = usize::try_from(s).map_err(|_| format!("shape value {s}"))?;
                out.push(match (d, s) {
                    (d, s) if d == s || s == 1 => d,
                    (1, s) => s,
                    _ => bail!("shape {spec:?} does not broadcast {xs:?}"),
                });
            }
            let reps: Vec<usize> = out.iter().zip(&xd).map(|(&o, &d)| o / d).collect();
            let x = if xd != xs { self.reshape(&x, &xd)? } else { x };
            (x, reps, out)
        };
        element_count(&out)?;
        if reps.iter().all(|&r| r == 1) {
            self.set(node, x);
            return Ok(Some("removed (no repetition)".into()));
        }
        let d = self.runtime(&x)?;
        if d.shape.len() > 4 {
            bail!("rank {}: NNAPI's TILE takes rank 4 at most", d.shape.len());
        }
        let mut m = vec![1i32; reps.len()];
        for (ax, &r) in reps.iter().enumerate() {
            m[phys(&d.layout, ax)] = r as i32;
        }
        let mt = self.int_vec(&m);
        let (operand, _) = self.emit(OperationType::Tile, &[d.operand, mt], d.quant)?;
        self.set(
            node,
            Value::Dyn(Dyn {
                operand,
                shape: out,
                act: None,
                ..d
            }),
        );
        Ok(None)
    }

    /// Gather of a runtime tensor with constant indices: GATHER in ONNX order.
    pub(super) fn gather(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis"])?;
        let x = self.need(node, 0)?;
        let idx = match self.input(node, 1) {
            Some(Value::Const(t)) => t.clone(),
            _ => bail!("runtime indices: NNAPI takes int32 indices, ONNX's are int64 graph tensors; only constant indices are lowered"),
        };
        let x = self.runtime(&x)?;
        let rank = x.shape.len();
        if rank > 4 {
            bail!("rank {rank}: NNAPI's GATHER takes rank 4 at most");
        }
        let axis = norm_axis(a.i("axis", 0), rank)?;
        let n = x.shape[axis] as i64;
        let ix: Vec<i32> = idx
            .data
            .to_i64()
            .ok_or("indices are not integer")?
            .iter()
            .map(|&i| {
                let j = if i < 0 { i + n } else { i };
                if (0..n).contains(&j) {
                    Ok(j as i32)
                } else {
                    Err(format!("index {i} out of range for size {n}"))
                }
            })
            .collect::<R<_>>()?;
        let mut shape = x.shape[..axis].to_vec();
        shape.extend(&idx.dims);
        shape.extend(&x.shape[axis + 1..]);
        if idx.dims.is_empty() {
            // A scalar index: gather one, then drop the axis.
            let plain = self.onnx_order(&x)?;
            let ax = self.b.int(axis as i32);
            let it = self.int_vec(&ix);
            let (g, _) = self.emit(OperationType::Gather, &[plain, ax, it], x.quant)?;
            let r = self.reshape_raw(g, &shape, x.quant)?;
            let d = self.nnapi_order(r, &shape, x.quant)?;
            self.set(node, Value::Dyn(d));
            return Ok(None);
        }
        if shape.len() > 4 || rank > 4 {
            bail!(
                "rank {}: NNAPI's GATHER takes rank 4 at most",
                shape.len().max(rank)
            );
        }
        let plain = self.onnx_order(&x)?;
        let ax = self.b.int(axis as i32);
        let it = self.b.i32_tensor(
            &idx.dims.iter().map(|&d| d as u32).collect::<Vec<_>>(),
            &ix,
            0.0,
        );
        let (g, _) = self.emit(OperationType::Gather, &[plain, ax, it], x.quant)?;
        let d = self.nnapi_order(g, &shape, x.quant)?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    /// Conv / ConvTranspose / pools of a 3-D input `[N, C, L]`: the same operator on
    /// `[N, C, 1, L]` (weights `[M, C, 1, K]`), reshaped back.
    pub(super) fn one_d(&mut self, k: usize, node: &NodeProto, op: &str) -> R<Option<String>> {
        let x = self.need(node, 0)?;
        let s = value_shape(&x);
        let x4 = self.reshape(&x, &[s[0], s[1], 1, s[2]])?;
        let tag = |what: &str| format!("\u{0}1d:{k}:{what}");
        let mut n2 = node.clone();
        n2.attribute = attrs_2d(&node.attribute);
        self.values.insert(tag("x"), x4);
        n2.input[0] = tag("x");
        if matches!(op, "Conv" | "ConvTranspose") {
            let w = self.constant(node, 1, "weight")?;
            if w.dims.len() != 3 {
                bail!("weight shape {:?} for a 1-D input", w.dims);
            }
            let dims = vec![w.dims[0], w.dims[1], 1, w.dims[2]];
            self.values
                .insert(tag("w"), Value::Const(Tensor { dims, data: w.data }));
            n2.input[1] = tag("w");
        }
        n2.output = vec![tag("y")];
        let note = self.node(k, &n2)?;
        let y = self.values.remove(&tag("y")).ok_or("no 2-D result")?;
        let ys = value_shape(&y);
        let out = self.reshape(&y, &[ys[0], ys[1], ys[3]])?;
        self.set(node, out);
        Ok(Some(match note {
            Some(n) => format!("as 2-D with a unit height; {n}"),
            None => "as 2-D with a unit height".into(),
        }))
    }

    /// ConvTranspose (group 1, no dilation): TRANSPOSE_CONV_2D with explicit padding.
    pub(super) fn conv_transpose(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "output_padding",
            "output_shape",
            "pads",
            "strides",
        ])?;
        if a.i("group", 1) != 1 {
            bail!(
                "group {}: NNAPI's TRANSPOSE_CONV_2D has no groups",
                a.i("group", 1)
            );
        }
        if let Some(d) = a.ints("dilations").filter(|d| d.iter().any(|&v| v != 1)) {
            bail!("dilations {d:?}: NNAPI's TRANSPOSE_CONV_2D has no dilation");
        }
        if a.get("output_shape").is_some() {
            bail!("output_shape is not supported (pads give the output size)");
        }
        if a.s("auto_pad").is_some_and(|s| s != "NOTSET") {
            bail!("auto_pad is not supported for ConvTranspose");
        }
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        self.rank4(&x)?;
        let w = self.constant(node, 1, "weight")?;
        let Some(wv) = w.f32s() else {
            bail!("the weight is not float32")
        };
        if w.dims.len() != 4 || w.dims[0] != x.shape[1] {
            bail!(
                "weight shape {:?} for {} input channels",
                w.dims,
                x.shape[1]
            );
        }
        let (c, m, kh, kw) = (w.dims[0], w.dims[1], w.dims[2], w.dims[3]);
        if let Some(ks) = a
            .ints("kernel_shape")
            .filter(|ks| ks[..] != [kh as i64, kw as i64])
        {
            bail!("kernel_shape {ks:?} disagrees with the weight's {kh}x{kw}");
        }
        // ONNX [C, M, kh, kw] → NNAPI [M, kh, kw, C].
        let mut f = vec![0f32; m * kh * kw * c];
        for ci in 0..c {
            for mo in 0..m {
                for y in 0..kh {
                    for xx in 0..kw {
                        f[((mo * kh + y) * kw + xx) * c + ci] =
                            wv[((ci * m + mo) * kh + y) * kw + xx];
                    }
                }
            }
        }
        let bias = match self.input(node, 2) {
            None => vec![0.0; m],
            Some(_) => match self.constant(node, 2, "bias")?.f32s() {
                Some(v) if v.len() == m => v.to_vec(),
                _ => bail!("bias is not [{m}] float32"),
            },
        };
        let strides = a.ints("strides").unwrap_or(vec![1, 1]);
        let pads = a.ints("pads").unwrap_or(vec![0; 4]);
        if strides.len() != 2
            || strides.iter().any(|&s| s < 1)
            || pads.len() != 4
            || pads.iter().any(|&p| p < 0)
        {
            bail!("strides {strides:?} / pads {pads:?} not two positive strides and four pads");
        }
        // ONNX's output is the full transposed convolution cropped by `pads`, `output_padding`
        // more at the end: the same as NNAPI's explicit padding with that much less at the end.
        let op = a.ints("output_padding").unwrap_or(vec![0, 0]);
        if op.len() != 2 || op.iter().any(|&v| v < 0) {
            bail!("output_padding {op:?}: two non-negative values expected");
        }
        // Beyond the end pads the added rows and columns get no input: the bias only, added
        // after a zero PAD of the bias-free result.
        let extra = [(op[0] - pads[2]).max(0), (op[1] - pads[3]).max(0)];
        let pads = [
            pads[0],
            pads[1],
            (pads[2] - op[0]).max(0),
            (pads[3] - op[1]).max(0),
        ];
        let late_bias = extra != [0, 0];
        let bias = if late_bias { vec![0.0; m] } else { bias };
        let ft = self
            .b
            .f32_tensor(&[m as u32, kh as u32, kw as u32, c as u32], &f);
        let bt = self.b.f32_tensor(&[m as u32], &bias);
        let mut ins = vec![x.operand, ft, bt];
        for v in [pads[1], pads[3], pads[0], pads[2], strides[1], strides[0]] {
            ins.push(self.b.int(v as i32));
        }
        let act = self.act();
        ins.push(act);
        ins.push(self.bool_scalar(false));
        let d = self.emit_image(OperationType::TransposeConv2d, &ins, None, Some(act))?;
        if !late_bias {
            self.set(node, Value::Dyn(d));
            return Ok(None);
        }
        let p = [0, 0, 0, extra[0] as i32, 0, extra[1] as i32, 0, 0];
        let pt = self.b.i32_tensor(&[4, 2], &p, 0.0);
        let (padded, _) = self.emit(OperationType::Pad, &[d.operand, pt], None)?;
        let real_bias = match self.input(node, 2) {
            None => vec![0.0; m],
            Some(_) => self
                .constant(node, 2, "bias")?
                .f32s()
                .unwrap_or_default()
                .to_vec(),
        };
        let bt = self.b.f32_tensor(&[1, 1, 1, m as u32], &real_bias);
        let act = self.act();
        let y = self.emit_image(OperationType::Add, &[padded, bt, act], None, Some(act))?;
        self.set(node, Value::Dyn(y));
        Ok(None)
    }
}

/// The slope of a PRelu over an input of rank `rank` viewed at rank `view` (5-D inputs are
/// viewed as `[N, C, rest]`: a per-channel slope `[C, 1, 1, 1]` becomes `[C, 1]`).
fn slope_view(slope: &Value, rank: usize, view: usize) -> R<Value> {
    if rank == view {
        return Ok(slope.clone());
    }
    let s = value_shape(slope);
    let Value::Const(t) = slope else {
        bail!("a runtime slope for a rank-{rank} input is not supported");
    };
    let mut full = vec![1; rank - s.len()];
    full.extend(&s);
    if full[0] != 1 || full[2..].iter().any(|&d| d != 1) {
        bail!("slope of shape {s:?}: only one value or one per channel for a rank-{rank} input");
    }
    Ok(Value::Const(Tensor {
        dims: vec![full[1], 1],
        data: t.data.clone(),
    }))
}

/// The ONNX shape of operand dimensions `dims` laid out as `layout`.
fn onnx_shape_of(dims: &[u32], layout: &EdgeLayout) -> Vec<usize> {
    if *layout == EdgeLayout::Nhwc {
        onnx_shape(dims)
    } else {
        dims.iter().map(|&d| d as usize).collect()
    }
}

impl Lowering<'_> {
    /// Gemm / MatMul of 2-D tensors where B (or a transposed A) is a runtime tensor:
    /// FULLY_CONNECTED with runtime weights (B transposed to [N, K] by TRANSPOSE), then
    /// α and β·C as MUL and ADD.
    pub(super) fn gemm_runtime(
        &mut self,
        node: &NodeProto,
        a: &Attrs,
        matmul: bool,
    ) -> R<Option<String>> {
        let x = self.need(node, 0)?;
        let mut x = self.runtime(&x)?;
        let bv = self.need(node, 1)?;
        let mut b = self.runtime(&bv)?;
        if x.quant.is_some() || b.quant.is_some() {
            bail!("a quantized Gemm outside a QDQ pattern is not supported");
        }
        if x.shape.len() != 2 || b.shape.len() != 2 {
            bail!("shapes {:?} and {:?}: only 2-D operands", x.shape, b.shape);
        }
        if !matmul && a.i("transA", 0) != 0 {
            x = self.transpose_dyn(&x, &[1, 0])?;
        }
        if matmul || a.i("transB", 0) == 0 {
            b = self.transpose_dyn(&b, &[1, 0])?;
        }
        let (kk, n) = (b.shape[1], b.shape[0]);
        if x.shape[1] != kk {
            bail!("A has {} columns, B {kk} rows", x.shape[1]);
        }
        let zeros = self.b.f32_tensor(&[n as u32], &vec![0.0; n]);
        let act = self.act();
        let (mut operand, dims) = self.emit(
            OperationType::FullyConnected,
            &[x.operand, b.operand, zeros, act],
            None,
        )?;
        let alpha = if matmul { 1.0 } else { a.f("alpha", 1.0) };
        if alpha != 1.0 {
            let s = self.b.f32_tensor(&[1], &[alpha]);
            let act = self.act();
            operand = self.emit(OperationType::Mul, &[operand, s, act], None)?.0;
        }
        let mut y = Dyn {
            operand,
            shape: onnx_shape(&dims),
            layout: EdgeLayout::Same,
            quant: None,
            act: None,
        };
        let beta = a.f("beta", 1.0);
        if !matmul && beta != 0.0 && self.input(node, 2).is_some() {
            let c = self.need(node, 2)?;
            let c = if beta == 1.0 {
                c
            } else if let Value::Const(t) | Value::QConst(t, ..) = &c {
                let t = match &c {
                    Value::QConst(t, s, z) => dequantized(t, *s, *z),
                    _ => t.clone(),
                };
                let v: Vec<f32> = t
                    .f32s()
                    .ok_or("C is not float32")?
                    .iter()
                    .map(|&v| v * beta)
                    .collect();
                Value::Const(Tensor {
                    dims: t.dims,
                    data: Data::F32(v),
                })
            } else {
                let d = self.runtime(&c)?;
                let s = self.b.f32_tensor(&[1], &[beta]);
                let act = self.act();
                let (o, _) = self.emit(OperationType::Mul, &[d.operand, s, act], None)?;
                Value::Dyn(Dyn {
                    operand: o,
                    act: None,
                    ..d
                })
            };
            let cy = self.broadcast_any(&c, 2)?;
            let act = self.act();
            let (o, dims) = self.emit(OperationType::Add, &[y.operand, cy.operand, act], None)?;
            if onnx_shape(&dims) != y.shape {
                bail!(
                    "C of shape {:?} does not broadcast to {:?}",
                    value_shape(&c),
                    y.shape
                );
            }
            y = Dyn {
                operand: o,
                act: Some(act),
                ..y
            };
        }
        self.set(node, Value::Dyn(y));
        Ok(None)
    }
}

impl Lowering<'_> {
    /// Clip to bounds that are no fused activation: MINIMUM and MAXIMUM with constants.
    pub(super) fn clip_general(&mut self, node: &NodeProto, lo: f32, hi: f32) -> R<Option<String>> {
        if lo > hi || lo.is_nan() || hi.is_nan() {
            bail!("Clip({lo}, {hi}): the bounds are not ordered");
        }
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        let mut operand = x.operand;
        if hi.is_finite() {
            let h = self.b.f32_tensor(&[1], &[hi]);
            operand = self.emit(OperationType::Minimum, &[operand, h], None)?.0;
        }
        if lo.is_finite() {
            let l = self.b.f32_tensor(&[1], &[lo]);
            operand = self.emit(OperationType::Maximum, &[operand, l], None)?.0;
        }
        self.set(node, self.same_as(&x, operand));
        Ok(None)
    }

    /// Shrink with bias = lambd: relu(x − λ) − relu(−x − λ), which is x − λ above λ,
    /// x + λ below −λ and 0 between.
    pub(super) fn shrink(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["bias", "lambd"])?;
        let (bias, lambd) = (a.f("bias", 0.0), a.f("lambd", 0.5));
        if bias != lambd {
            bail!(
                "bias {bias} ≠ lambd {lambd}: only the soft-shrink form (bias = lambd) is lowered"
            );
        }
        let x = self.need(node, 0)?;
        let x = self.float(&x)?;
        let l = self.b.f32_tensor(&[1], &[lambd]);
        let act = self.b.int(FusedActivationFunc::Relu.raw());
        let (up, _) = self.emit(OperationType::Sub, &[x.operand, l, act], None)?;
        let (neg, _) = self.emit(OperationType::Neg, &[x.operand], None)?;
        let l = self.b.f32_tensor(&[1], &[lambd]);
        let act = self.b.int(FusedActivationFunc::Relu.raw());
        let (down, _) = self.emit(OperationType::Sub, &[neg, l, act], None)?;
        let act = self.act();
        let (operand, _) = self.emit(OperationType::Sub, &[up, down, act], None)?;
        self.set(node, self.same_as(&x, operand));
        Ok(None)
    }
}

impl Lowering<'_> {
    /// PixelShuffle as exported: Reshape `[N, C, H, W]` → `[N, C', r, r, H, W]`, Transpose
    /// `[0, 1, 4, 2, 5, 3]`, then Reshapes. NNAPI tensors stop at rank 4, but the transposed
    /// `[N, C', H, r, W, r]` has the element order of `[N, C', H·r, W·r]`, which is what
    /// DEPTH_TO_SPACE makes once the channels are put from ONNX's CRD order into DCR order (a
    /// CHANNEL_SHUFFLE). Taken only when every use of the transposed tensor is a Reshape.
    /// `None`: not this pattern.
    pub(super) fn pixel_shuffle(
        &mut self,
        k: usize,
        node: &NodeProto,
        a: &Attrs,
    ) -> R<Option<String>> {
        let Some(Value::Dyn(d)) = self.input(node, 0).cloned() else {
            return Ok(None);
        };
        if d.layout != EdgeLayout::Nhwc {
            return Ok(None);
        }
        let Ok(shape) = self.target_shape(node, a, "Reshape", d.shape.clone()) else {
            return Ok(None);
        };
        let [n, c2, r1, r2, h, w] = shape[..] else {
            return Ok(None);
        };
        if r1 != r2 || r1 < 2 || [n, c2 * r1 * r2, h, w] != d.shape[..] {
            return Ok(None);
        }
        let out = &node.output[0];
        let Some(&t) = self.consumer.get(out) else {
            return Ok(None);
        };
        let tn = &self.nodes[t];
        if !self.single_use(out)
            || t <= k
            || tn.op_type.as_deref() != Some("Transpose")
            || Attrs(&tn.attribute).ints("perm").as_deref() != Some(&[0, 1, 4, 2, 5, 3])
        {
            return Ok(None);
        }
        let Some(tout) = tn.output.first().cloned() else {
            return Ok(None);
        };
        let only_reshapes = !self.graph_outputs.contains(&tout)
            && self.nodes.iter().enumerate().all(|(i, m)| {
                !m.input.contains(&tout)
                    || (i > t
                        && m.op_type.as_deref() == Some("Reshape")
                        && m.input.iter().position(|x| x == &tout) == Some(0))
            });
        if !only_reshapes {
            return Ok(None);
        }
        let r = r1;
        let src = if c2 > 1 {
            self.channel_permutation(&d, (c2, r * r))?
        } else {
            d.clone()
        };
        let bs = self.b.int(r as i32);
        let y = self.emit_image(
            OperationType::DepthToSpace,
            &[src.operand, bs],
            d.quant,
            None,
        )?;
        self.values.insert(tout, Value::Dyn(y));
        self.absorbed.insert(t);
        Ok(Some(format!(
            "PixelShuffle with Transpose node {t}: DEPTH_TO_SPACE (the 6-D view kept as its 4-D reshape)"
        )))
    }
}

/// The numpy broadcast of two shapes (checked by the operation's own shape inference too).
pub(super) fn broadcast_shape(a: &[usize], b: &[usize]) -> R<Vec<usize>> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(format!(
                "shapes {a:?} and {b:?} do not broadcast ({x} vs {y})"
            )),
        })
        .collect()
}

impl Lowering<'_> {
    /// A node with an integer runtime input (an int64 or int32 graph input, held as
    /// TENSOR_INT32): Gather by runtime indices and integer Add/Sub/Mul are lowered; every
    /// other use is refused, naming what NNAPI lacks.
    pub(super) fn int_node(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        let at: Vec<usize> = (0..node.input.len())
            .filter(|&k| self.ints.contains_key(&node.input[k]))
            .collect();
        match op {
            "Gather" if at == [1] => self.gather_runtime(node, a),
            "Add" | "Sub" | "Mul" if node.input.len() == 2 => self.int_binary(node, a, op),
            "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
                self.compare(node, a, op)
            }
            "Not" | "And" | "Or" | "Xor" => self.logical(node, a, op),
            "Where" => self.where_(node, a),
            "ArgMax" | "ArgMin" => self.arg(node, a, op),
            "Cast" => self.cast(node, a),
            "Expand" | "Reshape" | "Tile" | "ConstantOfShape" | "Range" | "OneHot" | "TopK"
            | "Resize" | "Upsample" | "Slice" | "Pad" => bail!(
                "input {} is a runtime shape, count or bound: NNAPI 1.3 has no operation whose \
                 output shape is a runtime value",
                at[0]
            ),
            _ if op.contains("Sequence") => {
                bail!("a sequence operator: sequence tensors are not supported")
            }
            _ => bail!(
                "input {} is an integer runtime tensor: NNAPI has no int64, and integer tensors \
                 and boolean tensors are lowered only as Gather indices, in Add/Sub/Mul, the \
                 comparisons, logical operators, Where, ArgMax/ArgMin and Cast",
                at[0]
            ),
        }
    }

    /// Gather with runtime indices: GATHER in ONNX order. NNAPI's GATHER takes indices in
    /// `[0, n)`; a negative ONNX index is refused at execution by its range check.
    fn gather_runtime(&mut self, node: &NodeProto, a: &Attrs) -> R<Option<String>> {
        a.only(&["axis"])?;
        let x = self.need(node, 0)?;
        let (idx, idims) = self.ints[&node.input[1]].clone();
        let x = self.runtime(&x)?;
        let rank = x.shape.len();
        let axis = norm_axis(a.i("axis", 0), rank)?;
        let mut shape = x.shape[..axis].to_vec();
        shape.extend(&idims);
        shape.extend(&x.shape[axis + 1..]);
        if shape.is_empty() || shape.len() > 4 || rank > 4 {
            bail!(
                "rank {}: NNAPI's GATHER takes ranks 1 to 4",
                shape.len().max(rank)
            );
        }
        let plain = self.onnx_order(&x)?;
        let ax = self.b.int(axis as i32);
        let (mut g, _) = self.emit(OperationType::Gather, &[plain, ax, idx], x.quant)?;
        if idims.is_empty() {
            // A scalar index is held as [1]: drop that axis.
            g = self.reshape_raw(g, &shape, x.quant)?;
        }
        let d = self.nnapi_order(g, &shape, x.quant)?;
        self.set(node, Value::Dyn(d));
        Ok(None)
    }

    /// Add/Sub/Mul of integer tensors (one may be an integer constant) as the TENSOR_INT32
    /// operation. The inputs are int64 narrowed to int32 by the caller, so a result past
    /// int32 wraps where ONNX's int64 would not.
    fn int_binary(&mut self, node: &NodeProto, a: &Attrs, op: &str) -> R<Option<String>> {
        if self.opset < 7 {
            a.only(&["broadcast", "axis"])?;
            if a.i("broadcast", 0) != 0 {
                bail!("the opset 1–6 broadcast attribute on integer tensors is not supported");
            }
        } else {
            a.only(&[])?;
        }
        let mut operands = Vec::new();
        let mut shapes = Vec::new();
        for k in 0..2 {
            if let Some((o, s)) = self.ints.get(&node.input[k]).cloned() {
                operands.push(o);
                shapes.push(s);
                continue;
            }
            let t = self.constant(node, k, "integer operand")?;
            let v: Vec<i32> = t
                .data
                .to_i64()
                .ok_or("a non-integer operand beside an integer tensor")?
                .iter()
                .map(|&x| i32::try_from(x).map_err(|_| format!("constant {x} is outside int32")))
                .collect::<R<_>>()?;
            let dims: Vec<u32> = if t.dims.is_empty() {
                vec![1]
            } else {
                t.dims.iter().map(|&d| d as u32).collect()
            };
            operands.push(self.b.i32_tensor(&dims, &v, 0.0));
            shapes.push(t.dims.clone());
        }
        let shape = broadcast_shape(&shapes[0], &shapes[1])?;
        let ty = match op {
            "Add" => OperationType::Add,
            "Sub" => OperationType::Sub,
            _ => OperationType::Mul,
        };
        let act = self.act();
        let ins = [operands[0], operands[1], act];
        let dims = self
            .b
            .infer(ty, &ins)?
            .into_iter()
            .next()
            .ok_or("no output")?;
        let out = self.b.temporary(OperandType::TensorInt32, &dims, 0.0, 0);
        self.b.operation(ty, &ins, &[out]);
        let name = node.output.first().ok_or("no output")?.clone();
        self.ints.insert(name, (out, shape));
        Ok(None)
    }
}

impl Lowering<'_> {
    /// MaxPool with dilations, which NNAPI's MAX_POOL_2D lacks: the window's maximum is
    /// separable, so after PAD_V2 with −∞ (padding never wins a maximum) it is the MAXIMUM of
    /// `kh` STRIDED_SLICEs along the height (row `i·dh`, step `sh`), then of `kw` along the
    /// width — exact, in `kh + kw` slices rather than `kh·kw`.
    pub(super) fn dilated_max_pool(&mut self, a: &Attrs, x: Dyn, dil: &[i64]) -> R<Dyn> {
        let ks = a.ints("kernel_shape").ok_or("kernel_shape is required")?;
        let strides = a.ints("strides").unwrap_or(vec![1, 1]);
        let ok =
            |v: &[i64]| v.len() == 2 && v.iter().all(|&s| (1..=i64::from(i32::MAX)).contains(&s));
        if !ok(&ks) || !ok(&strides) || !ok(dil) {
            bail!("kernel_shape {ks:?}, strides {strides:?}, dilations {dil:?}: two positive values each expected");
        }
        let [n, c, h, w] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
        let k = [ks[0] as usize, ks[1] as usize];
        let s = [strides[0] as usize, strides[1] as usize];
        let d = [dil[0] as usize, dil[1] as usize];
        let eff: Vec<usize> = (0..2)
            .map(|i| (k[i] - 1).checked_mul(d[i]).and_then(|v| v.checked_add(1)))
            .collect::<Option<_>>()
            .ok_or("the dilated kernel's extent overflows")?;
        let p = pads(a, &x.shape[2..4], &eff, &strides)?;
        let padded = [
            h + p[0] as usize + p[2] as usize,
            w + p[1] as usize + p[3] as usize,
        ];
        let mut out = [0usize; 2];
        for i in 0..2 {
            if padded[i] < eff[i] {
                bail!(
                    "the dilated kernel ({}) is larger than the padded input ({})",
                    eff[i],
                    padded[i]
                );
            }
            let span = padded[i] - eff[i];
            if a.i("ceil_mode", 0) != 0 && !span.is_multiple_of(s[i]) {
                bail!("ceil_mode 1 changes the output size here; not supported");
            }
            out[i] = span / s[i] + 1;
        }
        let mut v = x.operand;
        if p.iter().any(|&q| q != 0) {
            let pad = self
                .b
                .i32_tensor(&[4, 2], &[0, 0, p[0], p[2], p[1], p[3], 0, 0], 0.0);
            let low = self.b.float(f32::NEG_INFINITY);
            v = self.emit(OperationType::PadV2, &[v, pad, low], None)?.0;
        }
        // Height, then width: slice `t` of axis `ax` (1 or 2, NHWC) starts at t·d.
        let mut extent = [n, padded[0], padded[1], c];
        for (i, ax) in [(0usize, 1usize), (1, 2)] {
            if k[i] == 1 && s[i] == 1 && extent[ax] == out[i] {
                continue;
            }
            let mut acc = None;
            for t in 0..k[i] {
                let mut begin = [0i32; 4];
                let mut end = extent.map(|e| e as i32);
                let mut step = [1i32; 4];
                begin[ax] = (t * d[i]) as i32;
                end[ax] = (t * d[i] + (out[i] - 1) * s[i] + 1) as i32;
                step[ax] = s[i] as i32;
                let bt = self.b.i32_tensor(&[4], &begin, 0.0);
                let et = self.b.i32_tensor(&[4], &end, 0.0);
                let st = self.b.i32_tensor(&[4], &step, 0.0);
                let zero = [self.b.int(0), self.b.int(0), self.b.int(0)];
                let (sl, _) = self.emit(
                    OperationType::StridedSlice,
                    &[v, bt, et, st, zero[0], zero[1], zero[2]],
                    None,
                )?;
                acc = Some(match acc {
                    None => sl,
                    Some(m) => self.emit(OperationType::Maximum, &[m, sl], None)?.0,
                });
            }
            v = acc.ok_or("an empty kernel")?;
            extent[ax] = out[i];
        }
        Ok(Dyn {
            operand: v,
            shape: vec![n, c, out[0], out[1]],
            layout: EdgeLayout::Nhwc,
            quant: None,
            act: None,
        })
    }
}

impl Lowering<'_> {
    /// MatMul of an input of rank > 2 by a 2-D constant B (a Linear layer over a sequence):
    /// the input's leading axes folded into rows, FULLY_CONNECTED, then the leading axes back.
    /// A runtime or batched B: [`Self::matmul_batched`].
    pub(super) fn matmul_nd(&mut self, k: usize, node: &NodeProto) -> R<Option<String>> {
        let x = self.need(node, 0)?;
        let xs = value_shape(&x);
        let bs = match self.input(node, 1) {
            Some(Value::Const(t) | Value::QConst(t, ..)) if t.dims.len() == 2 => t.dims.clone(),
            _ => return self.matmul_batched(k, node),
        };
        let kk = xs[xs.len() - 1];
        let rows = element_count(&xs[..xs.len() - 1])?;
        let tag = |what: &str| format!("\u{0}matmul:{k}:{what}");
        let x2 = self.reshape(&x, &[rows, kk])?;
        self.values.insert(tag("x"), x2);
        let mut n2 = node.clone();
        n2.input[0] = tag("x");
        n2.output = vec![tag("y")];
        let note = self.node(k, &n2)?;
        let y = self.values.remove(&tag("y")).ok_or("no 2-D result")?;
        let mut out = xs[..xs.len() - 1].to_vec();
        out.push(bs[1]);
        let y = self.reshape(&y, &out)?;
        self.set(node, y);
        Ok(Some(match note {
            Some(n) => format!("as a 2-D product of the folded leading axes; {n}"),
            None => "as a 2-D product of the folded leading axes".into(),
        }))
    }

    /// A batched MatMul (`[…, M, K] × […, K, N]`, batch axes broadcast, rank ≤ 4; NNAPI 1.3
    /// has no BATCH_MATMUL): per batch, a SLICE of each side and the 2-D product (B a runtime
    /// FULLY_CONNECTED weight), then CONCATENATION of the results along the batch.
    fn matmul_batched(&mut self, k: usize, node: &NodeProto) -> R<Option<String>> {
        const MAX_BATCH: usize = 256;
        let (xv, yv) = (self.need(node, 0)?, self.need(node, 1)?);
        let (xs, ys) = (value_shape(&xv), value_shape(&yv));
        if xs.len() < 2 || ys.len() < 2 || xs.len().max(ys.len()) > 4 {
            bail!("MatMul of shapes {xs:?} and {ys:?}: ranks 2 to 4 are lowered");
        }
        let (m, kk, n) = (xs[xs.len() - 2], xs[xs.len() - 1], ys[ys.len() - 1]);
        if ys[ys.len() - 2] != kk {
            bail!("MatMul of shapes {xs:?} and {ys:?}: inner dimensions differ");
        }
        let batch = broadcast_shape(&xs[..xs.len() - 2], &ys[..ys.len() - 2])?;
        let b = element_count(&batch)?;
        if b > MAX_BATCH {
            bail!("a batch of {b} products: at most {MAX_BATCH} are lowered (one FULLY_CONNECTED each)");
        }
        // Each side as [batch, rows, cols] in ONNX order; a side whose batch axes are all 1
        // is shared by every product, any other must have the whole batch.
        let mut sides = Vec::new();
        for (v, s) in [(&xv, &xs), (&yv, &ys)] {
            let own = element_count(&s[..s.len() - 2])?;
            if own != 1 && s[..s.len() - 2] != batch[batch.len() + 2 - s.len()..] {
                bail!(
                    "MatMul of shapes {xs:?} and {ys:?}: a partly broadcast batch is not lowered"
                );
            }
            let d = self.runtime(v)?;
            if d.quant.is_some() {
                bail!("a quantized batched MatMul is not supported");
            }
            let plain = self.onnx_order(&d)?;
            let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
            let flat = self.reshape_raw(plain, &[own, r, c], None)?;
            sides.push((flat, own, r, c));
        }
        let tag = |what: String| format!("\u{0}bmm:{k}:{what}");
        let mut parts = Vec::new();
        let mut note = None;
        for i in 0..b {
            let mut names = Vec::new();
            for (j, &(flat, own, r, c)) in sides.iter().enumerate() {
                let at = if own == 1 { 0 } else { i as i32 };
                let begin = self.int_vec(&[at, 0, 0]);
                let size = self.int_vec(&[1, r as i32, c as i32]);
                let (sl, _) = self.emit(OperationType::Slice, &[flat, begin, size], None)?;
                let two = self.reshape_raw(sl, &[r, c], None)?;
                let name = tag(format!("{i}:{j}"));
                self.values.insert(
                    name.clone(),
                    Value::Dyn(Dyn {
                        operand: two,
                        shape: vec![r, c],
                        layout: EdgeLayout::Same,
                        quant: None,
                        act: None,
                    }),
                );
                names.push(name);
            }
            let mut n2 = node.clone();
            n2.input = names.clone();
            n2.output = vec![tag(format!("{i}:y"))];
            note = self.gemm(k, &n2, &Attrs(&[]), true)?;
            let y = self.values.remove(&n2.output[0]).ok_or("no 2-D product")?;
            for name in &names {
                self.values.remove(name);
            }
            let y = self.runtime(&y)?;
            let plain = self.onnx_order(&y)?;
            parts.push(self.reshape_raw(plain, &[1, m, n], None)?);
        }
        let cat = if parts.len() == 1 {
            parts[0]
        } else {
            let mut ins = parts;
            ins.push(self.b.int(0));
            self.emit(OperationType::Concatenation, &ins, None)?.0
        };
        let mut out = batch.clone();
        out.extend([m, n]);
        let r = self.reshape_raw(cat, &out, None)?;
        let d = self.nnapi_order(r, &out, None)?;
        self.set(node, Value::Dyn(d));
        Ok(Some(match note {
            Some(n) => format!("{b} 2-D products (SLICE, CONCATENATION); {n}"),
            None => format!("{b} 2-D products (SLICE, CONCATENATION)"),
        }))
    }
}
