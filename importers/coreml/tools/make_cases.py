#!/usr/bin/env python3
"""Builds the seeded CoreML case set in ../testdata/cases: for every case a NeuralNetwork
.mlmodel made with coremltools, the same network with the same weights built in ONNX and run
by onnxruntime (the independent runtime), the inputs and expected outputs as .npy, and
manifest.json listing them. CoreML blobs are [C,H,W]; the ONNX twin runs on [1,C,H,W].

    importers/coreml/tools/make_cases.sh    # creates ~/.cache/nnhal-coreml-venv (or $VENV), runs this
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

# ---- The layers NNAPI 1.1-1.3 operations express (unary, quantized weights of 1-8 bits,
# reordering reshapes, grouped / dilated convolution, reduce, ...). Appended after the cases
# above so the seeded stream, and with it every earlier case, stays as it was.

def positive(*shape):
    return (rng.random(shape) * 2 + 0.5).astype(np.float32)


def unary(mode, onnx_build, scale=1.0, shift=0.0, alpha=1.0, epsilon=None, feeds=None):
    t = Twin(f"unary_{mode}", [("x", [3, 4, 5])], [("y", [3, 4, 5])])
    t.nb.add_unary("u", "x", "y", mode, alpha=alpha, shift=shift, scale=scale, epsilon=epsilon)
    v = "x"
    if scale != 1.0:
        t.node("Mul", [v, t.const(np.array(scale, np.float32))], ["xs"]); v = "xs"
    if shift != 0.0:
        t.node("Add", [v, t.const(np.array(shift, np.float32))], ["xh"]); v = "xh"
    onnx_build(t, v)
    cases.append(t.save(feeds=feeds))


def eps_then(op):
    def build(t, v):
        t.node("Add", [v, t.const(np.array(1e-4, np.float32))], ["e"])
        if op == "Rsqrt":
            t.node("Sqrt", ["e"], ["s"]); t.node("Reciprocal", ["s"], ["y"])
        else:
            t.node("Reciprocal", ["e"], ["y"])
    return build


unary("sqrt", lambda t, v: t.node("Sqrt", [v], ["y"]), scale=0.5, shift=2.0, feeds={"x": positive(3, 4, 5)})
unary("rsqrt", eps_then("Rsqrt"), epsilon=1e-4, feeds={"x": positive(3, 4, 5)})
unary("inverse", eps_then("Reciprocal"), epsilon=1e-4, feeds={"x": positive(3, 4, 5)})
unary("power", lambda t, v: t.node("Pow", [v, t.const(np.array(2.5, np.float32))], ["y"]), alpha=2.5,
      feeds={"x": positive(3, 4, 5)})
unary("exp", lambda t, v: t.node("Exp", [v], ["y"]), scale=0.7, shift=-0.2)
unary("log", lambda t, v: t.node("Log", [v], ["y"]), feeds={"x": positive(3, 4, 5)})
unary("abs", lambda t, v: t.node("Abs", [v], ["y"]), shift=0.3)
unary("threshold", lambda t, v: t.node("Max", [v, t.const(np.array(0.25, np.float32))], ["y"]), alpha=0.25,
      scale=2.0)

# ReLU6 as coremltools' MIL backend and Keras converter write it: ReLU, linear(-1), unary
# threshold(-6), linear(-1); between two convolutions.
t = Twin("relu6_unary_pattern", [("x", [3, 6, 6])], [("y", [4, 6, 6])])
W1, W2 = rnd(5, 3, 3, 3, scale=2.0), rnd(4, 5, 1, 1)
t.nb.add_convolution("c1", 3, 5, 3, 3, 1, 1, "same", 1, W1.transpose(2, 3, 1, 0), None, False,
                     input_name="x", output_name="c1")
t.nb.add_activation("r6__relu6_relu__", "RELU", "c1", "r6_relu")
t.nb.add_activation("r6__relu6_neg__", "LINEAR", "r6_relu", "r6_neg", params=[-1.0, 0.0])
t.nb.add_unary("r6__relu6_threshold6__", "r6_neg", "r6_thr", "threshold", alpha=-6.0)
t.nb.add_activation("r6", "LINEAR", "r6_thr", "r6", params=[-1.0, 0.0])
t.nb.add_convolution("c2", 5, 4, 1, 1, 1, 1, "valid", 1, W2.transpose(2, 3, 1, 0), None, False,
                     input_name="r6", output_name="y")
t.node("Conv", ["x", t.const(W1)], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
t.node("Clip", ["c1", t.const(np.array(0, np.float32)), t.const(np.array(6, np.float32))], ["r6"])
t.node("Conv", ["r6", t.const(W2)], ["y"], kernel_shape=[1, 1])
cases.append(t.save())

# The same four layers with the negated blob also a model output: not the pattern, each
# layer lowered on its own (MUL, ADD, MAXIMUM), still exact.
t = Twin("relu6_unary_general", [("x", [2, 3, 4])], [("y", [2, 3, 4]), ("n", [2, 3, 4])])
t.nb.add_activation("relu", "RELU", "x", "r")
t.nb.add_activation("neg", "LINEAR", "r", "n", params=[-1.0, 0.0])
t.nb.add_unary("thr", "n", "th", "threshold", alpha=-6.0)
t.nb.add_activation("neg2", "LINEAR", "th", "y", params=[-1.0, 0.0])
t.node("Clip", ["x", t.const(np.array(0, np.float32)), t.const(np.array(6, np.float32))], ["y"])
t.node("Relu", ["x"], ["r"]); t.node("Neg", ["r"], ["n"])
cases.append(t.save(feeds={"x": rnd(2, 3, 4, scale=5.0)}))

t = Twin("l2normalize_chw", [("x", [3, 4, 5])], [("y", [3, 4, 5])])
t.nb.add_l2_normalize("l2", "x", "y", epsilon=1e-6)
t.node("ReduceSumSquare", ["x"], ["ss"], axes=[1, 2, 3], keepdims=1)
t.node("Add", ["ss", t.const(np.array(1e-6, np.float32))], ["sse"])
t.node("Sqrt", ["sse"], ["n"]); t.node("Div", ["x", "n"], ["y"])
cases.append(t.save())


def pack(codes, nbits):
    bits = ((codes.reshape(-1, 1) >> np.arange(nbits - 1, -1, -1)) & 1).astype(np.uint8)
    return np.packbits(bits.reshape(-1)).tobytes()


def quantized_inner(name, nbits, kind, rows=5, cols=7):
    q = rng.integers(0, 2 ** nbits, size=(rows, cols)).astype(np.uint8)
    b = rnd(rows)
    t = Twin(name, [("x", [cols])], [("y", [rows])])
    if kind == "lut":
        lut = rnd(2 ** nbits, scale=0.5)
        W = lut[q]
        t.nb.add_inner_product("fc", pack(q, nbits), b, cols, rows, True, "x", "y", is_quantized_weight=True,
                               quantization_type="lut", nbits=nbits, quant_lut=lut)
    else:
        sc = (rng.random(rows) * 0.2 + 0.05).astype(np.float32); bi = rnd(rows, scale=0.5)
        W = (sc[:, None] * q.astype(np.float32) + bi[:, None]).astype(np.float32)
        t.nb.add_inner_product("fc", pack(q, nbits), b, cols, rows, True, "x", "y", is_quantized_weight=True,
                               quantization_type="linear", nbits=nbits, quant_scale=sc, quant_bias=bi)
    t.node("Reshape", ["x", t.const(np.array([1, cols], np.int64))], ["x2"])
    t.node("Gemm", ["x2", t.const(W), t.const(b)], ["y"], transB=1)
    cases.append(t.save())


quantized_inner("inner_product_lut_1bit", 1, "lut")
quantized_inner("inner_product_lut_2bit", 2, "lut")
quantized_inner("inner_product_lut_3bit", 3, "lut")
quantized_inner("inner_product_lut_4bit", 4, "lut")
quantized_inner("inner_product_lut_6bit", 6, "lut")
quantized_inner("inner_product_linear_4bit", 4, "linear")

# A 2-bit lookup-table convolution (the weights the palettizer writes).
t = Twin("conv_lut_2bit", [("x", [3, 6, 6])], [("y", [4, 6, 6])])
q = rng.integers(0, 4, size=(4, 3, 3, 3)).astype(np.uint8)
lut = rnd(4, scale=0.5); b = rnd(4)
t.nb.add_convolution("conv", 3, 4, 3, 3, 1, 1, "same", 1, pack(q.transpose(2, 3, 1, 0), 2), b, True, input_name="x", output_name="y",
                     quantization_type="lut", nbits=2, quant_lut=lut, is_quantized_weight=True)
t.node("Conv", ["x", t.const(lut[q]), t.const(b)], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
cases.append(t.save())

# Reshapes that reorder elements (channel first between images) and a channel-last one.
t = Twin("reshape_channel_first", [("x", [4, 3, 2])], [("y", [2, 6, 2])])
t.nb.add_reshape("rs", "x", "y", [2, 6, 2], 0)
t.node("Reshape", ["x", t.const(np.array([1, 2, 6, 2], np.int64))], ["y"])
cases.append(t.save())

t = Twin("reshape_channel_last", [("x", [4, 3, 2])], [("y", [3, 4, 2])])
t.nb.add_reshape("rs", "x", "y", [3, 4, 2], 1)
t.node("Transpose", ["x"], ["xt"], perm=[0, 2, 3, 1])
t.node("Reshape", ["xt", t.const(np.array([1, 4, 2, 3], np.int64))], ["r"])
t.node("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2])
cases.append(t.save())

# A flatten, then a reshape back to an image: the flattened C·H·W order is read again.
t = Twin("flatten_reshape_image", [("x", [2, 3, 4])], [("y", [4, 2, 3])])
t.nb.add_flatten("flat", 0, "x", "f")
t.nb.add_reshape("rs", "f", "y", [4, 2, 3], 0)
t.node("Reshape", ["x", t.const(np.array([1, 4, 2, 3], np.int64))], ["y"])
cases.append(t.save())

t = Twin("upsample_nearest_unequal", [("x", [2, 3, 4])], [("y", [2, 6, 12])])
t.nb.add_upsample("up", 2, 3, "x", "y", mode="NN")
t.node("Resize", ["x", "", t.const(np.array([1, 1, 2, 3], np.float32))], ["y"], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
cases.append(t.save())

for mode, ctm in [("ALIGN_CORNERS_TRUE", "align_corners"), ("ALIGN_CORNERS_FALSE", "half_pixel")]:
    t = Twin(f"upsample_bilinear_{mode.lower()}", [("x", [2, 3, 4])], [("y", [2, 6, 12])])
    t.nb.add_upsample("up", 2, 3, "x", "y", mode="BILINEAR", linear_upsample_mode=mode)
    t.node("Resize", ["x", "", t.const(np.array([1, 1, 2, 3], np.float32))], ["y"], mode="linear",
           coordinate_transformation_mode=ctm)
    cases.append(t.save())


def conv2(name, c, h, w, oc, k, s, border, groups=1, dil=1):
    kc = c // groups
    W = rnd(oc, kc, k, k, scale=0.5); b = rnd(oc)
    ek = (k - 1) * dil + 1
    if border == "same":
        oh, ow = -(-h // s), -(-w // s)
        pt, pb = conv_pads(h, ek, s, "BOTTOM_RIGHT_HEAVY"); pl, pr = conv_pads(w, ek, s, "BOTTOM_RIGHT_HEAVY")
    else:
        oh, ow = (h - ek) // s + 1, (w - ek) // s + 1
        pt = pb = pl = pr = 0
    t = Twin(name, [("x", [c, h, w])], [("y", [oc, oh, ow])])
    t.nb.add_convolution("conv", kc, oc, k, k, s, s, border, groups, W.transpose(2, 3, 1, 0), b, True,
                         input_name="x", output_name="y", dilation_factors=[dil, dil])
    t.node("Conv", ["x", t.const(W), t.const(b)], ["y"], kernel_shape=[k, k], strides=[s, s],
           pads=[pt, pl, pb, pr], group=groups, dilations=[dil, dil])
    cases.append(t.save())


conv2("conv_dilated_same", 3, 9, 9, 4, 3, 1, "same", dil=2)
conv2("conv_dilated_valid_s2", 2, 11, 10, 3, 3, 2, "valid", dil=3)
conv2("conv_grouped", 6, 7, 7, 4, 3, 1, "same", groups=2)
conv2("conv_grouped_s2", 8, 9, 8, 12, 3, 2, "valid", groups=4)
conv2("depthwise_dilated", 4, 8, 8, 4, 3, 1, "same", groups=4, dil=2)

for act, params, build in [
    ("LEAKYRELU", [0.15], lambda t: t.node("LeakyRelu", ["x"], ["y"], alpha=0.15)),
    ("SIGMOID_HARD", [0.3, 0.4], lambda t: t.node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)),
    ("SCALED_TANH", [1.7, 0.6], lambda t: (t.node("Mul", ["x", t.const(np.array(0.6, np.float32))], ["m"]),
                                           t.node("Tanh", ["m"], ["th"]),
                                           t.node("Mul", ["th", t.const(np.array(1.7, np.float32))], ["y"]))),
    ("ELU", 0.8, lambda t: t.node("Elu", ["x"], ["y"], alpha=0.8)),
    ("SOFTSIGN", None, lambda t: t.node("Softsign", ["x"], ["y"])),
]:
    t = Twin(f"activation_{act.lower()}", [("x", [3, 4, 5])], [("y", [3, 4, 5])])
    t.nb.add_activation("act", act, "x", "y", params=params)
    build(t)
    cases.append(t.save(feeds={"x": rnd(3, 4, 5, scale=3.0)}))

t = Twin("activation_prelu", [("x", [4, 3, 5])], [("y", [4, 3, 5])])
alpha = rnd(4, scale=0.3)
t.nb.add_activation("act", "PRELU", "x", "y", params=alpha)
t.node("PRelu", ["x", t.const(alpha.reshape(4, 1, 1))], ["y"])
cases.append(t.save())

for mode, op in [("AVE", "Mean"), ("MAX", "Max"), ("MIN", "Min")]:
    t = Twin(f"elementwise_{mode.lower()}_inputs", [("a", [3, 4, 4]), ("b", [3, 4, 4]), ("c", [3, 1, 1])],
             [("y", [3, 4, 4])])
    t.nb.add_elementwise("e", ["a", "b", "c"], "y", mode)
    t.node(op, ["a", "b", "c"], ["y"])
    cases.append(t.save())

t = Twin("reorganize_pixel_shuffle", [("x", [8, 2, 3])], [("y", [2, 4, 6])])
t.nb.add_reorganize_data("r", "x", "y", mode="PIXEL_SHUFFLE", block_size=2)
t.node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")
cases.append(t.save())

for mode, axis, onnx_op in [("avg", "HW", "ReduceMean"), ("sum", "C", "ReduceSum"), ("max", "CHW", "ReduceMax"),
                            ("min", "W", "ReduceMin"), ("prod", "H", "ReduceProd"),
                            ("sumsquare", "HW", "ReduceSumSquare"), ("L1", "C", "ReduceL1"),
                            ("L2", "CHW", "ReduceL2"), ("logsum", "W", None), ("argmax", "C", "ArgMax")]:
    shape = [3, 4, 5]
    axes = {"C": [1], "H": [2], "W": [3], "HW": [2, 3], "CHW": [1, 2, 3]}[axis]
    out = [1 if (i + 1) in axes else d for i, d in enumerate(shape)]
    t = Twin(f"reduce_{mode.lower()}_{axis.lower()}", [("x", shape)], [("y", out)])
    t.nb.add_reduce("red", "x", "y", axis, mode, epsilon=1e-6)
    feeds = None
    if mode == "prod":
        feeds = {"x": (rng.random(shape) * 0.8 + 0.6).astype(np.float32)}
    if mode == "logsum":
        feeds = {"x": positive(*shape)}
        t.node("Add", ["x", t.const(np.array(1e-6, np.float32))], ["e"])
        t.node("Log", ["e"], ["l"])
        t.node("ReduceSum", ["l", t.const(np.array(axes, np.int64))], ["y"], keepdims=1)
    elif mode == "argmax":
        t.node("ArgMax", ["x"], ["i"], axis=axes[0], keepdims=1)
        t.node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)
    elif onnx_op == "ReduceSum":
        t.node(onnx_op, ["x", t.const(np.array(axes, np.int64))], ["y"], keepdims=1)
    else:
        t.node(onnx_op, ["x"], ["y"], axes=axes, keepdims=1)
    cases.append(t.save(feeds=feeds))

# Average pooling that counts its padding (valid with padding amounts, same), and the
# includeLastPixel (Caffe ceil-mode) padding of max and average pools.
def pool2(name, kind, c, h, w, k, s, padding, exclude, pad=(0, 0, 0, 0)):
    if padding == "SAME":
        oh, ow = -(-h // s), -(-w // s)
        pt, pb = conv_pads(h, k, s, "BOTTOM_RIGHT_HEAVY"); pl, pr = conv_pads(w, k, s, "BOTTOM_RIGHT_HEAVY")
    elif padding == "VALID":
        pt, pb, pl, pr = pad
        oh, ow = (h + pt + pb - k) // s + 1, (w + pl + pr - k) // s + 1
    else:
        pt = pb = pad[0]; pl = pr = pad[2]
        def one(n, p):
            o = -(-(n + 2 * p - k) // s) + 1
            if p > 0 and (o - 1) * s >= n + p:
                o -= 1
            return o
        oh, ow = one(h, pt), one(w, pl)
    t = Twin(name, [("x", [c, h, w])], [("y", [c, oh, ow])])
    t.nb.add_pooling("pool", k, k, s, s, kind, padding, "x", "y", exclude_pad_area=exclude,
                     padding_top=pad[0], padding_bottom=pad[1], padding_left=pad[2], padding_right=pad[3])
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[pt, pl, pb, pr])
    if padding == "INCLUDE_LAST_PIXEL":
        attrs["ceil_mode"] = 1
    if kind == "MAX":
        t.node("MaxPool", ["x"], ["y"], **attrs)
    else:
        t.node("AveragePool", ["x"], ["y"], count_include_pad=0 if exclude else 1, **attrs)
    cases.append(t.save())


pool2("avgpool_valid_padded_count_pad", "AVERAGE", 2, 7, 6, 3, 2, "VALID", False, pad=(1, 2, 2, 1))
pool2("avgpool_valid_padded_exclude_pad", "AVERAGE", 2, 7, 6, 3, 2, "VALID", True, pad=(1, 2, 2, 1))
pool2("avgpool_same_count_pad", "AVERAGE", 3, 7, 7, 3, 2, "SAME", False)
pool2("maxpool_valid_padded", "MAX", 2, 6, 7, 3, 2, "VALID", True, pad=(1, 1, 2, 0))
pool2("maxpool_include_last_pixel_padded", "MAX", 2, 8, 7, 3, 2, "INCLUDE_LAST_PIXEL", True, pad=(1, 1, 1, 1))
pool2("avgpool_include_last_pixel", "AVERAGE", 2, 8, 8, 3, 2, "INCLUDE_LAST_PIXEL", True)
pool2("avgpool_include_last_pixel_count_pad", "AVERAGE", 2, 8, 7, 3, 2, "INCLUDE_LAST_PIXEL", False,
      pad=(1, 1, 1, 1))
pool2("avgpool_include_last_pixel_exclude_pad", "AVERAGE", 2, 8, 7, 3, 2, "INCLUDE_LAST_PIXEL", True,
      pad=(1, 1, 1, 1))


# MobileNet v1 (width 0.25, 128×128, 1000 classes; TF-slim's 1×1-convolution classifier) written
# as an ML program with relu6 and converted by coremltools' own converter to a NeuralNetwork
# (convert_to="neuralnetwork"): its backend writes every ReLU6 as ReLU, linear(-1), unary
# threshold(-6), linear(-1) and folds each batchnorm into its convolution. The expected output is
# the same network (batchnorm unfolded, Clip for ReLU6) run by onnxruntime.
def mobilenet_converted():
    from coremltools.converters.mil import Builder as mb
    name, size = "mobilenet_v1_025_128_converted", 128
    blocks = [(8, 2, False)]
    c = 8
    for oc, s in [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (128, 1), (128, 1),
                  (128, 1), (128, 1), (256, 2), (256, 1)]:
        blocks += [(c, s, True), (oc, 1, False)]
        c = oc
    params, c = [], 3
    for k, (oc, s, dw) in enumerate(blocks):
        groups, kc, ks = (c, 1, 3) if dw else (1, c, 3 if k == 0 else 1)
        W = rnd(oc, kc, ks, ks, scale=np.sqrt(2.0 / (kc * ks * ks)))
        bn = ((rng.random(oc) * 0.5 + 0.75).astype(np.float32), rnd(oc, scale=0.1), rnd(oc, scale=0.1),
              (rng.random(oc) * 0.5 + 0.75).astype(np.float32))
        params.append((W, s, groups, ks, bn))
        c = oc
    Wc, bc = rnd(1000, 256, 1, 1, scale=0.1), rnd(1000, scale=0.1)

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 3, size, size))])
    def prog(x):
        y = x
        for W, s, groups, ks, (g, be, mu, var) in params:
            y = mb.conv(x=y, weight=W, strides=[s, s], pad_type="same", groups=groups)
            y = mb.batch_norm(x=y, mean=mu, variance=var, gamma=g, beta=be, epsilon=1e-3)
            y = mb.relu6(x=y)
        y = mb.reduce_mean(x=y, axes=[2, 3], keep_dims=True)
        y = mb.conv(x=y, weight=Wc, bias=bc)
        return mb.softmax(x=y, axis=1, name="prob")

    mlmodel = coremltools.convert(prog, convert_to="neuralnetwork")
    spec = mlmodel.get_spec()
    coremltools.models.utils.save_spec(spec, os.path.join(OUT, name + ".mlmodel"))

    t = Twin(name, [("x", [1, 3, size, size])], [("prob", None)])
    blob = "x"
    for k, (W, s, groups, ks, (g, be, mu, var)) in enumerate(params):
        pads = [0, 0, 1, 1] if s == 2 else ([1, 1, 1, 1] if ks == 3 else [0, 0, 0, 0])
        t.node("Conv", [blob, t.const(W)], [f"c{k}"], kernel_shape=[ks, ks], strides=[s, s], pads=pads,
               group=groups)
        t.node("BatchNormalization", [f"c{k}", t.const(g), t.const(be), t.const(mu), t.const(var)], [f"b{k}"],
               epsilon=1e-3)
        t.node("Clip", [f"b{k}", t.const(np.array(0, np.float32)), t.const(np.array(6, np.float32))], [f"r{k}"])
        blob = f"r{k}"
    t.node("GlobalAveragePool", [blob], ["gap"])
    t.node("Conv", ["gap", t.const(Wc), t.const(bc)], ["fc"], kernel_shape=[1, 1])
    t.node("Softmax", ["fc"], ["prob"], axis=1)
    g = helper.make_graph(t.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, None)], t.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.random((1, 3, size, size)).astype(np.float32)
    (prob,) = sess.run(["prob"], {"x": x})
    np.save(os.path.join(OUT, name + ".in0.npy"), x)
    # The converted model's output blob is [1000, 1, 1] (its declared shape is left open).
    np.save(os.path.join(OUT, name + ".out0.npy"), prob.reshape(1000, 1, 1).astype(np.float32))
    layers = sorted({l.WhichOneof("layer") for l in spec.neuralNetwork.layers})
    unary = sum(l.WhichOneof("layer") == "unary" for l in spec.neuralNetwork.layers)
    assert unary == len(params), unary
    cases.append({"name": name, "model": name + ".mlmodel", "inputs": [name + ".in0.npy"],
                  "outputs": [name + ".out0.npy"], "layers": layers})


mobilenet_converted()

t = Twin("clip_general", [("x", [3, 4, 4])], [("y", [3, 4, 4])])
t.nb.add_clip("clip", "x", "y", min_value=-0.5, max_value=2.5)
t.node("Clip", ["x", t.const(np.array(-0.5, np.float32)), t.const(np.array(2.5, np.float32))], ["y"])
cases.append(t.save(feeds={"x": rnd(3, 4, 4, scale=3.0)}))

# thresholded ReLU, softplus and parametric softplus (one value, and one per channel).
for act, params, build in [
    ("THRESHOLDEDRELU", 0.4, lambda t: t.node("ThresholdedRelu", ["x"], ["y"], alpha=0.4)),
    ("SOFTPLUS", None, lambda t: t.node("Softplus", ["x"], ["y"])),
]:
    t = Twin(f"activation_{act.lower()}", [("x", [3, 4, 5])], [("y", [3, 4, 5])])
    t.nb.add_activation("act", act, "x", "y", params=params)
    build(t)
    cases.append(t.save(feeds={"x": rnd(3, 4, 5, scale=3.0)}))
for name, count in [("activation_parametric_softplus", 1), ("activation_parametric_softplus_channels", 3)]:
    t = Twin(name, [("x", [3, 4, 5])], [("y", [3, 4, 5])])
    alpha = (np.abs(rnd(count)) + 0.5).astype(np.float32)
    beta = (np.abs(rnd(count)) + 0.3).astype(np.float32)
    t.nb.add_activation("act", "PARAMETRICSOFTPLUS", "x", "y", params=[alpha, beta])
    shape = (count, 1, 1) if count > 1 else ()
    t.node("Mul", ["x", t.const(beta.reshape(shape))], ["m"])
    t.node("Softplus", ["m"], ["sp"])
    t.node("Mul", ["sp", t.const(alpha.reshape(shape))], ["y"])
    cases.append(t.save(feeds={"x": rnd(3, 4, 5, scale=3.0)}))

# deconvolution (TRANSPOSE_CONV_2D), valid padding, strides 1 and 2 (unequal), with and without bias.
for name, (cin, cout, h, w, kh, kw, sh, sw, bias) in [
        ("deconvolution_s2", (3, 4, 4, 5, 3, 3, 2, 2, True)),
        ("deconvolution_s1x2_nobias", (2, 3, 3, 4, 2, 3, 1, 2, False))]:
    t = Twin(name, [("x", [cin, h, w])], [("y", [cout, (h - 1) * sh + kh, (w - 1) * sw + kw])])
    W = rnd(cin, cout, kh, kw, scale=0.5)
    b = rnd(cout, scale=0.5)
    t.nb.add_convolution("deconv", cin, cout, kh, kw, sh, sw, "valid", 1, W.transpose(2, 3, 0, 1),
                         b if bias else None, bias, is_deconv=True,
                         output_shape=[(h - 1) * sh + kh, (w - 1) * sw + kw], input_name="x", output_name="y")
    t.node("ConvTranspose", ["x", t.const(W)] + ([t.const(b)] if bias else []), ["y"],
           kernel_shape=[kh, kw], strides=[sh, sw])
    cases.append(t.save())

# reflection and replication padding (GATHER per axis; ONNX's reflect and edge modes).
for name, mode, onnx_mode in [("padding_reflection", "reflection", "reflect"), ("padding_replication", "replication", "edge")]:
    t = Twin(name, [("x", [2, 4, 5])], [("y", [2, 4 + 1 + 3, 5 + 2 + 0])])
    t.nb.add_padding("pad", left=2, right=0, top=1, bottom=3, padding_type=mode, input_name="x", output_name="y")
    t.node("Pad", ["x", t.const(np.array([0, 0, 1, 2, 0, 0, 3, 0], np.int64))], ["y"], mode=onnx_mode)
    cases.append(t.save())

# fractional bilinear upsampling: output floor(size * factor), sampled by the sizes' ratio.
for mode, ctm in [("ALIGN_CORNERS_TRUE", "align_corners"), ("ALIGN_CORNERS_FALSE", "half_pixel")]:
    t = Twin(f"upsample_fractional_{mode.lower()}", [("x", [2, 4, 5])], [("y", [2, 6, 12])])
    t.nb.add_upsample("up", 1.5, 2.5, "x", "y", mode="BILINEAR", linear_upsample_mode=mode)
    t.node("Resize", ["x", "", "", t.const(np.array([1, 2, 6, 12], np.int64))], ["y"], mode="linear",
           coordinate_transformation_mode=ctm)
    cases.append(t.save())

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"seed": 15, "cases": cases}, f, indent=1)
print(len(cases), "cases;", len({l for c in cases for l in c["layers"]}), "layer types")
