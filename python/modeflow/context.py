"""``from modeflow import context`` (MindSpore 1.x): the context functions, as at the top level."""

from ._modeflow import (  # noqa: F401
    GRAPH_MODE,
    PYNATIVE_MODE,
    get_auto_parallel_context,
    get_context,
    get_ps_context,
    reset_auto_parallel_context,
    reset_context,
    reset_ps_context,
    set_auto_parallel_context,
    set_context,
    set_ps_context,
)

# debug_level's constants (MindSpore's mindspore.context.RELEASE / DEBUG): set_context takes them
# as it takes the names; get_context returns the name.
RELEASE = 0
DEBUG = 1


class ParallelMode:
    """The values of set_auto_parallel_context(parallel_mode=...)."""

    STAND_ALONE = "stand_alone"
    DATA_PARALLEL = "data_parallel"
    HYBRID_PARALLEL = "hybrid_parallel"
    SEMI_AUTO_PARALLEL = "semi_auto_parallel"
    AUTO_PARALLEL = "auto_parallel"
