"""Cells: ``Cell`` to subclass in Python, and the engine's layers."""

from ._modeflow.nn import (  # noqa: F401
    GELU,
    Cell,
    Conv2d,
    Dense,
    Flatten,
    LayerNorm,
    MaxPool2d,
    MultiHeadAttention,
    ReLU,
    Softmax,
    TransformerEncoderLayer,
)


class SequentialCell(Cell):
    """Runs its cells in order; they are named "0", "1", ... as in MindSpore (and the C++ API)."""

    def __init__(self, *args):
        super().__init__()
        cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        object.__setattr__(self, "_cells", [])
        for cell in cells:
            self.append(cell)

    def append(self, cell):
        setattr(self, str(len(self._cells)), cell)
        self._cells.append(cell)

    def __len__(self):
        return len(self._cells)

    def __getitem__(self, index):
        return self._cells[index]

    def construct(self, x):
        for cell in self._cells:
            x = cell(x)
        return x
