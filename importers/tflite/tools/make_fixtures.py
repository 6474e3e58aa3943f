"""Makes the small .tflite fixtures of nnhal-tflite's tests with TensorFlow's converter.

Run once, from anywhere, with a Python that has TensorFlow and ai-edge-litert:

    python importers/tflite/tools/make_fixtures.py [CASE ...]

For every case it writes, under importers/tflite/testdata/:
  NAME.tflite        the converted model (float32, int8 or float16-weight)
  NAME.input_K.npy   a seeded input in the model's own type
  NAME.output_K.npy  LiteRT's output with its builtin kernels (XNNPACK off), the reference
                     the tests compare the driver's run against
The weights are seeded, so the files are reproducible up to converter changes.
"""

import pathlib
import sys

import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter, OpResolverType

OUT = pathlib.Path(__file__).resolve().parent.parent / "testdata"


def conv_net(shape):
    """Convolutions, pools, a dense head: CONV_2D, DEPTHWISE_CONV_2D, pools, FC, SOFTMAX."""
    tf.keras.utils.set_random_seed(11)
    x = tf.keras.Input(shape=shape[1:], batch_size=1)
    y = tf.keras.layers.Conv2D(6, 3, padding="same", activation="relu")(x)
    y = tf.keras.layers.DepthwiseConv2D(3, strides=2, padding="valid", activation="relu6")(y)
    y = tf.keras.layers.Conv2D(8, 1, padding="valid", dilation_rate=1)(y)
    y = tf.keras.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2, dilation_rate=2)(y)
    y = tf.keras.layers.AveragePooling2D(2, strides=1, padding="same")(y)
    y = tf.keras.layers.MaxPooling2D(2, strides=2, padding="valid")(y)
    y = tf.keras.layers.Flatten()(y)
    y = tf.keras.layers.Dense(10, activation="relu")(y)
    y = tf.keras.layers.Dense(5)(y)
    y = tf.keras.layers.Softmax()(y)
    return tf.keras.Model(x, y)


def shapes_net(shape):
    """Elementwise, activation and shape operations around one image."""
    tf.keras.utils.set_random_seed(12)
    x = tf.keras.Input(shape=shape[1:], batch_size=1)
    c = tf.constant(np.random.default_rng(3).uniform(0.5, 1.5, shape[1:]).astype(np.float32))
    a = tf.keras.layers.Lambda(lambda t: t * c + 0.25)(x)
    b = tf.keras.layers.Lambda(lambda t: tf.nn.relu(t - c))(x)
    d = tf.keras.layers.Lambda(lambda t: t / (tf.abs(t) + 2.0) if False else t / c)(x)
    s = tf.keras.layers.Lambda(lambda t: tf.sigmoid(t))(a)
    h = tf.keras.layers.Lambda(lambda t: tf.tanh(t))(b)
    hs = tf.keras.layers.Lambda(lambda t: t * tf.nn.relu6(t + 3.0) / 6.0)(d)
    y = tf.keras.layers.Concatenate(axis=-1)([s, h, hs])
    y = tf.keras.layers.Lambda(lambda t: tf.nn.relu6(t * 4.0))(y)
    y = tf.keras.layers.Lambda(lambda t: tf.pad(t, [[0, 0], [1, 2], [0, 1], [0, 0]]))(y)
    y = tf.keras.layers.Lambda(lambda t: tf.transpose(t, [0, 2, 1, 3]))(y)
    y = tf.keras.layers.Lambda(lambda t: t[:, 1:7:2, :, 1:])(y)
    m = tf.keras.layers.Lambda(lambda t: tf.reduce_mean(t, axis=[1, 2], keepdims=True))(y)
    m = tf.keras.layers.Lambda(lambda t: tf.squeeze(t, axis=[1, 2]))(m)
    r = tf.keras.layers.Reshape((-1, 4))(y)
    r = tf.keras.layers.Dense(3)(r)
    return tf.keras.Model(x, [m, r])


def misc_net(shape):
    """Two inputs: RELU and RELU6 on graph inputs, DIV of two tensors, SOFTMAX on an image."""
    x = tf.keras.Input(shape=shape[1:], batch_size=1)
    y = tf.keras.Input(shape=shape[1:], batch_size=1)
    a = tf.keras.layers.Lambda(lambda t: tf.nn.relu(t))(x)
    b = tf.keras.layers.Lambda(lambda t: tf.nn.relu6(t))(y)
    d = tf.keras.layers.Lambda(lambda t: t[0] / (t[1] + 1.0))([a, b])
    s = tf.keras.layers.Lambda(lambda t: tf.nn.softmax(t * 2.0, axis=-1))(d)
    m = tf.keras.layers.Lambda(lambda t: tf.reduce_mean(t, axis=[2], keepdims=False))(d)
    return tf.keras.Model([x, y], [s, m])


def layers_net(shape):
    """Layers the delegate maps one to one or nearly: LEAKY_RELU (as PRELU), PRELU,
    TRANSPOSE_CONV, RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR, MAXIMUM / MINIMUM."""
    tf.keras.utils.set_random_seed(13)
    x = tf.keras.Input(shape=shape[1:], batch_size=1)
    a = tf.keras.layers.LeakyReLU(0.2)(x)
    p = tf.keras.layers.PReLU(
        alpha_initializer=tf.keras.initializers.RandomUniform(0.1, 0.4), shared_axes=[1, 2]
    )(x)
    y = tf.keras.layers.Maximum()([a, p])
    t = tf.keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same")(y)
    u = tf.keras.layers.Lambda(
        lambda v: tf.image.resize(v, [8, 8], method="bilinear")
    )(tf.keras.layers.Minimum()([x, p]))
    n = tf.keras.layers.Lambda(lambda v: tf.image.resize(v, [8, 8], method="nearest"))(y)
    z = tf.keras.layers.Concatenate()([t, u, n])
    return tf.keras.Model(x, z)


def moves_net(shape):
    """Data movement: PACK, UNPACK, SPLIT, SPLIT_V, GATHER, SLICE, TILE, EXPAND_DIMS,
    SPACE_TO_DEPTH, DEPTH_TO_SPACE, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, REDUCE_MAX / MIN."""
    x = tf.keras.Input(shape=shape[1:], batch_size=1)

    def body(t):
        a, b, c = tf.split(t, 3, axis=3)
        d, e = tf.split(t, [1, 2], axis=3)
        s = tf.stack([a[..., 0], b[..., 0], c[..., 0]], axis=1)
        u = tf.unstack(s, axis=1)
        p = tf.stack([a[..., 0], c[..., 0]], axis=3)
        g = tf.gather(t, [2, 0, 1], axis=3)
        sl = tf.slice(g, [0, 1, 0, 0], [1, 2, 4, 3])
        ti = tf.tile(sl, [1, 2, 1, 1])
        sd = tf.nn.space_to_depth(t, 2)
        ds = tf.nn.depth_to_space(sd, 2)
        sb = tf.space_to_batch_nd(t, [2, 2], [[0, 0], [0, 0]])
        bs = tf.batch_to_space(sb * 2.0, [2, 2], [[0, 0], [0, 0]])
        ex = tf.expand_dims(tf.reduce_max(d, axis=[1, 2]), 1)
        mn = tf.reduce_min(e, axis=[2], keepdims=True)
        sm = tf.reduce_max(u[0] + u[2] * u[1], axis=[1, 2], keepdims=True)
        return tf.concat([ti, ds + bs, p], axis=3), ex + sm, mn
    return tf.keras.Model(x, tf.keras.layers.Lambda(body)(x))


def math_net(shape):
    """Float32 only: EXP, LOG, ABS, NEG, SQRT, RSQRT, SIN, POW, SQUARED_DIFFERENCE,
    LOG_SOFTMAX, ELU, FLOOR, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, REDUCE_PROD, SUM,
    comparisons, LOGICAL_*, SELECT_V2, ARG_MAX / ARG_MIN, CAST, PADV2."""

    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def body(t):
        a = tf.abs(t) + 0.5
        m = tf.exp(-a) + tf.math.log(a) - tf.sqrt(a) + tf.math.rsqrt(a) + tf.sin(-t)
        m = m + tf.pow(a, tf.constant(1.5)) + tf.math.squared_difference(t, 0.3)
        m = tf.nn.log_softmax(m, axis=-1) + tf.nn.elu(t) + tf.floor(t * 3.0)
        m = tf.nn.l2_normalize(m, axis=-1) + tf.nn.local_response_normalization(
            t, depth_radius=1, bias=1.5, alpha=0.5, beta=0.75
        )
        c = tf.logical_or(tf.logical_and(t > 0.1, t <= 0.7), tf.logical_not(t >= -0.5))
        c = tf.logical_or(c, tf.equal(tf.floor(t * 4.0), 1.0))
        c = tf.logical_and(c, tf.not_equal(tf.floor(t * 4.0), -2.0))
        s = tf.where(c, m, -m) + tf.where(t < 0.0, 1.0, 0.0)
        r = tf.reduce_prod(a, axis=[3]) + tf.reduce_sum(t, axis=[3])
        am = tf.cast(tf.argmax(s, axis=3, output_type=tf.int32), tf.float32)
        an = tf.cast(tf.argmin(s, axis=3, output_type=tf.int32), tf.float32)
        pv = tf.pad(s, [[0, 0], [1, 0], [0, 1], [0, 0]], constant_values=0.5)
        return pv, r + am + an

    # Booleans inside: a tf.function, as Keras cannot infer a Lambda's boolean shapes.
    return body


def edges_net(shape):
    """Graph edges of type bool and int32: an int32 index input (GATHER), a bool mask input
    (SELECT_V2), a comparison output (GREATER, bool), ARG_MAX and TOPK_V2 outputs (int32)."""

    @tf.function(
        input_signature=[
            tf.TensorSpec(shape, tf.float32),
            tf.TensorSpec([2], tf.int32),
            tf.TensorSpec(shape, tf.bool),
        ]
    )
    def body(x, idx, mask):
        g = tf.gather(x, idx, axis=3)
        s = tf.where(mask, x, x * -2.0)
        values, indices = tf.math.top_k(x, k=2)
        am = tf.argmax(x, axis=3, output_type=tf.int32)
        return x > 0.2, am, values + g, indices, s

    return body


CASES = [
    ("conv", conv_net, (1, 12, 12, 3), ("f32", "int8", "f16")),
    ("shapes", shapes_net, (1, 6, 5, 3), ("f32", "int8")),
    ("misc", misc_net, (1, 4, 4, 3), ("f32", "int8")),
    ("layers", layers_net, (1, 4, 4, 3), ("f32", "int8", "uint8")),
    ("moves", moves_net, (1, 4, 4, 3), ("f32", "int8")),
    ("math", math_net, (1, 4, 4, 3), ("f32",)),
    ("edges", edges_net, (1, 4, 4, 3), ("f32",)),
]


# Builtins no TensorFlow graph converts to (HASHTABLE_LOOKUP, LSH_PROJECTION, RNN, SVDF, the
# fused sequence operators without tf_keras' `experimental_implements`): their flatbuffers are
# written here with TensorFlow Lite's own generated schema classes, and LiteRT's builtin
# kernels on them are the expectation as for the converted fixtures.
from tensorflow.lite.python import schema_py_generated as schema  # noqa: E402
import flatbuffers  # noqa: E402


class Graph:
    """A one-subgraph model under construction."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors, self.buffers, self.ops, self.codes = [], [schema.BufferT()], [], []
        self.inputs, self.outputs = [], []

    def tensor(self, shape, dtype=schema.TensorType.FLOAT32, data=None, variable=False):
        t = schema.TensorT()
        t.shape = list(shape)
        t.type = dtype
        t.name = f"t{len(self.tensors)}".encode()
        t.buffer = 0
        t.isVariable = variable
        if data is not None:
            b = schema.BufferT()
            b.data = np.ascontiguousarray(data).tobytes()
            self.buffers.append(b)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def weights(self, *shape, scale=0.5):
        return self.tensor(shape, data=self.rng.uniform(-scale, scale, shape).astype(np.float32))

    def state(self, *shape):
        return self.tensor(shape, variable=True)

    def input(self, shape, dtype=schema.TensorType.FLOAT32):
        t = self.tensor(shape, dtype)
        self.inputs.append(t)
        return t

    def op(self, code, inputs, outputs, options_type=0, options=None):
        if code not in self.codes:
            self.codes.append(code)
        o = schema.OperatorT()
        o.opcodeIndex = self.codes.index(code)
        o.inputs, o.outputs = list(inputs), list(outputs)
        o.builtinOptionsType, o.builtinOptions = options_type, options
        self.ops.append(o)

    def output(self, shape, dtype=schema.TensorType.FLOAT32):
        t = self.tensor(shape, dtype)
        self.outputs.append(t)
        return t

    def finish(self):
        g = schema.SubGraphT()
        g.tensors, g.operators, g.inputs, g.outputs = self.tensors, self.ops, self.inputs, self.outputs
        m = schema.ModelT()
        m.version = 3
        m.subgraphs, m.buffers = [g], self.buffers
        m.operatorCodes = []
        for c in self.codes:
            oc = schema.OperatorCodeT()
            oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = c, min(c, 127), 1
            m.operatorCodes.append(oc)
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def options(cls, **fields):
    o = cls()
    for k, v in fields.items():
        setattr(o, k, v)
    return o


B, O, A = schema.BuiltinOperator, schema.BuiltinOptions, schema.ActivationFunctionType


def lookup_model():
    """HASHTABLE_LOOKUP (int32 lookups from a graph input, sorted keys, float32 rows),
    LSH_PROJECTION SPARSE (no weights) and DENSE (weights)."""
    g = Graph(21)
    lookups = g.input([4], schema.TensorType.INT32)
    x = g.input([3, 2])
    keys = g.tensor([5], schema.TensorType.INT32, np.array([1, 3, 5, 7, 9], np.int32))
    values = g.weights(5, 3, scale=2.0)
    rows, hits = g.output([4, 3]), g.output([4], schema.TensorType.UINT8)
    g.op(B.HASHTABLE_LOOKUP, [lookups, keys, values], [rows, hits])
    hash_s = g.weights(4, 3, scale=1.0)
    sparse = g.output([4], schema.TensorType.INT32)
    g.op(B.LSH_PROJECTION, [hash_s, x], [sparse], O.LSHProjectionOptions,
         options(schema.LSHProjectionOptionsT, type=schema.LSHProjectionType.SPARSE))
    hash_d = g.weights(2, 4, scale=1.0)
    weight = g.tensor([3], data=np.array([0.5, 1.0, 2.0], np.float32))
    dense = g.output([8], schema.TensorType.INT32)
    g.op(B.LSH_PROJECTION, [hash_d, x, weight], [dense], O.LSHProjectionOptions,
         options(schema.LSHProjectionOptionsT, type=schema.LSHProjectionType.DENSE))
    return g.finish()


def lstm_weights(g, n_in, units, cifg=False):
    """The 18 weight slots of an LSTM (no peepholes, no projection; CIFG drops the input
    gate's)."""
    w = [g.weights(units, n_in) if not (cifg and k == 0) else -1 for k in range(4)]
    r = [g.weights(units, units) if not (cifg and k == 0) else -1 for k in range(4)]
    peep = [-1, -1, -1]
    bias = [g.weights(units, scale=0.2) if not (cifg and k == 0) else -1 for k in range(4)]
    return w + r + peep + bias + [-1, -1]


def recurrent_model():
    """RNN, SVDF and LSTM (24 inputs, no layer norm) on one step; UNIDIRECTIONAL_SEQUENCE_RNN,
    UNIDIRECTIONAL_SEQUENCE_LSTM (CIFG) and BIDIRECTIONAL_SEQUENCE_LSTM (merged outputs) on a
    batch-major sequence. Every state is a variable tensor (zeros on the first invocation)."""
    g = Graph(22)
    batch, n_in, units, steps = 2, 3, 4, 5
    x = g.input([batch, n_in])
    xs = g.input([batch, steps, n_in])
    y = g.output([batch, units])
    g.op(B.RNN, [x, g.weights(units, n_in), g.weights(units, units), g.weights(units, scale=0.2),
                 g.state(batch, units)], [y], O.RNNOptions,
         options(schema.RNNOptionsT, fusedActivationFunction=A.RELU))
    rank, svdf_units, memory = 2, 2, 3
    filters = rank * svdf_units
    y = g.output([batch, svdf_units])
    g.op(B.SVDF, [x, g.weights(filters, n_in), g.weights(filters, memory),
                  g.weights(svdf_units, scale=0.2), g.state(batch, memory * filters)], [y],
         O.SVDFOptions, options(schema.SVDFOptionsT, rank=rank, fusedActivationFunction=A.NONE))
    y = g.output([batch, units])
    g.op(B.LSTM, [x] + lstm_weights(g, n_in, units) + [g.state(batch, units), g.state(batch, units)]
         + [-1] * 4, [y], O.LSTMOptions,
         options(schema.LSTMOptionsT, fusedActivationFunction=A.TANH, cellClip=0.0, projClip=0.0,
                 kernelType=schema.LSTMKernelType.FULL))
    y = g.output([batch, steps, units])
    g.op(B.UNIDIRECTIONAL_SEQUENCE_RNN, [xs, g.weights(units, n_in), g.weights(units, units),
                                         g.weights(units, scale=0.2), g.state(batch, units)], [y],
         O.SequenceRNNOptions,
         options(schema.SequenceRNNOptionsT, timeMajor=False, fusedActivationFunction=A.RELU))
    y = g.output([batch, steps, units])
    g.op(B.UNIDIRECTIONAL_SEQUENCE_LSTM,
         [xs] + lstm_weights(g, n_in, units, cifg=True)
         + [g.state(batch, units), g.state(batch, units)] + [-1] * 4, [y],
         O.UnidirectionalSequenceLSTMOptions,
         options(schema.UnidirectionalSequenceLSTMOptionsT, fusedActivationFunction=A.TANH,
                 cellClip=0.0, projClip=0.0, timeMajor=False))
    y = g.output([batch, steps, 2 * units])
    fw, bw = lstm_weights(g, n_in, units), lstm_weights(g, n_in, units)
    states = [g.state(batch, units) for _ in range(4)]
    g.op(B.BIDIRECTIONAL_SEQUENCE_LSTM, [xs] + fw[:17] + bw[:17] + states + [-1] * 9, [y],
         O.BidirectionalSequenceLSTMOptions,
         options(schema.BidirectionalSequenceLSTMOptionsT, fusedActivationFunction=A.TANH,
                 cellClip=0.0, projClip=0.0, mergeOutputs=True, timeMajor=False))
    return g.finish()


def refused_model():
    """Operators the delegate keeps on the CPU, for the import report: an RNN with a TANH
    activation (no NNAPI fused code), BIDIRECTIONAL_SEQUENCE_RNN (no mapping), a SPARSE
    LSH_PROJECTION with weights, and a TOPK_V2 whose k is a graph input."""
    g = Graph(23)
    batch, n_in, units, steps = 1, 3, 2, 2
    x = g.input([batch, n_in])
    xs = g.input([batch, steps, n_in])
    k = g.input([1], schema.TensorType.INT32)
    y = g.output([batch, units])
    g.op(B.RNN, [x, g.weights(units, n_in), g.weights(units, units), g.weights(units),
                 g.state(batch, units)], [y], O.RNNOptions,
         options(schema.RNNOptionsT, fusedActivationFunction=A.TANH))
    y = g.output([batch, steps, 2 * units])
    g.op(B.BIDIRECTIONAL_SEQUENCE_RNN,
         [xs, g.weights(units, n_in), g.weights(units, units), g.weights(units),
          g.state(batch, units), g.weights(units, n_in), g.weights(units, units),
          g.weights(units), g.state(batch, units), -1, -1, -1], [y],
         O.BidirectionalSequenceRNNOptions,
         options(schema.BidirectionalSequenceRNNOptionsT, fusedActivationFunction=A.RELU,
                 mergeOutputs=True))
    y = g.output([2], schema.TensorType.INT32)
    g.op(B.LSH_PROJECTION, [g.weights(2, 3), x, g.tensor([1], data=np.ones(1, np.float32))],
         [y], O.LSHProjectionOptions,
         options(schema.LSHProjectionOptionsT, type=schema.LSHProjectionType.SPARSE))
    v, i = g.output([batch, 1]), g.output([batch, 1], schema.TensorType.INT32)
    g.op(B.TOPK_V2, [x, k], [v, i])
    return g.finish()


HANDBUILT = [("lookup", lookup_model), ("recurrent", recurrent_model)]
# Written without LiteRT outputs: the import report's test reads only the model.
REFUSED = [("refused", refused_model)]

# The exclusive bound of the seeded int32 inputs of a fixture (3 otherwise).
INT_INPUT_BOUND = {"lookup_f32": 10}


def convert(model, kind, shape):
    if isinstance(model, tf.keras.Model):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
    else:
        conv = tf.lite.TFLiteConverter.from_concrete_functions([model.get_concrete_function()])
    if kind in ("int8", "uint8"):
        rng = np.random.default_rng(5)

        def data():
            for _ in range(32):
                yield [
                    rng.uniform(-1, 1, shape).astype(np.float32)
                    for _ in model.inputs
                ]

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = data
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        # The uint8 form: uint8 graph edges (QUANTIZE from and to the int8 interior).
        conv.inference_input_type = tf.uint8 if kind == "uint8" else tf.int8
        conv.inference_output_type = tf.uint8 if kind == "uint8" else tf.int8
        # NNAPI's FULLY_CONNECTED has per-tensor weights only (the delegate refuses
        # per-channel ones), as MobileNet v2's int8 file has.
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    elif kind == "f16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    return conv.convert()


def main():
    OUT.mkdir(exist_ok=True)
    only = set(sys.argv[1:])
    jobs = []
    for name, build, shape, kinds in CASES:
        if only and name not in only:
            continue
        model = build(shape)
        for kind in kinds:
            jobs.append((f"{name}_{kind}", lambda m=model, k=kind, s=shape: convert(m, k, s)))
    for name, build in HANDBUILT:
        if not only or name in only:
            jobs.append((f"{name}_f32", build))
    for name, build in REFUSED:
        if not only or name in only:
            (OUT / f"{name}_f32.tflite").write_bytes(build())
    for stem, make in jobs:
        blob = make()
        (OUT / f"{stem}.tflite").write_bytes(blob)
        it = Interpreter(
            model_content=blob,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
        it.allocate_tensors()
        rng = np.random.default_rng(7)
        for k, d in enumerate(it.get_input_details()):
            x = rng.uniform(-1, 1, d["shape"]).astype(np.float32)
            if d["dtype"] == np.int32:
                # Indices into a small axis, or lookup keys that hit and miss.
                x = rng.integers(0, INT_INPUT_BOUND.get(stem, 3), d["shape"]).astype(np.int32)
            elif d["dtype"] == np.bool_:
                x = rng.uniform(0, 1, d["shape"]) < 0.5
            elif d["dtype"] in (np.int8, np.uint8):
                s, z = d["quantization"]
                info = np.iinfo(d["dtype"])
                x = np.clip(np.round(x / s) + z, info.min, info.max).astype(d["dtype"])
            np.save(OUT / f"{stem}.input_{k}.npy", x)
            it.set_tensor(d["index"], x)
        it.invoke()
        # Outputs in the model's output order (the subgraph's outputs list).
        for k, d in enumerate(it.get_output_details()):
            np.save(OUT / f"{stem}.output_{k}.npy", it.get_tensor(d["index"]))
        ops = [o["op_name"] for o in it._get_ops_details()]
        print(stem, len(blob), "bytes:", ", ".join(ops))


if __name__ == "__main__":
    main()
