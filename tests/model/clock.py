"""The store's clock for the stateful model test (tests/store/test_contract_model.py):
a store handle whose clock moves with the model's, not with the real time
an example takes.

The model's clock ``t`` stands still between ticks; a store's clock is the
real time plus ``clock_offset_s``, and the real time runs on. Moved only at
ticks, the store's clock gained on the model by the whole real time of the
example: a start 19 s old in the model was past a 20 s rate window in the
store once an example ran long on a loaded machine. ``ModelClock`` sets the
offset before every store call so the call starts at ``floor``, a store time
it keeps:

* a call that may record a time (every call but ``READS``) moves ``floor``
  on by its own real duration and ``GRAIN_S``, so every later call runs at a
  store time after every time recorded so far: the store's clock never goes
  back for what it wrote, and a job due "now" is due for the next call;
* a read (the invariant's many) leaves ``floor`` where it was: the real
  time it took is taken back;
* a tick of ``s`` seconds moves ``floor`` on by ``s + GRAIN_S``.

Why ties and non-ties both hold. Let a time be recorded by a write ``w`` at
model time ``t1`` and compared by a call ``c`` at ``t2 >= t1`` against a
threshold ``th`` (the model says "past" iff ``t2 - t1 >= th``). Let ``x``
be the store's clock read in a call started at ``floor`` and lasting ``d``:
``floor - 0.001 <= x <= floor + d`` (SQLite's 'now' counts whole, truncated
milliseconds; PostgreSQL's ``now()`` is its transaction's start, inside the
call; Redis ``TIME`` is read inside the script).

* Past (``t2 - t1 >= th``; a tie is ``=``, with at least one tick between,
  or ``th = 0`` for a job due now): after ``w`` the floor is at least ``x_w + GRAIN_S``, each
  tick between adds ``s + GRAIN_S``, so ``x_c - x_w >= t2 - t1 + GRAIN_S -
  0.001 > th``: past in the store, as in the model.
* A non-tie (``t2 - t1 < th``): ``x_c - x_w - (t2 - t1)`` is at most what
  the floor gained beyond the ticks from the start of ``w``'s interval
  between two ticks (``ModelClock.lead``) to ``c``: the real durations of
  the writes between and ``GRAIN_S`` each, ``c``'s own duration, and 0.001.
  Below ``th - (t2 - t1)`` the time is not past in the store either.

So the store and the model agree exactly while, for every two intervals
``g`` of model time apart, the lead gained between them stays below the
nearest threshold above ``g`` less ``g`` (the test's thresholds and ticks
are whole units, so that is a unit at least); the writes take milliseconds
each. ``ModelClock`` checks this after every call and stops the example
with a message naming the harness clock (never as a store divergence) if a
stalled machine ever breaks it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

from store.base import JobStore

#: Store calls that record no time: they leave the floor where it was.
READS = frozenset({"get", "counts", "limit_usage", "list_jobs", "get_batch", "batch_jobs"})
#: What the floor moves on by at each write and each tick beyond its
#: duration, seconds: more than the coarsest store clock's step (SQLite
#: counts milliseconds), so a tie is past in the store whatever its resolution.
GRAIN_S = 0.002


class ModelClock:
    """``store`` with its clock moved by the model's ticks only: every
    attribute is the store's, every method call sets ``clock_offset_s``
    first (module docstring)."""

    def __init__(self, store: JobStore, thresholds: Collection[float]) -> None:
        self._store = store
        #: Every duration the model compares a time difference with, seconds.
        self._thresholds = sorted(thresholds)
        #: The store time the next call starts at: on from where the store's clock is.
        self.floor = time.time() + store.clock_offset_s + GRAIN_S
        self._origin = self.floor
        #: The model's time, seconds since the example began (the sum of the ticks).
        self.t = 0.0
        #: (model time, lead) at each tick: the lead with which each interval began.
        self._starts: list[tuple[float, float]] = [(0.0, 0.0)]
        #: The least room left by the checks so far, seconds (ModelClock._check).
        self.slack_s = float("inf")

    @property
    def lead(self) -> float:
        """How far the store's clock is ahead of the model's, seconds."""
        return self.floor - self._origin - self.t

    def tick(self, seconds: float) -> None:
        self.floor += seconds + GRAIN_S
        self.t += seconds
        self._starts.append((self.t, self.lead))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name.startswith("_") or not callable(attr):
            return attr
        return self._timed(name, attr)

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.time()
            self._store.clock_offset_s = self.floor - started
            try:
                return method(*args, **kwargs)
            finally:
                took = time.time() - started
                self._check(self.lead + took)
                if name not in READS:
                    self.floor += took + GRAIN_S

        return call

    def _check(self, lead: float) -> None:
        """Stop if a call ended ``lead`` ahead and some interval began so far
        behind that a non-tie between them could be past in the store."""
        longest = self._thresholds[-1]
        for at, since in reversed(self._starts):
            gap = self.t - at
            if gap >= longest:
                break
            room = next(th for th in self._thresholds if th > gap) - gap
            gained = lead - since + 0.001
            self.slack_s = min(self.slack_s, room - gained)
            assert gained < room, (
                f"harness clock, not the store: the store's clock gained {gained:.3f} s on the model "
                f"over {gap:g} s of model time, where a threshold is {room:g} s away; the machine "
                "stalled the store's writes (tests/model/clock.py)"
            )
