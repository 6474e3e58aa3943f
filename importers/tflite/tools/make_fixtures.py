"""Makes the small .tflite fixtures of nnhal-tflite's tests with TensorFlow's converter.

Run once, from anywhere, with a Python that has TensorFlow and ai-edge-litert:

    python importers/tflite/tools/make_fixtures.py

For every case it writes, under importers/tflite/testdata/:
  NAME.tflite        the converted model (float32, int8 or float16-weight)
  NAME.input_K.npy   a seeded input in the model's own type
  NAME.output_K.npy  LiteRT's output with its builtin kernels (XNNPACK off), the reference
                     the tests compare the driver's run against
The weights are seeded, so the files are reproducible up to converter changes.
"""

import pathlib

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


CASES = [
    ("conv", conv_net, (1, 12, 12, 3)),
    ("shapes", shapes_net, (1, 6, 5, 3)),
    ("misc", misc_net, (1, 4, 4, 3)),
]


def convert(model, kind, shape):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind == "int8":
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
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
        # NNAPI's FULLY_CONNECTED has per-tensor weights only (the delegate refuses
        # per-channel ones), as MobileNet v2's int8 file has.
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    elif kind == "f16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    return conv.convert()


def main():
    OUT.mkdir(exist_ok=True)
    for name, build, shape in CASES:
        model = build(shape)
        for kind in ("f32", "int8", "f16"):
            if kind == "f16" and name != "conv":
                continue
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
                if d["dtype"] == np.int8:
                    s, z = d["quantization"]
                    x = np.clip(np.round(x / s) + z, -128, 127).astype(np.int8)
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
