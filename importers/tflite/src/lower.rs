//! Lowering of subgraph 0 to NNAPI operations, following TensorFlow Lite's NNAPI delegate: the
//! same NNAPI operation per builtin, with the same extra inputs (fused activation codes,
//! implicit padding codes, MEAN's axis tensor and keep_dims, FULLY_CONNECTED's keep_num_dims as
//! a RESHAPE of the 2-D result) and the same operand types (int8 activations as
//! TENSOR_QUANT8_ASYMM_SIGNED, per-channel filters as TENSOR_QUANT8_SYMM_PER_CHANNEL, float16
//! weights dequantized to float32 constants at import). The README ("TensorFlow Lite models")
//! lists every builtin and what it becomes; [`lower_operator`] has one arm per builtin.

use crate::decode::{builtin_name, Code, Decoded, Operator, Tensor, TensorType};
use crate::generated::tflite::{ActivationFunctionType, BuiltinOptions, Padding};
use crate::TfliteError;
use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, ModelBuilder, SourceType};
use nnhal_hal::{ChannelQuant, Operand, OperandLifeTime, OperandType, OperationType};

type R<T> = Result<T, String>;

macro_rules! bail {
    ($($arg:tt)*) => { return Err(format!($($arg)*)) };
}

struct Lowering<'a> {
    b: ModelBuilder,
    m: &'a Decoded,
    /// The NNAPI operand of each TensorFlow Lite tensor, once made.
    operands: Vec<Option<u32>>,
}

/// The NNAPI operand a TensorFlow Lite tensor becomes (type, dimensions, quantization).
fn describe(t: &Tensor) -> R<Operand> {
    let q = t.quant.as_ref();
    let per_tensor = |ty: OperandType| -> R<Operand> {
        let mut o = Operand::new(ty, &t.shape, OperandLifeTime::TemporaryVariable);
        match q {
            Some(q) if q.scales.len() == 1 => {
                o.scale = q.scales[0];
                o.zero_point = i32::try_from(q.zero_points[0])
                    .map_err(|_| format!("zero point {} out of range", q.zero_points[0]))?;
            }
            Some(_) => bail!("per-channel quantization of a {:?} tensor", t.ty),
            None => bail!("a {:?} tensor without quantization", t.ty),
        }
        Ok(o)
    };
    Ok(match t.ty {
        TensorType::Float32 => Operand::new(
            OperandType::TensorFloat32,
            &t.shape,
            OperandLifeTime::TemporaryVariable,
        ),
        TensorType::Int32 => {
            let mut o = Operand::new(
                OperandType::TensorInt32,
                &t.shape,
                OperandLifeTime::TemporaryVariable,
            );
            // A bias of a per-tensor quantized operation carries input × filter scale; one of
            // a per-channel filter has scale 0 (NNAPI derives each channel's).
            if let Some(q) = q.filter(|q| q.scales.len() == 1) {
                o.scale = q.scales[0];
            }
            o
        }
        TensorType::Uint8 => per_tensor(OperandType::TensorQuant8Asymm)?,
        TensorType::Int8 => match q {
            Some(q) if q.scales.len() > 1 => {
                if q.zero_points.iter().any(|&z| z != 0) {
                    bail!("a per-channel int8 tensor with nonzero zero points");
                }
                let mut o = Operand::new(
                    OperandType::TensorQuant8SymmPerChannel,
                    &t.shape,
                    OperandLifeTime::TemporaryVariable,
                );
                o.channel_quant = Some(ChannelQuant {
                    scales: q.scales.clone(),
                    channel_dim: q.dim as u32,
                });
                o
            }
            _ => per_tensor(OperandType::TensorQuant8AsymmSigned)?,
        },
        other => bail!("tensors of type {other:?} are not lowered"),
    })
}

/// NNAPI's fused activation code of TensorFlow Lite's.
fn activation(a: ActivationFunctionType) -> R<i32> {
    Ok(match a {
        ActivationFunctionType::None => 0,
        ActivationFunctionType::Relu => 1,
        ActivationFunctionType::ReluN1To1 => 2,
        ActivationFunctionType::Relu6 => 3,
        other => bail!("fused activation {other:?} has no NNAPI code"),
    })
}

/// NNAPI's implicit padding code (1 SAME, 2 VALID): both compute TensorFlow's padding.
fn padding(p: Padding) -> i32 {
    match p {
        Padding::Same => 1,
        Padding::Valid => 2,
    }
}

pub fn lower(m: &Decoded) -> Result<ImportedModel, TfliteError> {
    let mut l = Lowering {
        b: ModelBuilder::new(),
        m,
        operands: vec![None; m.tensors.len()],
    };
    let mut inputs = Vec::new();
    for &t in &m.inputs {
        let tensor = &m.tensors[t];
        if tensor.data.is_some() {
            return Err(TfliteError::Unsupported(format!(
                "graph input '{}' is a constant",
                tensor.name
            )));
        }
        let edge = edge(tensor)?;
        let o = describe(tensor)
            .map_err(|e| TfliteError::Unsupported(format!("graph input '{}': {e}", tensor.name)))?;
        let index = l.b.push(o);
        l.b.mark_input(index);
        l.operands[t] = Some(index);
        inputs.push(edge);
    }
    let mut report = Vec::new();
    let mut failed = 0;
    for (k, op) in m.operators.iter().enumerate() {
        let name = match &op.code {
            Code::Builtin(c) => builtin_name(*c),
            Code::Custom(n) => format!("custom '{n}'"),
        };
        let before = l.b.model().operations.len();
        let outcome = l.operator(op);
        let added: Vec<&str> = l.b.model().operations[before..]
            .iter()
            .map(|o| OperationType::from_raw(o.operation_type).map_or("?", |t| t.name()))
            .collect();
        match outcome {
            Ok(()) if added.is_empty() => {
                report.push(format!("operator {k} ({name}) → folded into a constant"))
            }
            Ok(()) => report.push(format!("operator {k} ({name}) → {}", added.join(" + "))),
            Err(why) => {
                failed += 1;
                report.push(format!("operator {k} ({name}) → not lowered: {why}"));
                // Placeholders for its outputs let the report go on past it.
                for &t in &op.outputs {
                    if l.operands[t].is_none() {
                        let o = describe(&m.tensors[t]).unwrap_or_else(|_| {
                            Operand::new(
                                OperandType::TensorFloat32,
                                &m.tensors[t].shape,
                                OperandLifeTime::TemporaryVariable,
                            )
                        });
                        l.operands[t] = Some(l.b.push(o));
                    }
                }
            }
        }
    }
    if failed > 0 {
        return Err(TfliteError::Operators {
            count: failed,
            report,
        });
    }
    let mut outputs = Vec::new();
    for &t in &m.outputs {
        let tensor = &m.tensors[t];
        let index = match l.operands[t] {
            Some(i)
                if l.b.operand_at(i).lifetime == OperandLifeTime::TemporaryVariable.raw()
                    && !l.b.model().output_indexes.contains(&i) =>
            {
                i
            }
            _ => {
                return Err(TfliteError::Unsupported(format!(
                    "graph output '{}' is not computed by an operator (a constant or an input)",
                    tensor.name
                )))
            }
        };
        l.b.mark_output(index);
        outputs.push(edge(tensor)?);
    }
    if m.subgraphs > 1 {
        report.push(format!(
            "subgraphs 1..{} (bodies of control flow) are not lowered",
            m.subgraphs
        ));
    }
    let model = l.b.finish();
    nnhal_hal::validate::validate_model(&model)
        .map_err(|e| TfliteError::Invalid(e.message().to_string()))?;
    Ok(ImportedModel {
        model,
        inputs,
        outputs,
        summary: report,
        class_labels: None,
    })
}

/// A graph edge: TensorFlow Lite's NHWC is NNAPI's, so only the element type is told.
fn edge(t: &Tensor) -> Result<Edge, TfliteError> {
    let source_type = match t.ty {
        TensorType::Float32 => SourceType::Float32,
        TensorType::Uint8 => SourceType::UInt8,
        TensorType::Int8 => SourceType::Int8,
        other => {
            return Err(TfliteError::Unsupported(format!(
                "graph edge '{}' of type {other:?}: only float32, uint8 and int8 edges are run",
                t.name
            )))
        }
    };
    Ok(Edge {
        name: t.name.clone(),
        shape: t.shape.iter().map(|&d| d as usize).collect(),
        layout: EdgeLayout::Same,
        source_type,
        quantized: None,
    })
}

/// Little-endian integers of an INT32 or INT64 constant.
fn ints(t: &Tensor) -> R<Vec<i64>> {
    let data = t
        .data
        .as_ref()
        .ok_or_else(|| format!("tensor '{}' must be a constant", t.name))?;
    Ok(match t.ty {
        TensorType::Int32 => data
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        TensorType::Int64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
        other => bail!("tensor '{}' is {other:?}, not an integer constant", t.name),
    })
}

fn to_i32(v: &[i64]) -> R<Vec<i32>> {
    v.iter()
        .map(|&x| i32::try_from(x).map_err(|_| format!("value {x} does not fit int32")))
        .collect()
}

impl Lowering<'_> {
    fn tensor(&self, t: usize) -> &Tensor {
        &self.m.tensors[t]
    }

    /// Input `i` of an operator (required).
    fn input(&self, op: &Operator, i: usize) -> R<usize> {
        match op.inputs.get(i) {
            Some(Some(t)) => Ok(*t),
            Some(None) => bail!("input {i} is omitted"),
            None => bail!("input {i} is missing ({} given)", op.inputs.len()),
        }
    }

    fn output(&self, op: &Operator, i: usize) -> R<usize> {
        op.outputs
            .get(i)
            .copied()
            .ok_or_else(|| format!("output {i} is missing"))
    }

    /// The operand of a tensor: made from its buffer when it is a constant.
    fn operand(&mut self, t: usize) -> R<u32> {
        if let Some(o) = self.operands[t] {
            return Ok(o);
        }
        let tensor = self.tensor(t);
        let Some(data) = &tensor.data else {
            bail!(
                "tensor {t} '{}' is read before any operator writes it",
                tensor.name
            );
        };
        if tensor.ty == TensorType::Float16 {
            bail!(
                "float16 tensor '{}' reaches an operator other than DEQUANTIZE",
                tensor.name
            );
        }
        let mut o = describe(tensor).map_err(|e| format!("tensor '{}': {e}", tensor.name))?;
        if tensor.shape.is_empty() {
            // A rank-0 constant is NNAPI's one-element tensor (rank 0 means "unknown" there).
            o.dimensions = vec![1];
        }
        let data = data.clone();
        let index = self.b.constant_operand(o, &data);
        self.operands[t] = Some(index);
        Ok(index)
    }

    /// The operand an operator writes for tensor `t`.
    fn result(&mut self, t: usize) -> R<u32> {
        if self.operands[t].is_some() || self.tensor(t).data.is_some() {
            bail!(
                "output tensor {t} '{}' is written twice",
                self.tensor(t).name
            );
        }
        let tensor = self.tensor(t);
        if tensor.shape.is_empty() || tensor.shape.contains(&0) {
            bail!(
                "output tensor '{}' has shape {:?}: dynamic or rank-0 results are not lowered",
                tensor.name,
                tensor.shape
            );
        }
        let o = describe(tensor).map_err(|e| format!("tensor '{}': {e}", tensor.name))?;
        let index = self.b.push(o);
        self.operands[t] = Some(index);
        Ok(index)
    }

    /// A temporary like `like` with other dimensions (and optionally another type).
    fn temp_like(&mut self, like: u32, dims: &[u32], ty: Option<OperandType>) -> u32 {
        let mut o = self.b.operand_at(like).clone();
        o.dimensions = dims.to_vec();
        o.lifetime = OperandLifeTime::TemporaryVariable.raw();
        o.location = Default::default();
        if let Some(ty) = ty {
            o.operand_type = ty.raw();
            o.scale = 0.0;
            o.zero_point = 0;
            o.channel_quant = None;
        }
        self.b.push(o)
    }

    fn is_quantized(&self, t: usize) -> bool {
        matches!(self.tensor(t).ty, TensorType::Int8 | TensorType::Uint8)
    }

    fn bool_scalar(&mut self, v: bool) -> u32 {
        self.b.constant(OperandType::Bool, &[], &[u8::from(v)])
    }

    /// The bias of a convolution: the file's, or zeros when it omits one (as the delegate
    /// supplies), in the type and scale the filter calls for.
    fn bias(&mut self, op: &Operator, input: usize, filter: usize, channels: u32) -> R<u32> {
        if let Some(Some(t)) = op.inputs.get(2) {
            return self.operand(*t);
        }
        if self.is_quantized(input) {
            let f = self.tensor(filter);
            let scale = match (&self.tensor(input).quant, &f.quant) {
                (Some(i), Some(fq)) if fq.scales.len() == 1 => i.scales[0] * fq.scales[0],
                _ => 0.0,
            };
            let zeros = vec![0i32; channels as usize];
            Ok(self.b.i32_tensor(&[channels], &zeros, scale))
        } else {
            Ok(self
                .b
                .f32_tensor(&[channels], &vec![0.0; channels as usize]))
        }
    }

    fn op(&mut self, ty: OperationType, inputs: &[u32], outputs: &[u32]) {
        self.b.operation(ty, inputs, outputs);
    }

    /// Lowers one operator.
    fn operator(&mut self, op: &Operator) -> R<()> {
        let code = match &op.code {
            Code::Builtin(c) => *c,
            Code::Custom(n) => {
                bail!("custom operator '{n}': the NNAPI delegate sends no custom operators")
            }
        };
        lower_operator(self, code, op)
    }
}

/// What one builtin becomes: one arm per builtin, mirroring the delegate's mapping.
fn lower_operator(l: &mut Lowering, code: i32, op: &Operator) -> R<()> {
    use OperationType as T;
    let opts = op.options.as_ref();
    let name = builtin_name(code);
    match name.as_str() {
        "CONV_2D" => {
            let Some(BuiltinOptions::Conv2DOptions(o)) = opts else {
                bail!("no Conv2DOptions")
            };
            let (x, f) = (l.input(op, 0)?, l.input(op, 1)?);
            let channels = l.tensor(f).shape.first().copied().unwrap_or(0);
            let ins = [l.operand(x)?, l.operand(f)?];
            let bias = l.bias(op, x, f, channels)?;
            let mut args = vec![
                ins[0],
                ins[1],
                bias,
                l.b.int(padding(o.padding)),
                l.b.int(o.stride_w),
                l.b.int(o.stride_h),
                l.b.int(activation(o.fused_activation_function)?),
            ];
            if o.dilation_w_factor != 1 || o.dilation_h_factor != 1 {
                args.push(l.bool_scalar(false));
                args.push(l.b.int(o.dilation_w_factor));
                args.push(l.b.int(o.dilation_h_factor));
            }
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::Conv2d, &args, &[y]);
        }
        "DEPTHWISE_CONV_2D" => {
            let Some(BuiltinOptions::DepthwiseConv2DOptions(o)) = opts else {
                bail!("no DepthwiseConv2DOptions")
            };
            let (x, f) = (l.input(op, 0)?, l.input(op, 1)?);
            let channels = l.tensor(f).shape.get(3).copied().unwrap_or(0);
            let in_channels = l.tensor(x).shape.get(3).copied().unwrap_or(0);
            if in_channels == 0 || channels % in_channels != 0 {
                bail!(
                    "filter channels {channels} are not a multiple of input channels {in_channels}"
                );
            }
            let ins = [l.operand(x)?, l.operand(f)?];
            let bias = l.bias(op, x, f, channels)?;
            // The multiplier follows from the shapes (the option is redundant and may be 0).
            let mut args = vec![
                ins[0],
                ins[1],
                bias,
                l.b.int(padding(o.padding)),
                l.b.int(o.stride_w),
                l.b.int(o.stride_h),
                l.b.int((channels / in_channels) as i32),
                l.b.int(activation(o.fused_activation_function)?),
            ];
            if o.dilation_w_factor != 1 || o.dilation_h_factor != 1 {
                args.push(l.bool_scalar(false));
                args.push(l.b.int(o.dilation_w_factor));
                args.push(l.b.int(o.dilation_h_factor));
            }
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::DepthwiseConv2d, &args, &[y]);
        }
        "FULLY_CONNECTED" => {
            let o = match opts {
                Some(BuiltinOptions::FullyConnectedOptions(o)) => (**o).clone(),
                _ => Default::default(),
            };
            if o.weights_format
                != crate::generated::tflite::FullyConnectedOptionsWeightsFormat::Default
            {
                bail!("weights format {:?} is not lowered", o.weights_format);
            }
            let (x, w) = (l.input(op, 0)?, l.input(op, 1)?);
            if l.tensor(x).ty == TensorType::Float32 && l.tensor(w).ty != TensorType::Float32 {
                bail!("hybrid (quantized weights, float input) is not lowered");
            }
            if l.tensor(w)
                .quant
                .as_ref()
                .is_some_and(|q| q.scales.len() > 1)
            {
                bail!("per-channel weights: NNAPI's FULLY_CONNECTED takes per-tensor weights only");
            }
            let units = l.tensor(w).shape.first().copied().unwrap_or(0);
            let ins = [l.operand(x)?, l.operand(w)?];
            let bias = l.bias(op, x, w, units)?;
            let act = l.b.int(activation(o.fused_activation_function)?);
            let out_t = l.output(op, 0)?;
            let out_shape = l.tensor(out_t).shape.clone();
            let y = l.result(out_t)?;
            if out_shape.len() == 2 {
                l.op(T::FullyConnected, &[ins[0], ins[1], bias, act], &[y]);
            } else {
                // keep_num_dims: NNAPI's result is [rows, units]; a RESHAPE restores the
                // leading dimensions.
                let rows: u32 = out_shape.iter().rev().skip(1).product();
                let flat = l.temp_like(y, &[rows, units], None);
                l.op(T::FullyConnected, &[ins[0], ins[1], bias, act], &[flat]);
                let dims: Vec<i32> = out_shape.iter().map(|&d| d as i32).collect();
                let shape = l.b.i32_tensor(&[dims.len() as u32], &dims, 0.0);
                l.op(T::Reshape, &[flat, shape], &[y]);
            }
        }
        "ADD" | "MUL" | "SUB" | "DIV" => {
            let act = match opts {
                Some(BuiltinOptions::AddOptions(o)) => o.fused_activation_function,
                Some(BuiltinOptions::MulOptions(o)) => o.fused_activation_function,
                Some(BuiltinOptions::SubOptions(o)) => o.fused_activation_function,
                Some(BuiltinOptions::DivOptions(o)) => o.fused_activation_function,
                _ => ActivationFunctionType::None,
            };
            let ty = match name.as_str() {
                "ADD" => T::Add,
                "MUL" => T::Mul,
                "SUB" => T::Sub,
                _ => T::Div,
            };
            let (a, b) = (l.input(op, 0)?, l.input(op, 1)?);
            if ty == T::Div && l.is_quantized(a) {
                bail!("NNAPI's DIV has no quantized form (the delegate keeps it on the CPU)");
            }
            let args = [l.operand(a)?, l.operand(b)?, l.b.int(activation(act)?)];
            let y = l.result(l.output(op, 0)?)?;
            l.op(ty, &args, &[y]);
        }
        "AVERAGE_POOL_2D" | "MAX_POOL_2D" => {
            let Some(BuiltinOptions::Pool2DOptions(o)) = opts else {
                bail!("no Pool2DOptions")
            };
            let x = l.operand(l.input(op, 0)?)?;
            let args = [
                x,
                l.b.int(padding(o.padding)),
                l.b.int(o.stride_w),
                l.b.int(o.stride_h),
                l.b.int(o.filter_width),
                l.b.int(o.filter_height),
                l.b.int(activation(o.fused_activation_function)?),
            ];
            let y = l.result(l.output(op, 0)?)?;
            let ty = if name == "MAX_POOL_2D" {
                T::MaxPool2d
            } else {
                T::AveragePool2d
            };
            l.op(ty, &args, &[y]);
        }
        "MEAN" => {
            let keep = match opts {
                Some(BuiltinOptions::ReducerOptions(o)) => o.keep_dims,
                _ => false,
            };
            let (x_t, axes_t, out_t) = (l.input(op, 0)?, l.input(op, 1)?, l.output(op, 0)?);
            let axes = to_i32(&ints(l.tensor(axes_t))?)?;
            let x = l.operand(x_t)?;
            let axes = l.b.i32_tensor(&[axes.len() as u32], &axes, 0.0);
            let keep = l.b.int(i32::from(keep));
            let y = l.result(out_t)?;
            let (xi, yo) = (l.b.operand_at(x).clone(), l.b.operand_at(y).clone());
            if l.is_quantized(x_t) && (xi.scale != yo.scale || xi.zero_point != yo.zero_point) {
                // NNAPI's quantized MEAN keeps its input's quantization: a mean between two
                // scales goes through float32, as the delegate does.
                let xf = l.temp_like(x, &xi.dimensions, Some(OperandType::TensorFloat32));
                l.op(T::Dequantize, &[x], &[xf]);
                let yf = l.temp_like(y, &yo.dimensions, Some(OperandType::TensorFloat32));
                l.op(T::Mean, &[xf, axes, keep], &[yf]);
                l.op(T::Quantize, &[yf], &[y]);
            } else {
                l.op(T::Mean, &[x, axes, keep], &[y]);
            }
        }
        "RESHAPE" | "SQUEEZE" => {
            // Both are a reshape to the output's static shape (SQUEEZE's dimensions are in it).
            let x = l.operand(l.input(op, 0)?)?;
            let out_t = l.output(op, 0)?;
            let dims: Vec<i32> = l.tensor(out_t).shape.iter().map(|&d| d as i32).collect();
            let shape = l.b.i32_tensor(&[dims.len() as u32], &dims, 0.0);
            let y = l.result(out_t)?;
            l.op(T::Reshape, &[x, shape], &[y]);
        }
        "SOFTMAX" => {
            let beta = match opts {
                Some(BuiltinOptions::SoftmaxOptions(o)) => o.beta,
                _ => 1.0,
            };
            let x_t = l.input(op, 0)?;
            let rank = l.tensor(x_t).shape.len();
            let x = l.operand(x_t)?;
            let mut args = vec![x, l.b.float(beta)];
            if rank != 2 && rank != 4 {
                args.push(l.b.int(-1));
            }
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::Softmax, &args, &[y]);
        }
        "CONCATENATION" => {
            let Some(BuiltinOptions::ConcatenationOptions(o)) = opts else {
                bail!("no ConcatenationOptions")
            };
            if o.fused_activation_function != ActivationFunctionType::None {
                bail!("a fused activation on CONCATENATION is not lowered");
            }
            let out_t = l.output(op, 0)?;
            let rank = l.tensor(out_t).shape.len() as i32;
            if o.axis < -rank || o.axis >= rank {
                bail!("axis {} out of range for rank {rank}", o.axis);
            }
            let mut args = Vec::new();
            for i in 0..op.inputs.len() {
                let t = l.input(op, i)?;
                args.push(l.operand(t)?);
            }
            args.push(l.b.int((o.axis + rank) % rank));
            let y = l.result(out_t)?;
            l.op(T::Concatenation, &args, &[y]);
        }
        "LOGISTIC" | "TANH" | "RELU" | "RELU6" | "RELU_N1_TO_1" | "HARD_SWISH" => {
            let ty = match name.as_str() {
                "LOGISTIC" => T::Logistic,
                "TANH" => T::Tanh,
                "RELU" => T::Relu,
                "RELU6" => T::Relu6,
                "RELU_N1_TO_1" => T::Relu1,
                _ => T::HardSwish,
            };
            let x = l.operand(l.input(op, 0)?)?;
            let y = l.result(l.output(op, 0)?)?;
            l.op(ty, &[x], &[y]);
        }
        "PAD" | "TRANSPOSE" => {
            let (x_t, c_t) = (l.input(op, 0)?, l.input(op, 1)?);
            let values = to_i32(&ints(l.tensor(c_t))?)?;
            let dims = l.tensor(c_t).shape.clone();
            let x = l.operand(x_t)?;
            let c = l.b.i32_tensor(&dims, &values, 0.0);
            let y = l.result(l.output(op, 0)?)?;
            let ty = if name == "PAD" { T::Pad } else { T::Transpose };
            l.op(ty, &[x, c], &[y]);
        }
        "STRIDED_SLICE" => {
            let Some(BuiltinOptions::StridedSliceOptions(o)) = opts else {
                bail!("no StridedSliceOptions")
            };
            if o.ellipsis_mask != 0 || o.new_axis_mask != 0 || o.offset {
                bail!("ellipsis, new-axis masks and offset ends are not lowered");
            }
            let x = l.operand(l.input(op, 0)?)?;
            let mut args = vec![x];
            for i in 1..4 {
                let t = l.input(op, i)?;
                let v = to_i32(&ints(l.tensor(t))?)?;
                args.push(l.b.i32_tensor(&[v.len() as u32], &v, 0.0));
            }
            args.push(l.b.int(o.begin_mask));
            args.push(l.b.int(o.end_mask));
            args.push(l.b.int(o.shrink_axis_mask));
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::StridedSlice, &args, &[y]);
        }
        "QUANTIZE" => {
            let x_t = l.input(op, 0)?;
            let x = l.operand(x_t)?;
            let y = l.result(l.output(op, 0)?)?;
            if l.is_quantized(x_t) {
                // A requantization: NNAPI's QUANTIZE takes float input, so through float32.
                let dims = l.b.operand_at(x).dimensions.clone();
                let xf = l.temp_like(x, &dims, Some(OperandType::TensorFloat32));
                l.op(T::Dequantize, &[x], &[xf]);
                l.op(T::Quantize, &[xf], &[y]);
            } else {
                l.op(T::Quantize, &[x], &[y]);
            }
        }
        "DEQUANTIZE" => {
            let (x_t, out_t) = (l.input(op, 0)?, l.output(op, 0)?);
            let x = l.tensor(x_t);
            if x.ty == TensorType::Float16 {
                // float16 weights: the delegate hands the driver float32 constants.
                let Some(data) = &x.data else {
                    bail!("a float16 DEQUANTIZE input that is not a constant");
                };
                let values: Vec<f32> = data
                    .chunks_exact(2)
                    .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                    .collect();
                let dims = x.shape.clone();
                if l.tensor(out_t).ty != TensorType::Float32 || l.operands[out_t].is_some() {
                    bail!("a float16 DEQUANTIZE must write a fresh float32 tensor");
                }
                let c = l.b.f32_tensor(&dims, &values);
                l.operands[out_t] = Some(c);
            } else {
                let x = l.operand(x_t)?;
                let y = l.result(out_t)?;
                l.op(T::Dequantize, &[x], &[y]);
            }
        }
        "CUSTOM" | "CALL" | "IF" | "WHILE" | "CALL_ONCE" | "DELEGATE" => {
            bail!("the NNAPI delegate does not send {name}")
        }
        _ => bail!("{name} is not lowered by this importer"),
    }
    Ok(())
}

/// IEEE binary16 to binary32 (exact: every half is a float).
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        // Subnormal: value man × 2^-24, normalized into binary32.
        (0, _) => {
            let shift = man.leading_zeros() - 21;
            let m = (man << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::f16_to_f32;

    #[test]
    fn halves_widen_exactly() {
        for (h, f) in [
            (0x3c00u16, 1.0f32),
            (0xc000, -2.0),
            (0x3555, 1365.0 / 4096.0),
            (0x0001, 2f32.powi(-24)),
            (0x03ff, 1023.0 * 2f32.powi(-24)),
            (0x7bff, 65504.0),
            (0x0000, 0.0),
        ] {
            assert_eq!(f16_to_f32(h), f, "{h:#x}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
    }
}
