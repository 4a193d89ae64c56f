"""MindSpore's mindspore.communication: ``init()`` joins the job this process is a worker of (the
variables ``mf launch`` sets: MS_WORKER_NUM, MS_SCHED_HOST, MS_SCHED_PORT, MS_NODE_ID, MS_ROLE),
``get_rank()`` and ``get_group_size()`` say where it stands, ``release()`` leaves. Collectives
run on Gloo over TCP. A process started without MS_WORKER_NUM forms a group of its own.
See docs/distributed.md.
"""

from .._modeflow.communication import _backend, _initialized
from .._modeflow.communication import get_group_size, get_rank
from .._modeflow.communication import release as _release
from .._modeflow.communication import init as _init


class GlobalComm:
    """The world group's names, as MindSpore's GlobalComm. BACKEND is the backend init() chose;
    INITED says whether init() has run."""

    BACKEND = "gloo"
    WORLD_COMM_GROUP = "gloo_world_group"
    INITED = False


def init(backend_name=None):
    """Joins the job: rendezvous with the other workers (worker 0 serves it at
    MS_SCHED_HOST:MS_SCHED_PORT). backend_name: None, "gloo" or "mccl"; "hccl" and "nccl" need
    devices this build does not drive."""
    _init(backend_name)
    GlobalComm.INITED = True
    GlobalComm.BACKEND = _backend()


def release():
    """Waits for every worker, then leaves the group."""
    _release()
    GlobalComm.INITED = _initialized()


__all__ = ["init", "get_rank", "get_group_size", "release", "GlobalComm"]
