"""modeflow.dataset: MindSpore's ``mindspore.dataset`` for training scripts.

    import modeflow.dataset as ds
    import modeflow.dataset.vision as vision
    import modeflow.dataset.transforms as transforms

    train = ds.FashionMnistDataset("/usr/share/datasets/fashion-mnist", usage="train")
    train = train.map([vision.Rescale(1.0 / 255.0, 0.0), vision.HWC2CHW()], "image")
    train = train.map(transforms.TypeCast(ms.int32), "label").batch(64, drop_remainder=True)
    for images, labels in train.create_tuple_iterator(): ...

The files are read by the engine (engine/data/, C++); the pipeline is Python (engine.py). See
docs/datasets.md.
"""

from . import config, transforms, vision  # noqa: F401
from .engine import (  # noqa: F401
    Dataset,
    FashionMnistDataset,
    GeneratorDataset,
    NumpySlicesDataset,
)
from .. import _modeflow as _engine


def read_idx(file):
    """An IDX file (raw or gzip-compressed) as a numpy array."""
    return _engine._read_idx(file)
