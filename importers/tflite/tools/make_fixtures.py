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


CASES = [
    ("conv", conv_net, (1, 12, 12, 3), ("f32", "int8", "f16")),
    ("shapes", shapes_net, (1, 6, 5, 3), ("f32", "int8")),
    ("misc", misc_net, (1, 4, 4, 3), ("f32", "int8")),
    ("layers", layers_net, (1, 4, 4, 3), ("f32", "int8", "uint8")),
    ("moves", moves_net, (1, 4, 4, 3), ("f32", "int8")),
    ("math", math_net, (1, 4, 4, 3), ("f32",)),
]


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
    for name, build, shape, kinds in CASES:
        if only and name not in only:
            continue
        model = build(shape)
        for kind in kinds:
            blob = convert(model, kind, shape)
            stem = f"{name}_{kind}"
            (OUT / f"{stem}.tflite").write_bytes(blob)
            it = Interpreter(
                model_content=blob,
                experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            )
            it.allocate_tensors()
            rng = np.random.default_rng(7)
            for k, d in enumerate(it.get_input_details()):
                x = rng.uniform(-1, 1, d["shape"]).astype(np.float32)
                if d["dtype"] in (np.int8, np.uint8):
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
