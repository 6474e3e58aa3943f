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
    """inputs: [(name, shape)], outputs: [name]; `ref`: numpy outputs from the inputs, for a
    form neither onnxruntime nor the version converter reads right."""
    opsets = [helper.make_opsetid("", opset)]
    if ms:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph(
        nodes, name, [vi(n, s) for n, s in inputs], [onnx.ValueInfoProto(name=o) for o in outputs],
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
    for k, (n, s) in enumerate(inputs):
        x = feed[k] if feed else rng.uniform(-1.0, 1.0, s).astype(np.float32)
        feeds[n] = x
        np.save(os.path.join(OUT, f"{name}.in{k}.npy"), x)
    results = ref(*[feeds[n] for n, _ in inputs]) if ref else sess.run(None, feeds)
    for k, r in enumerate(results):
        np.save(os.path.join(OUT, f"{name}.out{k}.npy"), np.ascontiguousarray(r))
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


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    float_cases()
    quant_cases()
    qdq_cases()
    qdq_head_case()
    later_cases()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"seed": 20261124, "cases": cases}, f, indent=1)
    ops = sorted({o for c in cases for o in c["ops"]})
    print(f"{len(cases)} cases, {len(ops)} operators: {' '.join(ops)}")


if __name__ == "__main__":
    main()
