"""MindSpore 2.5+'s ``mindspore.runtime`` settings: each sets the same context key as set_context
(memory limits and memory_optimize_level, pynative_synchronize, inter_op_parallel_num)."""

from ._modeflow import _runtime_dispatch_threads_num as dispatch_threads_num  # noqa: F401
from ._modeflow import _runtime_launch_blocking as launch_blocking  # noqa: F401
from ._modeflow import _runtime_set_memory as set_memory  # noqa: F401
