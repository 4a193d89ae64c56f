"""ONNX models: ``model = ms.onnx.load("model.onnx"); y = model(x)`` runs op by op in PYNATIVE mode
and compiled in GRAPH mode (opsets 1 to 18 of the default domain)."""

from ._modeflow.onnx import OnnxModel, load  # noqa: F401
