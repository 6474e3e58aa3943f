#!/usr/bin/env python3
"""Copies the backend test models of the `onnx` Python package (onnx 1.23.2, Apache-2.0,
https://github.com/onnx/onnx, onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple})
into importers/onnx/testdata/backend/, which cli/tests/onnx_backend.rs runs.

Every model.onnx is copied with its test_data_set_*/ inputs and outputs.

    python3 importers/onnx/tools/vendor_backend.py [site-packages/onnx]
"""
import os
import shutil
import sys

SUITES = ["pytorch-converted", "pytorch-operator", "simple"]


def main():
    if len(sys.argv) > 1:
        root = sys.argv[1]
    else:
        import onnx

        assert onnx.__version__ == "1.23.2", onnx.__version__
        root = os.path.dirname(onnx.__file__)
    src = os.path.join(root, "backend", "test", "data")
    dst = os.path.join(os.path.dirname(__file__), "..", "testdata", "backend")
    readme = os.path.join(dst, "README.md")
    kept = open(readme).read() if os.path.exists(readme) else None
    shutil.rmtree(dst, ignore_errors=True)
    count = 0
    for suite in SUITES:
        for name in sorted(os.listdir(os.path.join(src, suite))):
            m = os.path.join(src, suite, name)
            out = os.path.join(dst, suite, name)
            os.makedirs(out)
            shutil.copy(os.path.join(m, "model.onnx"), out)
            for d in sorted(os.listdir(m)):
                if d.startswith("test_data_set_"):
                    shutil.copytree(os.path.join(m, d), os.path.join(out, d))
            count += 1
    if kept is not None:
        with open(readme, "w") as f:
            f.write(kept)
    print(f"{count} models")


if __name__ == "__main__":
    main()
