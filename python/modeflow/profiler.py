"""MindSpore's ``mindspore.Profiler`` for modeflow: a Chrome trace of every kernel and compile pass,
and a summary that judges each kernel against the machine's measured limits.

    profiler = ms.Profiler(output_path="./prof")
    net(x)                      # any work, in either mode
    profiler.analyse()          # writes prof/trace.json, prof/summary.md, prof/roofline.svg

or ``with ms.Profiler(output_path="./prof"): net(x)``. docs/profiler.md says what each file holds.
"""

import os

from . import _modeflow


class Profiler:
    """Profiles from construction (or from ``start()`` with ``start_profile=False``) until
    ``stop()`` or ``analyse()``. One profile runs at a time in a process. At most ``max_events``
    events are kept; the summary says how many more were dropped."""

    def __init__(self, output_path="./data", start_profile=True, max_events=1_000_000):
        if not isinstance(output_path, (str, os.PathLike)):
            raise TypeError(f"For 'Profiler', output_path must be a str or path, but got "
                            f"{type(output_path).__name__}.")
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
            raise ValueError(f"For 'Profiler', max_events must be a positive int, but got "
                             f"{max_events!r}.")
        self._output_path = os.fspath(output_path)
        self._max_events = max_events
        self._written = False
        if start_profile:
            self.start()

    def start(self):
        """Starts profiling (an error if this or another profile is already on)."""
        _modeflow._profiler_start(self._max_events)

    def stop(self):
        """Stops profiling without writing anything."""
        if _modeflow._profiler_active():
            _modeflow._profiler_stop("")

    def analyse(self):
        """Stops profiling (if on) and writes trace.json, summary.md and roofline.svg into
        output_path. Returns output_path."""
        if _modeflow._profiler_active():
            _modeflow._profiler_stop(self._output_path)
            self._written = True
        elif not self._written:
            raise RuntimeError("For 'Profiler.analyse', nothing was profiled: the profile was "
                               "stopped without analyse(); start() a new one.")
        return self._output_path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.analyse()
        else:
            self.stop()
        return False
