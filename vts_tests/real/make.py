#!/usr/bin/env python3
"""Writes the two small real-model vectors of this directory: a transformer text encoder and an
LSTM keyword spotter, float32, each as an NNAPI 1.3 model in the golden-vector format
(docs/vector-format.md) with LiteRT's output as the expected values.

Each network is built twice from the same seeded weights:
  * in TensorFlow, converted to a .tflite model and run by LiteRT with its builtin kernels
    (XNNPACK off): that output is the golden one;
  * as the NNAPI operation graph TensorFlow Lite's NNAPI delegate sends for it, written by hand
    below: GATHER for the token embedding, layer normalization as MEAN, SUB, MUL, RSQRT, ADD,
    the attention's RESHAPE, TRANSPOSE, SPLIT and SOFTMAX, its batched matrix products (an AIDL V2
    operation) as FULLY_CONNECTED per head, a feed-forward block; the spotter's Keras LSTM as
    UNIDIRECTIONAL_SEQUENCE_LSTM followed by STRIDED_SLICE of the last step.

Tolerance: float32 rtol 1e-4, atol max(1e-4 x max |expected|, 4 x max |XNNPACK - builtin|), the
rule the project's MobileNet v2 vectors use for a network compared against another float
implementation.

Needs TensorFlow and ai-edge-litert (numpy comes with them). Usage:
    python3 make.py            # rewrites encoder_f32.json and kws_lstm_f32.json beside this file
"""
import json
import os

import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter, OpResolverType

HERE = os.path.dirname(os.path.abspath(__file__))


def f32s(a):
    # The exact decimal of each float32 reads back as the same float32 whether parsed to f32 or
    # to f64 and narrowed.
    return [float(x) for x in np.asarray(a, dtype=np.float32).ravel()]


class Graph:
    """An NNAPI model in the vector format, operand by operand."""

    def __init__(self):
        self.operands, self.operations = [], []
        self.inputs, self.outputs = [], []

    def operand(self, ty, dims, lifetime, value=None):
        self.operands.append({"type": ty, "dimensions": list(dims), "scale": 0.0, "zeroPoint": 0,
                              "lifetime": lifetime, "value": value})
        return len(self.operands) - 1

    def const(self, array):
        a = np.asarray(array, dtype=np.float32)
        return self.operand("TENSOR_FLOAT32", a.shape, "CONSTANT_COPY", f32s(a))

    def ints(self, values):
        return self.operand("TENSOR_INT32", [len(values)], "CONSTANT_COPY", [int(v) for v in values])

    def int(self, v):
        return self.operand("INT32", [], "CONSTANT_COPY", [int(v)])

    def float(self, v):
        return self.operand("FLOAT32", [], "CONSTANT_COPY", f32s([v]))

    def bool(self, v):
        return self.operand("BOOL", [], "CONSTANT_COPY", [1 if v else 0])

    def omitted(self):
        return self.operand("TENSOR_FLOAT32", [0], "NO_VALUE")

    def input(self, ty, dims):
        i = self.operand(ty, dims, "MODEL_INPUT")
        self.inputs.append(i)
        return i

    def op(self, ty, ins, out_dims, n_out=1):
        outs = [self.operand("TENSOR_FLOAT32", out_dims, "TEMPORARY_VARIABLE") for _ in range(n_out)]
        self.operations.append({"type": ty, "inputs": list(ins), "outputs": outs})
        return outs[0] if n_out == 1 else outs

    def output(self, i):
        self.operands[i]["lifetime"] = "MODEL_OUTPUT"
        self.outputs.append(i)

    def model(self):
        return {"operands": self.operands, "operations": self.operations,
                "inputIndexes": self.inputs, "outputIndexes": self.outputs}


def litert(tflite, inputs):
    """Outputs of LiteRT's builtin kernels and of its default (XNNPACK) resolver, in the order of
    the model's signature outputs sorted by name."""
    results = []
    for resolver in (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, OpResolverType.AUTO):
        it = Interpreter(model_content=tflite, experimental_op_resolver_type=resolver, num_threads=1)
        it.allocate_tensors()
        for detail, value in zip(it.get_input_details(), inputs):
            it.set_tensor(detail["index"], value.astype(detail["dtype"]))
        it.invoke()
        outs = sorted(it.get_output_details(), key=lambda d: d["name"])
        results.append([it.get_tensor(d["index"]).copy() for d in outs])
    return results


def tflite_ops(tflite):
    from ai_edge_litert import schema_py_generated as S
    m = S.ModelT.InitFromObj(S.Model.GetRootAsModel(tflite, 0))
    names = {v: k for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_")}
    counts = {}
    for op in m.subgraphs[0].operators:
        code = m.operatorCodes[op.opcodeIndex]
        name = names.get(max(code.builtinCode, code.deprecatedBuiltinCode), "?")
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def evaluate(graph, inputs):
    """The graph's outputs by a plain numpy reading of the operations it uses: a check that the
    lowering above computes what the TensorFlow model computes, before any driver runs it."""
    vals = {}
    for i, o in enumerate(graph.operands):
        if o["lifetime"] == "CONSTANT_COPY":
            dt = np.float32 if o["type"] in ("TENSOR_FLOAT32", "FLOAT32") else np.int64
            vals[i] = np.array(o["value"], dtype=dt).reshape(o["dimensions"])
    for i, v in zip(graph.inputs, inputs):
        vals[i] = v
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    for op in graph.operations:
        a = [vals.get(i) for i in op["inputs"]]
        t = op["type"]
        if t in ("ADD", "SUB", "MUL"):
            r = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}[t](a[0], a[1])
        elif t == "GATHER":
            r = np.take(a[0], a[2], axis=int(a[1][()]))
        elif t == "RESHAPE":
            r = a[0].reshape(a[1])
        elif t == "FULLY_CONNECTED":
            r = a[0].reshape(-1, a[1].shape[1]) @ a[1].T + a[2]
            r = np.maximum(r, 0) if int(a[3][()]) == 1 else r
        elif t == "MEAN":
            r = a[0].mean(axis=tuple(int(x) for x in a[1]), keepdims=bool(a[2][()]))
        elif t == "RSQRT":
            r = 1 / np.sqrt(a[0])
        elif t == "SOFTMAX":
            z = a[0] * a[1][()]
            e = np.exp(z - z.max(axis=-1, keepdims=True))
            r = e / e.sum(axis=-1, keepdims=True)
        elif t == "TRANSPOSE":
            r = a[0].transpose(a[1])
        elif t == "SPLIT":
            r = np.split(a[0], int(a[2][()]), axis=int(a[1][()]))
        elif t == "CONCATENATION":
            r = np.concatenate(a[:-1], axis=int(a[-1][()]))
        elif t == "STRIDED_SLICE":
            r = a[0][tuple(slice(b, e, s) for b, e, s in zip(a[1], a[2], a[3]))]
            r = r.reshape([n for k, n in enumerate(r.shape) if not (int(a[6][()]) >> k) & 1])
        elif t == "UNIDIRECTIONAL_SEQUENCE_LSTM":
            x, h, c = a[0], a[18], a[19]
            steps = []
            for s in range(x.shape[1]):
                gates = [x[:, s] @ a[1 + k].T + h @ a[5 + k].T + a[12 + k] for k in range(4)]
                c = sig(gates[1]) * c + sig(gates[0]) * np.tanh(gates[2])
                h = sig(gates[3]) * np.tanh(c)
                steps.append(h)
            r = np.stack(steps, axis=1)
        else:
            raise ValueError(t)
        for i, v in zip(op["outputs"], r if isinstance(r, list) else [r]):
            assert list(v.shape) == graph.operands[i]["dimensions"], (t, v.shape)
            vals[i] = v.astype(np.float32)
    return [vals[i] for i in graph.outputs]


def write(name, graph, inputs, builtin, xnnpack, tflite, about):
    nn_ops = {}
    for o in graph.operations:
        nn_ops[o["type"]] = nn_ops.get(o["type"], 0) + 1
    peak = max(float(np.max(np.abs(e))) for e in builtin)
    drift = max(float(np.max(np.abs(a - b))) for a, b in zip(builtin, xnnpack))
    atol = max(1e-4 * max(1.0, peak), 4 * drift)
    for want, got in zip(builtin, evaluate(graph, inputs)):
        assert np.all(np.abs(want - got) <= atol + 1e-4 * np.abs(want)), (name, want, got)
    doc = {
        "name": name,
        "spec": "vts_tests/real/make.py",
        "version": "V1_3",
        "minSupportedVersion": "V1_3",
        "model": graph.model(),
        "examples": [{
            "inputs": {str(k): (f32s(v) if v.dtype == np.float32 else [int(x) for x in v.ravel()])
                       for k, v in enumerate(inputs)},
            "outputs": {str(k): f32s(v) for k, v in enumerate(builtin)},
        }],
        "tolerance": {
            "source": f"rtol 1e-4, atol = max(1e-4 x max(1, max |expected| = {peak:.4g}), "
                      f"4 x max |XNNPACK - builtin| = 4 x {drift:.3g})",
            "float32": {"atol": atol, "rtol": 1e-4},
            "ignoredOutputs": [],
        },
        "origin": {
            "generator": "vts_tests/real/make.py",
            "about": about,
            "goldenOutput": "LiteRT builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES), 1 thread",
            "tfliteOps": tflite_ops(tflite),
            "nnapiOps": dict(sorted(nn_ops.items())),
            "maxAbsXnnpackMinusBuiltin": drift,
        },
    }
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(name, "nnapi", doc["origin"]["nnapiOps"], "tflite", doc["origin"]["tfliteOps"],
          "atol", atol)


# ---------------------------------------------------------------------------------------------
# Transformer text encoder: token embedding + positions, 2 post-norm encoder layers (2-head
# self-attention, feed-forward with ReLU), mean pooling over tokens, a 4-class head.

VOCAB, T, D, H, FF, LAYERS, CLASSES, EPS = 64, 16, 32, 2, 64, 2, 4, 1e-5
DH = D // H


def encoder_weights(rng):
    w = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    layers = []
    for _ in range(LAYERS):
        layers.append({
            "wq": w(D, D), "bq": w(D), "wk": w(D, D), "bk": w(D), "wv": w(D, D), "bv": w(D),
            "wo": w(D, D), "bo": w(D), "g1": 1 + w(D), "b1": w(D),
            "w1": w(D, FF), "c1": w(FF), "w2": w(FF, D), "c2": w(D), "g2": 1 + w(D), "b2": w(D),
        })
    return {"emb": w(VOCAB, D) * 4, "pos": w(T, D), "layers": layers, "wc": w(D, CLASSES),
            "bc": w(CLASSES)}


def encoder_tf(W):
    def norm(x, g, b):
        m = tf.reduce_mean(x, axis=-1, keepdims=True)
        d = x - m
        v = tf.reduce_mean(d * d, axis=-1, keepdims=True)
        return d * tf.math.rsqrt(v + EPS) * g + b

    class Encoder(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, T], tf.int32)])
        def __call__(self, tokens):
            x = tf.reshape(tf.gather(W["emb"], tokens) + W["pos"], [T, D])
            for L in W["layers"]:
                heads = lambda y: tf.transpose(tf.reshape(y, [T, H, DH]), [1, 0, 2])  # noqa: E731
                q, k, v = (heads(tf.matmul(x, L[a]) + L[b])
                           for a, b in (("wq", "bq"), ("wk", "bk"), ("wv", "bv")))
                p = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(DH))
                ctx = tf.reshape(tf.transpose(tf.matmul(p, v), [1, 0, 2]), [T, D])
                x = norm(x + tf.matmul(ctx, L["wo"]) + L["bo"], L["g1"], L["b1"])
                f = tf.nn.relu(tf.matmul(x, L["w1"]) + L["c1"])
                x = norm(x + tf.matmul(f, L["w2"]) + L["c2"], L["g2"], L["b2"])
            logits = tf.matmul(tf.reduce_mean(x, axis=0, keepdims=True), W["wc"]) + W["bc"]
            return {"a_probabilities": tf.nn.softmax(logits), "b_logits": logits}

    m = Encoder()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    return conv.convert()


def encoder_nnapi(W):
    g = Graph()
    tokens = g.input("TENSOR_INT32", [1, T])
    none = g.int(0)

    def fc(x, w, b, act=0):
        # FULLY_CONNECTED's weights are [units, input]: the transpose of x @ w's matrix.
        return g.op("FULLY_CONNECTED", [x, g.const(w.T), g.const(b), g.int(act)],
                    [T if x != pooled else 1, w.shape[1]])

    def norm(x, gamma, beta):
        m = g.op("MEAN", [x, g.ints([-1]), g.int(1)], [T, 1])
        d = g.op("SUB", [x, m, none], [T, D])
        v = g.op("MEAN", [g.op("MUL", [d, d, none], [T, D]), g.ints([-1]), g.int(1)], [T, 1])
        r = g.op("RSQRT", [g.op("ADD", [v, g.const([EPS]), none], [T, 1])], [T, 1])
        n = g.op("MUL", [d, r, none], [T, D])
        return g.op("ADD", [g.op("MUL", [n, g.const(gamma), none], [T, D]), g.const(beta), none],
                    [T, D])

    def split_heads(y, perm, dims):
        # [T, D] -> [T, H, DH] -> perm -> H slices, each reshaped to 2-D for FULLY_CONNECTED.
        r = g.op("RESHAPE", [y, g.ints([T, H, DH])], [T, H, DH])
        full = [H] + dims
        t = g.op("TRANSPOSE", [r, g.ints(perm)], full)
        parts = g.op("SPLIT", [t, g.int(0), g.int(H)], [1] + dims, n_out=H)
        return [g.op("RESHAPE", [p, g.ints(dims)], dims) for p in parts]

    pooled = None
    e = g.op("GATHER", [g.const(W["emb"]), g.int(0), tokens], [1, T, D])
    x = g.op("RESHAPE", [g.op("ADD", [e, g.const(W["pos"]), none], [1, T, D]), g.ints([T, D])],
             [T, D])
    for L in W["layers"]:
        q = split_heads(fc(x, L["wq"], L["bq"]), [1, 0, 2], [T, DH])
        k = split_heads(fc(x, L["wk"], L["bk"]), [1, 0, 2], [T, DH])
        v = split_heads(fc(x, L["wv"], L["bv"]), [1, 2, 0], [DH, T])
        ctx = []
        for h in range(H):
            # scores = q_h k_hᵀ: k_h [T, DH] is FULLY_CONNECTED's [units, input] weight as it is.
            s = g.op("FULLY_CONNECTED", [q[h], k[h], g.const(np.zeros(T)), g.int(0)], [T, T])
            p = g.op("SOFTMAX", [s, g.float(1 / np.sqrt(DH))], [T, T])
            ctx.append(g.op("FULLY_CONNECTED", [p, v[h], g.const(np.zeros(DH)), g.int(0)],
                            [T, DH]))
        c = g.op("CONCATENATION", ctx + [g.int(1)], [T, D])
        x = norm(g.op("ADD", [x, fc(c, L["wo"], L["bo"]), none], [T, D]), L["g1"], L["b1"])
        f = fc(x, L["w1"], L["c1"], act=1)
        x = norm(g.op("ADD", [x, fc(f, L["w2"], L["c2"]), none], [T, D]), L["g2"], L["b2"])
    pooled = g.op("MEAN", [x, g.ints([0]), g.int(1)], [1, D])
    logits = fc(pooled, W["wc"], W["bc"])
    probs = g.op("SOFTMAX", [logits, g.float(1.0)], [1, CLASSES])
    g.output(probs)
    g.output(logits)
    return g


def encoder():
    rng = np.random.default_rng(20261127)
    W = encoder_weights(rng)
    tokens = rng.integers(0, VOCAB, size=(1, T)).astype(np.int32)
    tflite = encoder_tf(W)
    builtin, xnnpack = litert(tflite, [tokens])
    write("encoder_f32", encoder_nnapi(W), [tokens], builtin, xnnpack, tflite,
          f"transformer text encoder: vocabulary {VOCAB}, {T} tokens, width {D}, {H} heads, "
          f"feed-forward {FF}, {LAYERS} post-norm layers, mean pooling, {CLASSES} classes; "
          "outputs 0 probabilities, 1 logits")


# ---------------------------------------------------------------------------------------------
# LSTM keyword spotter: 49 frames of 10 MFCC features, one Keras LSTM of 32 units, the last
# step's output into a 12-keyword dense head.

FRAMES, FEATURES, UNITS, WORDS = 49, 10, 32, 12


def kws():
    rng = np.random.default_rng(20261128)
    inp = tf.keras.Input(shape=(FRAMES, FEATURES), batch_size=1)
    lstm = tf.keras.layers.LSTM(UNITS)
    dense = tf.keras.layers.Dense(WORDS)
    logits = dense(lstm(inp))
    model = tf.keras.Model(inp, {"a_probabilities": tf.keras.layers.Softmax()(logits),
                                "b_logits": logits})
    for layer in (lstm, dense):
        layer.set_weights([(rng.standard_normal(w.shape) * 0.3).astype(np.float32)
                           for w in layer.get_weights()])
    kernel, recurrent, bias = lstm.get_weights()
    wd, bd = dense.get_weights()
    tflite = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    features = rng.uniform(-1, 1, size=(1, FRAMES, FEATURES)).astype(np.float32)
    builtin, xnnpack = litert(tflite, [features])

    g = Graph()
    x = g.input("TENSOR_FLOAT32", [1, FRAMES, FEATURES])
    # Keras stores the gates input, forget, cell, output side by side along the last axis;
    # NNAPI takes one [units, input] matrix per gate, in the same order.
    gate = lambda m, i: m[:, i * UNITS:(i + 1) * UNITS].T  # noqa: E731
    ins = [x]
    ins += [g.const(gate(kernel, i)) for i in range(4)]
    ins += [g.const(gate(recurrent, i)) for i in range(4)]
    ins += [g.omitted() for _ in range(3)]                       # no peephole
    ins += [g.const(bias[i * UNITS:(i + 1) * UNITS]) for i in range(4)]
    ins += [g.omitted(), g.omitted()]                            # no projection
    ins += [g.input("TENSOR_FLOAT32", [1, UNITS]), g.input("TENSOR_FLOAT32", [1, UNITS])]
    ins += [g.int(4), g.float(0.0), g.float(0.0), g.bool(False)]  # tanh, no clipping, batch-major
    ins += [g.omitted() for _ in range(4)]                       # no layer normalization
    seq = g.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [1, FRAMES, UNITS])
    last = g.op("STRIDED_SLICE", [seq, g.ints([0, FRAMES - 1, 0]), g.ints([1, FRAMES, UNITS]),
                                  g.ints([1, 1, 1]), g.int(0), g.int(0), g.int(2)], [1, UNITS])
    lg = g.op("FULLY_CONNECTED", [last, g.const(wd.T), g.const(bd), g.int(0)], [1, WORDS])
    probs = g.op("SOFTMAX", [lg, g.float(1.0)], [1, WORDS])
    g.output(probs)
    g.output(lg)
    zeros = np.zeros((1, UNITS), dtype=np.float32)
    write("kws_lstm_f32", g, [features, zeros, zeros], builtin, xnnpack, tflite,
          f"keyword spotter: {FRAMES} frames x {FEATURES} features, LSTM {UNITS} units "
          f"(last step), {WORDS} keywords; inputs 0 features, 1 and 2 the LSTM's zero states; "
          "outputs 0 probabilities, 1 logits")


if __name__ == "__main__":
    encoder()
    kws()
