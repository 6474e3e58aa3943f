#!/usr/bin/env bash
# Regenerates importers/coreml/testdata/cases: creates a Python venv with coremltools (to build
# the .mlmodel files) and onnx + onnxruntime (the independent runtime for the expected outputs),
# then runs make_cases.py. The tests themselves need no Python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The venv lives outside the repository (its files would otherwise be scanned by the docs tests).
venv="${VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/nnhal-coreml-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet coremltools onnx onnxruntime numpy
fi
"$venv/bin/python" "$here/make_cases.py"
