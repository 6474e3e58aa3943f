#!/usr/bin/env python3
"""Builds the seeded CoreML case set in ../testdata/cases: for every case a NeuralNetwork
.mlmodel made with coremltools, the same network with the same weights built in ONNX and run
by onnxruntime (the independent runtime), the inputs and expected outputs as .npy, and
manifest.json listing them. CoreML blobs are [C,H,W]; the ONNX twin runs on [1,C,H,W].

    importers/coreml/tools/make_cases.sh    # creates tools/venv (or $VENV) and runs this script
"""
import json, os, sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper
import onnxruntime as ort
import coremltools
from coremltools.models import datatypes
from coremltools.models.neural_network import NeuralNetworkBuilder

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "cases")
rng = np.random.default_rng(15)


def rnd(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


class Twin:
    """One network built twice: CoreML layers and ONNX nodes."""

    def __init__(self, name, inputs, outputs, mode=None):
        self.name = name
        self.inputs = inputs  # [(name, [C,H,W])]
        self.outputs = outputs  # [(name, [C,H,W] or None)]
        self.nb = NeuralNetworkBuilder(
            [(n, datatypes.Array(*s)) for n, s in inputs],
            [(n, datatypes.Array(*s) if s else None) for n, s in outputs],
            mode=mode,
        )
        self.nodes, self.inits, self.k = [], [], 0

    def const(self, arr):
        self.k += 1
        n = f"const_{self.k}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, **attrs))

    def save(self, feeds=None, spec_edit=None):
        spec = self.nb.spec
        if spec_edit:
            spec_edit(spec)
        coremltools.models.utils.save_spec(spec, os.path.join(OUT, self.name + ".mlmodel"))
        g = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1] + list(s)) for n, s in self.inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n, _ in self.outputs],
            self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = feeds or {n: rnd(*s) for n, s in self.inputs}
        outs = sess.run([n for n, _ in self.outputs], {n: v[None] for n, v in feeds.items()})
        files_in, files_out = [], []
        for k, (n, _) in enumerate(self.inputs):
            f = f"{self.name}.in{k}.npy"
            np.save(os.path.join(OUT, f), feeds[n])
            files_in.append(f)
        for k, ((n, s), v) in enumerate(zip(self.outputs, outs)):
            f = f"{self.name}.out{k}.npy"
            shape = s if s else list(v.shape[1:])
            np.save(os.path.join(OUT, f), v.reshape(shape).astype(np.float32))
            files_out.append(f)
        layers = sorted({l.WhichOneof("layer") for l in self.nb.nn_spec.layers})
        return {"name": self.name, "model": self.name + ".mlmodel", "inputs": files_in,
                "outputs": files_out, "layers": layers}


def conv_pads(n, k, s, mode):
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    small = total // 2
    return (total - small, small) if mode == "TOP_LEFT_HEAVY" else (small, total - small)


cases = []


def conv(name, c, h, w, oc, k, s, border, groups=1, bias=True, asym="BOTTOM_RIGHT_HEAVY",
         pad=(0, 0, 0, 0), fp16=False):
    kc = c // groups
    W = rnd(oc, kc, k, k, scale=0.5)
    if fp16:
        W = W.astype(np.float16).astype(np.float32)
    b = rnd(oc)
    if border == "same":
        oh = -(-h // s); ow = -(-w // s)
    else:
        oh = (h + pad[0] + pad[1] - k) // s + 1; ow = (w + pad[2] + pad[3] - k) // s + 1
    t = Twin(name, [("x", [c, h, w])], [("y", [oc, oh, ow])])
    # coremltools takes the weight as (kH, kW, kernelChannels, outputChannels).
    t.nb.add_convolution("conv", kc, oc, k, k, s, s, border, groups, W.transpose(2, 3, 1, 0),
                         b if bias else None, bias, input_name="x", output_name="y",
                         padding_top=pad[0], padding_bottom=pad[1], padding_left=pad[2],
                         padding_right=pad[3], same_padding_asymmetry_mode=asym)
    if border == "same":
        pt, pb = conv_pads(h, k, s, asym); pl, pr = conv_pads(w, k, s, asym)
    else:
        pt, pb, pl, pr = pad
    ins = ["x", t.const(W)] + ([t.const(b)] if bias else [])
    t.node("Conv", ins, ["y"], kernel_shape=[k, k], strides=[s, s], pads=[pt, pl, pb, pr], group=groups)

    def edit(spec):
        if fp16:
            wp = spec.neuralNetwork.layers[0].convolution.weights
            vals = np.array(wp.floatValue, dtype=np.float16)
            del wp.floatValue[:]
            wp.float16Value = vals.tobytes()
    cases.append(t.save(spec_edit=edit))


conv("conv_valid_3x3", 3, 8, 8, 4, 3, 1, "valid")
conv("conv_same_s2_brh", 3, 9, 9, 5, 3, 2, "same")
conv("conv_same_k2_tlh", 2, 6, 7, 3, 2, 1, "same", asym="TOP_LEFT_HEAVY")
conv("conv_valid_padded_s2", 4, 7, 6, 4, 3, 2, "valid", pad=(1, 2, 0, 1))
conv("conv_1x1_nobias", 6, 5, 5, 3, 1, 1, "valid", bias=False)
conv("depthwise_same", 4, 8, 8, 4, 3, 1, "same", groups=4)
conv("depthwise_mult2_s2", 3, 9, 9, 6, 3, 2, "same", groups=3)
conv("conv_fp16_weights", 3, 6, 6, 4, 3, 1, "same", fp16=True)


def inner(name, quant=None):
    W = rnd(5, 8); b = rnd(5)
    t = Twin(name, [("x", [8])], [("y", [5])])
    if quant == "linear":
        q = rng.integers(0, 256, size=(5, 8)).astype(np.uint8)
        sc = (rng.random(5) * 0.02 + 0.01).astype(np.float32); bi = rnd(5, scale=0.5)
        W = (sc[:, None] * q.astype(np.float32) + bi[:, None]).astype(np.float32)
        t.nb.add_inner_product("fc", q.tobytes(), b, 8, 5, True, "x", "y", is_quantized_weight=True,
                               quantization_type="linear", nbits=8, quant_scale=sc, quant_bias=bi)
    elif quant == "lut":
        q = rng.integers(0, 256, size=(5, 8)).astype(np.uint8)
        lut = rnd(256, scale=0.3)
        W = lut[q]
        t.nb.add_inner_product("fc", q.tobytes(), b, 8, 5, True, "x", "y", is_quantized_weight=True,
                               quantization_type="lut", nbits=8, quant_lut=lut)
    else:
        t.nb.add_inner_product("fc", W, b, 8, 5, True, "x", "y")
    t.node("Reshape", ["x", t.const(np.array([1, 8], np.int64))], ["x2"])
    t.node("Gemm", ["x2", t.const(W), t.const(b)], ["y"], transB=1)
    cases.append(t.save())


inner("inner_product")
inner("inner_product_q8_linear", "linear")
inner("inner_product_q8_lut", "lut")

# flatten (channel first) of an image, then an inner product: the CHW column order.
t = Twin("flatten_inner_product", [("x", [4, 3, 3])], [("y", [6])])
W = rnd(6, 36); b = rnd(6)
t.nb.add_flatten("flat", 0, "x", "f")
t.nb.add_inner_product("fc", W, b, 36, 6, True, "f", "y")
t.node("Flatten", ["x"], ["f"], axis=1)
t.node("Gemm", ["f", t.const(W), t.const(b)], ["y"], transB=1)
cases.append(t.save())

# flatten as a model output.
t = Twin("flatten_output", [("x", [3, 2, 4])], [("y", [24, 1, 1])])
t.nb.add_activation("relu", "RELU", "x", "r")
t.nb.add_flatten("flat", 0, "r", "y")
t.node("Relu", ["x"], ["r"])
t.node("Reshape", ["r", t.const(np.array([1, 24, 1, 1], np.int64))], ["y"])
cases.append(t.save())

for act, onnx_op in [("RELU", "Relu"), ("SIGMOID", "Sigmoid"), ("TANH", "Tanh"), ("LINEAR", None)]:
    t = Twin(f"activation_{act.lower()}", [("x", [3, 4, 5])], [("y", [3, 4, 5])])
    if act == "LINEAR":
        t.nb.add_activation("act", act, "x", "y", params=[0.7, -0.3])
        t.node("Mul", ["x", t.const(np.array(0.7, np.float32))], ["m"])
        t.node("Add", ["m", t.const(np.array(-0.3, np.float32))], ["y"])
    else:
        t.nb.add_activation("act", act, "x", "y")
        t.node(onnx_op, ["x"], ["y"])
    cases.append(t.save())


def pool(name, kind, c, h, w, k, s, padding, exclude=True, is_global=False):
    if is_global:
        oh = ow = 1
    elif padding == "SAME":
        oh, ow = -(-h // s), -(-w // s)
    elif padding == "INCLUDE_LAST_PIXEL":
        oh, ow = -(-(h - k) // s) + 1, -(-(w - k) // s) + 1
    else:
        oh, ow = (h - k) // s + 1, (w - k) // s + 1
    t = Twin(name, [("x", [c, h, w])], [("y", [c, oh, ow])])
    t.nb.add_pooling("pool", k, k, s, s, kind, padding, "x", "y", exclude_pad_area=exclude, is_global=is_global)
    if is_global:
        t.node({"MAX": "GlobalMaxPool", "AVERAGE": "GlobalAveragePool"}[kind], ["x"], ["y"]) if kind != "L2" \
            else t.node("GlobalLpPool", ["x"], ["y"], p=2)
        return cases.append(t.save())
    pads = [0, 0, 0, 0]
    if padding == "SAME":
        pt, pb = conv_pads(h, k, s, "BOTTOM_RIGHT_HEAVY"); pl, pr = conv_pads(w, k, s, "BOTTOM_RIGHT_HEAVY")
        pads = [pt, pl, pb, pr]
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=pads)
    if padding == "INCLUDE_LAST_PIXEL":
        attrs["ceil_mode"] = 1
    if kind == "MAX":
        t.node("MaxPool", ["x"], ["y"], **attrs)
    elif kind == "AVERAGE":
        t.node("AveragePool", ["x"], ["y"], count_include_pad=0, **attrs)
    else:
        t.node("LpPool", ["x"], ["y"], p=2, kernel_shape=[k, k], strides=[s, s], pads=pads)
    cases.append(t.save())


pool("maxpool_valid_k2s2", "MAX", 3, 8, 8, 2, 2, "VALID")
pool("maxpool_same_k3s2", "MAX", 2, 7, 9, 3, 2, "SAME")
pool("maxpool_include_last_pixel", "MAX", 2, 8, 8, 3, 2, "INCLUDE_LAST_PIXEL")
pool("avgpool_valid_k3s1", "AVERAGE", 3, 6, 6, 3, 1, "VALID")
pool("avgpool_same_exclude_pad", "AVERAGE", 2, 7, 7, 3, 2, "SAME")
pool("l2pool_valid_k2s2", "L2", 3, 6, 6, 2, 2, "VALID")
pool("l2pool_same_k3s2", "L2", 2, 7, 7, 3, 2, "SAME")
pool("global_avgpool", "AVERAGE", 5, 6, 7, 0, 1, "VALID", is_global=True)
pool("global_maxpool", "MAX", 5, 4, 3, 0, 1, "VALID", is_global=True)

for mode, op in [("ADD", "Add"), ("MULTIPLY", "Mul")]:
    t = Twin(f"elementwise_{mode.lower()}", [("a", [3, 4, 4]), ("b", [3, 4, 4]), ("c", [3, 1, 1])], [("y", [3, 4, 4])])
    t.nb.add_elementwise("e1", ["a", "b"], "ab", mode)
    t.nb.add_elementwise("e2", ["ab", "c"], "y", mode)
    t.node(op, ["a", "b"], ["ab"]); t.node(op, ["ab", "c"], ["y"])
    cases.append(t.save())

t = Twin("add_alpha", [("x", [2, 3, 3])], [("y", [2, 3, 3])])
t.nb.add_elementwise("e", ["x"], "y", "ADD", alpha=1.25)
t.node("Add", ["x", t.const(np.array(1.25, np.float32))], ["y"])
cases.append(t.save())

t = Twin("concat_channels", [("a", [2, 4, 4]), ("b", [3, 4, 4])], [("y", [5, 4, 4])])
t.nb.add_elementwise("cat", ["a", "b"], "y", "CONCAT")
t.node("Concat", ["a", "b"], ["y"], axis=1)
cases.append(t.save())

t = Twin("softmax_channels", [("x", [6, 3, 2])], [("y", [6, 3, 2])])
t.nb.add_softmax("sm", "x", "y")
t.node("Softmax", ["x"], ["y"], axis=1)
cases.append(t.save())

t = Twin("batchnorm", [("x", [4, 5, 5])], [("y", [4, 5, 5])])
g, be, mu, var = rnd(4), rnd(4), rnd(4), (rng.random(4) + 0.5).astype(np.float32)
t.nb.add_batchnorm("bn", 4, g, be, mu, var, "x", "y", epsilon=1e-3)
t.node("BatchNormalization", ["x", t.const(g), t.const(be), t.const(mu), t.const(var)], ["y"], epsilon=1e-3)
cases.append(t.save())

t = Twin("lrn", [("x", [7, 4, 4])], [("y", [7, 4, 4])])
t.nb.add_lrn("lrn", "x", "y", alpha=0.3, beta=0.75, local_size=3, k=2.0)
t.node("LRN", ["x"], ["y"], alpha=0.3, beta=0.75, size=3, bias=2.0)
cases.append(t.save())

t = Twin("l2normalize", [("x", [6])], [("y", [6])])
t.nb.add_l2_normalize("l2", "x", "y", epsilon=1e-10)
t.node("LpNormalization", ["x"], ["y"], axis=1, p=2)
cases.append(t.save())

t = Twin("upsample_nearest_x2", [("x", [3, 3, 4])], [("y", [3, 6, 8])])
t.nb.add_upsample("up", 2, 2, "x", "y", mode="NN")
t.node("Resize", ["x", "", t.const(np.array([1, 1, 2, 2], np.float32))], ["y"], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
cases.append(t.save())

for mode, op, shape, out in [("SPACE_TO_DEPTH", "SpaceToDepth", [3, 4, 6], [12, 2, 3]),
                             ("DEPTH_TO_SPACE", "DepthToSpace", [8, 2, 3], [2, 4, 6])]:
    t = Twin(f"reorganize_{mode.lower()}", [("x", shape)], [("y", out)])
    t.nb.add_reorganize_data("r", "x", "y", mode=mode, block_size=2)
    if op == "DepthToSpace":
        t.node(op, ["x"], ["y"], blocksize=2, mode="DCR")
    else:
        t.node(op, ["x"], ["y"], blocksize=2)
    cases.append(t.save())

for name, value in [("padding_zero", 0.0), ("padding_constant", 1.5)]:
    t = Twin(name, [("x", [2, 3, 4])], [("y", [2, 3 + 1 + 2, 4 + 2 + 0])])
    t.nb.add_padding("pad", left=2, right=0, top=1, bottom=2, value=value, input_name="x", output_name="y")
    t.node("Pad", ["x", t.const(np.array([0, 0, 1, 2, 0, 0, 2, 0], np.int64)),
                   t.const(np.array(value, np.float32))], ["y"], mode="constant")
    cases.append(t.save())

t = Twin("scale_bias", [("x", [3, 4, 5])], [("y", [3, 4, 5])])
sc, bi, full = rnd(3), rnd(3), rnd(3, 4, 5)
t.nb.add_scale("scale", sc, bi, True, "x", "s", shape_scale=[3], shape_bias=[3])
t.nb.add_bias("bias", full, "s", "y", shape_bias=[3, 4, 5])
t.node("Mul", ["x", t.const(sc.reshape(1, 3, 1, 1))], ["m"])
t.node("Add", ["m", t.const(bi.reshape(1, 3, 1, 1))], ["s"])
t.node("Add", ["s", t.const(full[None])], ["y"])
cases.append(t.save())

t = Twin("load_constant_add", [("x", [2, 3, 3])], [("y", [2, 3, 3])])
cv = rnd(2, 3, 3)
t.nb.add_load_constant("k", "kv", cv, [2, 3, 3])
t.nb.add_elementwise("e", ["x", "kv"], "y", "ADD")
t.node("Add", ["x", t.const(cv[None])], ["y"])
cases.append(t.save())

t = Twin("reshape_single_channel", [("x", [1, 4, 6])], [("y", [1, 3, 8])])
t.nb.add_reshape("rs", "x", "y", [1, 3, 8], 0)
t.node("Reshape", ["x", t.const(np.array([1, 1, 3, 8], np.int64))], ["y"])
cases.append(t.save())

# A branched graph: conv → relu → (1×1 conv | 3×3 max pool) → concat → batchnorm → global
# average → flatten → inner product → softmax.
t = Twin("branched_graph", [("x", [3, 10, 10])], [("prob", [4])])
W1, b1 = rnd(6, 3, 3, 3, scale=0.4), rnd(6)
W2, b2 = rnd(5, 6, 1, 1, scale=0.4), rnd(5)
g, be, mu, var = rnd(11), rnd(11), rnd(11), (rng.random(11) + 0.5).astype(np.float32)
Wf, bf = rnd(4, 11), rnd(4)
nb = t.nb
nb.add_convolution("c1", 3, 6, 3, 3, 1, 1, "same", 1, W1.transpose(2, 3, 1, 0), b1, True, input_name="x", output_name="c1")
nb.add_activation("r1", "RELU", "c1", "r1")
nb.add_convolution("c2", 6, 5, 1, 1, 1, 1, "valid", 1, W2.transpose(2, 3, 1, 0), b2, True, input_name="r1", output_name="c2")
nb.add_pooling("p1", 3, 3, 1, 1, "MAX", "SAME", "r1", "p1")
nb.add_elementwise("cat", ["c2", "p1"], "cat", "CONCAT")
nb.add_batchnorm("bn", 11, g, be, mu, var, "cat", "bn", epsilon=1e-5)
nb.add_pooling("gap", 0, 0, 1, 1, "AVERAGE", "VALID", "bn", "gap", is_global=True)
nb.add_flatten("flat", 0, "gap", "flat")
nb.add_inner_product("fc", Wf, bf, 11, 4, True, "flat", "fc")
nb.add_softmax("sm", "fc", "prob")
t.node("Conv", ["x", t.const(W1), t.const(b1)], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
t.node("Relu", ["c1"], ["r1"])
t.node("Conv", ["r1", t.const(W2), t.const(b2)], ["c2"], kernel_shape=[1, 1])
t.node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
t.node("Concat", ["c2", "p1"], ["cat"], axis=1)
t.node("BatchNormalization", ["cat", t.const(g), t.const(be), t.const(mu), t.const(var)], ["bn"], epsilon=1e-5)
t.node("GlobalAveragePool", ["bn"], ["gap"])
t.node("Flatten", ["gap"], ["flat"], axis=1)
t.node("Gemm", ["flat", t.const(Wf), t.const(bf)], ["fc"], transB=1)
t.node("Softmax", ["fc"], ["prob"], axis=1)
cases.append(t.save())

# A classifier: its probabilities come out as output 0 with the class labels beside them.
t = Twin("classifier_labels", [("x", [6])], [("prob", [3])], mode="classifier")
Wc, bc = rnd(3, 6), rnd(3)
t.nb.add_inner_product("fc", Wc, bc, 6, 3, True, "x", "fc")
t.nb.add_softmax("sm", "fc", "prob")
t.nb.set_class_labels(["cat", "dog", "bird"], predicted_feature_name="label", prediction_blob="prob")
t.node("Reshape", ["x", t.const(np.array([1, 6], np.int64))], ["x2"])
t.node("Gemm", ["x2", t.const(Wc), t.const(bc)], ["fc"], transB=1)
t.node("Softmax", ["fc"], ["prob"], axis=1)
cases.append(t.save())

# An image input (BGR, 0–255) with preprocessing: scale, then a per-channel bias.
t = Twin("image_preprocessing_bgr", [("x", [3, 5, 6])], [("y", [2, 5, 6])])
Wi = rnd(2, 3, 1, 1, scale=0.5)
t.nb.set_pre_processing_parameters(image_input_names=["x"], is_bgr=True, red_bias=-0.4,
                                   green_bias=-0.5, blue_bias=-0.6, image_scale=1 / 255.0)
t.nb.add_convolution("c", 3, 2, 1, 1, 1, 1, "valid", 1, Wi.transpose(2, 3, 1, 0), None, False,
                     input_name="x", output_name="y")
t.node("Mul", ["x", t.const(np.array(1 / 255.0, np.float32))], ["s"])
t.node("Add", ["s", t.const(np.array([-0.6, -0.5, -0.4], np.float32).reshape(1, 3, 1, 1))], ["b"])
t.node("Conv", ["b", t.const(Wi)], ["y"], kernel_shape=[1, 1])
cases.append(t.save(feeds={"x": rng.integers(0, 256, size=(3, 5, 6)).astype(np.float32)}))

# MobileNet v1 (width 0.25, 224×224, 1000 classes): 27 convolutions (13 depthwise-separable
# blocks), batchnorm + ReLU after each, global average pool, flatten, inner product, softmax.
def mobilenet():
    t = Twin("mobilenet_v1_025", [("x", [3, 224, 224])], [("prob", [1000])])
    nb = t.nb
    blob, onnx_blob, c, k = "x", "x", 3, 0

    def block(oc, stride, depthwise):
        nonlocal blob, onnx_blob, c, k
        k += 1
        groups, kc, ks = (c, 1, 3) if depthwise else (1, c, 1 if k > 1 else 3)
        if depthwise:
            oc = c
        W = rnd(oc, kc, ks, ks, scale=np.sqrt(2.0 / (kc * ks * ks)))
        pads = conv_pads(224, ks, stride, "BOTTOM_RIGHT_HEAVY") if ks == 3 else (0, 0)
        nb.add_convolution(f"conv{k}", kc, oc, ks, ks, stride, stride, "same" if ks == 3 else "valid",
                           groups, W.transpose(2, 3, 1, 0), None, False, input_name=blob, output_name=f"conv{k}")
        g = (rng.random(oc) * 0.5 + 0.75).astype(np.float32); be = rnd(oc, scale=0.1)
        mu = rnd(oc, scale=0.1); var = (rng.random(oc) * 0.5 + 0.75).astype(np.float32)
        nb.add_batchnorm(f"bn{k}", oc, g, be, mu, var, f"conv{k}", f"bn{k}", epsilon=1e-3)
        nb.add_activation(f"relu{k}", "RELU", f"bn{k}", f"relu{k}")
        # Same padding of a 3×3 window: the even sizes here make it (0, 1) at stride 2, (1, 1) at 1.
        p = [0, 0, 1, 1] if stride == 2 else ([1, 1, 1, 1] if ks == 3 else [0, 0, 0, 0])
        t.node("Conv", [onnx_blob, t.const(W)], [f"conv{k}"], kernel_shape=[ks, ks], strides=[stride, stride],
               pads=p, group=groups)
        t.node("BatchNormalization", [f"conv{k}", t.const(g), t.const(be), t.const(mu), t.const(var)],
               [f"bn{k}"], epsilon=1e-3)
        t.node("Relu", [f"bn{k}"], [f"relu{k}"])
        blob = onnx_blob = f"relu{k}"
        c = oc

    block(8, 2, False)
    for oc, s in [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1),
                  (128, 1), (128, 1), (256, 2), (256, 1)]:
        block(c, s, True)
        block(oc, 1, False)
    nb.add_pooling("gap", 0, 0, 1, 1, "AVERAGE", "VALID", blob, "gap", is_global=True)
    nb.add_flatten("flat", 0, "gap", "flat")
    Wf, bf = rnd(1000, 256, scale=0.1), rnd(1000, scale=0.1)
    nb.add_inner_product("fc", Wf, bf, 256, 1000, True, "flat", "fc")
    nb.add_softmax("sm", "fc", "prob")
    t.node("GlobalAveragePool", [blob], ["gap"])
    t.node("Flatten", ["gap"], ["flat"], axis=1)
    t.node("Gemm", ["flat", t.const(Wf), t.const(bf)], ["fc"], transB=1)
    t.node("Softmax", ["fc"], ["prob"], axis=1)
    cases.append(t.save(feeds={"x": rng.random((3, 224, 224)).astype(np.float32)}))


mobilenet()

# Bilinear upsampling in the DEFAULT mode (asymmetric sampling), unequal factors.
t = Twin("upsample_bilinear_default", [("x", [2, 3, 4])], [("y", [2, 6, 12])])
t.nb.add_upsample("up", 2, 3, "x", "y", mode="BILINEAR", linear_upsample_mode="DEFAULT")
t.node("Resize", ["x", "", t.const(np.array([1, 1, 2, 3], np.float32))], ["y"], mode="linear",
       coordinate_transformation_mode="asymmetric")
cases.append(t.save())

# clip [0, 6] and [-1, 1] (RELU6, RELU1).
for name, lo, hi in [("clip_relu6", 0.0, 6.0), ("clip_relu1", -1.0, 1.0)]:
    t = Twin(name, [("x", [3, 4, 4])], [("y", [3, 4, 4])])
    t.nb.add_clip("clip", "x", "y", min_value=lo, max_value=hi)
    t.node("Clip", ["x", t.const(np.array(lo, np.float32)), t.const(np.array(hi, np.float32))], ["y"])
    cases.append(t.save(feeds={"x": rnd(3, 4, 4, scale=5.0)}))

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"seed": 15, "cases": cases}, f, indent=1)
print(len(cases), "cases;", len({l for c in cases for l in c["layers"]}), "layer types")
