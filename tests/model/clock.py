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

* A tie (``t2 - t1 = th``, at least one tick between, or ``th = 0`` for a
  job due now): after ``w`` the floor is at least ``x_w + GRAIN_S``, each
  tick between adds ``s + GRAIN_S``, so ``x_c - x_w >= t2 - t1 + GRAIN_S -
  0.001 > th``: past in the store, as in the model.
* A non-tie (``t2 - t1 <= th - MARGIN_S``): ``x_c - x_w - (t2 - t1)`` is at
  most what the floor gained beyond the ticks between ``w`` and ``c`` (the
  real durations of the writes between, and ``GRAIN_S`` each) plus ``c``'s
  own duration plus 0.001: the lead ``ModelClock.lead`` gained since ``w``'s
  interval began. Below ``MARGIN_S`` it is not past in the store either.

So the store and the model agree exactly while the lead gained over any
``WINDOW_S`` of model time stays below ``MARGIN_S``; the writes of one
window take some milliseconds each. ``ModelClock`` checks that bound after
every call and stops the example with a message naming the clock (never as
a store divergence) if a stalled machine ever breaks it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from store.base import JobStore

#: Store calls that record no time: they leave the floor where it was.
READS = frozenset({"get", "counts", "limit_usage", "list_jobs", "get_batch", "batch_jobs"})
#: What the floor moves on by at each write and each tick beyond its
#: duration, seconds: more than the coarsest store clock's step (SQLite
#: counts milliseconds), so a tie is past in the store whatever its resolution.
GRAIN_S = 0.002
#: The nearest a model time difference comes to a threshold without being
#: a tie, seconds: a 1 s tick against the handler's 1.5 s backoff (the
#: others are whole seconds apart).
MARGIN_S = 0.5
#: The longest threshold the model compares a time difference with,
#: seconds (``unique_for``); a pair further apart is past by a whole tick.
WINDOW_S = 30.0


class ModelClock:
    """``store`` with its clock moved by the model's ticks only: every
    attribute is the store's, every method call sets ``clock_offset_s``
    first (module docstring)."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        #: The store time the next call starts at: on from where the store's clock is.
        self.floor = time.time() + store.clock_offset_s + GRAIN_S
        self._origin = self.floor
        #: The model's time, seconds since the example began (the sum of the ticks).
        self.t = 0.0
        #: (model time, lead) at each tick: the lead with which each interval began.
        self._starts: list[tuple[float, float]] = [(0.0, 0.0)]
        #: The largest lead gained within a window so far, seconds.
        self.worst_s = 0.0

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
        """Stop if a call ended ``lead`` ahead with the window's first interval
        begun too far behind: the store and the model could then disagree
        on a non-tie by the real time alone."""
        since = min(lead_s for at, lead_s in self._starts if at >= self.t - WINDOW_S)
        gained = lead - since + 0.001
        self.worst_s = max(self.worst_s, gained)
        assert gained < MARGIN_S, (
            f"harness clock, not the store: the store's clock gained {gained:.3f} s on the model "
            f"within {WINDOW_S:g} s of model time (at most {MARGIN_S:g} s keeps ties exact); "
            "the machine stalled the store's writes"
        )
