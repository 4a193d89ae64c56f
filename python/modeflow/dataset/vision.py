"""MindSpore's ``mindspore.dataset.vision``: image transforms, each a callable on a numpy array
(what ``Dataset.map`` gives them), returning a numpy array."""

import numbers

import numpy as np

__all__ = ["HWC2CHW", "Normalize", "Rescale"]


def _check_number(name, value, op):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a number, got {type(value).__name__}")


class Rescale:
    """output = image * rescale + shift, as float32 (Rescale(1.0 / 255.0, 0.0) maps uint8 pixels
    to [0, 1])."""

    def __init__(self, rescale, shift):
        _check_number("rescale", rescale, "Rescale")
        _check_number("shift", shift, "Rescale")
        self.rescale = float(rescale)
        self.shift = float(shift)

    def __call__(self, img):
        img = np.asarray(img)
        return (img.astype(np.float32) * np.float32(self.rescale) + np.float32(self.shift)).astype(
            np.float32
        )


class HWC2CHW:
    """(H, W, C) to (C, H, W); an (H, W) image becomes (1, H, W)."""

    def __call__(self, img):
        img = np.asarray(img)
        if img.ndim == 2:
            return img[np.newaxis, :, :].copy()
        if img.ndim != 3:
            raise RuntimeError(
                f"HWC2CHW: the image has shape {img.shape}; it must be <H, W> or <H, W, C>"
            )
        return np.ascontiguousarray(img.transpose(2, 0, 1))


class Normalize:
    """output[c] = (image[c] - mean[c]) / std[c], as float32. mean in [0, 255], std in (0, 255],
    one value per channel; is_hwc (default True, as MindSpore) says whether channels are last."""

    def __init__(self, mean, std, is_hwc=True):
        for name, values in (("mean", mean), ("std", std)):
            if not isinstance(values, (list, tuple)):
                raise TypeError(f"Normalize: {name} must be a list or tuple, got "
                                f"{type(values).__name__}")
            for value in values:
                _check_number(name, value, "Normalize")
        if not isinstance(is_hwc, bool):
            raise TypeError(f"Normalize: is_hwc must be a bool, got {type(is_hwc).__name__}")
        if len(mean) != len(std) or not mean:
            raise ValueError(f"Normalize: mean has {len(mean)} values and std {len(std)}; give one "
                             "of each per channel")
        if any(not 0.0 <= m <= 255.0 for m in mean):
            raise ValueError(f"Normalize: mean {list(mean)} must be in [0.0, 255.0]")
        if any(not 0.0 < s <= 255.0 for s in std):
            raise ValueError(f"Normalize: std {list(std)} must be in (0.0, 255.0]")
        self.mean = [float(m) for m in mean]
        self.std = [float(s) for s in std]
        self.is_hwc = is_hwc

    def __call__(self, img):
        img = np.asarray(img).astype(np.float32)
        if img.ndim == 2:
            img = img[:, :, np.newaxis] if self.is_hwc else img[np.newaxis]
        if img.ndim != 3:
            raise RuntimeError(f"Normalize: the image has shape {img.shape}; it must be <H, W> or "
                               "<H, W, C> (<C, H, W> with is_hwc=False)")
        channels = img.shape[2] if self.is_hwc else img.shape[0]
        if channels != len(self.mean):
            raise RuntimeError(f"Normalize: the image has {channels} channels but mean and std "
                               f"have {len(self.mean)} values")
        mean = np.asarray(self.mean, np.float32)
        std = np.asarray(self.std, np.float32)
        if not self.is_hwc:
            mean, std = mean[:, None, None], std[:, None, None]
        return ((img - mean) / std).astype(np.float32)
