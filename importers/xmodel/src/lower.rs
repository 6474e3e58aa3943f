//! Lowering of a checked XIR graph to NNAPI operations, operator by operator, in producer
//! order. XIR tensors are NHWC like NNAPI's, so every edge keeps its layout. Quantizer output
//! lowers to quant8 operations (`docs/xmodel.md`, "Quantization"): an 8-bit `fix` on an
//! activation is a TENSOR_QUANT8_ASYMM operand at scale 2^-fix_point ([`Fix`]); constants
//! after a `fix` become uint8 weights (at one float32 ulp below their power of two where that
//! makes the driver round once) and int32 biases; convolutions, inner products and
//! two-input ADD/SUB/MUL on quant8 inputs write the quantization of the first `fix` after the
//! quantization-transparent operators that follow them ([`Requant`]: the driver's one
//! requantization, which the NNAPI-rounding reference mirrors); operators without an exact
//! quant8 form compute on float32 between the `fix`es. The README ("XModel models") lists
//! what each XIR operator becomes; `lower_op` has one arm per operator type.

use crate::decode::{Graph, Op};
use crate::XmodelError;
use crate::{Options, SourceType};
use nnhal_hal::builder::{Edge, EdgeLayout, ImportedModel, ModelBuilder};
use nnhal_hal::{OperandType, OperationType};
use std::collections::{HashMap, HashSet};

type R<T> = Result<T, String>;

macro_rules! bail {
    ($($arg:tt)*) => { return Err(format!($($arg)*)) };
}

/// Operator types lowered (everything else is refused by name).
pub const SUPPORTED: &[&str] = &[
    "data",
    "const",
    "fix",
    "identity",
    "conv2d",
    "depthwise-conv2d",
    "transposed-conv2d",
    "inner-product",
    "matmul",
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "min",
    "maxpool2d",
    "avgpool2d",
    "reduction_mean",
    "reduction_max",
    "reduction_sum",
    "pad",
    "relu",
    "relu6",
    "leaky-relu",
    "prelu",
    "sigmoid",
    "tanh",
    "hard-sigmoid",
    "hard-swish",
    "reshape",
    "flatten",
    "squeeze",
    "resize",
    "reorg",
    "gstiling",
    "pixel-shuffle",
    "concat",
    "softmax",
    "transpose",
    "strided_slice",
    "tile",
];

/// The graph's outputs: `return_ops` when present, else the operators nobody consumes (file
/// order); with `start`, only those downstream of a starting operator.
pub fn outputs(g: &Graph, start: &[usize]) -> R<Vec<usize>> {
    let candidates: Vec<usize> = match &g.return_ops {
        Some(names) => names
            .iter()
            .map(|n| {
                g.index(n)
                    .ok_or(format!("return_ops names '{n}', which is no operator"))
            })
            .collect::<R<_>>()?,
        None => (0..g.ops.len())
            .filter(|&i| {
                !matches!(g.ops[i].ty.as_str(), "data" | "const") && g.consumers(i).is_empty()
            })
            .collect(),
    };
    let out: Vec<usize> = if start.is_empty() {
        candidates
    } else {
        let down = downstream(g, start);
        candidates
            .into_iter()
            .filter(|i| down.contains(i))
            .collect()
    };
    if out.is_empty() {
        bail!("the graph has no output");
    }
    Ok(out)
}

fn downstream(g: &Graph, start: &[usize]) -> HashSet<usize> {
    let mut seen: HashSet<usize> = start.iter().copied().collect();
    for &i in &g.order {
        if g.ops[i]
            .args
            .iter()
            .any(|(_, p)| p.iter().any(|q| seen.contains(q)))
        {
            seen.insert(i);
        }
    }
    seen
}

/// The operators the outputs depend on, not looking past the starting ones.
pub fn needed(g: &Graph, outs: &[usize], start: &[usize]) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let mut stack: Vec<usize> = outs.to_vec();
    while let Some(i) = stack.pop() {
        if !seen.insert(i) || start.contains(&i) {
            continue;
        }
        for (_, p) in &g.ops[i].args {
            stack.extend(p);
        }
    }
    seen
}

/// The starting operators named in `options`.
pub fn start_ops(g: &Graph, options: &Options) -> R<Vec<usize>> {
    options
        .start_at
        .iter()
        .map(|n| {
            g.index(n).ok_or(format!(
                "--start-at '{n}': the graph has no operator of that name"
            ))
        })
        .collect()
}

/// Explicit padding (left, right, top, bottom) of a window operation whose declared output is
/// `out`, from XIR's `pad` {l, r, t, b} and `pad_mode`: FLOOR takes `pad` as is, CEIL widens
/// the right/bottom edge so the floor formula gives the ceil size, SAME splits TensorFlow's
/// total padding (the smaller half first), VALID pads nothing.
#[allow(clippy::too_many_arguments)]
pub fn window_pads(
    op: &Op,
    input: (usize, usize),
    kernel: (usize, usize),
    stride: (usize, usize),
    dilation: (usize, usize),
    out: (usize, usize),
) -> R<[usize; 4]> {
    let mode = op.string("pad_mode").unwrap_or("FLOOR");
    let given = op.ints("pad").unwrap_or_else(|| vec![0; 4]);
    if given.len() != 4 || given.iter().any(|&p| p < 0) {
        bail!("pad {given:?}: want four non-negative values {{l, r, t, b}}");
    }
    let given: Vec<usize> = given.iter().map(|&p| p as usize).collect();
    let side = |inp: usize, k: usize, s: usize, d: usize, o: usize, before: usize, after: usize| {
        let span = d * (k - 1) + 1;
        let total = ((o.max(1) - 1) * s + span).saturating_sub(inp);
        match mode {
            "SAME" => (total / 2, total - total / 2),
            "VALID" => (0, 0),
            _ => {
                // The right/bottom padding the declared size needs at least (CEIL's extra).
                let need = total.saturating_sub(before);
                (
                    before,
                    if mode == "CEIL" {
                        after.max(need)
                    } else {
                        after
                    },
                )
            }
        }
    };
    if !matches!(mode, "FLOOR" | "CEIL" | "SAME" | "VALID") {
        bail!("pad_mode '{mode}'");
    }
    let (l, r) = side(
        input.1, kernel.0, stride.0, dilation.0, out.1, given[0], given[1],
    );
    let (t, b) = side(
        input.0, kernel.1, stride.1, dilation.1, out.0, given[2], given[3],
    );
    Ok([l, r, t, b])
}

/// A pair attribute in XIR's {w, h} order, as (w, h).
pub fn pair(op: &Op, key: &str, default: Option<(usize, usize)>) -> R<(usize, usize)> {
    match op.ints(key) {
        Some(v) if v.len() == 2 && v.iter().all(|&x| x > 0) => Ok((v[0] as usize, v[1] as usize)),
        Some(v) => bail!("{key} {v:?}: want two positive values {{w, h}}"),
        None => default.ok_or(format!("no {key} attribute")),
    }
}

/// A `fix` as NNAPI holds it: TENSOR_QUANT8_ASYMM at scale 2^-fix_point, zero point 128 when
/// signed (the DPU's q stored as q + 128), 0 when not. One operand type for both lets an
/// operation read signed values and write unsigned ones (a convolution whose ReLU output is
/// fixed unsigned) without a conversion, on NNAPI 1.0's own quantized type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fix {
    pub fp: i64,
    pub signed: bool,
}

impl Fix {
    pub fn zero_point(self) -> i32 {
        if self.signed {
            128
        } else {
            0
        }
    }

    pub fn scale(self) -> f32 {
        2f32.powi(-self.fp as i32)
    }

    /// The integer range of q (the DPU's values, before the zero point).
    pub fn range(self) -> (i64, i64) {
        if self.signed {
            (-128, 127)
        } else {
            (0, 255)
        }
    }
}

/// The fix points held as quant8 operands: every scale 2^-fp, and every product of two, stays
/// a normal float32 (the driver derives its multipliers in float32). Others keep the float
/// carrier (QUANTIZE + DEQUANTIZE).
pub const QUANT_FP: std::ops::RangeInclusive<i64> = -24..=40;

/// An operation the lowering computes on quant8 operands and NNAPI requantizes once: its exact
/// result `v` becomes the integer `acc = v · 2^(out.fp + shift)`, scaled by 2^-shift with the
/// driver's rounding (a rounding doubling high multiply by the Q31 `multiplier`, then a
/// rounding right shift by `right_shift`), saturated to `out`'s range. `reference` rounds it so.
///
/// At an exact power of two 2^-shift the driver's multiplier is (2^30, shift − 1): two
/// roundings. A convolution-like operator whose weight scale is one float32 ulp below 2^-fp_w
/// (`below`) gets (2^31 − 2^7, shift) instead: the multiply leaves every accumulator of
/// magnitude below 2^23 unchanged and the shift rounds once (`docs/xmodel.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requant {
    pub out: Fix,
    pub shift: i64,
    pub multiplier: i64,
    pub right_shift: i64,
    /// The weights are held at one float32 ulp below 2^-fp_w.
    pub below: bool,
}

impl Requant {
    /// The requantization by exactly 2^-shift (`shift ≥ 1`).
    pub fn power_of_two(out: Fix, shift: i64) -> Requant {
        Requant {
            out,
            shift,
            multiplier: 1 << 30,
            right_shift: shift - 1,
            below: false,
        }
    }
}

/// The largest float32 below 2^-fp (2^-fp · (1 − 2^-24)), a normal float for every fp in
/// [`QUANT_FP`].
pub fn scale_below(fp: i64) -> f32 {
    f32::from_bits(2f32.powi(-fp as i32).to_bits() - 1)
}

/// The Q31 multiplier and right shift NNAPI 1.0 derives for a quantized convolution-like
/// operation: `s_in · s_w` then `/ s_out`, both in float32, split as fraction · 2^e with the
/// fraction in [0.5, 1), the fraction rounded to 31 bits (half away from zero; a carry to 2^31
/// renormalised), the right shift −e. `None` when the multiplier is not in (0, 1).
pub fn nnapi_multiplier(s_in: f32, s_w: f32, s_out: f32) -> Option<(i64, i64)> {
    let real = f64::from(s_in * s_w / s_out);
    if !(real > 0.0 && real < 1.0) || real < f64::MIN_POSITIVE {
        return None;
    }
    let bits = real.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1022;
    let fraction = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    let mut q = (fraction * 2f64.powi(31)).round() as i64;
    if q == 1 << 31 {
        q /= 2;
        e += 1;
    }
    (e <= 0).then_some((q, -e))
}

/// The accumulators a requantization with `multiplier` 2^31 − 2^7 leaves unchanged: the
/// rounding doubling high multiply gives `acc − acc · 2^-24` rounded, which is `acc` while
/// |acc| < 2^23.
pub const BELOW_EXACT: i64 = 1 << 23;

#[derive(Clone, Debug)]
enum Val {
    Tensor(u32, Vec<usize>),
    /// A TENSOR_QUANT8_ASYMM operand holding a `fix`'s values.
    Quant(u32, Vec<usize>, Fix),
    /// A constant, with the `fix` it went through.
    Const(Vec<usize>, Vec<f64>, Option<Fix>),
}

struct Lowering<'a> {
    b: ModelBuilder,
    g: &'a Graph,
    vals: HashMap<usize, Val>,
    /// The float32 form (DEQUANTIZE) of quant8 values, made on first use.
    floats: HashMap<usize, u32>,
    /// `tensor` gives quant8 operands as they are (the operator being lowered takes them).
    quant_in: bool,
    /// The quantization of the operation outputs `emit` makes (none: float32).
    carrier: Option<Fix>,
    /// The operators needed, and the graph's outputs (whose values stay as XIR has them).
    need: HashSet<usize>,
    outs: HashSet<usize>,
    requant: HashMap<usize, Requant>,
}

fn dims(shape: &[usize]) -> Vec<u32> {
    shape.iter().map(|&d| d as u32).collect()
}

/// `v` through a `fix`: round (the file's mode), saturate to the bit width, scale back.
pub fn fix_value(v: f64, fp: i64, bits: i64, signed: bool, mode: &str) -> f64 {
    let x = v * 2f64.powi(fp as i32);
    let r = match mode {
        "DPU_ROUND" => {
            if x < 0.0 && x - x.floor() == 0.5 {
                x.ceil()
            } else {
                x.round()
            }
        }
        "PY3_ROUND" => x.round_ties_even(),
        _ => x.round(),
    };
    let (lo, hi) = if signed {
        (
            -(2f64.powi(bits as i32 - 1)),
            2f64.powi(bits as i32 - 1) - 1.0,
        )
    } else {
        (0.0, 2f64.powi(bits as i32) - 1.0)
    };
    r.clamp(lo, hi) * 2f64.powi(-fp as i32)
}

/// A `fix` operator's (fix_point, bit_width, if_signed, round_mode), checked.
pub fn fix_params(op: &Op) -> R<(i64, i64, bool, String)> {
    let fp = op.int("fix_point").ok_or("no fix_point")?;
    let bits = op.int("bit_width").ok_or("no bit_width")?;
    let signed = op.bool("if_signed").unwrap_or(true);
    let mode = op.string("round_mode").unwrap_or("DPU_ROUND").to_string();
    if bits != 8 {
        bail!("bit_width {bits}: only 8-bit fix has an NNAPI tensor type");
    }
    if !(-64..=64).contains(&fp) {
        bail!("fix_point {fp} out of range");
    }
    if !matches!(mode.as_str(), "DPU_ROUND" | "STD_ROUND" | "PY3_ROUND") {
        bail!("round_mode '{mode}'");
    }
    Ok((fp, bits, signed, mode))
}

impl Lowering<'_> {
    fn val(&self, i: usize) -> R<&Val> {
        self.vals
            .get(&i)
            .ok_or(format!("input '{}' was not lowered", self.g.ops[i].name))
    }

    fn konst(&self, i: usize) -> Option<(Vec<usize>, Vec<f64>)> {
        match self.vals.get(&i)? {
            Val::Const(s, d, _) => Some((s.clone(), d.clone())),
            _ => None,
        }
    }

    /// The `fix` a constant went through.
    fn const_fix(&self, i: usize) -> Option<Fix> {
        match self.vals.get(&i)? {
            Val::Const(_, _, f) => *f,
            _ => None,
        }
    }

    /// The quantization of a quant8 value.
    fn quant_of(&self, i: usize) -> Option<Fix> {
        match self.vals.get(&i)? {
            Val::Quant(_, _, f) => Some(*f),
            _ => None,
        }
    }

    /// Operator `i`'s value as an operand: a constant made a TENSOR_FLOAT32 on first use, a
    /// quant8 value as it is when the operator takes quant8 (`quant_in`), else its float32
    /// form (DEQUANTIZE, exact: q · 2^-fp is a float32).
    fn tensor(&mut self, i: usize) -> R<(u32, Vec<usize>)> {
        match self.val(i)?.clone() {
            Val::Tensor(t, s) => Ok((t, s)),
            Val::Quant(t, s, _) if self.quant_in => Ok((t, s)),
            Val::Quant(t, s, _) => {
                if let Some(&f) = self.floats.get(&i) {
                    return Ok((f, s));
                }
                let f = self.emit_typed(
                    OperationType::Dequantize,
                    &[t],
                    &s,
                    OperandType::TensorFloat32,
                    0.0,
                    0,
                )?;
                self.floats.insert(i, f);
                Ok((f, s))
            }
            Val::Const(s, d, _) => {
                let values: Vec<f32> = d.iter().map(|&x| x as f32).collect();
                let t = self.b.f32_tensor(&dims(&s), &values);
                self.vals.insert(i, Val::Tensor(t, s.clone()));
                Ok((t, s))
            }
        }
    }

    fn i32s(&mut self, v: &[i64]) -> u32 {
        let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        self.b.i32_tensor(&[v.len() as u32], &v, 0.0)
    }

    fn boolean(&mut self, v: bool) -> u32 {
        self.b.constant(OperandType::Bool, &[], &[u8::from(v)])
    }

    /// Appends `ty` with a fresh output (float32, or quant8 as `carrier` says) whose shape
    /// inference must give `shape`.
    fn emit(&mut self, ty: OperationType, inputs: &[u32], shape: &[usize]) -> R<u32> {
        match self.carrier {
            Some(f) => self.emit_typed(
                ty,
                inputs,
                shape,
                OperandType::TensorQuant8Asymm,
                f.scale(),
                f.zero_point(),
            ),
            None => self.emit_typed(ty, inputs, shape, OperandType::TensorFloat32, 0.0, 0),
        }
    }

    fn emit_typed(
        &mut self,
        ty: OperationType,
        inputs: &[u32],
        shape: &[usize],
        out: OperandType,
        scale: f32,
        zero_point: i32,
    ) -> R<u32> {
        let inferred = self
            .b
            .infer(ty, inputs)
            .map_err(|e| format!("{}: {e}", ty.name()))?;
        let want = dims(shape);
        if inferred.first() != Some(&want) {
            bail!(
                "{} gives {:?}, the file declares {:?}",
                ty.name(),
                inferred.first().cloned().unwrap_or_default(),
                want
            );
        }
        let o = self.b.temporary(out, &want, scale, zero_point);
        self.b.operation(ty, inputs, &[o]);
        Ok(o)
    }

    fn input(&mut self, op: &Op, arg: &str) -> R<(u32, Vec<usize>)> {
        let p = op.arg(arg);
        if p.len() != 1 {
            bail!("argument '{arg}' has {} operator(s), want 1", p.len());
        }
        self.tensor(p[0])
    }

    fn weights(&self, op: &Op, arg: &str) -> R<Option<(Vec<usize>, Vec<f64>)>> {
        match op.arg(arg) {
            [] => Ok(None),
            [p] => self
                .konst(*p)
                .map(Some)
                .ok_or(format!("argument '{arg}' is not a constant")),
            more => bail!("argument '{arg}' has {} operators", more.len()),
        }
    }
}

/// One operator: its value, and the line the summary gives it.
fn lower_op(l: &mut Lowering, op: &Op) -> R<String> {
    use OperationType as T;
    let shape = op.shape.clone();
    let name = op.name.as_str();
    let i = l.g.index(name).expect("own index");
    let unary = |l: &mut Lowering, ty: T| -> R<String> {
        let (x, _) = l.input(op, "input")?;
        let o = l.emit(ty, &[x], &shape)?;
        l.vals.insert(i, Val::Tensor(o, shape.clone()));
        Ok(ty.name().to_string())
    };
    let reshape_to = |l: &mut Lowering, x: u32, to: &[usize]| -> R<u32> {
        let s = l.i32s(&to.iter().map(|&d| d as i64).collect::<Vec<_>>());
        l.emit(T::Reshape, &[x, s], to)
    };
    let what = match op.ty.as_str() {
        "const" => {
            let data = op.data.clone().ok_or("const without data")?;
            l.vals.insert(i, Val::Const(shape, data, None));
            return Ok("constant".into());
        }
        "identity" => {
            let p = op.arg("input");
            if p.len() != 1 {
                bail!("identity of {} operators", p.len());
            }
            let v = l.val(p[0])?.clone();
            l.vals.insert(i, v);
            return Ok("(its input)".into());
        }
        "fix" => {
            let (fp, bits, signed, mode) = fix_params(op)?;
            let p = op.arg("input");
            if p.len() != 1 {
                bail!("fix of {} operators", p.len());
            }
            let fix = Fix { fp, signed };
            if let Some((s, d)) = l.konst(p[0]) {
                let d = d
                    .iter()
                    .map(|&v| fix_value(v, fp, bits, signed, &mode))
                    .collect();
                // Weights and biases as quant8 need the scale to stay a normal float32.
                let kept = QUANT_FP.contains(&fp).then_some(fix);
                l.vals.insert(i, Val::Const(s, d, kept));
                return Ok(format!("constant folded (fix_point {fp})"));
            }
            let before = l.quant_of(p[0]);
            if before == Some(fix) {
                // The operation before already wrote this fix's grid and range.
                let v = l.val(p[0])?.clone();
                l.vals.insert(i, v);
                return Ok("no operation (its input holds this quantization already)".into());
            }
            let (x, _) = l.tensor(p[0])?;
            if QUANT_FP.contains(&fp) {
                let t = l.emit_typed(
                    T::Quantize,
                    &[x],
                    &shape,
                    OperandType::TensorQuant8Asymm,
                    fix.scale(),
                    fix.zero_point(),
                )?;
                l.vals.insert(i, Val::Quant(t, shape, fix));
                return Ok(format!(
                    "{}QUANTIZE (TENSOR_QUANT8_ASYMM scale 2^-{fp}, zero point {})",
                    if before.is_some() {
                        "DEQUANTIZE + "
                    } else {
                        ""
                    },
                    fix.zero_point()
                ));
            }
            let scale = 2f32.powi(-fp as i32);
            let q = if signed {
                OperandType::TensorQuant8AsymmSigned
            } else {
                OperandType::TensorQuant8Asymm
            };
            let t = l.emit_typed(T::Quantize, &[x], &shape, q, scale, 0)?;
            let o = l.emit(T::Dequantize, &[t], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            return Ok(format!(
                "QUANTIZE + DEQUANTIZE ({} scale 2^-{fp})",
                q.name()
            ));
        }
        "relu" => return unary(l, T::Relu),
        "relu6" => return unary(l, T::Relu6),
        "sigmoid" => return unary(l, T::Logistic),
        "tanh" => return unary(l, T::Tanh),
        "hard-swish" => return unary(l, T::HardSwish),
        "leaky-relu" | "prelu" => {
            let (x, _) = l.input(op, "input")?;
            let alpha = if op.ty == "leaky-relu" {
                let a = op.float("alpha").ok_or("no alpha")?;
                l.b.f32_tensor(&[1], &[a as f32])
            } else {
                let (s, d) = l.weights(op, "weight")?.ok_or("no weight")?;
                let v: Vec<f32> = d.iter().map(|&x| x as f32).collect();
                let n = s.iter().product::<usize>();
                l.b.f32_tensor(&[n as u32], &v)
            };
            let o = l.emit(T::Prelu, &[x, alpha], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "PRELU".into()
        }
        "hard-sigmoid" => {
            // relu6(x + 3) / 6: ADD with a fused RELU6, then DIV (exact, unlike a multiply by
            // a rounded 1/6).
            let (x, s) = l.input(op, "input")?;
            let three = l.b.f32_tensor(&[1], &[3.0]);
            let six = l.b.f32_tensor(&[1], &[6.0]);
            let act = l.b.int(3);
            let none = l.b.int(0);
            let t = l.emit(T::Add, &[x, three, act], &s)?;
            let o = l.emit(T::Div, &[t, six, none], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "ADD (RELU6) + DIV".into()
        }
        "conv2d" | "depthwise-conv2d" | "transposed-conv2d" => conv(l, op, i)?,
        "inner-product" | "matmul" => dense(l, op, i)?,
        "add" | "sub" | "mul" | "div" | "max" | "min" => {
            let (ty, act) = match op.ty.as_str() {
                "add" => (T::Add, true),
                "sub" => (T::Sub, true),
                "mul" => (T::Mul, true),
                "div" => (T::Div, true),
                "max" => (T::Maximum, false),
                _ => (T::Minimum, false),
            };
            let p = op.arg("input").to_vec();
            if p.len() < 2 {
                bail!("{} of {} input(s), want at least 2", op.ty, p.len());
            }
            // The quant8 form (two inputs) is one operation writing the output's quantization.
            let quant = eltwise_quant(l, op, i, &p);
            let what = quant_what(l, i, quant, ty.name());
            if quant.is_some() {
                l.quant_in = true;
            }
            let (mut acc, _) = l.tensor(p[0])?;
            for (k, &q) in p.iter().enumerate().skip(1) {
                let (y, _) = l.tensor(q)?;
                let mut ins = vec![acc, y];
                if act {
                    ins.push(l.b.int(0));
                }
                let out_shape = if k + 1 == p.len() {
                    shape.clone()
                } else {
                    let d = l.b.infer(ty, &ins)?;
                    d[0].iter().map(|&x| x as usize).collect()
                };
                acc = l.emit(ty, &ins, &out_shape)?;
            }
            l.vals.insert(i, Val::Tensor(acc, shape));
            if p.len() == 2 {
                what
            } else {
                format!("{what} ×{}", p.len() - 1)
            }
        }
        "maxpool2d" | "avgpool2d" => pool(l, op, i)?,
        "reduction_mean" | "reduction_max" | "reduction_sum" => {
            let (x, s) = l.input(op, "input")?;
            let rank = s.len() as i64;
            let axes: Vec<i64> = op
                .ints("axis")
                .ok_or("no axis")?
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            if axes.iter().any(|&a| !(0..rank).contains(&a)) {
                bail!("axis out of range for rank {rank}");
            }
            let keep = op.bool("keep_dims").unwrap_or(false);
            let a = l.i32s(&axes);
            let (ty, k) = match op.ty.as_str() {
                "reduction_mean" => (T::Mean, l.b.int(i32::from(keep))),
                "reduction_max" => (T::ReduceMax, l.boolean(keep)),
                _ => (T::ReduceSum, l.boolean(keep)),
            };
            let o = l.emit(ty, &[x, a, k], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            ty.name().to_string()
        }
        "pad" => {
            let (x, s) = l.input(op, "input")?;
            let mode = op.string("mode").unwrap_or("CONSTANT");
            let p = op.ints("paddings").ok_or("no paddings")?;
            if p.len() != 2 * s.len() || p.iter().any(|&v| v < 0) {
                bail!("paddings {p:?} for rank {}", s.len());
            }
            if mode != "CONSTANT" {
                let o = mirror_pad(l, x, &s, &p, mode)?;
                if l.b.operand_at(o).dimensions != dims(&shape) {
                    bail!(
                        "padded to {:?}, the file declares {shape:?}",
                        l.b.operand_at(o).dimensions
                    );
                }
                l.vals.insert(i, Val::Tensor(o, shape));
                return Ok(format!("{mode} padding as SLICE + CONCATENATION"));
            }
            let values = op.floats("constant_values").unwrap_or_default();
            let c = values.first().copied().unwrap_or(0.0);
            if values.iter().any(|&v| v != c) {
                bail!("constant_values {values:?}: NNAPI pads with one value");
            }
            let pads = l.b.i32_tensor(
                &[s.len() as u32, 2],
                &p.iter().map(|&v| v as i32).collect::<Vec<_>>(),
                0.0,
            );
            let cv = match l.carrier {
                Some(f) => {
                    l.b.int((c * 2f64.powi(f.fp as i32)) as i32 + f.zero_point())
                }
                None => l.b.float(c as f32),
            };
            let o = l.emit(T::PadV2, &[x, pads, cv], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "PAD_V2".into()
        }
        "reshape" | "flatten" | "squeeze" => {
            let (x, s) = l.input(op, "input")?;
            if s.iter().product::<usize>() != shape.iter().product::<usize>() {
                bail!("{s:?} has not the element count of {shape:?}");
            }
            let o = reshape_to(l, x, &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "RESHAPE".into()
        }
        "resize" => {
            let (x, s) = l.input(op, "input")?;
            if s.len() != 4 || shape.len() != 4 {
                bail!("resize of rank {}", s.len());
            }
            let ty = match op.string("mode").unwrap_or("NEAREST") {
                "NEAREST" => T::ResizeNearestNeighbor,
                "BILINEAR" => T::ResizeBilinear,
                m => bail!("resize mode '{m}'"),
            };
            let ac = op.bool("align_corners").unwrap_or(false);
            let hp = op.bool("half_pixel_centers").unwrap_or(false);
            let w = l.b.int(shape[2] as i32);
            let h = l.b.int(shape[1] as i32);
            let nchw = l.boolean(false);
            let a = l.boolean(ac);
            let hpo = l.boolean(hp);
            let o = l.emit(ty, &[x, w, h, nchw, a, hpo], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            ty.name().to_string()
        }
        "gstiling" | "reorg" | "pixel-shuffle" => rearrange(l, op, i)?,
        "concat" => {
            let p = op.arg("input").to_vec();
            if p.is_empty() {
                bail!("concat of nothing");
            }
            let mut ins = Vec::new();
            for q in p {
                ins.push(l.tensor(q)?.0);
            }
            let rank = shape.len() as i64;
            let axis = op.int("axis").ok_or("no axis")?;
            let axis = if axis < 0 { axis + rank } else { axis };
            if !(0..rank).contains(&axis) {
                bail!("axis out of range");
            }
            ins.push(l.b.int(axis as i32));
            let o = l.emit(T::Concatenation, &ins, &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "CONCATENATION".into()
        }
        "softmax" => {
            let (x, s) = l.input(op, "input")?;
            let axis = op.int("axis").unwrap_or(-1);
            let axis = if axis < 0 {
                axis + s.len() as i64
            } else {
                axis
            };
            let beta = l.b.float(1.0);
            let a = l.b.int(axis as i32);
            let o = l.emit(T::Softmax, &[x, beta, a], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "SOFTMAX".into()
        }
        "transpose" => {
            let (x, _) = l.input(op, "input")?;
            let order = op.ints("order").ok_or("no order")?;
            let perm = l.i32s(&order);
            let o = l.emit(T::Transpose, &[x, perm], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "TRANSPOSE".into()
        }
        "tile" => {
            let (x, _) = l.input(op, "input")?;
            let m = op.ints("multiples").ok_or("no multiples")?;
            let mt = l.i32s(&m);
            let o = l.emit(T::Tile, &[x, mt], &shape)?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "TILE".into()
        }
        "strided_slice" => {
            let (x, s) = l.input(op, "input")?;
            let (begin, end, strides) = slice_bounds(op, &s)?;
            let bt = l.i32s(&begin);
            let et = l.i32s(&end);
            let st = l.i32s(&strides);
            let zero = [l.b.int(0), l.b.int(0), l.b.int(0)];
            let o = l.emit(
                T::StridedSlice,
                &[x, bt, et, st, zero[0], zero[1], zero[2]],
                &shape,
            )?;
            l.vals.insert(i, Val::Tensor(o, shape));
            "STRIDED_SLICE".into()
        }
        other => bail!(
            "operator type '{other}' is not lowered{}",
            if SUPPORTED.contains(&other) {
                ""
            } else {
                " (not an XIR built-in this importer knows: a custom operator?)"
            }
        ),
    };
    Ok(what)
}

/// REFLECT (the edge not repeated) or SYMMETRIC (repeated) padding, exactly, axis by axis: the
/// mirrored rows are one-element SLICEs concatenated around the tensor (NNAPI has no mirror pad
/// before its feature level 7).
fn mirror_pad(l: &mut Lowering, x: u32, s: &[usize], p: &[i64], mode: &str) -> R<u32> {
    use OperationType as T;
    let reflect = match mode {
        "REFLECT" => true,
        "SYMMETRIC" => false,
        other => bail!("pad mode '{other}'"),
    };
    let (mut cur, mut shape) = (x, s.to_vec());
    for axis in 0..s.len() {
        let (before, after) = (p[2 * axis] as usize, p[2 * axis + 1] as usize);
        if before == 0 && after == 0 {
            continue;
        }
        let n = shape[axis];
        let limit = if reflect { n.saturating_sub(1) } else { n };
        if before > limit || after > limit {
            bail!("{mode} padding of {before}/{after} on an axis of {n}");
        }
        let mut rows: Vec<usize> = (0..before)
            .map(|k| if reflect { before - k } else { before - 1 - k })
            .collect();
        let first_after = rows.len();
        rows.extend((0..after).map(|k| if reflect { n - 2 - k } else { n - 1 - k }));
        let mut row_shape = shape.clone();
        row_shape[axis] = 1;
        let size = l.i32s(&row_shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let mut pieces = Vec::new();
        for (k, &r) in rows.iter().enumerate() {
            if k == first_after {
                pieces.push(cur);
            }
            let mut begin = vec![0i64; shape.len()];
            begin[axis] = r as i64;
            let b = l.i32s(&begin);
            pieces.push(l.emit(T::Slice, &[cur, b, size], &row_shape)?);
        }
        if first_after == rows.len() {
            pieces.push(cur);
        }
        shape[axis] = n + before + after;
        pieces.push(l.b.int(axis as i32));
        cur = l.emit(T::Concatenation, &pieces, &shape)?;
    }
    Ok(cur)
}

/// `strided_slice`'s begin/end/strides made concrete for every axis (positive strides,
/// Python's clamping), as NNAPI's STRIDED_SLICE takes them.
pub fn slice_bounds(op: &Op, s: &[usize]) -> R<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    let begin = op.ints("begin").ok_or("no begin")?;
    let end = op.ints("end").ok_or("no end")?;
    let strides = op.ints("strides").unwrap_or_else(|| vec![1; begin.len()]);
    if begin.len() != end.len() || begin.len() != strides.len() || begin.len() > s.len() {
        bail!(
            "begin/end/strides lengths {}/{}/{}",
            begin.len(),
            end.len(),
            strides.len()
        );
    }
    let (mut b, mut e, mut st) = (Vec::new(), Vec::new(), Vec::new());
    for (k, &d) in s.iter().enumerate() {
        let d = d as i64;
        if k >= begin.len() {
            b.push(0);
            e.push(d);
            st.push(1);
            continue;
        }
        if strides[k] <= 0 {
            bail!("stride {} (only positive strides)", strides[k]);
        }
        let norm = |v: i64| (if v < 0 { v + d } else { v }).clamp(0, d);
        b.push(norm(begin[k]));
        e.push(norm(end[k]).max(norm(begin[k])));
        st.push(strides[k]);
    }
    Ok((b, e, st))
}

fn conv(l: &mut Lowering, op: &Op, i: usize) -> R<String> {
    use OperationType as T;
    let shape = op.shape.clone();
    let quant = conv_quant(
        l,
        op,
        i,
        op.arg("input").first().copied(),
        op.arg("weights").first().copied(),
    )?;
    l.quant_in = quant.is_some();
    let (x, s) = l.input(op, "input")?;
    l.quant_in = false;
    let (ws, w) = l.weights(op, "weights")?.ok_or("no weights")?;
    if s.len() != 4 || ws.len() != 4 || shape.len() != 4 {
        bail!("input {s:?}, weights {ws:?}: want 4-D NHWC");
    }
    let (kw, kh) = pair(op, "kernel", Some((ws[2], ws[1])))?;
    if (kh, kw) != (ws[1], ws[2]) {
        bail!("kernel {{{kw}, {kh}}} disagrees with weights {ws:?}");
    }
    let (sw, sh) = pair(op, "stride", Some((1, 1)))?;
    let (dw, dh) = pair(op, "dilation", Some((1, 1)))?;
    let out_c = match op.ty.as_str() {
        "depthwise-conv2d" => ws[0] * ws[3],
        _ => ws[0],
    };
    if shape[3] != out_c {
        bail!(
            "{} output channels declared, the weights give {out_c}",
            shape[3]
        );
    }
    let bias: Vec<f64> = match l.weights(op, "bias")? {
        Some((bs, b)) if bs.iter().product::<usize>() == out_c => b,
        Some((bs, _)) => bail!("bias {bs:?} for {out_c} output channels"),
        None => vec![0.0; out_c],
    };
    let sc = |l: &mut Lowering, v: usize| l.b.int(v as i32);
    let (ty, filter_shape, filter): (T, Vec<usize>, Vec<f64>) = match op.ty.as_str() {
        "transposed-conv2d" => {
            // XIR correlates the stride-dilated input with the unflipped weights; NNAPI's
            // TRANSPOSE_CONV_2D scatters, which is the same with the kernel flipped in H and W.
            let mut f = vec![0.0; w.len()];
            let (oc, ic) = (ws[0], ws[3]);
            for o in 0..oc {
                for y in 0..kh {
                    for xx in 0..kw {
                        for c in 0..ic {
                            f[((o * kh + y) * kw + xx) * ic + c] =
                                w[((o * kh + (kh - 1 - y)) * kw + (kw - 1 - xx)) * ic + c];
                        }
                    }
                }
            }
            (T::TransposeConv2d, ws.clone(), f)
        }
        "depthwise-conv2d" => {
            // XIR [M, kh, kw, C] → NNAPI [1, kh, kw, C·M], output channel c·M + m.
            let (m, c) = (ws[0], ws[3]);
            let mut f = vec![0.0; w.len()];
            for mm in 0..m {
                for y in 0..kh {
                    for xx in 0..kw {
                        for cc in 0..c {
                            f[(y * kw + xx) * c * m + cc * m + mm] =
                                w[((mm * kh + y) * kw + xx) * c + cc];
                        }
                    }
                }
            }
            (T::DepthwiseConv2d, vec![1, kh, kw, c * m], f)
        }
        _ => {
            let group = op.int("group").unwrap_or(1);
            if group < 1 || !s[3].is_multiple_of(group as usize) || ws[3] * group as usize != s[3] {
                bail!(
                    "group {group} with {} input channels and weights {ws:?}",
                    s[3]
                );
            }
            let ty = if group > 1 {
                T::GroupedConv2d
            } else {
                T::Conv2d
            };
            (ty, ws.clone(), w.clone())
        }
    };
    // NNAPI's depthwise filter [1, h, w, channels] has its output channel last.
    let axis = if ty == T::DepthwiseConv2d {
        filter_shape.len().saturating_sub(1)
    } else {
        0
    };
    let (ft, bt, quant) = filter_and_bias(l, quant, &filter_shape, axis, &filter, &bias);
    let mut ins = vec![x, ft, bt];
    if ty == T::TransposeConv2d {
        if (dw, dh) != (1, 1) {
            bail!("a dilated transposed convolution");
        }
        // Output (in − 1)·s + k − pad: the declared size fixes the right/bottom padding.
        let given = op.ints("pad").unwrap_or_else(|| vec![0; 4]);
        let mode = op.string("pad_mode").unwrap_or("FLOOR");
        let full = |inp: usize, k: usize, st: usize| (inp - 1) * st + k;
        let (fw, fh) = (full(s[2], kw, sw), full(s[1], kh, sh));
        if fw < shape[2] || fh < shape[1] || given.len() != 4 || given.iter().any(|&p| p < 0) {
            bail!("output {shape:?} larger than the transposed convolution gives, or bad pad");
        }
        let (tw, th) = (fw - shape[2], fh - shape[1]);
        let (pl, pt) = match mode {
            "SAME" | "VALID" => (tw / 2, th / 2),
            _ => (given[0] as usize, given[2] as usize),
        };
        if pl > tw || pt > th {
            bail!("pad {given:?} for output {shape:?}");
        }
        for v in [pl, tw - pl, pt, th - pt, sw, sh] {
            ins.push(sc(l, v));
        }
    } else {
        let pads = window_pads(
            op,
            (s[1], s[2]),
            (kw, kh),
            (sw, sh),
            (dw, dh),
            (shape[1], shape[2]),
        )?;
        for v in pads {
            ins.push(sc(l, v));
        }
        ins.push(sc(l, sw));
        ins.push(sc(l, sh));
        if ty == T::DepthwiseConv2d {
            ins.push(sc(l, ws[0]));
        }
        if ty == T::GroupedConv2d {
            if (dw, dh) != (1, 1) {
                bail!("a dilated grouped convolution");
            }
            ins.push(sc(l, s[3] / ws[3]));
        }
    }
    ins.push(sc(l, 0));
    if ty == T::GroupedConv2d || ty == T::TransposeConv2d || (dw, dh) != (1, 1) {
        ins.push(l.boolean(false));
    }
    if (dw, dh) != (1, 1) {
        ins.push(sc(l, dw));
        ins.push(sc(l, dh));
    }
    let what = quant_what(l, i, quant, ty.name());
    let o = l.emit(ty, &ins, &shape)?;
    l.vals.insert(i, Val::Tensor(o, shape));
    Ok(what)
}

/// A convolution-like operator's quant8 form: its requantization and the input and weight
/// fixes, when its input is quant8, its weights went through a `fix` and a `fix` follows it
/// (past quantization-transparent operators); `None` keeps the float form. Refused: an output
/// multiplier of 1 or more, and a bias finer than input × weights (a negative bias shift).
fn conv_quant(
    l: &Lowering,
    op: &Op,
    i: usize,
    input: Option<usize>,
    weights: Option<usize>,
) -> R<Option<(Requant, Fix, Fix)>> {
    let (Some(input), Some(weights)) = (input, weights) else {
        return Ok(None);
    };
    let (Some(fin), Some(fw)) = (l.quant_of(input), l.const_fix(weights)) else {
        return Ok(None);
    };
    let Some(out) = out_fix(l, i) else {
        return Ok(None);
    };
    let shift = fin.fp + fw.fp - out.fp;
    if shift < 1 {
        bail!(
            "output multiplier 2^{} (input 2^-{}, weights 2^-{}, output 2^-{}) is not below 1: \
             NNAPI 1.0 requires the output scale of a quantized convolution or fully \
             connected layer to exceed input scale × filter scale",
            -shift,
            fin.fp,
            fw.fp,
            out.fp
        );
    }
    let product = 2f64.powi((fin.fp + fw.fp) as i32);
    if let Some(&b) = op.arg("bias").first() {
        if let Some(fb) = l.const_fix(b) {
            let sb = fin.fp + fw.fp - fb.fp;
            if sb < 0 {
                bail!(
                    "negative bias shift {sb}: the bias fix_point {} is finer than input × \
                     weights (2^-{}); an int32 bias at that scale cannot hold it exactly",
                    fb.fp,
                    fin.fp + fw.fp
                );
            }
        }
        // An unfixed bias must land on the int32 grid too, else the float form.
        let on_grid = l.konst(b).is_some_and(|(_, d)| {
            d.iter().all(|&v| {
                let q = v * product;
                q.fract() == 0.0 && q.abs() < 2f64.powi(31)
            })
        });
        if !on_grid {
            return Ok(None);
        }
    }
    let wq = l.konst(weights).map(|(_, d)| d).unwrap_or_default();
    if weight_zero_point(&wq, fw).is_none() {
        return Ok(None);
    }
    Ok(Some((Requant::power_of_two(out, shift), fin, fw)))
}

/// The zero point that holds weights `w` (on `fix`'s grid) in uint8: 128 for signed values, 0
/// for values in [0, 255]; `None` when neither holds them.
fn weight_zero_point(w: &[f64], fix: Fix) -> Option<i64> {
    let step = 2f64.powi(fix.fp as i32);
    let q: Vec<f64> = w.iter().map(|&v| v * step).collect();
    if q.iter().any(|v| v.fract() != 0.0) {
        None
    } else if q.iter().all(|&v| (-128.0..=127.0).contains(&v)) {
        Some(128)
    } else if q.iter().all(|&v| (0.0..=255.0).contains(&v)) {
        Some(0)
    } else {
        None
    }
}

/// The filter and bias operands: float32, or for the quant8 form TENSOR_QUANT8_ASYMM weights
/// and a TENSOR_INT32 bias at scale s_in·s_w (each value exactly `b · 2^(fp_in + fp_w)`,
/// checked by `conv_quant`). The weight scale is one float32 ulp below 2^-fp_w ([`scale_below`])
/// when every accumulator of the layer stays below [`BELOW_EXACT`] (bounded per output channel,
/// the filter's `channel_axis`, from the largest input and the weights and bias): the driver
/// then rounds once; otherwise exactly 2^-fp_w. The integers stay the file's either way; the
/// requantization returned says which.
fn filter_and_bias(
    l: &mut Lowering,
    quant: Option<(Requant, Fix, Fix)>,
    filter_shape: &[usize],
    channel_axis: usize,
    filter: &[f64],
    bias: &[f64],
) -> (u32, u32, Option<(Requant, Fix, Fix)>) {
    match quant {
        Some((rq, fin, fw)) => {
            let zp = weight_zero_point(filter, fw).unwrap_or(128);
            let step = 2f64.powi(fw.fp as i32);
            let q: Vec<i64> = filter.iter().map(|&v| (v * step) as i64).collect();
            let product = 2f64.powi((fin.fp + fw.fp) as i32);
            let b: Vec<i32> = bias.iter().map(|&v| (v * product) as i32).collect();
            // |x − zp_x| is at most 128 (signed input) or 255 (unsigned).
            let x_max: i64 = if fin.signed { 128 } else { 255 };
            let channels = filter_shape.get(channel_axis).copied().unwrap_or(1).max(1);
            let inner: usize = filter_shape
                .get(channel_axis + 1..)
                .map_or(1, |s| s.iter().product());
            let mut bound = vec![0i64; channels];
            for (n, &w) in q.iter().enumerate() {
                bound[(n / inner.max(1)) % channels] += w.abs() * x_max;
            }
            for (c, &v) in b.iter().enumerate() {
                if let Some(s) = bound.get_mut(c) {
                    *s += i64::from(v).abs();
                }
            }
            // Past a right shift of 31 the driver's multiplier is zero: keep the power of two.
            let below = rq.shift <= 31 && bound.iter().all(|&s| s < BELOW_EXACT);
            let s_w = if below {
                scale_below(fw.fp)
            } else {
                fw.scale()
            };
            let rq = match nnapi_multiplier(fin.scale(), s_w, rq.out.scale()) {
                Some((multiplier, right_shift)) if below => Requant {
                    multiplier,
                    right_shift,
                    below,
                    ..rq
                },
                _ => rq,
            };
            let u: Vec<u8> = q.iter().map(|&v| (v + zp) as u8).collect();
            let ft = l.b.u8_tensor(&dims(filter_shape), &u, s_w, zp as i32);
            let bt = l.b.i32_tensor(&[bias.len() as u32], &b, fin.scale() * s_w);
            (ft, bt, Some((rq, fin, fw)))
        }
        None => {
            let f: Vec<f32> = filter.iter().map(|&v| v as f32).collect();
            let ft = l.b.f32_tensor(&dims(filter_shape), &f);
            let b: Vec<f32> = bias.iter().map(|&v| v as f32).collect();
            let bt = l.b.f32_tensor(&[bias.len() as u32], &b);
            (ft, bt, None)
        }
    }
}

/// Sets the quant8 output of an operator lowered in its quant8 form, records its
/// requantization, and says so.
fn quant_what(
    l: &mut Lowering,
    i: usize,
    quant: Option<(Requant, Fix, Fix)>,
    name: &str,
) -> String {
    match quant {
        Some((rq, _, _)) => {
            l.carrier = Some(rq.out);
            l.requant.insert(i, rq);
            format!(
                "{name} on TENSOR_QUANT8_ASYMM (output scale 2^-{}, zero point {}; \
                 requantized by 2^-{}{})",
                rq.out.fp,
                rq.out.zero_point(),
                rq.shift,
                if rq.below {
                    format!(
                        ", weights one ulp below 2^-fp: multiplier {} >> {}",
                        rq.multiplier, rq.right_shift
                    )
                } else {
                    String::new()
                }
            )
        }
        None => name.to_string(),
    }
}

/// The `fix` an arithmetic operator's output reaches through quantization-transparent
/// operators (each the only consumer of the one before, none a graph output): the quantization
/// its quant8 form writes. The rounding then happens before those operators rather than after;
/// each of them commutes with it (ReLU, ReLU6 with 6 on the grid, max pooling and max
/// reductions are monotone; the rest move or copy values).
fn out_fix(l: &Lowering, i: usize) -> Option<Fix> {
    let g = l.g;
    let mut cur = i;
    let mut relu6 = false;
    loop {
        if l.outs.contains(&cur) {
            return None;
        }
        let next: Vec<usize> = g
            .consumers(cur)
            .into_iter()
            .filter(|c| l.need.contains(c))
            .collect();
        let [n] = next[..] else {
            return None;
        };
        let op = &g.ops[n];
        match op.ty.as_str() {
            "fix" => {
                let (fp, _, signed, _) = fix_params(op).ok()?;
                return (QUANT_FP.contains(&fp) && (!relu6 || fp >= -1))
                    .then_some(Fix { fp, signed });
            }
            "resize" if op.string("mode").unwrap_or("NEAREST") != "NEAREST" => return None,
            t if TRANSPARENT.contains(&t) => {
                relu6 |= t == "relu6";
                cur = n;
            }
            _ => return None,
        }
    }
}

/// Operators that move, copy, select or clamp values: on quant8 operands of one quantization
/// they keep it (`resize` only NEAREST, `relu6` only with 6 on the grid, `pad` only with its
/// value on it, `max`/`min` only between quant8 operands).
const TRANSPARENT: &[&str] = &[
    "identity",
    "relu",
    "relu6",
    "reshape",
    "flatten",
    "squeeze",
    "maxpool2d",
    "reduction_max",
    "transpose",
    "strided_slice",
    "tile",
    "gstiling",
    "reorg",
    "pixel-shuffle",
    "concat",
    "pad",
    "resize",
    "max",
    "min",
];

/// The quantization a quantization-transparent operator keeps: that of its inputs, when they
/// are all quant8 of one quantization and the operator's parameters stay on its grid.
fn transparent_fix(l: &Lowering, op: &Op) -> Option<Fix> {
    if !TRANSPARENT.contains(&op.ty.as_str()) || op.ty == "identity" {
        return None;
    }
    let args = op.arg("input");
    let mut fix = None;
    for &p in args {
        let f = l.quant_of(p)?;
        if fix.is_some_and(|g| g != f) {
            return None;
        }
        fix = Some(f);
    }
    let f = fix?;
    let on_grid = |v: f64| {
        let q = v * 2f64.powi(f.fp as i32);
        let (lo, hi) = f.range();
        q.fract() == 0.0 && (lo as f64..=hi as f64).contains(&q)
    };
    let ok = match op.ty.as_str() {
        "relu6" => f.fp >= -1,
        "resize" => op.string("mode").unwrap_or("NEAREST") == "NEAREST",
        "pad" if op.string("mode").unwrap_or("CONSTANT") == "CONSTANT" => on_grid(
            op.floats("constant_values")
                .unwrap_or_default()
                .first()
                .copied()
                .unwrap_or(0.0),
        ),
        _ => true,
    };
    ok.then_some(f)
}

/// ADD, SUB and MUL of two quant8 operands followed by a `fix`: the driver's requantization
/// (ADD/SUB bring both inputs to twice the coarser scale with 2^20 of headroom, exact while
/// the finer scale is at most 2^19 finer; MUL multiplies the integers). `None` (the float
/// form) when that is not exact or the output multiplier is not below 1.
fn eltwise_quant(l: &Lowering, op: &Op, i: usize, p: &[usize]) -> Option<(Requant, Fix, Fix)> {
    if p.len() != 2 || !matches!(op.ty.as_str(), "add" | "sub" | "mul") {
        return None;
    }
    let (a, b) = (l.quant_of(p[0])?, l.quant_of(p[1])?);
    let out = out_fix(l, i)?;
    let shift = if op.ty == "mul" {
        a.fp + b.fp - out.fp
    } else {
        let (lo, hi) = (a.fp.min(b.fp), a.fp.max(b.fp));
        if hi - lo > 19 {
            return None;
        }
        19 + lo - out.fp
    };
    (1..=31)
        .contains(&shift)
        .then_some((Requant::power_of_two(out, shift), a, b))
}

fn dense(l: &mut Lowering, op: &Op, i: usize) -> R<String> {
    use OperationType as T;
    let shape = op.shape.clone();
    let weight_op: Option<usize>;
    let (a, k_rows, weights): (usize, usize, Vec<f64>) = if op.ty == "inner-product" {
        let p = op.arg("input");
        if p.len() != 1 {
            bail!("inner-product of {} inputs", p.len());
        }
        let (ws, w) = l.weights(op, "weights")?.ok_or("no weights")?;
        weight_op = op.arg("weights").first().copied();
        (p[0], ws[0], w)
    } else {
        let p: Vec<usize> = op
            .args
            .iter()
            .filter(|(n, _)| n != "bias")
            .flat_map(|(_, p)| p.iter().copied())
            .collect();
        if p.len() != 2 {
            bail!("matmul of {} inputs", p.len());
        }
        if op.bool("transpose_a").unwrap_or(false) {
            bail!("matmul with transpose_a");
        }
        let (bs, bv) = l
            .konst(p[1])
            .ok_or("matmul of two activations (B is not constant)")?;
        weight_op = Some(p[1]);
        if bs.len() != 2 {
            bail!("matmul B of shape {bs:?}");
        }
        if op.bool("transpose_b").unwrap_or(false) {
            (p[0], bs[0], bv)
        } else {
            let (k, n) = (bs[0], bs[1]);
            let mut t = vec![0.0; k * n];
            for r in 0..k {
                for c in 0..n {
                    t[c * k + r] = bv[r * n + c];
                }
            }
            (p[0], n, t)
        }
    };
    let quant = conv_quant(l, op, i, Some(a), weight_op)?;
    l.quant_in = quant.is_some();
    let (x, s) = l.tensor(a)?;
    l.quant_in = false;
    let total: usize = s.iter().product();
    let units = k_rows;
    if units == 0 || !weights.len().is_multiple_of(units) {
        bail!("weights of {} values for {units} units", weights.len());
    }
    let depth = weights.len() / units;
    if depth == 0 || !total.is_multiple_of(depth) {
        bail!("input {s:?} does not flatten to rows of {depth}");
    }
    let batch = total / depth;
    let bias: Vec<f64> = match l.weights(op, "bias")? {
        Some((_, b)) if b.len() == units => b,
        Some((bs, _)) => bail!("bias {bs:?} for {units} units"),
        None => vec![0.0; units],
    };
    let (wt, bt, quant) = filter_and_bias(l, quant, &[units, depth], 0, &weights, &bias);
    let act = l.b.int(0);
    if shape.iter().product::<usize>() != batch * units {
        bail!("output {shape:?} is not {batch}×{units}");
    }
    let what = quant_what(l, i, quant, "FULLY_CONNECTED");
    let mut o = l.emit(T::FullyConnected, &[x, wt, bt, act], &[batch, units])?;
    if shape != [batch, units] {
        let st = l.i32s(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        o = l.emit(T::Reshape, &[o, st], &shape)?;
    }
    l.vals.insert(i, Val::Tensor(o, shape));
    Ok(what)
}

fn pool(l: &mut Lowering, op: &Op, i: usize) -> R<String> {
    use OperationType as T;
    let shape = op.shape.clone();
    let (mut x, s) = l.input(op, "input")?;
    if s.len() != 4 || shape.len() != 4 {
        bail!("pooling of rank {}", s.len());
    }
    let global = op.bool("global").unwrap_or(false);
    let (kw, kh) = if global {
        (s[2], s[1])
    } else {
        pair(op, "kernel", None)?
    };
    let (sw, sh) = if global {
        (1, 1)
    } else {
        pair(op, "stride", Some((1, 1)))?
    };
    let mut pads = if global {
        [0; 4]
    } else {
        window_pads(
            op,
            (s[1], s[2]),
            (kw, kh),
            (sw, sh),
            (1, 1),
            (shape[1], shape[2]),
        )?
    };
    let avg = op.ty == "avgpool2d";
    let mut what = String::new();
    if avg && op.bool("count_include_pad").unwrap_or(true) && pads.iter().any(|&p| p > 0) {
        // XIR counts the padding in the divisor, NNAPI does not: pad with zeros first. The
        // part CEIL adds beyond `pad` is counted too with `count_include_invalid` ("count data
        // outside the padded input", XIR's default true), else it stays outside the count.
        let invalid = op.bool("count_include_invalid").unwrap_or(true);
        let given = match op.string("pad_mode").unwrap_or("FLOOR") {
            "FLOOR" | "CEIL" if !invalid => {
                let g = op.ints("pad").unwrap_or_else(|| vec![0; 4]);
                [g[0] as usize, g[1] as usize, g[2] as usize, g[3] as usize]
            }
            _ => pads,
        };
        let given = [
            given[0].min(pads[0]),
            given[1].min(pads[1]),
            given[2].min(pads[2]),
            given[3].min(pads[3]),
        ];
        let padded = [
            s[0],
            s[1] + given[2] + given[3],
            s[2] + given[0] + given[1],
            s[3],
        ];
        let p = l.b.i32_tensor(
            &[4, 2],
            &[
                0,
                0,
                given[2] as i32,
                given[3] as i32,
                given[0] as i32,
                given[1] as i32,
                0,
                0,
            ],
            0.0,
        );
        x = l.emit(T::Pad, &[x, p], &padded)?;
        for k in 0..4 {
            pads[k] -= given[k];
        }
        what.push_str("PAD + ");
    }
    let ty = if avg { T::AveragePool2d } else { T::MaxPool2d };
    let mut ins = vec![x];
    for v in pads.iter().copied().chain([sw, sh, kw, kh, 0]) {
        ins.push(l.b.int(v as i32));
    }
    let o = l.emit(ty, &ins, &shape)?;
    l.vals.insert(i, Val::Tensor(o, shape));
    what.push_str(ty.name());
    Ok(what)
}

/// `gstiling` (SPACE_TO_DEPTH, or DEPTH_TO_SPACE reversed), `reorg` (a reshape,
/// SPACE_TO_DEPTH, reshape chain, or its inverse) and `pixel-shuffle` (PyTorch's channel order
/// `c·r² + i·r + j`, regrouped to NNAPI's `(i·r + j)·C + c` with a transpose).
fn rearrange(l: &mut Lowering, op: &Op, i: usize) -> R<String> {
    use OperationType as T;
    let shape = op.shape.clone();
    let (x, s) = l.input(op, "input")?;
    if s.len() != 4 || shape.len() != 4 {
        bail!("rank {}, want 4", s.len());
    }
    let (n, h, w, c) = (s[0], s[1], s[2], s[3]);
    let key = if op.ty == "gstiling" {
        "stride"
    } else {
        "scale"
    };
    let r = op.int(key).ok_or(format!("no {key}"))?;
    if !(1..=64).contains(&r) {
        bail!("{key} {r}");
    }
    let r = r as usize;
    let reverse = if op.ty == "pixel-shuffle" {
        op.bool("upscale").unwrap_or(true)
    } else {
        op.bool("reverse").unwrap_or(false)
    };
    let rs = |l: &mut Lowering, x: u32, to: &[usize]| -> R<u32> {
        let st = l.i32s(&to.iter().map(|&d| d as i64).collect::<Vec<_>>());
        l.emit(T::Reshape, &[x, st], to)
    };
    let block = |l: &mut Lowering, ty: T, x: u32, to: &[usize]| -> R<u32> {
        let b = l.b.int(r as i32);
        l.emit(ty, &[x, b], to)
    };
    let regroup = |l: &mut Lowering, x: u32, rows: usize, a: usize, b: usize| -> R<u32> {
        let t = rs(l, x, &[rows, a, b])?;
        let perm = l.i32s(&[0, 2, 1]);
        l.emit(T::Transpose, &[t, perm], &[rows, b, a])
    };
    let (o, what) = match (op.ty.as_str(), reverse) {
        ("gstiling", false) => (block(l, T::SpaceToDepth, x, &shape)?, "SPACE_TO_DEPTH"),
        ("gstiling", true) => (block(l, T::DepthToSpace, x, &shape)?, "DEPTH_TO_SPACE"),
        ("reorg", false) => {
            if !h.is_multiple_of(r * r) || !w.is_multiple_of(r) {
                bail!("reorg {r} of {s:?}: H must divide by {}", r * r);
            }
            let a = rs(l, x, &[n, h / r, w * r, c])?;
            let b = block(l, T::SpaceToDepth, a, &[n, h / (r * r), w, c * r * r])?;
            (rs(l, b, &shape)?, "RESHAPE + SPACE_TO_DEPTH + RESHAPE")
        }
        ("reorg", true) => {
            if !h.is_multiple_of(r) || !c.is_multiple_of(r * r) {
                bail!("reversed reorg {r} of {s:?}");
            }
            let a = rs(l, x, &[n, h / r, w * r, c])?;
            let b = block(l, T::DepthToSpace, a, &[n, h, w * r * r, c / (r * r)])?;
            (rs(l, b, &shape)?, "RESHAPE + DEPTH_TO_SPACE + RESHAPE")
        }
        (_, true) => {
            if !c.is_multiple_of(r * r) {
                bail!("pixel-shuffle {r} of {c} channels");
            }
            let t = regroup(l, x, n * h * w, c / (r * r), r * r)?;
            let t = rs(l, t, &s)?;
            (
                block(l, T::DepthToSpace, t, &shape)?,
                "TRANSPOSE + DEPTH_TO_SPACE",
            )
        }
        (_, false) => {
            if !h.is_multiple_of(r) || !w.is_multiple_of(r) {
                bail!("pixel-unshuffle {r} of {s:?}");
            }
            let t = block(l, T::SpaceToDepth, x, &[n, h / r, w / r, c * r * r])?;
            let t = regroup(l, t, n * (h / r) * (w / r), r * r, c)?;
            (rs(l, t, &shape)?, "SPACE_TO_DEPTH + TRANSPOSE")
        }
    };
    l.vals.insert(i, Val::Tensor(o, shape));
    Ok(what.into())
}

/// One operator, in its quant8 form where it has one (a quantization-transparent operator on
/// quant8 inputs keeps their quantization; the arithmetic ones decide in their arms), else on
/// float32, its quant8 inputs dequantized: the summary line says which.
fn lower_one(l: &mut Lowering, op: &Op, i: usize) -> R<String> {
    let keep = transparent_fix(l, op);
    l.quant_in = keep.is_some();
    l.carrier = keep;
    let result = lower_op(l, op);
    l.quant_in = false;
    let carrier = l.carrier.take();
    let mut what = result?;
    match (carrier, l.vals.get(&i).cloned()) {
        (Some(f), Some(Val::Tensor(t, s))) => {
            l.vals.insert(i, Val::Quant(t, s, f));
            if keep.is_some() {
                what.push_str(" on TENSOR_QUANT8_ASYMM (its input's quantization)");
            }
        }
        (None, Some(Val::Tensor(..)))
            if op.ty != "fix"
                && op
                    .args
                    .iter()
                    .any(|(_, p)| p.iter().any(|&q| l.quant_of(q).is_some())) =>
        {
            what.push_str(" on float32 (quant8 inputs dequantized: no exact quant8 form here)");
        }
        _ => {}
    }
    Ok(what)
}

/// Lowers `g` (from the `--start-at` operators when given).
pub fn lower(g: &Graph, options: &Options) -> Result<ImportedModel, XmodelError> {
    lower_with_plan(g, options).map(|(m, _)| m)
}

/// The operators `lower` computes on quant8 operands with one requantization, by operator
/// index: what the NNAPI-rounding reference rounds as the driver does.
pub fn quant_plan(g: &Graph, options: &Options) -> Result<HashMap<usize, Requant>, XmodelError> {
    lower_with_plan(g, options).map(|(_, p)| p)
}

fn lower_with_plan(
    g: &Graph,
    options: &Options,
) -> Result<(ImportedModel, HashMap<usize, Requant>), XmodelError> {
    let start = start_ops(g, options).map_err(XmodelError::Unsupported)?;
    let outs = outputs(g, &start).map_err(XmodelError::Unsupported)?;
    let need = needed(g, &outs, &start);
    let mut l = Lowering {
        b: ModelBuilder::new(),
        g,
        vals: HashMap::new(),
        floats: HashMap::new(),
        quant_in: false,
        carrier: None,
        need: need.clone(),
        outs: outs.iter().copied().collect(),
        requant: HashMap::new(),
    };
    let mut inputs = Vec::new();
    let mut summary = Vec::new();
    let mut report = Vec::new();
    let mut blocked = 0usize;
    for &i in &g.order {
        if !need.contains(&i) {
            continue;
        }
        let op = &g.ops[i];
        if op.ty == "data" || start.contains(&i) {
            if op.ty == "data" {
                let dtype = op.string("data_type").unwrap_or("float32");
                if !dtype.eq_ignore_ascii_case("float32") {
                    report.push(format!(
                        "'{}' (data): data_type '{dtype}', only float32",
                        op.name
                    ));
                    continue;
                }
            }
            let t = l.b.input(OperandType::TensorFloat32, &dims(&op.shape));
            l.vals.insert(i, Val::Tensor(t, op.shape.clone()));
            // A starting `fix` keeps its grid: the input is quantized at it (as the fix would).
            let fix = (op.ty == "fix")
                .then(|| fix_params(op).ok())
                .flatten()
                .filter(|(fp, ..)| QUANT_FP.contains(fp));
            let mut quantized = String::new();
            if let Some((fp, _, signed, _)) = fix {
                let f = Fix { fp, signed };
                match l.emit_typed(
                    OperationType::Quantize,
                    &[t],
                    &op.shape,
                    OperandType::TensorQuant8Asymm,
                    f.scale(),
                    f.zero_point(),
                ) {
                    Ok(q) => {
                        l.vals.insert(i, Val::Quant(q, op.shape.clone(), f));
                        quantized = format!(
                            ", QUANTIZE (TENSOR_QUANT8_ASYMM scale 2^-{fp}, zero point {})",
                            f.zero_point()
                        );
                    }
                    Err(why) => report.push(format!("'{}' ({}): {why}", op.name, op.ty)),
                }
            }
            inputs.push(Edge {
                name: op.name.clone(),
                shape: op.shape.clone(),
                layout: EdgeLayout::Same,
                source_type: SourceType::Float32,
                quantized: None,
            });
            summary.push(format!(
                "'{}' ({}): model input {:?}{quantized}",
                op.name, op.ty, op.shape
            ));
            continue;
        }
        if op
            .args
            .iter()
            .any(|(_, p)| p.iter().any(|q| !l.vals.contains_key(q)))
        {
            // Downstream of a refused operator: counted, not reported one by one.
            blocked += 1;
            continue;
        }
        match lower_one(&mut l, op, i) {
            Ok(what) => summary.push(format!("'{}' ({}): {what}", op.name, op.ty)),
            Err(why) => report.push(format!("'{}' ({}): {why}", op.name, op.ty)),
        }
    }
    if blocked > 0 {
        report.push(format!(
            "({blocked} operator(s) after them not lowered; --start-at OP starts the graph \
             after one)"
        ));
    }
    if !report.is_empty() {
        return Err(XmodelError::Operators {
            count: report.len() - usize::from(blocked > 0),
            report,
        });
    }
    let mut outputs = Vec::new();
    let mut marked = HashSet::new();
    for &o in &outs {
        let op = &g.ops[o];
        let t = match l.vals.get(&o) {
            Some(Val::Tensor(t, _)) => *t,
            // Quantized outputs are dequantized (exactly) in the model.
            Some(Val::Quant(..)) => l.tensor(o).map_err(XmodelError::Unsupported)?.0,
            _ => {
                return Err(XmodelError::Unsupported(format!(
                    "output '{}' is a constant",
                    op.name
                )))
            }
        };
        let lifetime = l.b.operand_at(t).lifetime;
        if lifetime != nnhal_hal::OperandLifeTime::TemporaryVariable.raw() || !marked.insert(t) {
            return Err(XmodelError::Unsupported(format!(
                "output '{}' is a model input or another output",
                op.name
            )));
        }
        l.b.mark_output(t);
        outputs.push(Edge {
            name: op.name.clone(),
            shape: op.shape.clone(),
            layout: EdgeLayout::Same,
            source_type: SourceType::Float32,
            quantized: None,
        });
    }
    let model = l.b.finish();
    nnhal_hal::validate::validate_model(&model).map_err(|e| XmodelError::Invalid(e.to_string()))?;
    Ok((
        ImportedModel {
            model,
            inputs,
            outputs,
            summary,
            class_labels: None,
        },
        l.requant,
    ))
}
