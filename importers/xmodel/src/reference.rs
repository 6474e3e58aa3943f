//! A float64 interpreter of XIR graphs, written from the XIR operator definitions (NHWC
//! tensors, `{w, h}` kernel/stride/dilation, `{l, r, t, b}` padding, unflipped transposed
//! convolution weights, numpy broadcasting): the oracle the importer's tests compare the
//! driver against. `fix` rounds as [`Rounding`] says — NNAPI's QUANTIZE (half away from zero)
//! or the DPU's (half toward +∞) — so one graph gives both references.
//!
//! With [`Rounding::Nnapi`], the operators the lowering computes on quant8 operands
//! ([`crate::lower::quant_plan`]) are rounded as the driver requantizes their integer result:
//! the exact accumulator scaled by 2^-k with a rounding doubling high multiply by the Q31
//! multiplier the lowered scales give (half toward +∞) then a rounding right shift (half away
//! from zero), saturated to the output range. At an exact power of two that is (2^30, k − 1),
//! two roundings where the DPU's `DPU_ROUND` makes one; with the weights one float32 ulp below
//! their power of two, (2^31 − 2^7, k), one rounding (`docs/xmodel.md`).

use crate::decode::{Graph, Op};
use crate::lower::{
    fix_params, fix_value, needed, outputs, pair, quant_plan, slice_bounds, start_ops, window_pads,
    Requant,
};
use crate::Options;
use std::collections::HashMap;

/// How activations are rounded in `fix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Half away from zero, as NNAPI QUANTIZE (what the lowered model computes).
    Nnapi,
    /// Half toward +∞, the DPU's DPU_ROUND.
    Dpu,
}

/// A dense tensor: shape and row-major values.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

type R<T> = Result<T, String>;

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        idx[k] = i % shape[k].max(1);
        i /= shape[k].max(1);
    }
    idx
}

fn broadcast(a: &Tensor, b: &Tensor, f: impl Fn(f64, f64) -> f64, out: &[usize]) -> Tensor {
    let n: usize = out.iter().product();
    let at = |t: &Tensor, idx: &[usize]| {
        let off = out.len() - t.shape.len();
        let st = strides(&t.shape);
        let mut p = 0;
        for (k, &d) in t.shape.iter().enumerate() {
            p += if d == 1 { 0 } else { idx[k + off] * st[k] };
        }
        t.data[p]
    };
    let data = (0..n)
        .map(|i| {
            let idx = unravel(i, out);
            f(at(a, &idx), at(b, &idx))
        })
        .collect();
    Tensor {
        shape: out.to_vec(),
        data,
    }
}

fn bshape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|k| {
            let da = if k + a.len() >= r {
                a[k + a.len() - r]
            } else {
                1
            };
            let db = if k + b.len() >= r {
                b[k + b.len() - r]
            } else {
                1
            };
            da.max(db)
        })
        .collect()
}

/// Runs `g` on `inputs` (one per model input, in the importer's order) and gives its outputs.
pub fn run(g: &Graph, options: &Options, inputs: &[Tensor], rounding: Rounding) -> R<Vec<Tensor>> {
    run_inner(g, options, inputs, rounding, None)
}

/// One requantized operator of the NNAPI-rounding run: its name, its element count, and how
/// many of its elements the DPU's single rounding (`DPU_ROUND` of the same accumulator) puts
/// one step higher and one step lower than the driver's (never further: asserted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerRounding {
    pub name: String,
    /// The requantization 2^-shift (a fraction 2^-shift of evenly spread accumulators round
    /// differently).
    pub shift: i64,
    pub elements: usize,
    pub dpu_higher: usize,
    pub dpu_lower: usize,
}

/// Runs `g` with NNAPI rounding and gives, per requantized operator, how the DPU's rounding
/// of the same accumulators differs (the layer-by-layer distribution, free of the differences
/// earlier layers pass on).
pub fn rounding_by_layer(g: &Graph, options: &Options, inputs: &[Tensor]) -> R<Vec<LayerRounding>> {
    let mut layers = Vec::new();
    run_inner(g, options, inputs, Rounding::Nnapi, Some(&mut layers))?;
    Ok(layers)
}

fn run_inner(
    g: &Graph,
    options: &Options,
    inputs: &[Tensor],
    rounding: Rounding,
    mut layers: Option<&mut Vec<LayerRounding>>,
) -> R<Vec<Tensor>> {
    let start = start_ops(g, options)?;
    let outs = outputs(g, &start)?;
    let need = needed(g, &outs, &start);
    let plan = match rounding {
        Rounding::Nnapi => quant_plan(g, options).map_err(|e| e.to_string())?,
        Rounding::Dpu => HashMap::new(),
    };
    let mut vals: HashMap<usize, Tensor> = HashMap::new();
    let mut next = inputs.iter();
    for &i in &g.order {
        if !need.contains(&i) {
            continue;
        }
        let op = &g.ops[i];
        let v = if op.ty == "data" || start.contains(&i) {
            let v = next.next().ok_or("too few inputs")?.clone();
            if op.ty == "fix" {
                // A starting fix still puts its input on its grid.
                let (fp, bits, signed, mode) = fix_params(op)?;
                let mode = match rounding {
                    Rounding::Nnapi => "STD_ROUND".to_string(),
                    Rounding::Dpu => mode,
                };
                map(&v, |x| fix_value(x, fp, bits, signed, &mode))
            } else {
                v
            }
        } else {
            let on_constant = op.arg("input").iter().all(|&p| g.ops[p].ty == "const");
            let v = eval(op, &vals, rounding, on_constant)
                .map_err(|e| format!("'{}': {e}", op.name))?;
            match plan.get(&i) {
                Some(&rq) => {
                    let q = requantize(&v, rq).map_err(|e| format!("'{}': {e}", op.name))?;
                    if let Some(layers) = layers.as_deref_mut() {
                        layers.push(compare_rounding(&op.name, &v, &q, rq)?);
                    }
                    q
                }
                None => v,
            }
        };
        if v.data.len() != op.shape.iter().product::<usize>() {
            return Err(format!(
                "'{}': {} values for {:?}",
                op.name,
                v.data.len(),
                op.shape
            ));
        }
        vals.insert(
            i,
            Tensor {
                shape: op.shape.clone(),
                data: v.data,
            },
        );
    }
    Ok(outs.iter().map(|o| vals[o].clone()).collect())
}

/// `acc` scaled as the driver's requantization rounds it: the rounding doubling high multiply
/// by the Q31 `multiplier` (`acc · m / 2^31` to nearest, an exact half toward +∞ when
/// positive and toward zero when negative), then a right shift by `right_shift` rounding half
/// away from zero. At a power of two 2^-k the multiplier is (2^30, k − 1): two roundings; one
/// float32 ulp below it, (2^31 − 2^7, k): the multiply keeps |acc| < 2^23, one rounding.
pub fn nnapi_requantize(acc: i64, multiplier: i64, right_shift: i64) -> i64 {
    let ab = i128::from(acc) * i128::from(multiplier);
    let nudge: i128 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    let high = ((ab + nudge) / (1i128 << 31)) as i64;
    if right_shift == 0 {
        return high;
    }
    if right_shift >= 62 {
        return 0;
    }
    let magnitude = (high.abs() + (1i64 << (right_shift - 1))) >> right_shift;
    if high < 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The DPU's rounding of an operator's exact result `v` against the driver's `q`.
fn compare_rounding(name: &str, v: &Tensor, q: &Tensor, rq: Requant) -> R<LayerRounding> {
    let step = 2f64.powi(-rq.out.fp as i32);
    let (mut higher, mut lower) = (0, 0);
    for (&x, &n) in v.data.iter().zip(&q.data) {
        let d = fix_value(x, rq.out.fp, 8, rq.out.signed, "DPU_ROUND");
        let k = (d - n) / step;
        if k == 1.0 {
            higher += 1;
        } else if k == -1.0 {
            lower += 1;
        } else if k != 0.0 {
            return Err(format!(
                "'{name}': DPU rounding {d} and NNAPI's {n} differ by {k} steps"
            ));
        }
    }
    Ok(LayerRounding {
        name: name.to_string(),
        shift: rq.shift,
        elements: v.data.len(),
        dpu_higher: higher,
        dpu_lower: lower,
    })
}

/// An operator's exact result requantized as the driver does (see [`nnapi_requantize`]).
fn requantize(v: &Tensor, rq: Requant) -> R<Tensor> {
    let up = 2f64.powi((rq.out.fp + rq.shift) as i32);
    let step = 2f64.powi(-rq.out.fp as i32);
    let (lo, hi) = rq.out.range();
    let data = v
        .data
        .iter()
        .map(|&x| {
            let acc = x * up;
            if acc.fract() != 0.0 || acc.abs() >= 2f64.powi(31) {
                return Err(format!("accumulator {acc} is not an int32"));
            }
            Ok(
                nnapi_requantize(acc as i64, rq.multiplier, rq.right_shift).clamp(lo, hi) as f64
                    * step,
            )
        })
        .collect::<R<Vec<f64>>>()?;
    Ok(Tensor {
        shape: v.shape.clone(),
        data,
    })
}

fn arg<'a>(op: &Op, vals: &'a HashMap<usize, Tensor>, name: &str) -> R<&'a Tensor> {
    let p = op.arg(name);
    p.first()
        .and_then(|i| vals.get(i))
        .ok_or(format!("no '{name}'"))
}

fn map(x: &Tensor, f: impl Fn(f64) -> f64) -> Tensor {
    Tensor {
        shape: x.shape.clone(),
        data: x.data.iter().map(|&v| f(v)).collect(),
    }
}

fn eval(
    op: &Op,
    vals: &HashMap<usize, Tensor>,
    rounding: Rounding,
    on_constant: bool,
) -> R<Tensor> {
    let out = op.shape.clone();
    let input = || arg(op, vals, "input");
    Ok(match op.ty.as_str() {
        "const" => Tensor {
            shape: out,
            data: op.data.clone().ok_or("no data")?,
        },
        "identity" | "reshape" | "flatten" | "squeeze" => Tensor {
            shape: out,
            data: input()?.data.clone(),
        },
        "fix" => {
            let (fp, bits, signed, mode) = fix_params(op)?;
            let x = input()?;
            // A constant's fix keeps the file's mode (the lowering folds it so); an
            // activation's rounds as the reference is asked to.
            let mode = match rounding {
                Rounding::Nnapi if !on_constant => "STD_ROUND".to_string(),
                _ => mode,
            };
            map(x, |v| fix_value(v, fp, bits, signed, &mode))
        }
        "relu" => map(input()?, |v| v.max(0.0)),
        "relu6" => map(input()?, |v| v.clamp(0.0, 6.0)),
        "sigmoid" => map(input()?, |v| 1.0 / (1.0 + (-v).exp())),
        "tanh" => map(input()?, f64::tanh),
        "hard-sigmoid" => map(input()?, |v| (v + 3.0).clamp(0.0, 6.0) / 6.0),
        "hard-swish" => map(input()?, |v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
        "leaky-relu" => {
            let a = op.float("alpha").ok_or("no alpha")?;
            map(input()?, |v| if v < 0.0 { a * v } else { v })
        }
        "prelu" => {
            let x = input()?;
            let w = arg(op, vals, "weight")?;
            let c = *x.shape.last().unwrap_or(&1);
            let data = x
                .data
                .iter()
                .enumerate()
                .map(|(k, &v)| {
                    let a = if w.data.len() == 1 {
                        w.data[0]
                    } else {
                        w.data[k % c]
                    };
                    if v < 0.0 {
                        a * v
                    } else {
                        v
                    }
                })
                .collect();
            Tensor { shape: out, data }
        }
        "add" | "sub" | "mul" | "div" | "max" | "min" => {
            let p = op.arg("input");
            let f: fn(f64, f64) -> f64 = match op.ty.as_str() {
                "add" => |a, b| a + b,
                "sub" => |a, b| a - b,
                "mul" => |a, b| a * b,
                "div" => |a, b| a / b,
                "max" => f64::max,
                _ => f64::min,
            };
            let mut acc = vals[&p[0]].clone();
            for q in &p[1..] {
                let s = bshape(&acc.shape, &vals[q].shape);
                acc = broadcast(&acc, &vals[q], f, &s);
            }
            acc
        }
        "conv2d" | "depthwise-conv2d" | "transposed-conv2d" => conv(op, vals)?,
        "inner-product" | "matmul" => dense(op, vals)?,
        "maxpool2d" | "avgpool2d" => pool(op, input()?)?,
        "reduction_mean" | "reduction_max" | "reduction_sum" => {
            let x = input()?;
            let r = x.shape.len() as i64;
            let axes: Vec<usize> = op
                .ints("axis")
                .ok_or("no axis")?
                .iter()
                .map(|&a| (if a < 0 { a + r } else { a }) as usize)
                .collect();
            let kept: Vec<usize> = x
                .shape
                .iter()
                .enumerate()
                .map(|(k, &d)| if axes.contains(&k) { 1 } else { d })
                .collect();
            let n: usize = kept.iter().product();
            let mut acc = vec![
                if op.ty == "reduction_max" {
                    f64::NEG_INFINITY
                } else {
                    0.0
                };
                n
            ];
            let ks = strides(&kept);
            for (i, &v) in x.data.iter().enumerate() {
                let idx = unravel(i, &x.shape);
                let o: usize = idx
                    .iter()
                    .enumerate()
                    .map(|(k, &j)| if axes.contains(&k) { 0 } else { j * ks[k] })
                    .sum();
                if op.ty == "reduction_max" {
                    acc[o] = acc[o].max(v)
                } else {
                    acc[o] += v
                }
            }
            if op.ty == "reduction_mean" {
                let count: usize = axes.iter().map(|&a| x.shape[a]).product();
                acc.iter_mut().for_each(|v| *v /= count as f64);
            }
            Tensor {
                shape: out,
                data: acc,
            }
        }
        "pad" => {
            let x = input()?;
            let p = op.ints("paddings").ok_or("no paddings")?;
            let mode = op.string("mode").unwrap_or("CONSTANT");
            let c = op
                .floats("constant_values")
                .unwrap_or_default()
                .first()
                .copied()
                .unwrap_or(0.0);
            let n: usize = out.iter().product();
            let xs = strides(&x.shape);
            let data = (0..n)
                .map(|i| {
                    let idx = unravel(i, &out);
                    let mut off = 0;
                    for (k, &j) in idx.iter().enumerate() {
                        let (j, n) = (j as i64 - p[2 * k], x.shape[k] as i64);
                        // REFLECT mirrors about the edge element, SYMMETRIC about the edge.
                        let j = match mode {
                            _ if (0..n).contains(&j) => j,
                            "REFLECT" if j < 0 => -j,
                            "REFLECT" => 2 * n - 2 - j,
                            "SYMMETRIC" if j < 0 => -j - 1,
                            "SYMMETRIC" => 2 * n - 1 - j,
                            _ => return c,
                        };
                        off += j as usize * xs[k];
                    }
                    x.data[off]
                })
                .collect();
            Tensor { shape: out, data }
        }
        "resize" => resize(op, input()?)?,
        "gstiling" | "reorg" | "pixel-shuffle" => rearrange(op, input()?)?,
        "concat" => {
            let p = op.arg("input");
            let r = out.len() as i64;
            let a = op.int("axis").ok_or("no axis")?;
            let a = (if a < 0 { a + r } else { a }) as usize;
            let outer: usize = out[..a].iter().product();
            let mut data = Vec::with_capacity(out.iter().product());
            for o in 0..outer {
                for q in p {
                    let t = &vals[q];
                    let inner: usize = t.shape[a..].iter().product();
                    data.extend_from_slice(&t.data[o * inner..(o + 1) * inner]);
                }
            }
            Tensor { shape: out, data }
        }
        "softmax" => {
            let x = input()?;
            let r = x.shape.len() as i64;
            let a = op.int("axis").unwrap_or(-1);
            let a = (if a < 0 { a + r } else { a }) as usize;
            let d = x.shape[a];
            let inner: usize = x.shape[a + 1..].iter().product();
            let mut data = x.data.clone();
            for o in 0..x.data.len() / (d * inner) {
                for j in 0..inner {
                    let at = |k: usize| (o * d + k) * inner + j;
                    let m = (0..d)
                        .map(|k| x.data[at(k)])
                        .fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = (0..d).map(|k| (x.data[at(k)] - m).exp()).sum();
                    for k in 0..d {
                        data[at(k)] = (x.data[at(k)] - m).exp() / s;
                    }
                }
            }
            Tensor { shape: out, data }
        }
        "transpose" => {
            let x = input()?;
            let order = op.ints("order").ok_or("no order")?;
            let xs = strides(&x.shape);
            let n: usize = out.iter().product();
            let data = (0..n)
                .map(|i| {
                    let idx = unravel(i, &out);
                    x.data[idx
                        .iter()
                        .enumerate()
                        .map(|(k, &j)| j * xs[order[k] as usize])
                        .sum::<usize>()]
                })
                .collect();
            Tensor { shape: out, data }
        }
        "tile" => {
            let x = input()?;
            let xs = strides(&x.shape);
            let n: usize = out.iter().product();
            let data = (0..n)
                .map(|i| {
                    let idx = unravel(i, &out);
                    x.data[idx
                        .iter()
                        .enumerate()
                        .map(|(k, &j)| (j % x.shape[k]) * xs[k])
                        .sum::<usize>()]
                })
                .collect();
            Tensor { shape: out, data }
        }
        "strided_slice" => {
            let x = input()?;
            let (b, _, s) = slice_bounds(op, &x.shape)?;
            let xs = strides(&x.shape);
            let n: usize = out.iter().product();
            let data = (0..n)
                .map(|i| {
                    let idx = unravel(i, &out);
                    x.data[idx
                        .iter()
                        .enumerate()
                        .map(|(k, &j)| (b[k] as usize + j * s[k] as usize) * xs[k])
                        .sum::<usize>()]
                })
                .collect();
            Tensor { shape: out, data }
        }
        other => return Err(format!("no reference for '{other}'")),
    })
}

fn conv(op: &Op, vals: &HashMap<usize, Tensor>) -> R<Tensor> {
    let x = arg(op, vals, "input")?;
    let w = arg(op, vals, "weights")?;
    let out = op.shape.clone();
    let (n, ih, iw, ic) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (oh, ow, oc) = (out[1], out[2], out[3]);
    let (kh, kw) = (w.shape[1], w.shape[2]);
    let (sw, sh) = pair(op, "stride", Some((1, 1)))?;
    let (dw, dh) = pair(op, "dilation", Some((1, 1)))?;
    let bias = |o: usize| arg(op, vals, "bias").map_or(0.0, |b| b.data[o]);
    let mut data = vec![0.0; n * oh * ow * oc];
    if op.ty == "transposed-conv2d" {
        // XIR: the input dilated by the stride, padded by k − 1 − pad, correlated with the
        // weights as stored.
        let fh = (ih - 1) * sh + kh;
        let fw = (iw - 1) * sw + kw;
        let given = op.ints("pad").unwrap_or_else(|| vec![0; 4]);
        let (pl, pt) = match op.string("pad_mode").unwrap_or("FLOOR") {
            "SAME" | "VALID" => ((fw - ow) / 2, (fh - oh) / 2),
            _ => (given[0] as usize, given[2] as usize),
        };
        for b in 0..n {
            for y in 0..oh {
                for xx in 0..ow {
                    for o in 0..oc {
                        let mut acc = bias(o);
                        for ky in 0..kh {
                            for kx in 0..kw {
                                // Position in the dilated, (k − 1 − pad)-padded input.
                                let dy = (y + ky) as i64 - (kh as i64 - 1 - pt as i64);
                                let dx = (xx + kx) as i64 - (kw as i64 - 1 - pl as i64);
                                if dy < 0 || dx < 0 || dy % sh as i64 != 0 || dx % sw as i64 != 0 {
                                    continue;
                                }
                                let (sy, sx) =
                                    ((dy / sh as i64) as usize, (dx / sw as i64) as usize);
                                if sy >= ih || sx >= iw {
                                    continue;
                                }
                                for c in 0..ic {
                                    acc += x.data[((b * ih + sy) * iw + sx) * ic + c]
                                        * w.data[((o * kh + ky) * kw + kx) * ic + c];
                                }
                            }
                        }
                        data[((b * oh + y) * ow + xx) * oc + o] = acc;
                    }
                }
            }
        }
        return Ok(Tensor { shape: out, data });
    }
    let [pl, _, pt, _] = window_pads(op, (ih, iw), (kw, kh), (sw, sh), (dw, dh), (oh, ow))?;
    let depthwise = op.ty == "depthwise-conv2d";
    let m = w.shape[0];
    let group_in = if depthwise { 1 } else { w.shape[3] };
    let groups = if depthwise { ic } else { ic / group_in };
    let per_group = oc / groups;
    for b in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                for o in 0..oc {
                    let g = o / per_group;
                    let mut acc = bias(o);
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let sy = (y * sh + ky * dh) as i64 - pt as i64;
                            let sx = (xx * sw + kx * dw) as i64 - pl as i64;
                            if sy < 0 || sx < 0 || sy >= ih as i64 || sx >= iw as i64 {
                                continue;
                            }
                            let base = ((b * ih + sy as usize) * iw + sx as usize) * ic;
                            if depthwise {
                                // Output channel c·M + q reads input channel c, weights [q, ., ., c].
                                let (c, q) = (o / m, o % m);
                                acc +=
                                    x.data[base + c] * w.data[((q * kh + ky) * kw + kx) * ic + c];
                            } else {
                                for c in 0..group_in {
                                    acc += x.data[base + g * group_in + c]
                                        * w.data[((o * kh + ky) * kw + kx) * group_in + c];
                                }
                            }
                        }
                    }
                    data[((b * oh + y) * ow + xx) * oc + o] = acc;
                }
            }
        }
    }
    Ok(Tensor { shape: out, data })
}

fn dense(op: &Op, vals: &HashMap<usize, Tensor>) -> R<Tensor> {
    let (x, w, transposed) = if op.ty == "inner-product" {
        (arg(op, vals, "input")?, arg(op, vals, "weights")?, true)
    } else {
        let p: Vec<usize> = op
            .args
            .iter()
            .filter(|(n, _)| n != "bias")
            .flat_map(|(_, p)| p.iter().copied())
            .collect();
        (
            &vals[&p[0]],
            &vals[&p[1]],
            op.bool("transpose_b").unwrap_or(false),
        )
    };
    // Weights as [units, depth] (inner-product, transpose_b) or [depth, units].
    let units = if transposed { w.shape[0] } else { w.shape[1] };
    let depth = w.data.len() / units;
    let rows = x.data.len() / depth;
    let bias = |o: usize| arg(op, vals, "bias").map_or(0.0, |b| b.data[o]);
    let mut data = vec![0.0; rows * units];
    for r in 0..rows {
        for u in 0..units {
            let mut acc = bias(u);
            for k in 0..depth {
                let wv = if transposed {
                    w.data[u * depth + k]
                } else {
                    w.data[k * units + u]
                };
                acc += x.data[r * depth + k] * wv;
            }
            data[r * units + u] = acc;
        }
    }
    Ok(Tensor {
        shape: op.shape.clone(),
        data,
    })
}

fn pool(op: &Op, x: &Tensor) -> R<Tensor> {
    let out = op.shape.clone();
    let (n, ih, iw, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (oh, ow) = (out[1], out[2]);
    let global = op.bool("global").unwrap_or(false);
    let (kw, kh) = if global {
        (iw, ih)
    } else {
        pair(op, "kernel", None)?
    };
    let (sw, sh) = if global {
        (1, 1)
    } else {
        pair(op, "stride", Some((1, 1)))?
    };
    let pads = if global {
        [0; 4]
    } else {
        window_pads(op, (ih, iw), (kw, kh), (sw, sh), (1, 1), (oh, ow))?
    };
    let avg = op.ty == "avgpool2d";
    let include = op.bool("count_include_pad").unwrap_or(true);
    // The padded extent the divisor may count: the explicit `pad` (SAME's own padding too),
    // and what CEIL adds past it only with `count_include_invalid` (XIR's default, true).
    let invalid = op.bool("count_include_invalid").unwrap_or(true);
    let counted = match op.string("pad_mode").unwrap_or("FLOOR") {
        "FLOOR" | "CEIL" if !global && !invalid => {
            let g = op.ints("pad").unwrap_or_else(|| vec![0; 4]);
            [g[0] as usize, g[1] as usize, g[2] as usize, g[3] as usize]
        }
        _ => pads,
    };
    let mut data = vec![0.0; n * oh * ow * c];
    for b in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                for ch in 0..c {
                    let (mut acc, mut cnt, mut mx) = (0.0, 0usize, f64::NEG_INFINITY);
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let sy = (y * sh + ky) as i64 - pads[2] as i64;
                            let sx = (xx * sw + kx) as i64 - pads[0] as i64;
                            let inside = sy >= 0 && sx >= 0 && sy < ih as i64 && sx < iw as i64;
                            if inside {
                                let v =
                                    x.data[((b * ih + sy as usize) * iw + sx as usize) * c + ch];
                                acc += v;
                                mx = mx.max(v);
                                cnt += 1;
                            } else if include
                                && sy >= -(counted[2] as i64)
                                && sx >= -(counted[0] as i64)
                                && sy < (ih + counted[3]) as i64
                                && sx < (iw + counted[1]) as i64
                            {
                                cnt += 1;
                            }
                        }
                    }
                    data[((b * oh + y) * ow + xx) * c + ch] =
                        if avg { acc / cnt as f64 } else { mx };
                }
            }
        }
    }
    Ok(Tensor { shape: out, data })
}

fn resize(op: &Op, x: &Tensor) -> R<Tensor> {
    let out = op.shape.clone();
    let (n, ih, iw, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (oh, ow) = (out[1], out[2]);
    let ac = op.bool("align_corners").unwrap_or(false);
    let hp = op.bool("half_pixel_centers").unwrap_or(false);
    let bilinear = op.string("mode").unwrap_or("NEAREST") == "BILINEAR";
    let scale = |i: usize, o: usize| {
        if ac && o > 1 {
            (i - 1) as f64 / (o - 1) as f64
        } else {
            i as f64 / o as f64
        }
    };
    let (fy, fx) = (scale(ih, oh), scale(iw, ow));
    let at = |b: usize, y: usize, xx: usize, ch: usize| x.data[((b * ih + y) * iw + xx) * c + ch];
    let mut data = vec![0.0; n * oh * ow * c];
    for b in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                for ch in 0..c {
                    let v = if bilinear {
                        let src = |o: usize, f: f64| {
                            if hp {
                                (o as f64 + 0.5) * f - 0.5
                            } else {
                                o as f64 * f
                            }
                        };
                        let (sy, sx) = (src(y, fy).max(0.0), src(xx, fx).max(0.0));
                        let (y0, x0) = (sy.floor() as usize, sx.floor() as usize);
                        let (y1, x1) = ((y0 + 1).min(ih - 1), (x0 + 1).min(iw - 1));
                        let (dy, dx) = (sy - y0 as f64, sx - x0 as f64);
                        let top = at(b, y0, x0, ch) * (1.0 - dx) + at(b, y0, x1, ch) * dx;
                        let bot = at(b, y1, x0, ch) * (1.0 - dx) + at(b, y1, x1, ch) * dx;
                        top * (1.0 - dy) + bot * dy
                    } else {
                        let src = |o: usize, f: f64, len: usize| {
                            let s = if hp {
                                (o as f64 + 0.5) * f
                            } else {
                                o as f64 * f
                            };
                            let s = if ac { s.round() } else { s.floor() };
                            (s.max(0.0) as usize).min(len - 1)
                        };
                        at(b, src(y, fy, ih), src(xx, fx, iw), ch)
                    };
                    data[((b * oh + y) * ow + xx) * c + ch] = v;
                }
            }
        }
    }
    Ok(Tensor { shape: out, data })
}

/// SPACE_TO_DEPTH as defined for NHWC: `out[n, y, x, (i·r + j)·C + c] = in[n, y·r + i, x·r + j, c]`.
fn s2d(x: &Tensor, r: usize) -> Tensor {
    let (n, h, w, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (oh, ow, oc) = (h / r, w / r, c * r * r);
    let mut data = vec![0.0; n * h * w * c];
    for b in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                for i in 0..r {
                    for j in 0..r {
                        for ch in 0..c {
                            data[((b * oh + y) * ow + xx) * oc + (i * r + j) * c + ch] =
                                x.data[((b * h + y * r + i) * w + xx * r + j) * c + ch];
                        }
                    }
                }
            }
        }
    }
    Tensor {
        shape: vec![n, oh, ow, oc],
        data,
    }
}

/// The inverse of [`s2d`].
fn d2s(x: &Tensor, r: usize) -> Tensor {
    let (n, h, w, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3] / (r * r));
    let mut data = vec![0.0; x.data.len()];
    for b in 0..n {
        for y in 0..h {
            for xx in 0..w {
                for i in 0..r {
                    for j in 0..r {
                        for ch in 0..c {
                            data[((b * h * r + y * r + i) * w * r + xx * r + j) * c + ch] =
                                x.data[((b * h + y) * w + xx) * c * r * r + (i * r + j) * c + ch];
                        }
                    }
                }
            }
        }
    }
    Tensor {
        shape: vec![n, h * r, w * r, c],
        data,
    }
}

fn rearrange(op: &Op, x: &Tensor) -> R<Tensor> {
    let out = op.shape.clone();
    let (n, h, w, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let r = op
        .int(if op.ty == "gstiling" {
            "stride"
        } else {
            "scale"
        })
        .ok_or("no scale")? as usize;
    let with = |shape: Vec<usize>, t: &Tensor| Tensor {
        shape,
        data: t.data.clone(),
    };
    Ok(match op.ty.as_str() {
        "gstiling" if op.bool("reverse").unwrap_or(false) => d2s(x, r),
        "gstiling" => s2d(x, r),
        // Darknet's reorg: rows regrouped in blocks of r·r before the space-to-depth.
        "reorg" if op.bool("reverse").unwrap_or(false) => {
            with(out, &d2s(&with(vec![n, h / r, w * r, c], x), r))
        }
        "reorg" => with(out, &s2d(&with(vec![n, h / r, w * r, c], x), r)),
        _ => {
            // PyTorch's pixel shuffle channel order c·r² + i·r + j, in NHWC.
            let upscale = op.bool("upscale").unwrap_or(true);
            let (oh, ow, oc) = (out[1], out[2], out[3]);
            let mut data = vec![0.0; x.data.len()];
            for b in 0..n {
                for y in 0..oh {
                    for xx in 0..ow {
                        for ch in 0..oc {
                            let o = ((b * oh + y) * ow + xx) * oc + ch;
                            if upscale {
                                let (i, j) = (y % r, xx % r);
                                data[o] = x.data
                                    [((b * h + y / r) * w + xx / r) * c + ch * r * r + i * r + j];
                            } else {
                                let (cc, i, j) = (ch / (r * r), (ch / r) % r, ch % r);
                                data[o] = x.data[((b * h + y * r + i) * w + xx * r + j) * c + cc];
                            }
                        }
                    }
                }
            }
            Tensor { shape: out, data }
        }
    })
}
