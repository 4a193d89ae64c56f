"""MindSpore's ``mindspore.dataset.transforms``: TypeCast and Compose, callables on numpy
arrays."""

import numpy as np

__all__ = ["Compose", "TypeCast"]


def _numpy_dtype(data_type):
    """A numpy dtype from a modeflow dtype (ms.int32), a numpy dtype or type, or a name."""
    if type(data_type).__module__.startswith("modeflow"):
        # modeflow dtypes print as "dtype.int32".
        return np.dtype(str(data_type).rsplit(".", 1)[-1])
    try:
        return np.dtype(data_type)
    except TypeError:
        pass
    raise TypeError(f"TypeCast: data_type must be a modeflow or numpy dtype, got {data_type!r}")


class TypeCast:
    """Casts an array to data_type (ms.int32, ms.float32, np.uint8, "float32", ...)."""

    def __init__(self, data_type):
        self.data_type = _numpy_dtype(data_type)

    def __call__(self, data):
        return np.asarray(data).astype(self.data_type)


class Compose:
    """Applies transforms in order, as one operation."""

    def __init__(self, transforms):
        if not isinstance(transforms, (list, tuple)) or not transforms:
            raise ValueError("Compose: transforms must be a non-empty list of callables")
        for t in transforms:
            if not callable(t):
                raise TypeError(f"Compose: {t!r} is not callable")
        self.transforms = list(transforms)

    def __call__(self, *data):
        for t in self.transforms:
            data = t(*data)
            if not isinstance(data, tuple):
                data = (data,)
        return data[0] if len(data) == 1 else data
