"""modeflow for Python: ``import modeflow as ms``.

MindSpore's context API (set_context, get_context, the auto-parallel and ps contexts), Tensor,
ops generated from the engine's op registry, nn.Cell subclassable in Python, jit, the sample
networks and ONNX models, all over the one C++ engine: PYNATIVE op by op, GRAPH mode and jit
traced and compiled at jit_level O0/O1/O2 with fusion, save_graphs dumps and the compile cache.
"""

from ._modeflow import (  # noqa: F401
    GRAPH_MODE,
    PYNATIVE_MODE,
    Parameter,
    Tensor,
    TracedValueError,
    bool_,
    double,
    dtype,
    float32,
    float64,
    float_,
    get_auto_parallel_context,
    get_context,
    get_ps_context,
    int32,
    int64,
    reset_auto_parallel_context,
    reset_context,
    reset_ps_context,
    set_auto_parallel_context,
    set_context,
    set_deterministic,
    set_device,
    set_ps_context,
    set_recursion_limit,
)
from . import _dynamic, _grad, _indexing, _modeflow, _primitives, _tensor_methods
from . import common, context, device_context, models, nn, onnx, ops, runtime  # noqa: F401
from . import dataset  # noqa: F401  (MindSpore's mindspore.dataset: docs/datasets.md)
from . import train  # noqa: F401  (MindSpore's mindspore.train: docs/training.md)
from . import communication  # noqa: F401  (mindspore.communication: docs/distributed.md)
from .context import ParallelMode  # noqa: F401
from .train import Model  # noqa: F401
from ._grad import ParameterTuple, grad, value_and_grad  # noqa: F401
from .jit import JitConfig, jit  # noqa: F401
from .profiler import Profiler  # noqa: F401
# MindSpore's checkpoints (.ckpt): docs/checkpoints.md.
from ._modeflow import load_checkpoint, load_param_into_net, save_checkpoint  # noqa: F401

# Indexing is written in Python over the registry's ops (so GRAPH mode traces it): _indexing.py.
Tensor.__getitem__ = _indexing.getitem
Tensor.__setitem__ = _indexing.setitem
Tensor.__iter__ = _indexing.iterate
# MindSpore's Tensor methods (x.sum(), x.mean(axis=1), x.argmax(axis=1), ...): _tensor_methods.py.
_tensor_methods.install()
# MindSpore's operator classes (ops.ReduceSum, ops.MatMul, ...) and functional names: _primitives.py.
_primitives.install(ops)
# Tensor(shape=[None, 784], dtype=...) declares a dynamic input for Cell.set_inputs: _dynamic.py.
Tensor.__new__ = staticmethod(_dynamic.tensor_new)
nn.Cell.set_inputs = _dynamic.set_inputs
nn.Cell.get_inputs = _dynamic.get_inputs
# Gradients (MindSpore's ms.grad, ms.value_and_grad, ops.GradOperation): _grad.py.
nn.Cell.trainable_params = _grad.trainable_params
ops.GradOperation = _grad.GradOperation

# jit_syntax_level's constants (MindSpore's ms.STRICT / COMPATIBLE / LAX): set_context takes them
# as it takes the names; get_context returns the name.
STRICT = 0
COMPATIBLE = 1
LAX = 2

# MindSpore's MS_* environment variables, read once here as MindSpore reads them at start-up; what
# wins over a later set_context is in docs/context-keys.md.
_modeflow._configure_from_environment()

__version__ = "0.1.0"
