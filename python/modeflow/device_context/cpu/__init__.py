"""``mindspore.device_context.cpu``: op_tuning.threads_num sets runtime_num_threads."""
from . import op_tuning  # noqa: F401
