"""``modeflow.common`` (MindSpore's ``mindspore.common``): the initializer module."""

from . import initializer  # noqa: F401
