//! Writes the test fixtures of importers/xmodel/testdata/ (run from the repository root:
//! `cargo run -p nnhal-xmodel --example make_fixtures`; not part of CI). Each fixture is a
//! small XIR graph exercising operators and attribute combinations; the tests
//! (cli/tests/xmodel_cases.rs) run them through the driver against the float64 reference of
//! `nnhal_xmodel::reference`. Weights are fixed pseudo-random values, so the files regenerate
//! byte for byte.
//!
//! Checked once with Xilinx's XIR 2.5 (Debian 12 `libxir-utils`; not in CI): `xir graph FILE`
//! loads every fixture through XIR's op-definition registry and shape inference, but
//! `activations.xmodel`, whose `prelu` has the `weight` argument of XIR 3.x that XIR 2.5 does
//! not define. Attributes XIR requires are written even where they hold the default
//! (`transpose_a`, a global pool's `stride`, `strides`, `resize`'s `scale`); operators XIR 2.5
//! does not define (`tile`) carry `shape` and `data_type`. What the op definitions settle about
//! the mapping is in docs/xmodel.md ("Checked with XIR").

use nnhal_xmodel::proto::attr_value::Value;
use nnhal_xmodel::writer::{boolean, float, floats, int, ints, string, GraphWriter};
use std::path::Path;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }

    /// Values that are exactly int8 · 2^-fp (what the quantizer writes into constants).
    fn fixed(&mut self, n: usize, fp: i32) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() * 127.0).round() * 2f32.powi(-fp))
            .collect()
    }
}

/// The `shape` and `data_type` attributes XIR wants on an operator type it has no definition
/// of (it creates one on load, from them).
fn declared(shape: &[usize]) -> Vec<(&'static str, Value)> {
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    vec![("shape", ints(&dims)), ("data_type", string("FLOAT32"))]
}

fn konst(g: &mut GraphWriter, r: &mut Rng, name: &str, shape: &[usize]) -> String {
    let v = r.values(shape.iter().product());
    g.constant(name, shape, &v)
}

#[allow(clippy::too_many_arguments)]
fn conv(
    g: &mut GraphWriter,
    name: &str,
    ty: &str,
    input: &str,
    w: &str,
    b: Option<&str>,
    attrs: Vec<(&str, nnhal_xmodel::proto::attr_value::Value)>,
    shape: &[usize],
) -> String {
    let mut args: Vec<(&str, &[&str])> = vec![("input", std::slice::from_ref(&input))];
    let ws = [w];
    args.push(("weights", &ws));
    let bs: Vec<&str> = b.into_iter().collect();
    args.push(("bias", &bs));
    g.op(name, ty, &args, attrs, shape)
}

fn convs(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("convs");
    let x = g.data("x", &[1, 7, 8, 3]);
    // kernel {w 2, h 3}, stride {w 2, h 1}, pad {l 1, r 0, t 1, b 1}, FLOOR.
    let w = konst(&mut g, r, "w1", &[4, 3, 2, 3]);
    let b = konst(&mut g, r, "b1", &[4]);
    let c1 = conv(
        &mut g,
        "c1",
        "conv2d",
        &x,
        &w,
        Some(&b),
        vec![
            ("kernel", ints(&[2, 3])),
            ("stride", ints(&[2, 1])),
            ("pad", ints(&[1, 0, 1, 1])),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 7, 4, 4],
    );
    let r1 = g.op("r1", "relu", &[("input", &[&c1])], vec![], &[1, 7, 4, 4]);
    // Dilation {w 1, h 2}, SAME.
    let w2 = konst(&mut g, r, "w2", &[6, 3, 3, 4]);
    let c2 = conv(
        &mut g,
        "c2",
        "conv2d",
        &r1,
        &w2,
        None,
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[1, 1])),
            ("dilation", ints(&[1, 2])),
            ("pad_mode", string("SAME")),
        ],
        &[1, 7, 4, 6],
    );
    // Grouped (3 groups of 2), CEIL with stride 2.
    let w3 = konst(&mut g, r, "w3", &[6, 2, 2, 2]);
    let b3 = konst(&mut g, r, "b3", &[6]);
    conv(
        &mut g,
        "c3",
        "conv2d",
        &c2,
        &w3,
        Some(&b3),
        vec![
            ("kernel", ints(&[2, 2])),
            ("stride", ints(&[2, 2])),
            ("pad", ints(&[0, 0, 0, 0])),
            ("pad_mode", string("CEIL")),
            ("group", int(3)),
        ],
        &[1, 4, 2, 6],
    );
    // Depthwise, multiplier 2, VALID, then relu6.
    let w4 = konst(&mut g, r, "w4", &[2, 3, 3, 3]);
    let b4 = konst(&mut g, r, "b4", &[6]);
    let d = conv(
        &mut g,
        "dw",
        "depthwise-conv2d",
        &x,
        &w4,
        Some(&b4),
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[1, 2])),
            ("pad_mode", string("VALID")),
        ],
        &[1, 3, 6, 6],
    );
    g.op(
        "dw_relu6",
        "relu6",
        &[("input", &[&d])],
        vec![],
        &[1, 3, 6, 6],
    );
    g
}

fn transposed(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("transposed");
    let x = g.data("x", &[1, 3, 4, 3]);
    let w = konst(&mut g, r, "w1", &[2, 3, 3, 3]);
    let b = konst(&mut g, r, "b1", &[2]);
    // (in − 1)·2 + 3 − 1 − 1: 5 × 7.
    conv(
        &mut g,
        "t1",
        "transposed-conv2d",
        &x,
        &w,
        Some(&b),
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[2, 2])),
            ("pad", ints(&[1, 1, 1, 1])),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 5, 7, 2],
    );
    let w2 = konst(&mut g, r, "w2", &[4, 2, 2, 3]);
    conv(
        &mut g,
        "t2",
        "transposed-conv2d",
        &x,
        &w2,
        None,
        vec![
            ("kernel", ints(&[2, 2])),
            ("stride", ints(&[2, 2])),
            ("pad", ints(&[0, 0, 0, 0])),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 6, 8, 4],
    );
    g
}

fn dense(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("dense");
    let x = g.data("x", &[2, 2, 2, 3]);
    let w = konst(&mut g, r, "w", &[5, 12]);
    let b = konst(&mut g, r, "b", &[5]);
    let ip = g.op(
        "ip",
        "inner-product",
        &[("input", &[&x]), ("weights", &[&w]), ("bias", &[&b])],
        vec![("axis", int(1))],
        &[2, 5],
    );
    let m = konst(&mut g, r, "m", &[5, 3]);
    let mm = g.op(
        "mm",
        "matmul",
        &[("input", &[&ip, &m])],
        vec![
            ("transpose_a", boolean(false)),
            ("transpose_b", boolean(false)),
        ],
        &[2, 3],
    );
    g.op(
        "sm",
        "softmax",
        &[("input", &[&mm])],
        vec![("axis", int(-1))],
        &[2, 3],
    );
    let y = g.data("y", &[3, 4]);
    let n = konst(&mut g, r, "n", &[2, 4]);
    let nb = konst(&mut g, r, "nb", &[2]);
    g.op(
        "mt",
        "matmul",
        &[("input", &[&y, &n]), ("bias", &[&nb])],
        vec![
            ("transpose_a", boolean(false)),
            ("transpose_b", boolean(true)),
        ],
        &[3, 2],
    );
    g
}

fn eltwise(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("eltwise");
    let a = g.data("a", &[1, 3, 4, 5]);
    let b = g.data("b", &[1, 1, 4, 1]);
    let c = konst(&mut g, r, "c", &[5]);
    let add = g.op(
        "add",
        "add",
        &[("input", &[&a, &b, &c])],
        vec![],
        &[1, 3, 4, 5],
    );
    let sub = g.op(
        "sub",
        "sub",
        &[("input", &[&add, &b])],
        vec![],
        &[1, 3, 4, 5],
    );
    let mul = g.op(
        "mul",
        "mul",
        &[("input", &[&sub, &c])],
        vec![],
        &[1, 3, 4, 5],
    );
    let two = g.constant("two", &[1], &[2.0]);
    let div = g.op(
        "div",
        "div",
        &[("input", &[&mul, &two])],
        vec![],
        &[1, 3, 4, 5],
    );
    let mx = g.op(
        "max",
        "max",
        &[("input", &[&div, &a])],
        vec![],
        &[1, 3, 4, 5],
    );
    g.op(
        "min",
        "min",
        &[("input", &[&mx, &b])],
        vec![],
        &[1, 3, 4, 5],
    );
    g
}

fn pools(_r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("pools");
    let x = g.data("x", &[1, 7, 6, 2]);
    g.op(
        "max_ceil",
        "maxpool2d",
        &[("input", &[&x])],
        vec![
            ("kernel", ints(&[2, 2])),
            ("stride", ints(&[2, 2])),
            ("pad_mode", string("CEIL")),
        ],
        &[1, 4, 3, 2],
    );
    g.op(
        "avg_pad",
        "avgpool2d",
        &[("input", &[&x])],
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[2, 2])),
            ("pad", ints(&[1, 1, 1, 1])),
            ("pad_mode", string("FLOOR")),
            ("count_include_pad", boolean(true)),
        ],
        &[1, 4, 3, 2],
    );
    g.op(
        "avg_excl",
        "avgpool2d",
        &[("input", &[&x])],
        vec![
            ("kernel", ints(&[3, 2])),
            ("stride", ints(&[1, 2])),
            ("pad", ints(&[1, 0, 0, 1])),
            ("pad_mode", string("FLOOR")),
            ("count_include_pad", boolean(false)),
        ],
        &[1, 4, 5, 2],
    );
    // CEIL past `pad`: counted in the divisor by default (`count_include_invalid` true, XIR's
    // op definition), not counted when it is false.
    for (name, invalid) in [("avg_ceil", true), ("avg_ceil_valid", false)] {
        g.op(
            name,
            "avgpool2d",
            &[("input", &[&x])],
            vec![
                ("kernel", ints(&[2, 2])),
                ("stride", ints(&[2, 2])),
                ("pad", ints(&[1, 0, 0, 0])),
                ("pad_mode", string("CEIL")),
                ("count_include_pad", boolean(true)),
                ("count_include_invalid", boolean(invalid)),
            ],
            &[1, 4, 4, 2],
        );
    }
    g.op(
        "avg_same",
        "avgpool2d",
        &[("input", &[&x])],
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[2, 2])),
            ("pad_mode", string("SAME")),
            ("count_include_pad", boolean(false)),
        ],
        &[1, 4, 3, 2],
    );
    g.op(
        "global",
        "avgpool2d",
        &[("input", &[&x])],
        vec![
            ("kernel", ints(&[6, 7])),
            ("stride", ints(&[1, 1])),
            ("global", boolean(true)),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 1, 1, 2],
    );
    g.op(
        "mean",
        "reduction_mean",
        &[("input", &[&x])],
        vec![("axis", ints(&[1, 2])), ("keep_dims", boolean(true))],
        &[1, 1, 1, 2],
    );
    g.op(
        "rmax",
        "reduction_max",
        &[("input", &[&x])],
        vec![("axis", ints(&[-1])), ("keep_dims", boolean(false))],
        &[1, 7, 6],
    );
    g
}

fn activations(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("activations");
    let x = g.data("x", &[1, 3, 4, 3]);
    let s = [1, 3, 4, 3];
    let lr = g.op(
        "leaky",
        "leaky-relu",
        &[("input", &[&x])],
        vec![("alpha", float(0.1015625))],
        &s,
    );
    let a = konst(&mut g, r, "alpha", &[3]);
    let pr = g.op(
        "prelu",
        "prelu",
        &[("input", &[&x]), ("weight", &[&a])],
        // Not an XIR 2.5 built-in: XIR defines it on load from its declared output.
        declared(&s),
        &s,
    );
    let sg = g.op("sigmoid", "sigmoid", &[("input", &[&x])], vec![], &s);
    let th = g.op("tanh", "tanh", &[("input", &[&x])], vec![], &s);
    let hs = g.op("hsig", "hard-sigmoid", &[("input", &[&x])], vec![], &s);
    let cat = g.op(
        "cat",
        "concat",
        &[("input", &[&lr, &pr, &sg, &th, &hs])],
        vec![("axis", int(-1))],
        &[1, 3, 4, 15],
    );
    g.op(
        "pad",
        "pad",
        &[("input", &[&cat])],
        vec![
            ("paddings", ints(&[0, 0, 1, 2, 0, 1, 0, 0])),
            ("mode", string("CONSTANT")),
            ("constant_values", floats(&[0.5])),
        ],
        &[1, 6, 5, 15],
    );
    g.op(
        "reflect",
        "pad",
        &[("input", &[&x])],
        vec![
            ("paddings", ints(&[0, 0, 2, 1, 1, 2, 0, 0])),
            ("mode", string("REFLECT")),
        ],
        &[1, 6, 7, 3],
    );
    g.op(
        "symmetric",
        "pad",
        &[("input", &[&x])],
        vec![
            ("paddings", ints(&[0, 0, 3, 0, 0, 4, 1, 1])),
            ("mode", string("SYMMETRIC")),
        ],
        &[1, 6, 8, 5],
    );
    g
}

fn shapes(_r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("shapes");
    let x = g.data("x", &[1, 4, 6, 2]);
    let t = g.op(
        "tr",
        "transpose",
        &[("input", &[&x])],
        vec![("order", ints(&[0, 3, 1, 2]))],
        &[1, 2, 4, 6],
    );
    let rs = g.op(
        "rs",
        "reshape",
        &[("input", &[&t])],
        vec![("shape", ints(&[8, 6]))],
        &[8, 6],
    );
    let ss = g.op(
        "ss",
        "strided_slice",
        &[("input", &[&rs])],
        vec![
            ("begin", ints(&[1, -5])),
            ("end", ints(&[100, 6])),
            ("strides", ints(&[3, 2])),
        ],
        &[3, 3],
    );
    g.op(
        "tile",
        "tile",
        &[("input", &[&ss])],
        {
            let mut a = declared(&[6, 9]);
            a.push(("multiples", ints(&[2, 3])));
            a
        },
        &[6, 9],
    );
    let m = g.op(
        "m",
        "reduction_mean",
        &[("input", &[&x])],
        vec![("axis", ints(&[1])), ("keep_dims", boolean(true))],
        &[1, 1, 6, 2],
    );
    g.op(
        "sq",
        "squeeze",
        &[("input", &[&m])],
        vec![("axis", ints(&[0, 1]))],
        &[6, 2],
    );
    g.op(
        "fl",
        "flatten",
        &[("input", &[&x])],
        vec![("start_axis", int(1)), ("end_axis", int(-1))],
        &[1, 48],
    );
    g
}

fn resizes(_r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("resizes");
    let x = g.data("x", &[1, 3, 4, 2]);
    g.op(
        "up2",
        "resize",
        &[("input", &[&x])],
        vec![
            ("mode", string("NEAREST")),
            ("scale", floats(&[8.0 / 4.0, 6.0 / 3.0])),
        ],
        &[1, 6, 8, 2],
    );
    g.op(
        "bil_hp",
        "resize",
        &[("input", &[&x])],
        vec![
            ("scale", floats(&[7.0 / 4.0, 5.0 / 3.0])),
            ("mode", string("BILINEAR")),
            ("half_pixel_centers", boolean(true)),
        ],
        &[1, 5, 7, 2],
    );
    g.op(
        "bil_ac",
        "resize",
        &[("input", &[&x])],
        vec![
            ("scale", floats(&[5.0 / 4.0, 7.0 / 3.0])),
            ("mode", string("BILINEAR")),
            ("align_corners", boolean(true)),
        ],
        &[1, 7, 5, 2],
    );
    g.op(
        "near_hp",
        "resize",
        &[("input", &[&x])],
        vec![
            ("scale", floats(&[6.0 / 4.0, 5.0 / 3.0])),
            ("mode", string("NEAREST")),
            ("half_pixel_centers", boolean(true)),
        ],
        &[1, 5, 6, 2],
    );
    g.op(
        "down",
        "resize",
        &[("input", &[&x])],
        vec![
            ("mode", string("NEAREST")),
            ("scale", floats(&[2.0 / 4.0, 1.0 / 3.0])),
        ],
        &[1, 1, 2, 2],
    );
    g
}

fn rearranges(_r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("rearranges");
    let x = g.data("x", &[1, 8, 4, 3]);
    g.op(
        "reorg",
        "reorg",
        &[("input", &[&x])],
        vec![("scale", int(2)), ("reverse", boolean(false))],
        &[1, 4, 2, 12],
    );
    let y = g.data("y", &[1, 4, 2, 8]);
    g.op(
        "reorg_rev",
        "reorg",
        &[("input", &[&y])],
        vec![("scale", int(2)), ("reverse", boolean(true))],
        &[1, 8, 4, 2],
    );
    g.op(
        "tile",
        "gstiling",
        &[("input", &[&x])],
        vec![("stride", int(2)), ("reverse", boolean(false))],
        &[1, 4, 2, 12],
    );
    g.op(
        "untile",
        "gstiling",
        &[("input", &[&y])],
        vec![("stride", int(2)), ("reverse", boolean(true))],
        &[1, 8, 4, 2],
    );
    g.op(
        "shuffle",
        "pixel-shuffle",
        &[("input", &[&y])],
        vec![("scale", int(2)), ("upscale", boolean(true))],
        &[1, 8, 4, 2],
    );
    g.op(
        "unshuffle",
        "pixel-shuffle",
        &[("input", &[&x])],
        vec![("scale", int(2)), ("upscale", boolean(false))],
        &[1, 4, 2, 12],
    );
    g
}

/// A quantizer-style graph: data → fix, const → fix weights, conv → relu → fix, as the
/// PyTorch exporter writes it.
fn quantized(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("quantized");
    let x = g.data("x", &[1, 6, 6, 4]);
    let xf = g.fix("x_fix", &x, 5, &[1, 6, 6, 4]);
    let v = r.fixed(8 * 9 * 4, 7);
    let w = g.constant("w1", &[8, 3, 3, 4], &v);
    let wf = g.fix("w1_fix", &w, 7, &[8, 3, 3, 4]);
    let v = r.fixed(8, 6);
    let b = g.constant("b1", &[8], &v);
    let bf = g.fix("b1_fix", &b, 6, &[8]);
    let c = conv(
        &mut g,
        "c1",
        "conv2d",
        &xf,
        &wf,
        Some(&bf),
        vec![
            ("kernel", ints(&[3, 3])),
            ("stride", ints(&[1, 1])),
            ("pad", ints(&[1, 1, 1, 1])),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 6, 6, 8],
    );
    let rl = g.op(
        "c1_relu",
        "relu",
        &[("input", &[&c])],
        vec![],
        &[1, 6, 6, 8],
    );
    let cf = g.fix("c1_fix", &rl, 4, &[1, 6, 6, 8]);
    let v = r.fixed(4 * 4 * 8, 7);
    let w2 = g.constant("w2", &[4, 2, 2, 8], &v);
    let w2f = g.fix("w2_fix", &w2, 7, &[4, 2, 2, 8]);
    let t = conv(
        &mut g,
        "t2",
        "transposed-conv2d",
        &cf,
        &w2f,
        None,
        vec![
            ("kernel", ints(&[2, 2])),
            ("stride", ints(&[2, 2])),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 12, 12, 4],
    );
    let tf = g.fix("t2_fix", &t, 3, &[1, 12, 12, 4]);
    let p = g.op(
        "pool",
        "maxpool2d",
        &[("input", &[&tf])],
        vec![
            ("kernel", ints(&[2, 2])),
            ("stride", ints(&[2, 2])),
            ("pad_mode", string("FLOOR")),
        ],
        &[1, 6, 6, 4],
    );
    let s = g.op(
        "sum",
        "add",
        &[("input", &[&p, &xf])],
        vec![],
        &[1, 6, 6, 4],
    );
    let sf = g.fix("sum_fix", &s, 4, &[1, 6, 6, 4]);
    g.returns(&[&sf, &cf]);
    g
}

/// A quantizer-style constant: values exactly int8 · 2^-fp (non-negative ones when `unsigned`)
/// and the `fix` after it.
fn qconst(
    g: &mut GraphWriter,
    r: &mut Rng,
    name: &str,
    shape: &[usize],
    fp: i64,
    signed: bool,
) -> String {
    let mut v = r.fixed(shape.iter().product(), fp as i32);
    if !signed {
        v.iter_mut().for_each(|x| *x = x.abs());
    }
    let c = g.constant(name, shape, &v);
    g.fix_with(&format!("{name}_fix"), &c, fp, 8, signed, shape)
}

fn window(k: i64, s: i64, pad: &[i64], mode: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("kernel", ints(&[k, k])),
        ("stride", ints(&[s, s])),
        ("pad", ints(pad)),
        ("pad_mode", string(mode)),
    ]
}

/// Signed quant8: every operator with a quant8 form on int8 `fix`es (convolution, depthwise,
/// transposed, inner-product, add, mul, and the transparent ones between an operation and
/// its `fix`: relu, relu6, max pooling, concat, reshape, pad, nearest resize, gstiling,
/// transpose, max).
fn quant_signed(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("quant_signed");
    let x = g.data("x", &[1, 8, 8, 4]);
    let xf = g.fix("x_fix", &x, 5, &[1, 8, 8, 4]);
    let w = qconst(&mut g, r, "w1", &[8, 3, 3, 4], 7, true);
    let b = qconst(&mut g, r, "b1", &[8], 6, true);
    let c = conv(
        &mut g,
        "c1",
        "conv2d",
        &xf,
        &w,
        Some(&b),
        window(3, 1, &[1, 1, 1, 1], "FLOOR"),
        &[1, 8, 8, 8],
    );
    let rl = g.op(
        "c1_relu",
        "relu",
        &[("input", &[&c])],
        vec![],
        &[1, 8, 8, 8],
    );
    let cf = g.fix("c1_fix", &rl, 4, &[1, 8, 8, 8]);
    let w = qconst(&mut g, r, "w2", &[1, 3, 3, 8], 7, true);
    let b = qconst(&mut g, r, "b2", &[8], 5, true);
    let d = conv(
        &mut g,
        "d2",
        "depthwise-conv2d",
        &cf,
        &w,
        Some(&b),
        window(3, 2, &[1, 1, 1, 1], "FLOOR"),
        &[1, 4, 4, 8],
    );
    let d6 = g.op(
        "d2_relu6",
        "relu6",
        &[("input", &[&d])],
        vec![],
        &[1, 4, 4, 8],
    );
    let df = g.fix("d2_fix", &d6, 5, &[1, 4, 4, 8]);
    let w = qconst(&mut g, r, "w3", &[4, 2, 2, 8], 7, true);
    let t = conv(
        &mut g,
        "t3",
        "transposed-conv2d",
        &df,
        &w,
        None,
        window(2, 2, &[0, 0, 0, 0], "FLOOR"),
        &[1, 8, 8, 4],
    );
    let tp = g.op(
        "t3_pool",
        "maxpool2d",
        &[("input", &[&t])],
        window(2, 2, &[0, 0, 0, 0], "FLOOR"),
        &[1, 4, 4, 4],
    );
    let tf = g.fix("t3_fix", &tp, 4, &[1, 4, 4, 4]);
    let cat = g.op(
        "cat",
        "concat",
        &[("input", &[&tf, &tf])],
        vec![("axis", int(3))],
        &[1, 4, 4, 8],
    );
    let s = g.op(
        "sum",
        "add",
        &[("input", &[&cat, &df])],
        vec![],
        &[1, 4, 4, 8],
    );
    let sf = g.fix("sum_fix", &s, 4, &[1, 4, 4, 8]);
    let m = g.op(
        "prod",
        "mul",
        &[("input", &[&sf, &df])],
        vec![],
        &[1, 4, 4, 8],
    );
    let mp = g.op(
        "prod_pad",
        "pad",
        &[("input", &[&m])],
        vec![
            ("paddings", ints(&[0, 0, 1, 1, 0, 2, 0, 0])),
            ("mode", string("CONSTANT")),
        ],
        &[1, 6, 6, 8],
    );
    let mf = g.fix("prod_fix", &mp, 5, &[1, 6, 6, 8]);
    let w = qconst(&mut g, r, "w4", &[6, 96], 8, true);
    let b = qconst(&mut g, r, "b4", &[6], 7, true);
    let sl = g.op(
        "rows",
        "strided_slice",
        &[("input", &[&mf])],
        vec![
            ("begin", ints(&[0, 1, 0, 0])),
            ("end", ints(&[1, 5, 3, 8])),
            ("strides", ints(&[1, 1, 1, 1])),
        ],
        &[1, 4, 3, 8],
    );
    let ip = g.op(
        "ip",
        "inner-product",
        &[("input", &[&sl]), ("weights", &[&w]), ("bias", &[&b])],
        vec![("axis", int(1))],
        &[1, 6],
    );
    let ipr = g.op(
        "ip_rows",
        "reshape",
        &[("input", &[&ip])],
        vec![("shape", ints(&[1, 2, 3]))],
        &[1, 2, 3],
    );
    let ipf = g.fix("ip_fix", &ipr, 3, &[1, 2, 3]);
    let w = qconst(&mut g, r, "w5", &[16, 1, 1, 8], 7, true);
    let e = conv(
        &mut g,
        "c5",
        "conv2d",
        &sf,
        &w,
        None,
        window(1, 1, &[0, 0, 0, 0], "FLOOR"),
        &[1, 4, 4, 16],
    );
    let up = g.op(
        "c5_up",
        "resize",
        &[("input", &[&e])],
        vec![("mode", string("NEAREST")), ("scale", floats(&[2.0, 2.0]))],
        &[1, 8, 8, 16],
    );
    let sp = g.op(
        "c5_d2s",
        "gstiling",
        &[("input", &[&up])],
        vec![("stride", int(2)), ("reverse", boolean(true))],
        &[1, 16, 16, 4],
    );
    let tr = g.op(
        "c5_t",
        "transpose",
        &[("input", &[&sp])],
        vec![("order", ints(&[0, 2, 1, 3]))],
        &[1, 16, 16, 4],
    );
    let ef = g.fix("c5_fix", &tr, 3, &[1, 16, 16, 4]);
    let mx = g.op(
        "mx",
        "max",
        &[("input", &[&ef, &ef])],
        vec![],
        &[1, 16, 16, 4],
    );
    // No exact quant8 form here: the average pool computes on float32 between the fixes.
    let avg = g.op(
        "avg",
        "avgpool2d",
        &[("input", &[&cf])],
        window(2, 2, &[0, 0, 0, 0], "FLOOR"),
        &[1, 4, 4, 8],
    );
    let af = g.fix("avg_fix", &avg, 5, &[1, 4, 4, 8]);
    g.returns(&[&cf, &ipf, &mx, &mf, &af]);
    g
}

/// Unsigned quant8: uint8 `fix`es on activations (ReLU outputs), signed weights on unsigned
/// inputs, grouped convolution, matmul, sub, reorg, pixel-shuffle, squeeze, tile, and a
/// `fix` whose input has another quantization (DEQUANTIZE + QUANTIZE).
fn quant_unsigned(r: &mut Rng) -> GraphWriter {
    let mut g = GraphWriter::new("quant_unsigned");
    let x = g.data("x", &[1, 8, 8, 4]);
    let xf = g.fix_with("x_fix", &x, 6, 8, false, &[1, 8, 8, 4]);
    let w = qconst(&mut g, r, "w1", &[8, 3, 3, 2], 7, true);
    let b = qconst(&mut g, r, "b1", &[8], 7, true);
    let mut attrs = window(3, 1, &[1, 1, 1, 1], "SAME");
    attrs.push(("group", int(2)));
    let c = conv(
        &mut g,
        "c1",
        "conv2d",
        &xf,
        &w,
        Some(&b),
        attrs,
        &[1, 8, 8, 8],
    );
    let rl = g.op(
        "c1_relu",
        "relu",
        &[("input", &[&c])],
        vec![],
        &[1, 8, 8, 8],
    );
    let cf = g.fix_with("c1_fix", &rl, 5, 8, false, &[1, 8, 8, 8]);
    let ro = g.op(
        "reorg",
        "reorg",
        &[("input", &[&cf])],
        vec![("scale", int(2)), ("reverse", boolean(false))],
        &[1, 4, 4, 32],
    );
    let w = qconst(&mut g, r, "w2", &[8, 1, 1, 32], 8, false);
    let c2 = conv(
        &mut g,
        "c2",
        "conv2d",
        &ro,
        &w,
        None,
        window(1, 1, &[0, 0, 0, 0], "VALID"),
        &[1, 4, 4, 8],
    );
    let ps = g.op(
        "c2_shuffle",
        "pixel-shuffle",
        &[("input", &[&c2])],
        vec![("scale", int(2)), ("upscale", boolean(true))],
        &[1, 8, 8, 2],
    );
    let c2f = g.fix_with("c2_fix", &ps, 4, 8, false, &[1, 8, 8, 2]);
    let xs = g.op(
        "x_two",
        "strided_slice",
        &[("input", &[&xf])],
        vec![
            ("begin", ints(&[0, 0, 0, 1])),
            ("end", ints(&[1, 8, 8, 3])),
            ("strides", ints(&[1, 1, 1, 1])),
        ],
        &[1, 8, 8, 2],
    );
    let d = g.op(
        "diff",
        "sub",
        &[("input", &[&c2f, &xs])],
        vec![],
        &[1, 8, 8, 2],
    );
    let df = g.fix("diff_fix", &d, 4, &[1, 8, 8, 2]);
    let tl = g.op(
        "diff_tile",
        "tile",
        &[("input", &[&df])],
        {
            let mut a = declared(&[1, 8, 8, 4]);
            a.push(("multiples", ints(&[1, 1, 1, 2])));
            a
        },
        &[1, 8, 8, 4],
    );
    let m = qconst(&mut g, r, "m", &[16, 3], 7, true);
    let y = g.data("y", &[2, 16]);
    let yf = g.fix_with("y_fix", &y, 6, 8, false, &[2, 16]);
    let mm = g.op(
        "mm",
        "matmul",
        &[("input", &[&yf, &m])],
        vec![
            ("transpose_a", boolean(false)),
            ("transpose_b", boolean(false)),
        ],
        &[2, 3],
    );
    let mmf = g.fix_with("mm_fix", &mm, 5, 8, false, &[2, 3]);
    let again = g.fix("mm_refix", &mmf, 3, &[2, 3]);
    let sq = g.op(
        "sq",
        "squeeze",
        &[("input", &[&c2f])],
        vec![("axis", ints(&[0]))],
        &[8, 8, 2],
    );
    g.returns(&[&cf, &tl, &again, &sq]);
    g
}

/// The quantized graphs the importer refuses: a bias finer than input × weights (a negative
/// bias shift), an output multiplier of 1 or more, a 4-bit `fix`.
fn quant_refusals(r: &mut Rng) -> Vec<(&'static str, GraphWriter)> {
    let mut all = Vec::new();
    for (name, fp_b, fp_out, bits) in [
        ("quant_bias_shift", 14, 4, 8),
        ("quant_multiplier", 6, 12, 8),
        ("quant_bits4", 6, 4, 4),
    ] {
        let mut g = GraphWriter::new(name);
        let x = g.data("x", &[1, 4, 4, 2]);
        let xf = g.fix("x_fix", &x, 5, &[1, 4, 4, 2]);
        let w = qconst(&mut g, r, "w", &[2, 1, 1, 2], 6, true);
        let b = qconst(&mut g, r, "b", &[2], fp_b, true);
        let c = conv(
            &mut g,
            "c",
            "conv2d",
            &xf,
            &w,
            Some(&b),
            window(1, 1, &[0, 0, 0, 0], "FLOOR"),
            &[1, 4, 4, 2],
        );
        g.fix_with("c_fix", &c, fp_out, bits, true, &[1, 4, 4, 2]);
        all.push((name, g));
    }
    all
}

fn main() {
    let dir = Path::new("importers/xmodel/testdata");
    std::fs::create_dir_all(dir).expect("testdata directory");
    let mut r = Rng(0x5EED_CAFE);
    type Make = fn(&mut Rng) -> GraphWriter;
    let all: [(&str, Make); 12] = [
        ("convs", convs),
        ("transposed", transposed),
        ("dense", dense),
        ("eltwise", eltwise),
        ("pools", pools),
        ("activations", activations),
        ("shapes", shapes),
        ("resizes", resizes),
        ("rearranges", rearranges),
        ("quantized", quantized),
        ("quant_signed", quant_signed),
        ("quant_unsigned", quant_unsigned),
    ];
    for (name, make) in all {
        let g = make(&mut r);
        let path = dir.join(format!("{name}.xmodel"));
        std::fs::write(&path, g.bytes()).expect("write fixture");
        println!("wrote {}", path.display());
    }
    for (name, g) in quant_refusals(&mut r) {
        let path = dir.join(format!("{name}.xmodel"));
        std::fs::write(&path, g.bytes()).expect("write fixture");
        println!("wrote {}", path.display());
    }
}
