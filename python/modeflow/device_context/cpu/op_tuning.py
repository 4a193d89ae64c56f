"""``mindspore.device_context.cpu.op_tuning``."""
from ..._modeflow import _op_tuning_threads_num as threads_num  # noqa: F401
