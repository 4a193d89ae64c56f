"""MindSpore's ``mindspore.dataset.config``: the pipeline seed and worker count.

Without ``set_seed`` every new iterator shuffles differently (MindSpore's behaviour). With it, the
same seed gives the same order on every machine: shuffles draw from the engine's own generator
(engine/data/batches.h), not from numpy's or Python's.
"""

import os

_seed = None
_num_parallel_workers = 8


def set_seed(seed):
    """Fixes the seed of every shuffle from now on (MindSpore: 0 <= seed <= 2**32 - 1)."""
    global _seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"set_seed: seed must be an int, got {type(seed).__name__}")
    if not 0 <= seed <= 2**32 - 1:
        raise ValueError(f"set_seed: seed {seed} is not in [0, 4294967295]")
    _seed = seed


def get_seed():
    """The seed set with set_seed, or MindSpore's default 5489 (std::mt19937's) when none was."""
    return 5489 if _seed is None else _seed


def set_num_parallel_workers(num):
    """Accepted for MindSpore scripts; modeflow's pipeline runs in the calling thread."""
    global _num_parallel_workers
    if isinstance(num, bool) or not isinstance(num, int) or num <= 0:
        raise ValueError(f"set_num_parallel_workers: num must be a positive int, got {num!r}")
    _num_parallel_workers = num


def get_num_parallel_workers():
    return _num_parallel_workers


def _pipeline_seed(sharded):
    """The seed an iterator's shuffles start from: the set seed; else a fresh random one, or 0
    for a sharded source, whose shards (in other processes) must draw the same permutation to
    partition the set."""
    if _seed is not None:
        return _seed
    if sharded:
        return 0
    return int.from_bytes(os.urandom(4), "little")
