"""ONNX models: ``model = ms.onnx.load("model.onnx"); y = model(x)`` runs op by op in PYNATIVE mode
and compiled in GRAPH mode (opsets 1 to 18 of the default domain). ``ms.onnx.load_cell(path)``
gives a model as an ``nn.Cell`` whose parameters are its weights, to differentiate or
train it."""

from ._modeflow.onnx import ModelCell, OnnxModel, load, load_cell  # noqa: F401
