//! Writes the test fixtures of importers/xmodel/testdata/ (run from the repository root:
//! `cargo run -p nnhal-xmodel --example make_fixtures`; not part of CI). Each fixture is a
//! small XIR graph exercising operators and attribute combinations; the tests
//! (cli/tests/xmodel_cases.rs) run them through the driver against the float64 reference of
//! `nnhal_xmodel::reference`. Weights are fixed pseudo-random values, so the files regenerate
//! byte for byte.

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
        vec![("transpose_b", boolean(true))],
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
        vec![],
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
        vec![("multiples", ints(&[2, 3]))],
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
        vec![("mode", string("NEAREST"))],
        &[1, 6, 8, 2],
    );
    g.op(
        "bil_hp",
        "resize",
        &[("input", &[&x])],
        vec![
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
            ("mode", string("NEAREST")),
            ("half_pixel_centers", boolean(true)),
        ],
        &[1, 5, 6, 2],
    );
    g.op(
        "down",
        "resize",
        &[("input", &[&x])],
        vec![("mode", string("NEAREST"))],
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

fn main() {
    let dir = Path::new("importers/xmodel/testdata");
    std::fs::create_dir_all(dir).expect("testdata directory");
    let mut r = Rng(0x5EED_CAFE);
    type Make = fn(&mut Rng) -> GraphWriter;
    let all: [(&str, Make); 10] = [
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
    ];
    for (name, make) in all {
        let g = make(&mut r);
        let path = dir.join(format!("{name}.xmodel"));
        std::fs::write(&path, g.bytes()).expect("write fixture");
        println!("wrote {}", path.display());
    }
}
