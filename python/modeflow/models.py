"""The sample networks of ``mf nets``: ``ms.models.load("mlp")`` builds the C++ network from its
seed (the weights ``mf run mlp`` uses) and ``make_input`` the input ``mf run`` feeds it."""

from ._modeflow.models import describe, load, make_input, names  # noqa: F401
