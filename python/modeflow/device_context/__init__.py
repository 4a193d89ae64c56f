"""MindSpore 2.5+'s ``mindspore.device_context``: only the CPU part applies here."""
from . import cpu  # noqa: F401
