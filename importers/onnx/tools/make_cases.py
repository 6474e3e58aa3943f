#!/usr/bin/env python3
"""The seeded set of small ONNX graphs under importers/onnx/testdata/cases/ and their expected
outputs from onnxruntime (CPU execution provider; a model of an opset whose kernels onnxruntime
no longer has runs as onnx's version converter rewrites it to opset 13), for importers' differential test
(cli/tests/onnx_cases.rs). Every row of the README's ONNX ops table has at least one case; some
cases are multi-node graphs with branches.

Per case NAME: NAME.onnx, NAME.in<k>.npy (inputs, graph order), NAME.out<k>.npy (onnxruntime's
outputs); manifest.json lists each case with its tolerance ("float": |a-e| <= 1e-5 + 1e-4*|e|;
"quant": within `step`, one quantization step of the output, or one step per output).

  python3 importers/onnx/tools/make_cases.py     # numpy, onnx, onnxruntime
"""
import json
import os

import numpy as np
import onnx
import onnx.version_converter
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "cases")
rng = np.random.default_rng(20261124)
cases = []


def w(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def case(name, nodes, inputs, outputs, inits=(), opset=13, tol="float", step=0.0, ms=False, feed=None, ref=None):
    """inputs: [(name, shape)] or [(name, shape, element type)] (fed from `feed`), outputs:
    [name]; `ref`: numpy outputs from the inputs, for a form neither onnxruntime nor the version
    converter reads right. Integer tensors are saved as int32, what the runner feeds and returns
    for ONNX's int64 (NNAPI has no int64)."""
    opsets = [helper.make_opsetid("", opset)]
    if ms:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph(
        nodes, name, [vi(*i) for i in inputs], [onnx.ValueInfoProto(name=o) for o in outputs],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=opsets, producer_name="make_cases.py")
    model.ir_version = 8
    try:
        sess = None if ref else ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime lacks some opset 1-6 kernels: run the converted model
        newer = onnx.version_converter.convert_version(model, 13)
        del newer.graph.value_info[:]  # the converter leaves some without an element type
        for o in newer.graph.output:
            o.type.tensor_type.elem_type = TensorProto.FLOAT
        sess = ort.InferenceSession(newer.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {}
    narrow = lambda a: a.astype(np.int32) if a.dtype == np.int64 else a
    for k, (n, s, *_) in enumerate(inputs):
        x = feed[k] if feed else rng.uniform(-1.0, 1.0, s).astype(np.float32)
        feeds[n] = x
        np.save(os.path.join(OUT, f"{name}.in{k}.npy"), narrow(x))
    results = ref(*[feeds[i[0]] for i in inputs]) if ref else sess.run(None, feeds)
    for k, r in enumerate(results):
        np.save(os.path.join(OUT, f"{name}.out{k}.npy"), np.ascontiguousarray(narrow(r)))
    onnx.save(model, os.path.join(OUT, f"{name}.onnx"))
    ops = sorted({(n.domain + "." if n.domain else "") + n.op_type for n in nodes})
    cases.append({"name": name, "inputs": len(inputs), "outputs": len(results), "tolerance": tol, "step": step, "ops": ops})


N = helper.make_node


def float_cases():
    # Conv: group 1 with explicit asymmetric pads and strides; auto_pad; depthwise (multiplier 2).
    case("conv_pads_strides", [N("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 2, 1], strides=[2, 1], kernel_shape=[3, 3])],
         [("x", [1, 3, 9, 8])], ["y"], [init("w", w(4, 3, 3, 3)), init("b", w(4))])
    case("conv_same_upper_nobias", [N("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
         [("x", [1, 2, 7, 6])], ["y"], [init("w", w(3, 2, 2, 3))], opset=11)
    case("conv_same_lower", [N("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER")],
         [("x", [1, 2, 5, 5])], ["y"], [init("w", w(2, 2, 2, 2))], opset=9)
    case("conv_depthwise_mult2_relu", [N("Conv", ["x", "w", "b"], ["c"], group=3, pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])],
         [("x", [1, 3, 6, 6])], ["y"], [init("w", w(6, 1, 3, 3)), init("b", w(6))])
    case("conv_clip6_opset11", [N("Conv", ["x", "w"], ["c"]), N("Clip", ["c", "lo", "hi"], ["y"])],
         [("x", [1, 4, 5, 5])], ["y"], [init("w", w(5, 4, 1, 1, scale=3.0)), init("lo", np.float32(0)), init("hi", np.float32(6))], opset=11)
    case("clip_attr_opset7", [N("Add", ["x", "x"], ["s"]), N("Clip", ["s"], ["y"], min=-1.0, max=1.0)],
         [("x", [1, 2, 3, 3])], ["y"], opset=7)
    # Gemm / MatMul with constant B.
    case("gemm_transb_alpha_beta", [N("Gemm", ["x", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
         [("x", [2, 6])], ["y"], [init("b", w(4, 6)), init("c", w(4))])
    case("matmul_const_b", [N("MatMul", ["x", "b"], ["y"])], [("x", [3, 5])], ["y"], [init("b", w(5, 7))])
    # Broadcasting Add / Mul / Sum.
    case("add_mul_broadcast", [N("Add", ["x", "c"], ["a"]), N("Mul", ["a", "d"], ["y"])],
         [("x", [1, 4, 3, 5])], ["y"], [init("c", w(4, 1, 1)), init("d", w(5))])
    case("sum_three_branches", [N("Relu", ["x"], ["r"]), N("Sigmoid", ["x"], ["s"]), N("Sum", ["x", "r", "s"], ["y"])],
         [("x", [1, 3, 4, 4])], ["y"])
    # Unary.
    case("sigmoid_tanh_floor", [N("Sigmoid", ["x"], ["s"]), N("Tanh", ["s"], ["t"]), N("Mul", ["t", "k"], ["m"]), N("Floor", ["m"], ["y"])],
         [("x", [2, 7])], ["y"], [init("k", np.float32([7.3]))])
    # Pools.
    case("maxpool_pads_strides", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], pads=[1, 0, 1, 1], strides=[2, 2])],
         [("x", [1, 3, 7, 6])], ["y"])
    case("averagepool_pads_exclude", [N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 2])],
         [("x", [1, 2, 5, 6])], ["y"])
    case("averagepool_same_upper", [N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_UPPER", strides=[2, 2])],
         [("x", [1, 2, 5, 5])], ["y"], opset=10)
    case("global_pools", [N("GlobalAveragePool", ["x"], ["a"]), N("GlobalMaxPool", ["x"], ["m"]), N("Add", ["a", "m"], ["y"])],
         [("x", [1, 5, 4, 3])], ["y"])
    case("lppool_p2", [N("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], p=2)], [("x", [1, 3, 4, 6])], ["y"], opset=11)
    # Concat of branches, channel axis and height axis.
    case("concat_branches", [N("Conv", ["x", "w1"], ["a"]), N("MaxPool", ["x"], ["p"], kernel_shape=[1, 1]), N("Concat", ["a", "p"], ["c"], axis=1),
                             N("Concat", ["c", "c"], ["y"], axis=-2)],
         [("x", [1, 2, 3, 4])], ["y"], [init("w1", w(3, 2, 1, 1))])
    # Flatten / Reshape → Gemm (the NCHW element order through a re-laid-out weight), Squeeze/Unsqueeze.
    case("flatten_gemm", [N("Conv", ["x", "w"], ["c"]), N("Flatten", ["c"], ["f"]), N("Gemm", ["f", "b", "bias"], ["y"], transB=1)],
         [("x", [1, 3, 4, 5])], ["y"], [init("w", w(6, 3, 1, 1)), init("b", w(10, 6 * 4 * 5, scale=0.1)), init("bias", w(10))])
    case("reshape_matmul", [N("Reshape", ["x", "s"], ["r"]), N("MatMul", ["r", "b"], ["y"])],
         [("x", [1, 2, 3, 3])], ["y"], [init("s", np.int64([1, -1])), init("b", w(18, 4))])
    case("squeeze_unsqueeze", [N("GlobalAveragePool", ["x"], ["g"]), N("Squeeze", ["g", "ax"], ["s"]), N("Gemm", ["s", "b"], ["m"]),
                               N("Unsqueeze", ["m", "ax"], ["u"]), N("Relu", ["u"], ["y"])],
         [("x", [1, 4, 3, 3])], ["y"], [init("ax", np.int64([2, 3])), init("b", w(4, 5))])
    case("squeeze_attr_opset11", [N("GlobalMaxPool", ["x"], ["g"]), N("Squeeze", ["g"], ["y"], axes=[2, 3])], [("x", [1, 3, 2, 2])], ["y"], opset=11)
    # Softmax: opset 13 along the channel axis of an image, opset 11 on a matrix.
    case("softmax_channels", [N("Softmax", ["x"], ["y"], axis=1)], [("x", [1, 5, 2, 3])], ["y"])
    case("softmax_opset11", [N("Mul", ["x", "k"], ["m"]), N("Softmax", ["m"], ["y"])], [("x", [3, 10])], ["y"], [init("k", np.float32([4.0]))], opset=11)
    # Normalizations.
    case("lrn_size5", [N("LRN", ["x"], ["y"], size=5, alpha=0.01, beta=0.6, bias=2.0)], [("x", [1, 7, 3, 3])], ["y"])
    case("lpnormalization_channels", [N("LpNormalization", ["x"], ["y"], axis=1, p=2)], [("x", [1, 4, 2, 3])], ["y"])
    # Depth/space.
    case("depth_to_space_dcr", [N("DepthToSpace", ["x"], ["y"], blocksize=2, mode="DCR")], [("x", [1, 8, 2, 3])], ["y"])
    case("space_to_depth", [N("SpaceToDepth", ["x"], ["y"], blocksize=2)], [("x", [1, 3, 4, 6])], ["y"])
    # Resize / Upsample, linear, asymmetric.
    case("resize_linear_asymmetric", [N("Resize", ["x", "", "sc"], ["y"], mode="linear", coordinate_transformation_mode="asymmetric")],
         [("x", [1, 2, 3, 4])], ["y"], [init("sc", np.float32([1, 1, 2, 3]))])
    case("resize_sizes_asymmetric", [N("Resize", ["x", "", "", "sz"], ["y"], mode="linear", coordinate_transformation_mode="asymmetric")],
         [("x", [1, 2, 4, 4])], ["y"], [init("sz", np.int64([1, 2, 8, 6]))])
    case("upsample_linear_opset9", [N("Upsample", ["x", "sc"], ["y"], mode="linear")], [("x", [1, 3, 2, 3])], ["y"],
         [init("sc", np.float32([1, 1, 2, 2]))], opset=9)
    # BatchNormalization: folded into the Conv / Gemm, and alone (MUL + ADD).
    bn = lambda c, p: [init(p + "g", w(c) + 1), init(p + "b", w(c)), init(p + "m", w(c)), init(p + "v", np.abs(w(c)) + 0.5)]
    case("batchnorm_folded_and_alone",
         [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("BatchNormalization", ["c", "1g", "1b", "1m", "1v"], ["n"], epsilon=1e-3),
          N("Relu", ["n"], ["r"]), N("Add", ["r", "x2"], ["a"]), N("BatchNormalization", ["a", "2g", "2b", "2m", "2v"], ["y"])],
         [("x", [1, 3, 4, 4]), ("x2", [1, 4, 4, 4])], ["y"], [init("w", w(4, 3, 3, 3))] + bn(4, "1") + bn(4, "2"))
    case("gemm_batchnorm_dropout_identity",
         [N("Gemm", ["x", "b"], ["g"]), N("BatchNormalization", ["g", "1g", "1b", "1m", "1v"], ["n"]), N("Dropout", ["n"], ["d"]),
          N("Identity", ["d"], ["y"])],
         [("x", [2, 5])], ["y"], [init("b", w(5, 3))] + bn(3, "1"))
    # Folded constants: the PyTorch flatten pattern Shape → Gather → Unsqueeze → Concat → Reshape,
    # Constant and ConstantOfShape.
    case("shape_folding_flatten",
         [N("Relu", ["x"], ["r"]), N("Shape", ["r"], ["s"]), N("Constant", [], ["i0"], value=numpy_helper.from_array(np.int64(0))),
          N("Gather", ["s", "i0"], ["n"], axis=0), N("Unsqueeze", ["n", "ax0"], ["nu"]),
          N("Constant", [], ["m1"], value_ints=[-1]), N("Concat", ["nu", "m1"], ["shape"], axis=0),
          N("Reshape", ["r", "shape"], ["f"]), N("MatMul", ["f", "b"], ["mm"]),
          N("ConstantOfShape", ["cs"], ["ones"], value=numpy_helper.from_array(np.float32([0.25]))), N("Add", ["mm", "ones"], ["y"])],
         [("x", [1, 2, 2, 3])], ["y"], [init("ax0", np.int64([0])), init("b", w(12, 3)), init("cs", np.int64([1, 3]))])
    # Transpose: ShuffleNet's channel shuffle (Reshape → Transpose → Reshape) and a constant.
    case("channel_shuffle",
         [N("Conv", ["x", "w"], ["c"]), N("Reshape", ["c", "s5"], ["r5"]), N("Transpose", ["r5"], ["t"], perm=[0, 2, 1, 3, 4]),
          N("Reshape", ["t", "s4"], ["r4"]), N("Transpose", ["k"], ["kt"], perm=[1, 0]), N("Reshape", ["kt", "s4b"], ["kb"]),
          N("Add", ["r4", "kb"], ["y"])],
         [("x", [1, 4, 3, 3])], ["y"],
         [init("w", w(6, 4, 1, 1)), init("s5", np.int64([1, 3, 2, 3, 3])), init("s4", np.int64([1, 6, 3, 3])),
          init("k", w(1, 6)), init("s4b", np.int64([6, 1, 1]))])
    # tf2onnx's NHWC edges: Transpose [0, 3, 1, 2] after the input, [0, 2, 3, 1] before the output.
    case("nhwc_edges_transposed",
         [N("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]), N("Conv", ["xt", "w"], ["c"], pads=[1, 1, 1, 1]),
          N("Relu", ["c"], ["r"]), N("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])],
         [("x", [1, 5, 4, 3])], ["y"], [init("w", w(2, 3, 3, 3))])
    # Multi-node graph with branches: a residual block, a pool branch, a classifier head.
    case("residual_branches_head",
         [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
          N("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), N("Add", ["c2", "x"], ["s"]), N("Relu", ["s"], ["r2"]),
          N("AveragePool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]), N("MaxPool", ["r2"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
          N("Concat", ["p", "q"], ["cat"], axis=1), N("Flatten", ["cat"], ["f"]), N("Gemm", ["f", "fc", "fb"], ["logits"], transB=1),
          N("Softmax", ["logits"], ["y"])],
         [("x", [1, 4, 6, 6])], ["y", "logits"],
         [init("w1", w(4, 4, 3, 3, scale=0.3)), init("b1", w(4)), init("w2", w(4, 4, 3, 3, scale=0.3)), init("fc", w(5, 8 * 3 * 3, scale=0.2)), init("fb", w(5))])


def q_init(name, x, scale, zp):
    q = np.clip(np.round(x / scale) + zp, 0, 255).astype(np.uint8)
    return init(name, q)


def quant_cases():
    s_in, z_in = np.float32(1 / 64), np.uint8(128)
    common = [init("xs", s_in), init("xz", z_in)]
    # QuantizeLinear input → QLinearConv (group 1) → QLinearConv (depthwise) → DequantizeLinear.
    wv = w(4, 3, 3, 3, scale=0.3)
    dv = w(4, 1, 3, 3, scale=0.3)
    ws, wz, ds, dz = np.float32(0.01), np.uint8(120), np.float32(0.008), np.uint8(131)
    c1s, c1z, c2s, c2z = np.float32(0.05), np.uint8(100), np.float32(0.03), np.uint8(140)
    case("qlinearconv_chain",
         [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
          N("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "c1s", "c1z", "b"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
          N("QLinearConv", ["c1", "c1s", "c1z", "d", "ds", "dz", "c2s", "c2z", "db"], ["c2"], group=4, pads=[1, 1, 1, 1]),
          N("DequantizeLinear", ["c2", "c2s", "c2z"], ["y"])],
         [("x", [1, 3, 8, 8])], ["y"],
         common + [q_init("w", wv, ws, wz), init("ws", ws), init("wz", wz), init("c1s", c1s), init("c1z", c1z),
                   init("b", (w(4) / (s_in * ws)).astype(np.int32)), q_init("d", dv, ds, dz), init("ds", ds), init("dz", dz),
                   init("c2s", c2s), init("c2z", c2z), init("db", (w(4) / (c1s * ds)).astype(np.int32))],
         tol="quant", step=float(c2s))
    bs, bz, ys, yz = np.float32(0.02), np.uint8(125), np.float32(0.04), np.uint8(128)
    case("qlinearmatmul",
         [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), N("QLinearMatMul", ["xq", "xs", "xz", "b", "bs", "bz", "ys", "yz"], ["m"]),
          N("DequantizeLinear", ["m", "ys", "yz"], ["y"])],
         [("x", [2, 9])], ["y"], common + [q_init("b", w(9, 4), bs, bz), init("bs", bs), init("bz", bz), init("ys", ys), init("yz", yz)],
         tol="quant", step=float(ys))
    as_, az = np.float32(0.025), np.uint8(130)
    case("qlinear_add_mul_concat",
         [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
          N("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "xs", "xz"], ["c"]),
          N("QLinearAdd", ["xq", "xs", "xz", "c", "xs", "xz", "as", "az"], ["a"], domain="com.microsoft"),
          N("QLinearMul", ["a", "as", "az", "xq", "xs", "xz", "ms", "mz"], ["m"], domain="com.microsoft"),
          N("QLinearConcat", ["ms", "mz", "m", "ms", "mz", "m", "ms", "mz"], ["cat"], axis=1, domain="com.microsoft"),
          N("DequantizeLinear", ["cat", "ms", "mz"], ["y"])],
         [("x", [1, 3, 4, 4])], ["y"],
         common + [q_init("w", w(3, 3, 1, 1, scale=0.3), ws, wz), init("ws", ws), init("wz", wz), init("as", as_), init("az", az),
                   init("ms", np.float32(0.02)), init("mz", np.uint8(110))],
         ms=True, tol="quant", step=0.02)
    gs, gz = np.float32(0.006), np.uint8(120)
    case("qlinear_gap_softmax",
         [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
          N("QLinearGlobalAveragePool", ["xq", "xs", "xz", "gs", "gz"], ["g"], domain="com.microsoft", channels_last=0),
          N("Reshape", ["g", "shape"], ["r"]),
          N("QLinearSoftmax", ["r", "gs", "gz", "ys", "yz"], ["sm"], axis=-1, opset=13, domain="com.microsoft"),
          N("DequantizeLinear", ["sm", "ys", "yz"], ["y"])],
         [("x", [1, 6, 5, 5])], ["y"],
         common + [init("gs", gs), init("gz", gz), init("shape", np.int64([1, 6])), init("ys", np.float32(1 / 256)), init("yz", np.uint8(0))],
         ms=True, tol="quant", step=1 / 256)


def qdq_cases():
    """onnxruntime's QDQ form: DequantizeLinear → op → QuantizeLinear around each operator."""
    xs, xz = np.float32(1 / 64), np.uint8(128)
    ws, wz = np.float32(0.01), np.uint8(127)
    cs, cz = np.float32(0.04), np.uint8(120)
    ss, sz = np.float32(0.05), np.uint8(110)
    gs, gz = np.float32(0.02), np.uint8(100)
    wv = w(4, 3, 3, 3, scale=0.3)
    q = lambda i, o, s, z: N("QuantizeLinear", [i, s, z], [o])
    dq = lambda i, o, s, z: N("DequantizeLinear", [i, s, z], [o])
    case("qdq_conv_pool_add_gap",
         [q("x", "xq", "xs", "xz"), dq("xq", "xd", "xs", "xz"), dq("wq", "wd", "ws", "wz"), dq("bq", "bd", "bs", ""),
          N("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]), q("c", "cq", "cs", "cz"), dq("cq", "cd", "cs", "cz"),
          N("MaxPool", ["cd"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), q("p", "pq", "cs", "cz"), dq("pq", "pd", "cs", "cz"),
          N("Add", ["cd", "pd"], ["s"]), q("s", "sq", "ss", "sz"), dq("sq", "sd", "ss", "sz"),
          N("Concat", ["sd", "sd"], ["cat"], axis=1), q("cat", "catq", "ss", "sz"), dq("catq", "catd", "ss", "sz"),
          N("GlobalAveragePool", ["catd"], ["g"]), q("g", "gq", "gs", "gz"), dq("gq", "y", "gs", "gz")],
         [("x", [1, 3, 6, 6])], ["y"],
         [init("xs", xs), init("xz", xz), q_init("wq", wv, ws, wz), init("ws", ws), init("wz", wz),
          init("bq", (w(4) / (xs * ws)).astype(np.int32)), init("bs", np.float32(xs * ws)),
          init("cs", cs), init("cz", cz), init("ss", ss), init("sz", sz), init("gs", gs), init("gz", gz)],
         tol="quant", step=float(gs))


def qdq_head_case():
    """A QDQ classifier head: Flatten of an image → Gemm (int32 bias) → Softmax, plus MatMul."""
    xs, xz = np.float32(1 / 64), np.uint8(128)
    ws, wz = np.float32(0.01), np.uint8(127)
    gs, gz = np.float32(0.08), np.uint8(128)
    q = lambda i, o, s, z: N("QuantizeLinear", [i, s, z], [o])
    dq = lambda i, o, s, z: N("DequantizeLinear", [i, s, z], [o])
    case("qdq_flatten_gemm_softmax",
         [q("x", "xq", "xs", "xz"), dq("xq", "xd", "xs", "xz"), N("Flatten", ["xd"], ["f"]),
          dq("wq", "wd", "ws", "wz"), dq("bq", "bd", "bs", ""), N("Gemm", ["f", "wd", "bd"], ["g"], transB=1),
          q("g", "gq", "gs", "gz"), dq("gq", "gd", "gs", "gz"), N("Softmax", ["gd"], ["s"]), q("s", "sq", "ss", "sz"),
          dq("sq", "y", "ss", "sz"),
          dq("mq", "md", "ws", "wz"), N("MatMul", ["gd", "md"], ["m"]), q("m", "mmq", "gs", "gz"), dq("mmq", "y2", "gs", "gz")],
         [("x", [1, 3, 2, 2])], ["y", "y2"],
         [init("xs", xs), init("xz", xz), q_init("wq", w(6, 12, scale=0.3), ws, wz), init("ws", ws), init("wz", wz),
          init("bq", (w(6) / (xs * ws)).astype(np.int32)), init("bs", np.float32(xs * ws)), init("gs", gs), init("gz", gz),
          init("ss", np.float32(1 / 256)), init("sz", np.uint8(0)), q_init("mq", w(6, 4, scale=0.3), ws, wz)],
         tol="quant", step=[1 / 256, float(gs)])


def later_cases():
    """The lowerings to the NNAPI 1.1-1.3 operations, per opset where the form changed."""
    # Transpose and the NCHW-order reshapes it makes exact.
    case("transpose_image_perm", [N("Transpose", ["x"], ["y"], perm=[0, 3, 1, 2])], [("x", [1, 2, 3, 4])], ["y"])
    case("transpose_3d", [N("Transpose", ["x"], ["y"], perm=[2, 0, 1])], [("x", [2, 3, 4])], ["y"])
    case("reshape_image_nchw_order", [N("Reshape", ["x", "s"], ["r"]), N("Relu", ["r"], ["y"])],
         [("x", [1, 2, 3, 4])], ["y"], [init("s", np.int64([1, 6, 4]))])
    case("unsqueeze_to_image", [N("Unsqueeze", ["x", "ax"], ["u"]), N("Conv", ["u", "w"], ["y"])],
         [("x", [1, 3, 5])], ["y"], [init("ax", np.int64([2])), init("w", w(2, 3, 1, 2))])
    case("reshape_opset1_attr", [N("Reshape", ["x"], ["y"], shape=[2, 12])], [("x", [1, 2, 3, 4])], ["y"], opset=1)
    # Convolutions: grouped, dilated, 1-D, transposed.
    case("conv_grouped", [N("Conv", ["x", "w", "b"], ["y"], group=2, pads=[1, 1, 1, 1])],
         [("x", [1, 4, 5, 5])], ["y"], [init("w", w(6, 2, 3, 3)), init("b", w(6))])
    case("conv_dilated", [N("Conv", ["x", "w"], ["y"], dilations=[2, 1], pads=[2, 1, 2, 1])],
         [("x", [1, 2, 7, 6])], ["y"], [init("w", w(3, 2, 3, 3))])
    case("conv_1d", [N("Conv", ["x", "w", "b"], ["y"], pads=[1, 2], strides=[2])],
         [("x", [2, 3, 9])], ["y"], [init("w", w(4, 3, 3)), init("b", w(4))])
    case("maxpool_1d_opset6", [N("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2])], [("x", [1, 3, 9])], ["y"], opset=6)
    case("conv_transpose_output_padding", [N("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 0, 0], output_padding=[1, 1])],
         [("x", [1, 3, 4, 3])], ["y"], [init("w", w(3, 2, 3, 3)), init("b", w(2))])
    # Pad: constant (attribute form of opset 2, inputs of 11), reflect and edge.
    case("pad_constant_opset2", [N("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 1, 0, 1], value=0.5)], [("x", [1, 2, 3, 3])], ["y"], opset=2)
    case("pad_reflect_opset11", [N("Pad", ["x", "p"], ["y"], mode="reflect")], [("x", [1, 2, 4, 4])], ["y"],
         [init("p", np.int64([0, 0, 2, 1, 0, 0, 1, 3]))], opset=11)
    case("pad_edge_opset13", [N("Pad", ["x", "p"], ["y"], mode="edge")], [("x", [2, 5])], ["y"], [init("p", np.int64([1, 2, 0, 3]))])
    # Reductions: attribute axes (opset 11), input axes (ReduceSum 13, ReduceMax 18), keepdims 0.
    case("reduce_mean_keepdims_opset11", [N("ReduceMean", ["x"], ["y"], axes=[2, 3])], [("x", [1, 3, 4, 5])], ["y"], opset=11)
    case("reduce_sum_channel_opset13", [N("ReduceSum", ["x", "ax"], ["y"], keepdims=0)], [("x", [1, 3, 4, 5])], ["y"],
         [init("ax", np.int64([1]))])
    case("reduce_max_batch_opset18", [N("ReduceMax", ["x", "ax"], ["y"], keepdims=0)], [("x", [2, 3, 2, 2])], ["y"],
         [init("ax", np.int64([0]))], opset=18)
    case("reduce_min_prod", [N("ReduceMin", ["x"], ["a"], axes=[1], keepdims=1), N("ReduceProd", ["x"], ["b"], axes=[1], keepdims=1),
                             N("Add", ["a", "b"], ["y"])], [("x", [3, 4])], ["y"], opset=13)
    # Slice (attributes in opset 1, inputs with steps from 10), Split (attribute 11, input 13), Tile, Expand, Gather.
    case("slice_opset1_attrs", [N("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1], axes=[2, 3])], [("x", [1, 2, 4, 5])], ["y"], opset=1)
    case("slice_steps_negative", [N("Slice", ["x", "b", "e", "a", "s"], ["y"])], [("x", [1, 3, 6, 5])], ["y"],
         [init("b", np.int64([-1, 0])), init("e", np.int64([-100, 5])), init("a", np.int64([2, 3])), init("s", np.int64([-2, 2]))])
    case("split_unequal_opset11", [N("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]), N("Concat", ["b", "a"], ["y"], axis=1)],
         [("x", [1, 4, 2, 3])], ["y"], opset=11)
    case("split_equal_opset13", [N("Split", ["x", "s"], ["a", "b"], axis=-1), N("Sub", ["a", "b"], ["y"])], [("x", [2, 3, 6])], ["y"],
         [init("s", np.int64([3, 3]))])
    case("tile_image", [N("Tile", ["x", "r"], ["y"])], [("x", [1, 2, 2, 3])], ["y"], [init("r", np.int64([1, 2, 3, 1]))])
    case("expand_rank_up", [N("Expand", ["x", "s"], ["y"])], [("x", [3, 1])], ["y"], [init("s", np.int64([2, 3, 4]))])
    case("gather_const_indices", [N("Gather", ["x", "i"], ["y"], axis=1)], [("x", [2, 5, 3])], ["y"], [init("i", np.int64([[4, 0], [1, 1]]))])
    # Element-wise math and activations.
    case("sub_div_pow_max_min", [N("Sub", ["x", "c"], ["a"]), N("Div", ["a", "x2"], ["b"]), N("Abs", ["b"], ["ab"]),
                                 N("Pow", ["ab", "e"], ["p"]), N("Max", ["p", "x"], ["m"]), N("Min", ["m", "c"], ["y"])],
         [("x", [2, 3, 4]), ("x2", [4])], ["y"], [init("c", w(3, 1)), init("e", np.float32([1.5]))],
         feed=[rng.uniform(-1.0, 1.0, (2, 3, 4)).astype(np.float32), rng.uniform(0.5, 1.5, (4,)).astype(np.float32)])
    case("unary_math", [N("Exp", ["x"], ["e"]), N("Log", ["e"], ["l"]), N("Sqrt", ["e"], ["s"]), N("Neg", ["s"], ["n"]),
                        N("Sin", ["n"], ["si"]), N("Reciprocal", ["e"], ["r"]), N("Add", ["si", "r"], ["a"]), N("Add", ["a", "l"], ["y"])],
         [("x", [2, 3, 2, 2])], ["y"])
    case("activations", [N("LeakyRelu", ["x"], ["a"], alpha=0.2), N("Elu", ["x"], ["b"], alpha=0.7), N("Selu", ["x"], ["c"]),
                         N("HardSigmoid", ["x"], ["d"]), N("HardSwish", ["x"], ["e"]), N("Softplus", ["x"], ["f"]),
                         N("Softsign", ["x"], ["g"]), N("Sum", ["a", "b", "c", "d", "e", "f", "g"], ["y"])],
         [("x", [1, 3, 4, 4])], ["y"], opset=14,
         feed=[rng.uniform(-4.0, 4.0, (1, 3, 4, 4)).astype(np.float32)])
    case("prelu_channels", [N("PRelu", ["x", "s"], ["y"])], [("x", [1, 3, 2, 2])], ["y"], [init("s", w(3, 1, 1))])
    case("clip_bounds_opset13", [N("Clip", ["x", "lo", "hi"], ["y"])], [("x", [3, 4])], ["y"],
         [init("lo", np.float32(-0.3)), init("hi", np.float32(0.45))])
    # Softmax / LogSoftmax: opset 11 over everything from the axis on, 13 along one axis.
    case("softmax_opset11_flattened", [N("Softmax", ["x"], ["y"], axis=1)], [("x", [1, 3, 2, 2])], ["y"], opset=11)
    case("logsoftmax_axis2_opset13", [N("LogSoftmax", ["x"], ["y"], axis=2)], [("x", [1, 3, 4, 2])], ["y"])
    # Opset 6 binary broadcast with an axis, BatchNormalization is_test, InstanceNormalization.
    c6, d6 = w(3), w(2, 4)
    # (onnx 1.23.2's version converter unsqueezes B at the wrong axes for axis = 1: numpy.)
    case("add_broadcast_axis_opset6", [N("Add", ["x", "c"], ["a"], broadcast=1, axis=1), N("Mul", ["a", "d"], ["y"], broadcast=1)],
         [("x", [1, 3, 2, 4])], ["y"], [init("c", c6), init("d", d6)], opset=6,
         ref=lambda x: [((x + c6.reshape(1, 3, 1, 1)) * d6).astype(np.float32)])
    bn = lambda c: [init("g", w(c) + 1), init("b", w(c)), init("m", w(c)), init("v", np.abs(w(c)) + 0.5)]
    case("batchnorm_3d_opset6", [N("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], is_test=1, epsilon=1e-5)],
         [("x", [2, 3, 5])], ["y"], bn(3), opset=6)
    case("instance_norm", [N("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)], [("x", [2, 3, 4, 5])], ["y"],
         [init("s", w(3) + 1), init("b", w(3))])
    # Gemm with a runtime B and C; PixelShuffle's 6-D pattern.
    case("gemm_runtime_b", [N("Gemm", ["x", "b", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)], [("x", [4, 2]), ("b", [4, 3]), ("c", [3])], ["y"])
    case("pixel_shuffle", [N("Reshape", ["x", "s6"], ["r"]), N("Transpose", ["r"], ["t"], perm=[0, 1, 4, 2, 5, 3]),
                           N("Reshape", ["t", "s4"], ["y"])],
         [("x", [1, 8, 2, 3])], ["y"], [init("s6", np.int64([1, 2, 2, 2, 2, 3])), init("s4", np.int64([1, 2, 4, 6]))])
    # Sign (GREATER/LESS/SELECT, zeros included); dilated MaxPool (padded slices), 2-D and 1-D.
    sx = rng.uniform(-1.0, 1.0, (2, 3, 4)).astype(np.float32)
    sx[0, 1, :2] = 0.0
    case("sign_with_zeros", [N("Sign", ["x"], ["y"])], [("x", [2, 3, 4])], ["y"], feed=[sx])
    case("maxpool_dilated_strided_padded", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], dilations=[2, 3], strides=[2, 1], pads=[2, 1, 1, 1])],
         [("x", [1, 2, 9, 8])], ["y"])
    case("maxpool_1d_dilated_padded", [N("MaxPool", ["x"], ["y"], kernel_shape=[3], dilations=[2], pads=[2, 1])],
         [("x", [1, 3, 10])], ["y"], opset=12)
    # QuantizeLinear of a runtime tensor (QUANTIZE), MatMul of a 3-D input, GlobalLpPool.
    qs, qz = np.float32(0.01), np.uint8(100)
    case("quantize_runtime", [N("Relu", ["x"], ["r"]), N("QuantizeLinear", ["r", "qs", "qz"], ["q"]),
                              N("DequantizeLinear", ["q", "qs", "qz"], ["y"])],
         [("x", [2, 3, 4])], ["y"], [init("qs", qs), init("qz", qz)], tol="quant", step=float(qs))
    case("matmul_3d_const_b", [N("MatMul", ["x", "b"], ["y"])], [("x", [2, 3, 5])], ["y"], [init("b", w(5, 4))])
    case("global_lppool", [N("GlobalLpPool", ["x"], ["y"], p=2)], [("x", [1, 3, 4, 5])], ["y"])


class Net:
    """A small builder for the zoo-shaped graphs: fresh value names, seeded weights scaled so
    activations stay of order one through a deep stack."""

    def __init__(self, opset):
        self.opset, self.nodes, self.inits, self.k = opset, [], [], 0

    def fresh(self, p):
        self.k += 1
        return f"{p}{self.k}"

    def op(self, op, ins, n_out=1, **attrs):
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(N(op, ins, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, array, p="c"):
        n = self.fresh(p)
        self.inits.append(init(n, array))
        return n

    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=True, pads=None, gain=1.4):
        fan = cin // group * k * k
        ins = [x, self.const(w(cout, cin // group, k, k, scale=gain / np.sqrt(fan)), "w")]
        if bias:
            ins.append(self.const(w(cout, scale=0.1), "b"))
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=pads or [pad] * 4, group=group)

    def bn(self, x, c):
        attrs = {"epsilon": 1e-5}
        if self.opset < 7:
            attrs.update(is_test=1, spatial=1)
        elif self.opset < 9:
            attrs["spatial"] = 1
        ins = [x, self.const(w(c, scale=0.2) + 1, "g"), self.const(w(c, scale=0.1), "be"),
               self.const(w(c, scale=0.1), "mu"), self.const(np.abs(w(c, scale=0.2)) + 0.8, "var")]
        return self.op("BatchNormalization", ins, **attrs)

    def relu(self, x):
        return self.op("Relu", [x])

    def dropout(self, x):
        if self.opset < 7:
            return self.op("Dropout", [x], is_test=1)
        if self.opset < 12:
            return self.op("Dropout", [x], ratio=0.5)
        return self.op("Dropout", [x, self.const(np.float32(0.5), "ratio")])

    def gemm(self, x, cin, cout):
        attrs = {"transB": 1}
        if self.opset < 7:
            attrs["broadcast"] = 1
        ins = [x, self.const(w(cout, cin, scale=1.0 / np.sqrt(cin)), "fc"), self.const(w(cout, scale=0.1), "fb")]
        return self.op("Gemm", ins, **attrs)

    def reshape(self, x, shape):
        if self.opset < 5:
            return self.op("Reshape", [x], shape=shape)
        return self.op("Reshape", [x, self.const(np.int64(shape), "shape")])

    def dyn_reshape(self, x, of, dims):
        """PyTorch's `x.view(...)` with sizes read from `of`'s shape: Shape → Gather →
        Unsqueeze per size taken (an int: a constant), Concat, Reshape."""
        shape = self.op("Shape", [of])
        parts = []
        for d in dims:
            if isinstance(d, tuple):
                g = self.op("Gather", [shape, self.const(np.int64(d[1]), "idx")], axis=0)
                parts.append(self.op("Unsqueeze", [g], axes=[0]) if self.opset < 13 else
                             self.op("Unsqueeze", [g, self.const(np.int64([0]), "axes")]))
            else:
                parts.append(self.const(np.int64([d]), "dim"))
        return self.op("Reshape", [x, self.op("Concat", parts, axis=0)])

    def lrn(self, x):
        return self.op("LRN", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0)

    def maxpool(self, x, k, s, pads=(0, 0, 0, 0), **attrs):
        return self.op("MaxPool", [x], kernel_shape=[k, k], strides=[s, s], pads=list(pads), **attrs)

    def case(self, name, x, shape, y):
        case(name, self.nodes, [(x, shape)], [y], self.inits, opset=self.opset)


def zoo_cases():
    """The classic model-zoo networks in miniature (fewer channels, smaller images, seeded
    weights) at the opsets and operator forms their Caffe2 / MXNet / PyTorch exports use."""
    # AlexNet / CaffeNet (Caffe2, opsets 3-9): LRN, MaxPool, grouped Conv (group 2), Dropout,
    # Reshape → Gemm (transB), Softmax.
    for name, opset, order in [("zoo_alexnet_opset6", 6, "lrn_pool"), ("zoo_caffenet_opset9", 9, "pool_lrn")]:
        g = Net(opset)
        h = g.relu(g.conv("data", 3, 8, 5, stride=2, pad=2))
        h = g.maxpool(g.lrn(h), 3, 2) if order == "lrn_pool" else g.lrn(g.maxpool(h, 3, 2))
        h = g.relu(g.conv(h, 8, 12, 3, pad=1, group=2))
        h = g.maxpool(g.lrn(h), 3, 2) if order == "lrn_pool" else g.lrn(g.maxpool(h, 3, 2))
        h = g.relu(g.conv(h, 12, 16, 3, pad=1))
        h = g.relu(g.conv(h, 16, 16, 3, pad=1, group=2))
        h = g.relu(g.conv(h, 16, 8, 3, pad=1, group=2))
        h = g.maxpool(h, 3, 2)
        h = g.reshape(h, [1, -1])
        h = g.dropout(g.relu(g.gemm(h, 8 * 1 * 1, 24)))
        h = g.dropout(g.relu(g.gemm(h, 24, 24)))
        g.case(name, "data", [1, 3, 31, 31], g.op("Softmax", [g.gemm(h, 24, 10)]))
    # ZFNet-512 (Caffe2, opset 8): 7x7 stride-2 stem, LRN after the pools.
    g = Net(8)
    h = g.lrn(g.maxpool(g.relu(g.conv("gpu_0/data_0", 3, 8, 7, stride=2, pad=1)), 3, 2, pads=(0, 0, 1, 1)))
    h = g.lrn(g.maxpool(g.relu(g.conv(h, 8, 16, 5, stride=2)), 3, 2, pads=(0, 0, 1, 1)))
    h = g.relu(g.conv(h, 16, 16, 3, pad=1))
    h = g.maxpool(g.relu(g.conv(h, 16, 12, 3, pad=1)), 3, 2)
    h = g.relu(g.gemm(g.reshape(h, [1, -1]), 12, 32))
    g.case("zoo_zfnet512_opset8", "gpu_0/data_0", [1, 3, 71, 71], g.op("Softmax", [g.gemm(g.dropout(h), 32, 10)]))
    # VGG-19 (MXNet, opset 7: Flatten → Gemm; Caffe2, opset 9: Reshape → Gemm).
    for name, opset in [("zoo_vgg19_opset7", 7), ("zoo_vgg19_caffe2_opset9", 9)]:
        g = Net(opset)
        h, c = "data", 3
        for width, reps in [(4, 2), (6, 2), (8, 4), (8, 4), (8, 4)]:
            for _ in range(reps):
                h, c = g.relu(g.conv(h, c, width, 3, pad=1)), width
            h = g.maxpool(h, 2, 2)
        h = g.op("Flatten", [h], axis=1) if opset == 7 else g.reshape(h, [1, -1])
        h = g.dropout(g.relu(g.gemm(h, 8, 16)))
        h = g.dropout(g.relu(g.gemm(h, 16, 16)))
        g.case(name, "data", [1, 3, 32, 32], g.gemm(h, 16, 10))
    # ResNet-50 v1 (post-activation) and v2 (pre-activation) bottlenecks (MXNet, opset 7:
    # BatchNormalization with `spatial`, Add, GlobalAveragePool, Flatten, Gemm).
    for v in (1, 2):
        g = Net(7)
        h = g.conv("data", 3, 8, 7, stride=2, pad=3, bias=False)
        if v == 1:
            h = g.relu(g.bn(h, 8))
        h = g.maxpool(h, 3, 2, pads=(1, 1, 1, 1))
        c = 8
        for mid, out, stride in [(4, 16, 1), (4, 16, 1), (8, 24, 2), (8, 24, 1)]:
            if v == 1:
                t = g.relu(g.bn(g.conv(h, c, mid, 1, bias=False), mid))
                t = g.relu(g.bn(g.conv(t, mid, mid, 3, stride=stride, pad=1, bias=False), mid))
                t = g.bn(g.conv(t, mid, out, 1, bias=False, gain=0.7), out)
                sc = h if (c == out and stride == 1) else g.bn(g.conv(h, c, out, 1, stride=stride, bias=False), out)
                h = g.relu(g.op("Add", [t, sc]))
            else:
                pre = g.relu(g.bn(h, c))
                t = g.relu(g.bn(g.conv(pre, c, mid, 1, bias=False), mid))
                t = g.relu(g.bn(g.conv(t, mid, mid, 3, stride=stride, pad=1, bias=False), mid))
                t = g.conv(t, mid, out, 1, bias=False, gain=0.7)
                sc = h if (c == out and stride == 1) else g.conv(pre, c, out, 1, stride=stride, bias=False)
                h = g.op("Add", [t, sc])
            c = out
        if v == 2:
            h = g.relu(g.bn(h, c))
        h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
        g.case(f"zoo_resnet50_v{v}_opset7", "data", [1, 3, 32, 32], g.gemm(h, c, 10))
    # ShuffleNet v1 (Caffe2, opset 9): grouped 1x1 Conv (group 3), the channel shuffle as
    # Reshape [N, 3, C/3, H, W] → Transpose [0, 2, 1, 3, 4] → Reshape, depthwise 3x3, stride-2
    # units concatenating an AveragePool shortcut.
    g = Net(9)
    h = g.maxpool(g.relu(g.conv("gpu_0/data_0", 3, 12, 3, stride=2, pad=1)), 3, 2, pads=(1, 1, 1, 1))
    c, side = 12, 8
    for unit, (out, stride) in enumerate([(24, 2), (24, 1), (48, 2), (48, 1)]):
        branch = out - c if stride == 2 else out
        # The first unit's 1x1 convolution is not grouped (its input has few channels).
        t = g.relu(g.conv(h, c, 12, 1, group=1 if unit == 0 else 3))
        t = g.reshape(t, [1, 3, 4, side, side])
        t = g.op("Transpose", [t], perm=[0, 2, 1, 3, 4])
        t = g.reshape(t, [1, 12, side, side])
        t = g.conv(t, 12, 12, 3, stride=stride, pad=1, group=12)
        side //= stride
        t = g.conv(t, 12, branch, 1, group=3, gain=0.7)
        if stride == 2:
            sc = g.op("AveragePool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
            h = g.relu(g.op("Concat", [sc, t], axis=1))
        else:
            h = g.relu(g.op("Add", [h, t]))
        c = out
    h = g.reshape(g.op("AveragePool", [h], kernel_shape=[side, side]), [1, -1])
    g.case("zoo_shufflenet_v1_opset9", "gpu_0/data_0", [1, 3, 32, 32], g.op("Softmax", [g.gemm(h, c, 10)]))
    # ShuffleNet v2 (PyTorch, opset 10): Split of channels (and Slice in the other export form),
    # the shuffle of the concatenated halves, ReduceMean over H, W before the classifier.
    g = Net(10)
    h = g.maxpool(g.relu(g.conv("input", 3, 8, 3, stride=2, pad=1)), 3, 2, pads=(1, 1, 1, 1))
    c, side = 8, 8
    for unit, (out, stride) in enumerate([(16, 2), (16, 1), (16, 1)]):
        half = out // 2
        if stride == 2:
            a = g.relu(g.conv(g.conv(h, c, c, 3, stride=2, pad=1, group=c), c, half, 1))
            b = h
        elif unit == 1:
            a, b = g.op("Split", [h], n_out=2, axis=1, split=[half, half])
        else:
            b = g.op("Slice", [h, g.const(np.int64([0]), "st"), g.const(np.int64([half]), "en"), g.const(np.int64([1]), "ax")])
            a = g.op("Slice", [h, g.const(np.int64([half]), "st"), g.const(np.int64([out]), "en"), g.const(np.int64([1]), "ax")])
            a, b = b, a
        cin = c if stride == 2 else half
        t = g.relu(g.bn(g.conv(b, cin, half, 1, bias=False), half))
        t = g.bn(g.conv(t, half, half, 3, stride=stride, pad=1, group=half, bias=False), half)
        t = g.relu(g.bn(g.conv(t, half, half, 1, bias=False), half))
        side //= stride
        h = g.op("Concat", [a, t], axis=1)
        if unit == 2:
            # The traced export: every size read from the tensor's own (static) shape.
            cat = h
            h = g.dyn_reshape(h, cat, [("n", 0), 2, half, ("h", 2), ("w", 3)])
            h = g.op("Transpose", [h], perm=[0, 2, 1, 3, 4])
            h = g.dyn_reshape(h, cat, [("n", 0), -1, ("h", 2), ("w", 3)])
        else:
            h = g.reshape(h, [1, 2, half, side, side])
            h = g.op("Transpose", [h], perm=[0, 2, 1, 3, 4])
            h = g.reshape(h, [1, out, side, side])
        c = out
    h = g.op("ReduceMean", [h], axes=[2, 3], keepdims=0)
    g.case("zoo_shufflenet_v2_opset10", "input", [1, 3, 32, 32], g.gemm(h, c, 10))
    # SqueezeNet 1.1 (Caffe2, opset 9): fire modules (squeeze 1x1, expand 1x1 | 3x3, Concat),
    # Dropout, a final 1x1 Conv, GlobalAveragePool, Reshape, Softmax.
    g = Net(9)
    h = g.maxpool(g.relu(g.conv("data_0", 3, 8, 3, stride=2)), 3, 2)
    c = 8
    for sq, ex, pool in [(4, 8, False), (4, 8, True), (6, 12, False)]:
        s = g.relu(g.conv(h, c, sq, 1))
        h = g.op("Concat", [g.relu(g.conv(s, sq, ex, 1)), g.relu(g.conv(s, sq, ex, 3, pad=1))], axis=1)
        c = 2 * ex
        if pool:
            h = g.maxpool(h, 3, 2)
    h = g.relu(g.conv(g.dropout(h), c, 10, 1))
    h = g.reshape(g.op("GlobalAveragePool", [h]), [1, 10])
    g.case("zoo_squeezenet11_opset9", "data_0", [1, 3, 33, 33], g.op("Softmax", [h]))
    # DenseNet-121 (Caffe2, opset 8): dense blocks (BN → Relu → 1x1 → BN → Relu → 3x3, Concat
    # onto the running stack), transitions with AveragePool, GlobalAveragePool at the end.
    g = Net(8)
    h = g.maxpool(g.relu(g.bn(g.conv("data_0", 3, 8, 7, stride=2, pad=3, bias=False), 8)), 3, 2, pads=(1, 1, 1, 1))
    c, growth = 8, 4
    for block in range(2):
        for _ in range(3):
            t = g.conv(g.relu(g.bn(h, c)), c, 8, 1, bias=False)
            t = g.conv(g.relu(g.bn(t, 8)), 8, growth, 3, pad=1, bias=False)
            h, c = g.op("Concat", [h, t], axis=1), c + growth
        if block == 0:
            h = g.conv(g.relu(g.bn(h, c)), c, c // 2, 1, bias=False)
            c //= 2
            h = g.op("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = g.op("GlobalAveragePool", [g.relu(g.bn(h, c))])
    h = g.conv(h, c, 10, 1)
    g.case("zoo_densenet121_opset8", "data_0", [1, 3, 32, 32], g.op("Softmax", [g.reshape(h, [1, 10])]))
    # GoogLeNet / Inception v1 (Caffe2 opset 8: MaxPool with asymmetric pads; opset 10: the
    # same pools as ceil_mode), LRN, inception modules (four branches, Concat), Dropout.
    for name, opset in [("zoo_googlenet_opset8", 8), ("zoo_googlenet_ceil_opset10", 10)]:
        g = Net(opset)

        def pool(x, k, s):
            if opset >= 10:
                return g.maxpool(x, k, s, ceil_mode=1)
            return g.maxpool(x, k, s, pads=(0, 0, 1, 1))

        h = g.lrn(pool(g.relu(g.conv("data_0", 3, 8, 7, stride=2, pad=3)), 3, 2))
        h = g.relu(g.conv(g.relu(g.conv(h, 8, 8, 1)), 8, 12, 3, pad=1))
        h = pool(g.lrn(h), 3, 2)
        c = 12
        for b1, b3r, b3, b5r, b5, bp in [(4, 4, 6, 2, 3, 3), (6, 4, 8, 2, 4, 4)]:
            x1 = g.relu(g.conv(h, c, b1, 1))
            x3 = g.relu(g.conv(g.relu(g.conv(h, c, b3r, 1)), b3r, b3, 3, pad=1))
            x5 = g.relu(g.conv(g.relu(g.conv(h, c, b5r, 1)), b5r, b5, 5, pad=2))
            xp = g.relu(g.conv(g.maxpool(h, 3, 1, pads=(1, 1, 1, 1)), c, bp, 1))
            h, c = g.op("Concat", [x1, x3, x5, xp], axis=1), b1 + b3 + b5 + bp
        h = pool(h, 3, 2)
        h = g.op("AveragePool", [h], kernel_shape=[3, 3], strides=[1, 1])
        h = g.dropout(g.reshape(h, [1, c]))
        g.case(name, "data_0", [1, 3, 56, 56], g.op("Softmax", [g.gemm(h, c, 10)]))
    # MobileNet v2 (PyTorch, opset 12): BatchNorm folded into Conv, Clip(0, 6) with min/max
    # inputs, inverted residuals with Add, GlobalAveragePool, then the flatten as
    # Shape → Gather → Unsqueeze → Concat → Reshape, Dropout (ratio input), Gemm.
    g = Net(12)
    lo, hi = g.const(np.float32(0.0), "min"), g.const(np.float32(6.0), "max")
    clip = lambda x: g.op("Clip", [x, lo, hi])
    h = clip(g.conv("input", 3, 8, 3, stride=2, pad=1))
    c = 8
    for t_, out, stride in [(1, 8, 1), (4, 12, 2), (4, 12, 1), (4, 16, 2)]:
        mid = c * t_
        x = h
        if t_ != 1:
            x = clip(g.conv(x, c, mid, 1))
        x = clip(g.conv(x, mid, mid, 3, stride=stride, pad=1, group=mid))
        x = g.conv(x, mid, out, 1, gain=0.7)
        h = g.op("Add", [h, x]) if (stride == 1 and c == out) else x
        c = out
    h = clip(g.conv(h, c, 32, 1))
    h = g.op("GlobalAveragePool", [h])
    s = g.op("Shape", [h])
    n = g.op("Gather", [s, g.const(np.int64(0), "idx")], axis=0)
    nu = g.op("Unsqueeze", [n], axes=[0])
    shape = g.op("Concat", [nu, g.const(np.int64([-1]), "m1")], axis=0)
    h = g.op("Reshape", [h, shape])
    h = g.dropout(h)
    g.case("zoo_mobilenet_v2_opset12", "input", [1, 3, 32, 32], g.gemm(h, 32, 10))



def random_float_graphs(count=40):
    """Seeded random graphs over the float operator set: a stack of image operators with
    skip connections (Add/Mul/Concat onto an earlier value of the same size), then a head."""
    gen = np.random.default_rng(31)
    for gi in range(count):
        g = Net(int(gen.choice([9, 11, 13, 17])))
        c, h = int(gen.integers(1, 5)), int(gen.integers(5, 11))
        shape = [1, c, h, h]
        cur, pool = "x", [("x", c, h)]
        for _ in range(int(gen.integers(3, 8))):
            kind = gen.choice(["conv", "dw", "gconv", "act", "pool", "add", "mul", "concat", "bn", "pad"])
            if kind == "conv" or (kind == "gconv" and c % 2):
                k = int(gen.choice([1, 3]))
                s = int(gen.choice([1, 1, 2])) if h >= 4 else 1
                co = int(gen.integers(2, 7))
                cur = g.conv(cur, c, co, k, stride=s, pad=k // 2, bias=bool(gen.integers(2)))
                c, h = co, (h + 2 * (k // 2) - k) // s + 1
            elif kind == "gconv":
                co = 2 * int(gen.integers(1, 4))
                cur, c = g.conv(cur, c, co, 3, pad=1, group=2), co
            elif kind == "dw":
                cur = g.conv(cur, c, c, 3, pad=1, group=c)
            elif kind == "act":
                op = gen.choice(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip6", "HardSigmoid", "Elu", "Abs", "Neg"])
                if op == "Clip6":
                    cur = g.op("Clip", [cur], min=0.0, max=6.0) if g.opset < 11 else \
                        g.op("Clip", [cur, g.const(np.float32(0), "lo"), g.const(np.float32(6), "hi")])
                else:
                    cur = g.op(str(op), [cur])
            elif kind == "pool" and h >= 2:
                op = str(gen.choice(["MaxPool", "AveragePool"]))
                k = int(gen.choice([2, 3])) if h >= 3 else 2
                p = int(gen.integers(0, 2)) if k == 3 else 0
                cur = g.op(op, [cur], kernel_shape=[k, k], strides=[2, 2], pads=[p] * 4)
                h = (h + 2 * p - k) // 2 + 1
            elif kind in ("add", "mul"):
                same = [n for n, cc, hh in pool if (cc, hh) == (c, h) and n != cur]
                other = same[int(gen.integers(len(same)))] if same and gen.integers(2) else g.const(w(c, 1, 1), "k")
                cur = g.op("Add" if kind == "add" else "Mul", [cur, other])
            elif kind == "concat":
                same = [n for n, cc, hh in pool if hh == h and n != cur and cc + c <= 16]
                if same:
                    n = same[int(gen.integers(len(same)))]
                    cur, c = g.op("Concat", [cur, n], axis=1), c + dict((a, b) for a, b, _ in pool)[n]
            elif kind == "bn":
                cur = g.bn(cur, c)
            elif kind == "pad" and g.opset >= 11:
                # A zero row on top and a zero column on the right, then the first h rows and
                # the last h columns: the image shifted down and left, square again.
                cur = g.op("Pad", [cur, g.const(np.int64([0, 0, 1, 0, 0, 0, 0, 1]), "pads")])
                cur = g.op("Slice", [cur, g.const(np.int64([0]), "st"), g.const(np.int64([h]), "en"),
                                     g.const(np.int64([2]), "ax")])
                cur = g.op("Slice", [cur, g.const(np.int64([1]), "st"), g.const(np.int64([h + 1]), "en"),
                                     g.const(np.int64([3]), "ax")])
            pool.append((cur, c, h))
        head = gen.choice(["gap_gemm", "flatten_gemm", "softmax", "none"])
        if head == "gap_gemm":
            cur = g.gemm(g.op("Flatten", [g.op("GlobalAveragePool", [cur])]), c, 5)
        elif head == "flatten_gemm":
            cur = g.gemm(g.op("Flatten", [cur]), c * h * h, 4)
        elif head == "softmax":
            cur = g.op("Softmax", [cur], axis=1) if g.opset >= 13 else g.op("Softmax", [g.op("Flatten", [cur])])
        g.case(f"random_float_{gi:02d}", "x", shape, cur)


def random_qdq_graphs(count=40):
    """Seeded random QDQ graphs (onnxruntime's format: DequantizeLinear → op → QuantizeLinear)
    over Conv (grouped and depthwise too), MatMul, Add, Mul, MaxPool, AveragePool, Concat and
    Relu, with uint8 or int8 activations and per-tensor (uint8 / int8) or per-channel (int8,
    symmetric) weights."""
    gen = np.random.default_rng(32)
    for gi in range(count):
        signed = bool(gi % 2)
        act_t = np.int8 if signed else np.uint8
        lo = -128 if signed else 0
        g = Net(13)
        steps = []

        def qparams(span):
            s = np.float32(span / 255.0 * gen.uniform(0.9, 1.1))
            z = int(gen.integers(100, 156)) + lo
            return g.const(s, "s"), g.const(act_t(z), "z"), float(s)

        def qdq(x, span):
            s, z, sv = qparams(span)
            q = g.op("QuantizeLinear", [x, s, z])
            steps.append(sv)
            return g.op("DequantizeLinear", [q, s, z])

        def qweight(wv, per_channel):
            if per_channel:
                ws = (np.abs(wv).reshape(wv.shape[0], -1).max(axis=1) / 127.0 + 1e-6).astype(np.float32)
                q = np.clip(np.round(wv / ws.reshape((-1,) + (1,) * (wv.ndim - 1))), -127, 127).astype(np.int8)
                wq, wz = g.const(q, "wq"), g.const(np.zeros(wv.shape[0], np.int8), "wz")
                return g.op("DequantizeLinear", [wq, g.const(ws, "ws"), wz], axis=0), ws
            if gen.integers(2):
                ws = np.float32(np.abs(wv).max() / 127.0)
                q = np.clip(np.round(wv / ws), -127, 127).astype(np.int8)
                return g.op("DequantizeLinear", [g.const(q, "wq"), g.const(ws, "ws"), g.const(np.int8(0), "wz")]), ws
            ws, wz = np.float32((wv.max() - wv.min()) / 255.0), np.uint8(gen.integers(110, 146))
            q = np.clip(np.round(wv / ws) + wz, 0, 255).astype(np.uint8)
            return g.op("DequantizeLinear", [g.const(q, "wq"), g.const(ws, "ws"), g.const(wz, "wz")]), ws

        c, h = int(gen.integers(2, 5)), int(gen.integers(5, 9))
        shape = [1, c, h, h]
        cur = qdq("x", 2.0)
        span = 2.0
        pool = [(cur, c, h, span)]
        for _ in range(int(gen.integers(2, 5))):
            kind = gen.choice(["conv", "conv", "dw", "add", "mul", "pool", "concat"])
            if kind in ("conv", "dw"):
                dw = kind == "dw"
                co = c if dw else int(gen.integers(2, 7))
                k = int(gen.choice([1, 3]))
                wv = w(co, 1 if dw else c, k, k, scale=1.0 / np.sqrt((1 if dw else c) * k * k))
                wd, ws = qweight(wv, bool(gen.integers(2)))
                in_s = span / 255.0
                bq = (w(co, scale=0.2) / (np.float32(in_s) * ws)).astype(np.int32)
                bd = g.op("DequantizeLinear", [g.const(bq, "bq"), g.const((np.float32(in_s) * ws).astype(np.float32), "bs")], axis=0)
                # The bias is int32 at a nominal activation scale times the weight scale; it is
                # dequantized with the scale it carries (the importer requantizes it to the
                # actual input scale).
                conv = g.op("Conv", [cur, wd, bd], pads=[k // 2] * 4, group=c if dw else 1)
                relu = bool(gen.integers(2))
                if relu:
                    conv = g.relu(conv)
                c, span = co, span * 1.5
                cur = qdq(conv, span)
            elif kind in ("add", "mul"):
                same = [(n, sp) for n, cc, hh, sp in pool if (cc, hh) == (c, h) and n != cur]
                if not same:
                    continue
                n, sp = same[int(gen.integers(len(same)))]
                if kind == "add":
                    cur, span = qdq(g.op("Add", [cur, n]), span + sp), span + sp
                else:
                    cur, span = qdq(g.op("Mul", [cur, n]), span * sp / 2), span * sp / 2
            elif kind == "pool" and h >= 3:
                op = str(gen.choice(["MaxPool", "AveragePool"]))
                p = g.op(op, [cur], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4 if op == "MaxPool" else [0] * 4)
                h = (h + (2 if op == "MaxPool" else 0) - 3) // 2 + 1
                # Pools keep their input's quantization, as onnxruntime's quantizer makes them.
                s, z = g.nodes[-2].input[1], g.nodes[-2].input[2]
                cur = g.op("DequantizeLinear", [g.op("QuantizeLinear", [p, s, z]), s, z])
            elif kind == "concat":
                same = [n for n, cc, hh, _ in pool if hh == h and n != cur and cc + c <= 12]
                if not same:
                    continue
                n = same[int(gen.integers(len(same)))]
                cc = [pc for pn, pc, _, _ in pool if pn == n][0]
                s, z = g.nodes[-2].input[1], g.nodes[-2].input[2]
                cur = g.op("DequantizeLinear", [g.op("QuantizeLinear", [g.op("Concat", [cur, n], axis=1), s, z]), s, z])
                c += cc
            pool.append((cur, c, h, span))
        if gen.integers(2):
            f = g.op("Flatten", [g.op("GlobalAveragePool", [cur])])
            f = qdq(f, span)
            wd, _ = qweight(w(c, 5, scale=1.0 / np.sqrt(c)), False)
            cur = qdq(g.op("MatMul", [f, wd]), span * 1.5)
        g.case(f"random_qdq_{'s8' if signed else 'u8'}_{gi:02d}", "x", shape, cur)
        cases[-1].update(tolerance="quant", step=steps[-1])


def logic_cases():
    """Comparisons, logical operators, Where, ArgMax/ArgMin, Cast of runtime tensors, Min/Max of
    several inputs, Mish: boolean and integer runtime tensors, graph inputs and outputs."""
    x = rng.uniform(-1.0, 1.0, (2, 3, 4)).astype(np.float32)
    y = rng.uniform(-1.0, 1.0, (2, 3, 4)).astype(np.float32)
    y[0, 0] = x[0, 0]  # equal elements for Equal, LessOrEqual and GreaterOrEqual
    case("compare_logic_where",
         [N("Greater", ["x", "y"], ["gt"]), N("Less", ["x", "c"], ["lt"]), N("LessOrEqual", ["x", "y"], ["le"]),
          N("GreaterOrEqual", ["x", "y"], ["ge"]), N("Equal", ["x", "y"], ["eq"]),
          N("And", ["gt", "lt"], ["and"]), N("Or", ["and", "eq"], ["or"]), N("Xor", ["or", "le"], ["xor"]),
          N("Not", ["xor"], ["not"]), N("And", ["not", "ge"], ["cond"]),
          N("Where", ["cond", "x", "k"], ["y0"]), N("Where", ["lt", "y", "x"], ["y1"]), N("Add", ["y0", "y1"], ["out"])],
         [("x", [2, 3, 4]), ("y", [2, 3, 4])], ["out", "eq", "xor"], [init("c", w(4)), init("k", np.float32(0.25))],
         feed=[x, y])
    xi = rng.uniform(-1.0, 1.0, (1, 3, 4, 4)).astype(np.float32)
    case("where_image_broadcast",
         [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Greater", ["c", "t"], ["m"]),
          N("Where", ["m", "c", "f"], ["s"]), N("MaxPool", ["s"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
         [("x", [1, 3, 4, 4])], ["y"], [init("w", w(4, 3, 3, 3)), init("t", w(4, 1, 1)), init("f", w(1, 4, 1))], feed=[xi])
    case("where_bool_input_opset9",
         [N("Where", ["b", "x", "z"], ["y"])],
         [("b", [3, 4], TensorProto.BOOL), ("x", [3, 4]), ("z", [4])], ["y"], opset=9,
         feed=[rng.uniform(0, 1, (3, 4)) > 0.5, rng.uniform(-1, 1, (3, 4)).astype(np.float32),
               rng.uniform(-1, 1, (4,)).astype(np.float32)])
    case("argmax_argmin_keepdims",
         [N("ArgMax", ["x"], ["a"], axis=1, keepdims=1), N("ArgMin", ["x"], ["b"], axis=-1, keepdims=0),
          N("Cast", ["a"], ["af"], to=TensorProto.FLOAT), N("Mul", ["af", "x"], ["y"])],
         [("x", [1, 5, 3, 4])], ["a", "b", "y"], opset=13)
    case("argmax_opset11_no_keepdims",
         [N("ArgMax", ["x"], ["y"], axis=0, keepdims=0)], [("x", [4, 3, 2])], ["y"], opset=11)
    case("cast_runtime",
         [N("Mul", ["x", "k"], ["s"]), N("Cast", ["s"], ["i"], to=TensorProto.INT32), N("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
          N("Cast", ["x"], ["b"], to=TensorProto.BOOL), N("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
          N("Cast", ["n"], ["nf"], to=TensorProto.FLOAT), N("Cast", ["n"], ["nb"], to=TensorProto.BOOL),
          N("Cast", ["nb"], ["ni"], to=TensorProto.INT64), N("Add", ["f", "bf"], ["a"]), N("Add", ["a", "nf"], ["y"])],
         [("x", [2, 6]), ("n", [2, 6], TensorProto.INT64)], ["y", "i", "ni"], [init("k", np.float32(4.0))],
         feed=[np.concatenate([rng.uniform(-1, 1, (2, 4)), np.zeros((2, 2))], axis=1).astype(np.float32),
               rng.integers(-3, 4, (2, 6)).astype(np.int64)])
    case("min_max_three_inputs",
         [N("Max", ["x", "y", "c"], ["m"]), N("Min", ["x", "y", "c"], ["n"]), N("Sub", ["m", "n"], ["z"])],
         [("x", [2, 3, 4]), ("y", [3, 4])], ["z"], [init("c", w(4))])
    case("matmul_batched_runtime", [N("MatMul", ["a", "b"], ["y"])], [("a", [2, 3, 4]), ("b", [2, 4, 5])], ["y"])
    case("matmul_batched_4d_shared_b", [N("Relu", ["a"], ["r"]), N("MatMul", ["r", "b"], ["m"]), N("MatMul", ["m", "c"], ["y"])],
         [("a", [1, 2, 3, 4]), ("b", [1, 1, 4, 2])], ["y"], [init("c", w(2, 2, 3))])
    case("mish_opset18", [N("Mish", ["x"], ["y"])], [("x", [1, 2, 3, 4])], ["y"], opset=18,
         feed=[rng.uniform(-6.0, 6.0, (1, 2, 3, 4)).astype(np.float32)])


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    float_cases()
    quant_cases()
    qdq_cases()
    qdq_head_case()
    later_cases()
    zoo_cases()
    logic_cases()
    random_float_graphs()
    random_qdq_graphs()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"seed": 20261124, "cases": cases}, f, indent=1)
    ops = sorted({o for c in cases for o in c["ops"]})
    print(f"{len(cases)} cases, {len(ops)} operators: {' '.join(ops)}")


if __name__ == "__main__":
    main()
