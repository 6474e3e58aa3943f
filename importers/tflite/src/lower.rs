//! Lowering of subgraph 0 to NNAPI operations, following TensorFlow Lite's NNAPI delegate: the
//! same NNAPI operation per builtin, with the same extra inputs (fused activation codes,
//! implicit padding codes, MEAN's axis tensor and keep_dims, FULLY_CONNECTED's keep_num_dims as
//! a RESHAPE of the 2-D result) and the same operand types (int8 activations as
//! TENSOR_QUANT8_ASYMM_SIGNED, per-channel filters as TENSOR_QUANT8_SYMM_PER_CHANNEL, float16
//! weights dequantized to float32 constants at import). Builtins without one NNAPI operation
//! are rewritten as the delegate rewrites them: LEAKY_RELU as PRELU with a one-element alpha,
//! SQUARED_DIFFERENCE as SUB + MUL, PACK as CONCATENATION + RESHAPE, UNPACK as SPLIT + RESHAPE,
//! SPLIT_V as SPLIT (equal parts) or SLICEs. The recurrent builtins get the operands the
//! delegate adds (activation, clips, `time_major`, absent layer-norm weights, NNAPI's extra
//! state and scratch outputs); their variable state tensors become zero constants, the state
//! of the single invocation an imported model stands for. The README ("TensorFlow Lite models")
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
        TensorType::Bool => Operand::new(
            OperandType::TensorBool8,
            &t.shape,
            OperandLifeTime::TemporaryVariable,
        ),
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

/// TensorFlow Lite's activation number, which the delegate passes unchanged to the recurrent
/// operations (whose NNAPI activation takes TANH = 4 besides the fused codes).
fn raw_activation(a: ActivationFunctionType) -> i32 {
    match a {
        ActivationFunctionType::None => 0,
        ActivationFunctionType::Relu => 1,
        ActivationFunctionType::ReluN1To1 => 2,
        ActivationFunctionType::Relu6 => 3,
        ActivationFunctionType::Tanh => 4,
        ActivationFunctionType::SignBit => 5,
    }
}

/// The inputs of an LSTM that may not be omitted: the input, the forget, cell and output
/// gates' input and recurrent weights and their biases (the input gate's are omitted under
/// CIFG, peepholes and projection are optional).
const LSTM_REQUIRED: [usize; 10] = [0, 2, 3, 4, 6, 7, 8, 13, 14, 15];

/// The most elements a zero state constant may have (64 MiB of float32): a state is a batch
/// of one layer's units, far below it.
const MAX_STATE_ELEMENTS: usize = 1 << 24;

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
        TensorType::Int32 => SourceType::Int32,
        TensorType::Bool => SourceType::Bool8,
        // The delegate has no NNAPI type for int64 (or int16, float16) tensors: it leaves
        // operators reading or writing them on the CPU rather than casting.
        other => {
            return Err(TfliteError::Unsupported(format!(
                "graph edge '{}' of type {other:?}: only float32, uint8, int8, int32 and bool \
                 edges are run",
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
        let o = describe(tensor).map_err(|e| format!("tensor '{}': {e}", tensor.name))?;
        self.result_as(t, o)
    }

    /// [`Self::result`] with the operand described by the caller (a type NNAPI gives a
    /// result that TensorFlow Lite describes otherwise).
    fn result_as(&mut self, t: usize, o: Operand) -> R<u32> {
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
        let index = self.b.push(o);
        self.operands[t] = Some(index);
        Ok(index)
    }

    /// Input `i` of an operator, or NNAPI's omitted operand when the file omits it (-1) or
    /// the operator has fewer inputs.
    fn optional(&mut self, op: &Operator, i: usize) -> R<u32> {
        match op.inputs.get(i) {
            Some(Some(t)) => self.operand(*t),
            _ => Ok(self.b.no_value()),
        }
    }

    /// A recurrent operator's state input. TensorFlow Lite keeps it in a variable tensor its
    /// kernel updates in place; the delegate hands NNAPI that tensor's current contents as an
    /// input and copies the state output back after each run. The first invocation of a fresh
    /// interpreter — the one run an imported model stands for — reads zeros, so the state
    /// becomes a zero constant of its shape.
    fn state(&mut self, op: &Operator, i: usize) -> R<u32> {
        let t = self.input(op, i)?;
        if self.operands[t].is_some() || self.tensor(t).data.is_some() {
            return self.operand(t);
        }
        let tensor = self.tensor(t);
        if !tensor.is_variable {
            bail!(
                "state tensor '{}' is neither a variable nor a constant",
                tensor.name
            );
        }
        if tensor.ty != TensorType::Float32 {
            bail!(
                "state tensor '{}' is {:?}: the delegate sends float32 states",
                tensor.name,
                tensor.ty
            );
        }
        let n = tensor
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d as usize))
            .filter(|&n| n > 0 && n <= MAX_STATE_ELEMENTS)
            .ok_or_else(|| {
                format!(
                    "state tensor '{}' of shape {:?} is empty or over {MAX_STATE_ELEMENTS} \
                     elements",
                    tensor.name, tensor.shape
                )
            })?;
        let shape = tensor.shape.clone();
        let index = self.b.f32_tensor(&shape, &vec![0.0; n]);
        self.operands[t] = Some(index);
        Ok(index)
    }

    /// A temporary output of `ty(inputs)` (a state output NNAPI writes and TensorFlow Lite
    /// does not have), its dimensions inferred.
    fn extra_output(&mut self, ty: OperationType, inputs: &[u32], k: usize) -> R<u32> {
        let dims = self.b.infer(ty, inputs)?;
        let dims = dims
            .get(k)
            .ok_or_else(|| format!("{} has no output {k}", ty.name()))?
            .clone();
        Ok(self.b.temporary(OperandType::TensorFloat32, &dims, 0.0, 0))
    }

    /// Checks that the inputs at `slots` are given (not omitted).
    fn required(&self, op: &Operator, slots: &[usize]) -> R<()> {
        for &i in slots {
            self.input(op, i)?;
        }
        Ok(())
    }

    /// Refuses a hybrid recurrent operator (float input, quantized weights in input `w`),
    /// which the delegate keeps on the CPU.
    fn not_hybrid(&self, op: &Operator, w: usize) -> R<()> {
        let x = self.tensor(self.input(op, 0)?);
        if let Some(Some(wt)) = op.inputs.get(w) {
            let wt = self.tensor(*wt);
            if x.ty == TensorType::Float32 && wt.ty != TensorType::Float32 {
                bail!(
                    "hybrid form (float input, {:?} weights): the delegate refuses it",
                    wt.ty
                );
            }
        }
        if x.ty != TensorType::Float32 {
            bail!("{:?} input: the importer lowers the float32 form", x.ty);
        }
        Ok(())
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
        self.bias_at(op, 2, input, filter, channels)
    }

    /// [`Self::bias`] with the bias in input slot `slot`.
    fn bias_at(
        &mut self,
        op: &Operator,
        slot: usize,
        input: usize,
        filter: usize,
        channels: u32,
    ) -> R<u32> {
        if let Some(Some(t)) = op.inputs.get(slot) {
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

    /// An INT32 tensor input: a constant (INT32 or INT64 in the file) is written as INT32;
    /// a computed one must already be INT32.
    fn int_tensor(&mut self, t: usize) -> R<u32> {
        let tensor = self.tensor(t);
        if tensor.data.is_some() {
            let v = to_i32(&ints(tensor)?)?;
            let dims = if tensor.shape.is_empty() {
                vec![1]
            } else {
                tensor.shape.clone()
            };
            return Ok(self.b.i32_tensor(&dims, &v, 0.0));
        }
        if tensor.ty != TensorType::Int32 {
            bail!("tensor '{}' is {:?}, not INT32", tensor.name, tensor.ty);
        }
        self.operand(t)
    }

    /// A one-element integer constant (an axis or a count).
    fn int_scalar(&self, t: usize) -> R<i32> {
        match to_i32(&ints(self.tensor(t))?)?.as_slice() {
            [v] => Ok(*v),
            v => bail!(
                "tensor '{}' holds {} values, not one",
                self.tensor(t).name,
                v.len()
            ),
        }
    }

    fn rank(&self, t: usize) -> usize {
        self.tensor(t).shape.len()
    }

    /// An axis in `-rank..rank`, made nonnegative.
    fn axis(&self, axis: i32, rank: usize) -> R<i32> {
        let r = rank as i32;
        if axis < -r || axis >= r {
            bail!("axis {axis} out of range for rank {rank}");
        }
        Ok((axis + r) % r)
    }

    /// `y = ty(inputs…)` for an operator whose NNAPI operation takes its inputs as they are.
    fn plain(&mut self, op: &Operator, ty: OperationType, extra: &[u32]) -> R<()> {
        let mut args = Vec::new();
        for i in 0..op.inputs.len() {
            let t = self.input(op, i)?;
            args.push(self.operand(t)?);
        }
        args.extend_from_slice(extra);
        let y = self.result(self.output(op, 0)?)?;
        self.op(ty, &args, &[y]);
        Ok(())
    }

    /// A SELECT branch: a one-element constant is spread to the condition's shape (NNAPI's
    /// SELECT does not broadcast); anything else must already have that shape.
    fn select_branch(&mut self, t: usize, dims: &[u32]) -> R<u32> {
        let tensor = self.tensor(t);
        if tensor.shape == dims {
            return self.operand(t);
        }
        let n: u64 = tensor.shape.iter().map(|&d| u64::from(d)).product();
        let total: u64 = dims.iter().map(|&d| u64::from(d)).product();
        match &tensor.data {
            Some(data) if n == 1 && total <= 1 << 24 => {
                let bytes: Vec<u8> = data
                    .iter()
                    .copied()
                    .cycle()
                    .take(data.len() * total as usize)
                    .collect();
                let mut o = describe(tensor)?;
                o.dimensions = dims.to_vec();
                Ok(self.b.constant_operand(o, &bytes))
            }
            _ => bail!(
                "a SELECT branch of shape {:?} against a condition of {dims:?}: NNAPI's SELECT \
                 does not broadcast",
                tensor.shape
            ),
        }
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
        "L2_POOL_2D" => {
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
            l.op(T::L2Pool2d, &args, &[y]);
        }
        "EXP" | "LOG" | "ABS" | "NEG" | "SQRT" | "RSQRT" | "SIN" | "FLOOR" | "CAST"
        | "LOGICAL_NOT" => {
            let x_t = l.input(op, 0)?;
            if name != "CAST" && name != "LOGICAL_NOT" && l.tensor(x_t).ty != TensorType::Float32 {
                bail!("the NNAPI delegate sends {name} for float32 tensors only");
            }
            l.plain(op, nn(&name)?, &[])?;
        }
        "MAXIMUM" | "MINIMUM" | "POW" | "PRELU" | "EQUAL" | "NOT_EQUAL" | "LESS" | "LESS_EQUAL"
        | "GREATER" | "GREATER_EQUAL" | "LOGICAL_AND" | "LOGICAL_OR" => {
            let ty = nn(match name.as_str() {
                "POW" => "POW",
                "PRELU" => "PRELU",
                other => other,
            })?;
            if name == "POW" && l.tensor(l.input(op, 0)?).ty != TensorType::Float32 {
                bail!("the NNAPI delegate sends POW for float32 tensors only");
            }
            l.plain(op, ty, &[])?;
        }
        "LEAKY_RELU" => {
            let alpha = match opts {
                Some(BuiltinOptions::LeakyReluOptions(o)) => o.alpha,
                _ => bail!("no LeakyReluOptions"),
            };
            // PRELU with a one-element alpha, as the delegate sends it; a quantized alpha is
            // exact: scale |alpha| and the single value ±1 (zero point 1 holds −1 in uint8).
            let x_t = l.input(op, 0)?;
            let x = l.operand(x_t)?;
            let a = match l.tensor(x_t).ty {
                TensorType::Float32 => l.b.f32_tensor(&[1], &[alpha]),
                TensorType::Int8 | TensorType::Uint8 => {
                    let signed = l.tensor(x_t).ty == TensorType::Int8;
                    let scale = if alpha == 0.0 { 1.0 } else { alpha.abs() };
                    let (byte, zero) = match (alpha < 0.0, signed) {
                        (_, _) if alpha == 0.0 => (0u8, 0),
                        (false, _) => (1u8, 0),
                        (true, true) => ((-1i8) as u8, 0),
                        (true, false) => (0u8, 1),
                    };
                    let ty = if signed {
                        OperandType::TensorQuant8AsymmSigned
                    } else {
                        OperandType::TensorQuant8Asymm
                    };
                    let mut o = Operand::new(ty, &[1], OperandLifeTime::TemporaryVariable);
                    o.scale = scale;
                    o.zero_point = zero;
                    l.b.constant_operand(o, &[byte])
                }
                other => bail!("LEAKY_RELU on {other:?}"),
            };
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::Prelu, &[x, a], &[y]);
        }
        "SQUARED_DIFFERENCE" => {
            let (a_t, b_t) = (l.input(op, 0)?, l.input(op, 1)?);
            if l.tensor(a_t).ty != TensorType::Float32 {
                bail!("the NNAPI delegate sends SQUARED_DIFFERENCE for float32 tensors only");
            }
            let (a, b) = (l.operand(a_t)?, l.operand(b_t)?);
            let y = l.result(l.output(op, 0)?)?;
            let dims = l.b.operand_at(y).dimensions.clone();
            let d = l.temp_like(y, &dims, None);
            let none = l.b.int(0);
            l.op(T::Sub, &[a, b, none], &[d]);
            l.op(T::Mul, &[d, d, none], &[y]);
        }
        "ELU" => {
            let alpha = l.b.float(1.0);
            l.plain(op, T::Elu, &[alpha])?;
        }
        "LOG_SOFTMAX" => {
            let (beta, axis) = (l.b.float(1.0), l.b.int(-1));
            l.plain(op, T::LogSoftmax, &[beta, axis])?;
        }
        "L2_NORMALIZATION" => {
            if let Some(BuiltinOptions::L2NormOptions(o)) = opts {
                if o.fused_activation_function != ActivationFunctionType::None {
                    bail!("a fused activation on L2_NORMALIZATION is not sent by the delegate");
                }
            }
            l.plain(op, T::L2Normalization, &[])?;
        }
        "LOCAL_RESPONSE_NORMALIZATION" => {
            let Some(BuiltinOptions::LocalResponseNormalizationOptions(o)) = opts else {
                bail!("no LocalResponseNormalizationOptions")
            };
            let x_t = l.input(op, 0)?;
            if l.rank(x_t) != 4 {
                bail!(
                    "LOCAL_RESPONSE_NORMALIZATION of rank {}: the delegate sends rank 4",
                    l.rank(x_t)
                );
            }
            let x = l.operand(x_t)?;
            let args = [
                x,
                l.b.int(o.radius),
                l.b.float(o.bias),
                l.b.float(o.alpha),
                l.b.float(o.beta),
            ];
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::LocalResponseNormalization, &args, &[y]);
        }
        "SPACE_TO_DEPTH" | "DEPTH_TO_SPACE" => {
            let block = match opts {
                Some(BuiltinOptions::SpaceToDepthOptions(o)) => o.block_size,
                Some(BuiltinOptions::DepthToSpaceOptions(o)) => o.block_size,
                _ => bail!("no block size"),
            };
            let block = l.b.int(block);
            l.plain(op, nn(&name)?, &[block])?;
        }
        "SPACE_TO_BATCH_ND" | "BATCH_TO_SPACE_ND" => {
            let x_t = l.input(op, 0)?;
            if l.rank(x_t) != 4 {
                bail!("{name} of rank {}: NNAPI's takes rank 4", l.rank(x_t));
            }
            let x = l.operand(x_t)?;
            let block = l.int_tensor(l.input(op, 1)?)?;
            let mut args = vec![x, block];
            if name == "SPACE_TO_BATCH_ND" {
                args.push(l.int_tensor(l.input(op, 2)?)?);
            } else if ints(l.tensor(l.input(op, 2)?))?.iter().any(|&c| c != 0) {
                bail!("BATCH_TO_SPACE_ND with crops: NNAPI's takes none");
            }
            let y = l.result(l.output(op, 0)?)?;
            l.op(nn(&name)?, &args, &[y]);
        }
        "GATHER" => {
            let (axis, batch) = match opts {
                Some(BuiltinOptions::GatherOptions(o)) => (o.axis, o.batch_dims),
                _ => (0, 0),
            };
            if batch != 0 {
                bail!("GATHER with batch_dims {batch} is not sent by the delegate");
            }
            let x_t = l.input(op, 0)?;
            let axis = l.axis(axis, l.rank(x_t))?;
            let x = l.operand(x_t)?;
            let idx = l.int_tensor(l.input(op, 1)?)?;
            let axis = l.b.int(axis);
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::Gather, &[x, axis, idx], &[y]);
        }
        "SLICE" | "TILE" => {
            let x = l.operand(l.input(op, 0)?)?;
            let mut args = vec![x];
            for i in 1..op.inputs.len() {
                args.push(l.int_tensor(l.input(op, i)?)?);
            }
            let y = l.result(l.output(op, 0)?)?;
            l.op(nn(&name)?, &args, &[y]);
        }
        "EXPAND_DIMS" => {
            let x_t = l.input(op, 0)?;
            let axis = l.int_scalar(l.input(op, 1)?)?;
            let axis = l.axis(axis, l.rank(x_t) + 1)?;
            let x = l.operand(x_t)?;
            let axis = l.b.int(axis);
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::ExpandDims, &[x, axis], &[y]);
        }
        "PADV2" => {
            let x_t = l.input(op, 0)?;
            let x = l.operand(x_t)?;
            let pads = l.int_tensor(l.input(op, 1)?)?;
            let v_t = l.input(op, 2)?;
            let v = l.tensor(v_t);
            let value = match (&v.data, v.ty) {
                (Some(d), TensorType::Float32) if d.len() == 4 => {
                    l.b.float(f32::from_le_bytes([d[0], d[1], d[2], d[3]]))
                }
                // The quantized pad value is its stored integer (the input's quantization).
                (Some(d), TensorType::Int8) if d.len() == 1 => l.b.int(i32::from(d[0] as i8)),
                (Some(d), TensorType::Uint8) if d.len() == 1 => l.b.int(i32::from(d[0])),
                _ => bail!("PADV2's pad value must be a one-element constant"),
            };
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::PadV2, &[x, pads, value], &[y]);
        }
        "ARG_MAX" | "ARG_MIN" => {
            let (x_t, out_t) = (l.input(op, 0)?, l.output(op, 0)?);
            if l.tensor(out_t).ty != TensorType::Int32 {
                bail!(
                    "{name} with a {:?} result: NNAPI's gives int32",
                    l.tensor(out_t).ty
                );
            }
            let axis = l.int_scalar(l.input(op, 1)?)?;
            let axis = l.axis(axis, l.rank(x_t))?;
            let x = l.operand(x_t)?;
            let axis = l.b.int(axis);
            let y = l.result(out_t)?;
            let ty = if name == "ARG_MAX" {
                T::Argmax
            } else {
                T::Argmin
            };
            l.op(ty, &[x, axis], &[y]);
        }
        "SUM" | "REDUCE_MAX" | "REDUCE_MIN" | "REDUCE_PROD" | "REDUCE_ANY" => {
            let keep = match opts {
                Some(BuiltinOptions::ReducerOptions(o)) => o.keep_dims,
                _ => false,
            };
            let x_t = l.input(op, 0)?;
            if matches!(name.as_str(), "SUM" | "REDUCE_PROD") && l.is_quantized(x_t) {
                bail!("NNAPI's {name} has no quantized form (the delegate keeps it on the CPU)");
            }
            let x = l.operand(x_t)?;
            let axes = l.int_tensor(l.input(op, 1)?)?;
            let keep = l.bool_scalar(keep);
            let y = l.result(l.output(op, 0)?)?;
            let ty = nn(if name == "SUM" { "REDUCE_SUM" } else { &name })?;
            l.op(ty, &[x, axes, keep], &[y]);
        }
        "SELECT" | "SELECT_V2" => {
            let c_t = l.input(op, 0)?;
            let dims = l.tensor(c_t).shape.clone();
            let out_t = l.output(op, 0)?;
            if l.tensor(out_t).shape != dims {
                bail!("{name} with a broadcast condition: NNAPI's SELECT does not broadcast");
            }
            let c = l.operand(c_t)?;
            let a = l.select_branch(l.input(op, 1)?, &dims)?;
            let b = l.select_branch(l.input(op, 2)?, &dims)?;
            let y = l.result(out_t)?;
            l.op(T::Select, &[c, a, b], &[y]);
        }
        "EMBEDDING_LOOKUP" => {
            let ids = l.int_tensor(l.input(op, 0)?)?;
            let values = l.operand(l.input(op, 1)?)?;
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::EmbeddingLookup, &[ids, values], &[y]);
        }
        "RESIZE_BILINEAR" | "RESIZE_NEAREST_NEIGHBOR" => {
            let (align, half) = match opts {
                Some(BuiltinOptions::ResizeBilinearOptions(o)) => {
                    (o.align_corners, o.half_pixel_centers)
                }
                Some(BuiltinOptions::ResizeNearestNeighborOptions(o)) => {
                    (o.align_corners, o.half_pixel_centers)
                }
                _ => (false, false),
            };
            let x_t = l.input(op, 0)?;
            if l.rank(x_t) != 4 {
                bail!("{name} of rank {}: the delegate sends rank 4", l.rank(x_t));
            }
            let size = to_i32(&ints(l.tensor(l.input(op, 1)?))?)?;
            let [h, w] = size[..] else {
                bail!("{name}'s size holds {} values, not 2", size.len())
            };
            let x = l.operand(x_t)?;
            let args = [
                x,
                l.b.int(w),
                l.b.int(h),
                l.bool_scalar(false),
                l.bool_scalar(align),
                l.bool_scalar(half),
            ];
            let y = l.result(l.output(op, 0)?)?;
            l.op(nn(&name)?, &args, &[y]);
        }
        "TRANSPOSE_CONV" => {
            let Some(BuiltinOptions::TransposeConvOptions(o)) = opts else {
                bail!("no TransposeConvOptions")
            };
            // Inputs: output shape, filter [out, h, w, in], input, optional bias.
            let (s_t, f_t, x_t) = (l.input(op, 0)?, l.input(op, 1)?, l.input(op, 2)?);
            let channels = l.tensor(f_t).shape.first().copied().unwrap_or(0);
            let x = l.operand(x_t)?;
            let f = l.operand(f_t)?;
            let bias = l.bias_at(op, 3, x_t, f_t, channels)?;
            let shape = l.int_tensor(s_t)?;
            let args = [
                x,
                f,
                bias,
                shape,
                l.b.int(padding(o.padding)),
                l.b.int(o.stride_w),
                l.b.int(o.stride_h),
                l.b.int(activation(o.fused_activation_function)?),
                l.bool_scalar(false),
            ];
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::TransposeConv2d, &args, &[y]);
        }
        "SPLIT" => {
            // Inputs: axis, then the tensor.
            let x_t = l.input(op, 1)?;
            let axis = l.int_scalar(l.input(op, 0)?)?;
            let axis = l.axis(axis, l.rank(x_t))?;
            let x = l.operand(x_t)?;
            let (axis, n) = (l.b.int(axis), l.b.int(op.outputs.len() as i32));
            let mut ys = Vec::new();
            for &t in &op.outputs {
                ys.push(l.result(t)?);
            }
            l.op(T::Split, &[x, axis, n], &ys);
        }
        "SPLIT_V" => {
            // Equal parts are NNAPI's SPLIT; unequal ones a SLICE each.
            let x_t = l.input(op, 0)?;
            let axis = l.int_scalar(l.input(op, 2)?)?;
            let rank = l.rank(x_t);
            let axis = l.axis(axis, rank)? as usize;
            let sizes: Vec<u32> = op
                .outputs
                .iter()
                .map(|&t| l.tensor(t).shape.get(axis).copied().unwrap_or(0))
                .collect();
            let x = l.operand(x_t)?;
            if sizes.windows(2).all(|w| w[0] == w[1]) {
                let (a, n) = (l.b.int(axis as i32), l.b.int(sizes.len() as i32));
                let mut ys = Vec::new();
                for &t in &op.outputs {
                    ys.push(l.result(t)?);
                }
                l.op(T::Split, &[x, a, n], &ys);
            } else {
                let mut offset = 0i32;
                for (&t, &size) in op.outputs.iter().zip(&sizes) {
                    let mut begin = vec![0i32; rank];
                    begin[axis] = offset;
                    let extent: Vec<i32> = l.tensor(t).shape.iter().map(|&d| d as i32).collect();
                    offset = i32::try_from(size)
                        .ok()
                        .and_then(|z| offset.checked_add(z))
                        .ok_or_else(|| format!("SPLIT_V parts overflow at {offset}"))?;
                    let b = l.b.i32_tensor(&[rank as u32], &begin, 0.0);
                    let e = l.b.i32_tensor(&[rank as u32], &extent, 0.0);
                    let y = l.result(t)?;
                    l.op(T::Slice, &[x, b, e], &[y]);
                }
            }
        }
        "PACK" => {
            let Some(BuiltinOptions::PackOptions(o)) = opts else {
                bail!("no PackOptions")
            };
            let out_t = l.output(op, 0)?;
            let out_shape = l.tensor(out_t).shape.clone();
            let Some(rank) = out_shape.len().checked_sub(1) else {
                bail!("PACK with a rank-0 result")
            };
            let axis = l.axis(o.axis, rank + 1)? as usize;
            let n = op.inputs.len() as u32;
            let mut parts = Vec::new();
            for i in 0..op.inputs.len() {
                let t = l.input(op, i)?;
                parts.push(l.operand(t)?);
            }
            let y = l.result(out_t)?;
            // CONCATENATION along the axis, then RESHAPE to the packed shape; packing after the
            // last axis first gives each part a trailing 1.
            let (cat_axis, joined_dims) = if axis < rank {
                let mut d = out_shape.clone();
                d.remove(axis);
                d[axis] = d[axis]
                    .checked_mul(n)
                    .ok_or_else(|| format!("PACK of {n} parts overflows dimension {axis}"))?;
                (axis, d)
            } else {
                let mut inner = out_shape.clone();
                inner[rank] = 1;
                for p in parts.iter_mut() {
                    let r = l.temp_like(*p, &inner, None);
                    let dims: Vec<i32> = inner.iter().map(|&d| d as i32).collect();
                    let s = l.b.i32_tensor(&[dims.len() as u32], &dims, 0.0);
                    l.op(T::Reshape, &[*p, s], &[r]);
                    *p = r;
                }
                (rank, out_shape.clone())
            };
            let joined = l.temp_like(y, &joined_dims, None);
            parts.push(l.b.int(cat_axis as i32));
            l.op(T::Concatenation, &parts, &[joined]);
            let dims: Vec<i32> = out_shape.iter().map(|&d| d as i32).collect();
            let s = l.b.i32_tensor(&[dims.len() as u32], &dims, 0.0);
            l.op(T::Reshape, &[joined, s], &[y]);
        }
        "UNPACK" => {
            let Some(BuiltinOptions::UnpackOptions(o)) = opts else {
                bail!("no UnpackOptions")
            };
            let x_t = l.input(op, 0)?;
            let shape = l.tensor(x_t).shape.clone();
            let axis = l.axis(o.axis, shape.len())? as usize;
            if shape[axis] as usize != op.outputs.len() {
                bail!(
                    "UNPACK of {} parts into {} outputs",
                    shape[axis],
                    op.outputs.len()
                );
            }
            let x = l.operand(x_t)?;
            // SPLIT along the axis, then a RESHAPE of each part drops it.
            let mut part = shape.clone();
            part[axis] = 1;
            let mut parts = Vec::new();
            for _ in &op.outputs {
                parts.push(l.temp_like(x, &part, None));
            }
            let (a, n) = (l.b.int(axis as i32), l.b.int(op.outputs.len() as i32));
            l.op(T::Split, &[x, a, n], &parts);
            for (&t, &p) in op.outputs.iter().zip(&parts) {
                let dims: Vec<i32> = l.tensor(t).shape.iter().map(|&d| d as i32).collect();
                let s = l.b.i32_tensor(&[dims.len() as u32], &dims, 0.0);
                let y = l.result(t)?;
                l.op(T::Reshape, &[p, s], &[y]);
            }
        }
        "TOPK_V2" => {
            let (x_t, k_t) = (l.input(op, 0)?, l.input(op, 1)?);
            let ty = l.tensor(x_t).ty;
            if !matches!(
                ty,
                TensorType::Float32 | TensorType::Int32 | TensorType::Uint8 | TensorType::Int8
            ) {
                bail!("TOPK_V2 of {ty:?}: the delegate sends float32, int32, uint8 and int8");
            }
            let k = l.tensor(k_t);
            if k.ty != TensorType::Int32 || k.data.is_none() {
                bail!("TOPK_V2's k must be an int32 constant (the delegate passes it as a scalar)");
            }
            let k = l.int_scalar(k_t)?;
            let idx_t = l.output(op, 1)?;
            if l.tensor(idx_t).ty != TensorType::Int32 {
                bail!(
                    "TOPK_V2 with {:?} indices: NNAPI's are int32",
                    l.tensor(idx_t).ty
                );
            }
            let x = l.operand(x_t)?;
            let k = l.b.int(k);
            let values = l.result(l.output(op, 0)?)?;
            let indices = l.result(idx_t)?;
            l.op(T::TopkV2, &[x, k], &[values, indices]);
        }
        "HASHTABLE_LOOKUP" => {
            let (out_t, hits_t) = (l.output(op, 0)?, l.output(op, 1)?);
            if l.tensor(out_t).ty != TensorType::Float32 {
                bail!(
                    "HASHTABLE_LOOKUP of {:?} values: the delegate sends float32 only",
                    l.tensor(out_t).ty
                );
            }
            if l.tensor(hits_t).ty != TensorType::Uint8 {
                bail!("HASHTABLE_LOOKUP's hits must be uint8");
            }
            let lookups = l.int_tensor(l.input(op, 0)?)?;
            let keys = l.int_tensor(l.input(op, 1)?)?;
            let values = l.operand(l.input(op, 2)?)?;
            let y = l.result(out_t)?;
            // TensorFlow Lite's hits are plain bytes 0 and 1; NNAPI's are a
            // TENSOR_QUANT8_ASYMM of scale 1 and zero point 0, the same bytes.
            let mut hits = Operand::new(
                OperandType::TensorQuant8Asymm,
                &l.tensor(hits_t).shape,
                OperandLifeTime::TemporaryVariable,
            );
            hits.scale = 1.0;
            let hits = l.result_as(hits_t, hits)?;
            l.op(T::HashtableLookup, &[lookups, keys, values], &[y, hits]);
        }
        "LSH_PROJECTION" => {
            use crate::generated::tflite::LshProjectionType as P;
            let Some(BuiltinOptions::LshProjectionOptions(o)) = opts else {
                bail!("no LSHProjectionOptions")
            };
            // NNAPI numbers SPARSE 3 (1 is the deprecated form the delegate no longer sends).
            let kind = match o.type_ {
                P::Sparse => {
                    if op.inputs.len() != 2 {
                        bail!("a SPARSE projection with a weight input: the delegate refuses it");
                    }
                    3
                }
                P::Dense => {
                    if !matches!(op.inputs.get(2), Some(Some(_))) {
                        bail!("a DENSE projection without weights: NNAPI's takes them");
                    }
                    2
                }
                P::Unknown => bail!("LSH projection type UNKNOWN"),
            };
            let hash = l.operand(l.input(op, 0)?)?;
            let x = l.operand(l.input(op, 1)?)?;
            let weight = l.optional(op, 2)?;
            let kind = l.b.int(kind);
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::LshProjection, &[hash, x, weight, kind], &[y]);
        }
        "RNN" | "SVDF" => {
            if op.inputs.len() != 5 {
                bail!(
                    "{name} with {} inputs: the delegate takes 5",
                    op.inputs.len()
                );
            }
            l.not_hybrid(op, 1)?;
            let mut args = Vec::new();
            for i in 0..4 {
                // SVDF's bias (input 3) is optional; every other input is required.
                args.push(if name == "SVDF" && i == 3 {
                    l.optional(op, i)?
                } else {
                    let t = l.input(op, i)?;
                    l.operand(t)?
                });
            }
            args.push(l.state(op, 4)?);
            let ty = if name == "RNN" {
                let Some(BuiltinOptions::RnnOptions(o)) = opts else {
                    bail!("no RNNOptions")
                };
                args.push(l.b.int(activation(o.fused_activation_function)?));
                T::Rnn
            } else {
                let Some(BuiltinOptions::SvdfOptions(o)) = opts else {
                    bail!("no SVDFOptions")
                };
                args.push(l.b.int(o.rank));
                args.push(l.b.int(activation(o.fused_activation_function)?));
                T::Svdf
            };
            // NNAPI writes the new state as output 0; the delegate adds that output.
            let state_out = l.extra_output(ty, &args, 0)?;
            let y = l.result(l.output(op, 0)?)?;
            l.op(ty, &args, &[state_out, y]);
        }
        "UNIDIRECTIONAL_SEQUENCE_RNN" => {
            let Some(BuiltinOptions::SequenceRnnOptions(o)) = opts else {
                bail!("no SequenceRNNOptions")
            };
            if op.inputs.len() != 5 {
                bail!(
                    "{name} with {} inputs: the delegate takes 5",
                    op.inputs.len()
                );
            }
            l.not_hybrid(op, 1)?;
            let mut args = Vec::new();
            for i in 0..4 {
                let t = l.input(op, i)?;
                args.push(l.operand(t)?);
            }
            args.push(l.state(op, 4)?);
            args.push(l.b.int(activation(o.fused_activation_function)?));
            args.push(l.b.int(i32::from(o.time_major)));
            let y = l.result(l.output(op, 0)?)?;
            l.op(T::UnidirectionalSequenceRnn, &args, &[y]);
        }
        "LSTM" | "UNIDIRECTIONAL_SEQUENCE_LSTM" => {
            let unidirectional = name != "LSTM";
            let (act, cell_clip, proj_clip, time_major) = match opts {
                Some(BuiltinOptions::LstmOptions(o)) if !unidirectional => {
                    if o.kernel_type == crate::generated::tflite::LstmKernelType::Basic {
                        bail!(
                            "the basic (5-input, quantized) LSTM kernel is not lowered by this \
                             importer"
                        );
                    }
                    (o.fused_activation_function, o.cell_clip, o.proj_clip, false)
                }
                Some(BuiltinOptions::UnidirectionalSequenceLstmOptions(o)) if unidirectional => {
                    if o.diagonal_recurrent_tensors {
                        bail!("diagonal recurrent weights have no NNAPI form");
                    }
                    (
                        o.fused_activation_function,
                        o.cell_clip,
                        o.proj_clip,
                        o.time_major,
                    )
                }
                _ => bail!("no {name} options"),
            };
            let n = op.inputs.len();
            if n != 20 && n != 24 {
                bail!("{name} with {n} inputs: the delegate takes 20 or 24");
            }
            l.not_hybrid(op, 2)?;
            l.required(op, &LSTM_REQUIRED)?;
            let mut args = Vec::new();
            for i in 0..18 {
                args.push(l.optional(op, i)?);
            }
            args.push(l.state(op, 18)?);
            args.push(l.state(op, 19)?);
            args.push(l.b.int(raw_activation(act)));
            args.push(l.b.float(cell_clip));
            args.push(l.b.float(proj_clip));
            if unidirectional {
                args.push(l.bool_scalar(time_major));
            }
            // Layer normalization weights: the file's (24 inputs), else omitted — the LSTM
            // of 20 inputs has no such operands, the sequence form always has the four.
            if n == 24 || unidirectional {
                for i in 20..24 {
                    args.push(l.optional(op, i)?);
                }
            }
            if unidirectional {
                let y = l.result(l.output(op, 0)?)?;
                l.op(T::UnidirectionalSequenceLstm, &args, &[y]);
            } else {
                // NNAPI's LSTM writes a scratch buffer and both states before the output.
                let extra: Vec<u32> = (0..3)
                    .map(|k| l.extra_output(T::Lstm, &args, k))
                    .collect::<R<_>>()?;
                let y = l.result(l.output(op, 0)?)?;
                l.op(T::Lstm, &args, &[extra[0], extra[1], extra[2], y]);
            }
        }
        "BIDIRECTIONAL_SEQUENCE_LSTM" => {
            let Some(BuiltinOptions::BidirectionalSequenceLstmOptions(o)) = opts else {
                bail!("no BidirectionalSequenceLSTMOptions")
            };
            if op.inputs.len() != 48 {
                bail!(
                    "{name} with {} inputs: TensorFlow Lite's has 48",
                    op.inputs.len()
                );
            }
            l.not_hybrid(op, 2)?;
            l.required(op, &LSTM_REQUIRED)?;
            l.required(op, &LSTM_REQUIRED.map(|i| if i == 0 { 0 } else { i + 17 }))?;
            let mut args = Vec::new();
            for i in 0..48 {
                // 35–38: both directions' activation and cell states.
                args.push(if (35..=38).contains(&i) {
                    l.state(op, i)?
                } else {
                    l.optional(op, i)?
                });
            }
            args.push(l.b.int(raw_activation(o.fused_activation_function)));
            args.push(l.b.float(o.cell_clip));
            args.push(l.b.float(o.proj_clip));
            args.push(l.bool_scalar(o.merge_outputs));
            args.push(l.bool_scalar(o.time_major));
            // TensorFlow Lite's has no layer normalization: eight omitted weights.
            for _ in 0..8 {
                args.push(l.b.no_value());
            }
            let mut ys = vec![l.result(l.output(op, 0)?)?];
            if !o.merge_outputs {
                ys.push(l.result(l.output(op, 1)?)?);
            }
            l.op(T::BidirectionalSequenceLstm, &args, &ys);
        }
        "BIDIRECTIONAL_SEQUENCE_RNN" => {
            bail!("the NNAPI delegate has no mapping for BIDIRECTIONAL_SEQUENCE_RNN")
        }
        "CUSTOM" | "CALL" | "IF" | "WHILE" | "CALL_ONCE" | "DELEGATE" => {
            bail!("the NNAPI delegate does not send {name}")
        }
        _ => bail!("{name} is not lowered by this importer"),
    }
    Ok(())
}

/// The NNAPI operation of a types.hal name.
fn nn(name: &str) -> R<OperationType> {
    OperationType::from_name(name).ok_or_else(|| format!("no NNAPI operation {name}"))
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
