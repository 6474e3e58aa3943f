#!/usr/bin/env python3
"""Expected outputs of the committed MobileNets, computed by onnxruntime (CPU execution
provider, default options), for the differential tests in importers/onnx/tests/ and cli/tests/onnx_models.rs.

Writes, under importers/onnx/testdata/expected/:
  mobilenet_input.npy      the test input, float32 [1,3,224,224], uniform in [-1, 1), seed 14
  mobilenet_f32.npy        mobilenet_v1_f32.onnx's output (probabilities, [1,1001])
  mobilenet_u8u8.npy       mobilenet_v1_u8u8.onnx's output (dequantized probabilities)
  mobilenet_u8u8_logits.npy  its QLinearSoftmax input 'logits_2d_quantized' (uint8)

Run with a Python that has numpy, onnx and onnxruntime:
  python3 importers/onnx/tools/make_expected.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "testdata")
OUT = os.path.join(DATA, "expected")


def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def main():
    os.makedirs(OUT, exist_ok=True)
    x = np.random.default_rng(14).uniform(-1.0, 1.0, (1, 3, 224, 224)).astype(np.float32)
    np.save(os.path.join(OUT, "mobilenet_input.npy"), x)

    f32 = onnx.load(os.path.join(DATA, "mobilenet_v1_f32.onnx"))
    np.save(os.path.join(OUT, "mobilenet_f32.npy"), session(f32).run(None, {"input": x})[0])

    u8 = onnx.load(os.path.join(DATA, "mobilenet_v1_u8u8.onnx"))
    u8.graph.output.append(
        onnx.helper.make_tensor_value_info("logits_2d_quantized", onnx.TensorProto.UINT8, [1, 1001])
    )
    probs, logits = session(u8).run(None, {"input": x})
    np.save(os.path.join(OUT, "mobilenet_u8u8.npy"), probs)
    np.save(os.path.join(OUT, "mobilenet_u8u8_logits.npy"), logits)
    print("wrote", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
