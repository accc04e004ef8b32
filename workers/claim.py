"""Which queue to claim from next, and how long to wait when there is no work.

Queue choice is smooth weighted round robin (the algorithm of nginx's
upstream module, ngx_http_upstream_round_robin.c): each pick adds every
queue's weight to its running score, takes the highest score and subtracts
the total from it. Over any ``sum(weights)`` consecutive picks queue *q* is
chosen exactly ``weight(q)`` times and the picks are spread out, so a busy
queue cannot starve a light one. Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Queue names: what the store accepts, minus the separators of ``--queues``.
_QUEUE_NAME = re.compile(r"^[^\s,:]{1,100}$")
#: Largest weight one queue may have.
MAX_WEIGHT = 1000


def parse_queues(text: str) -> list[tuple[str, int]]:
    """Parse ``a,b:3`` into ``[("a", 1), ("b", 3)]``.

    Raises ValueError with a one-line message for an empty list, an empty or
    repeated name, or a weight that is not an integer in [1, MAX_WEIGHT]."""
    items = [part.strip() for part in text.split(",")]
    if not text.strip() or not all(items):
        raise ValueError(f"expected queue names like 'a,b:3', got {text!r}")
    out: list[tuple[str, int]] = []
    for item in items:
        name, sep, raw = item.partition(":")
        name = name.strip()
        if not _QUEUE_NAME.match(name):
            raise ValueError(f"bad queue name {name!r} in {text!r}")
        weight = 1
        if sep:
            raw = raw.strip()
            if not raw.isdigit():
                raise ValueError(f"weight of queue {name!r} must be an integer >= 1, got {raw!r}")
            weight = int(raw)
            if not 1 <= weight <= MAX_WEIGHT:
                raise ValueError(f"weight of queue {name!r} must be within [1, {MAX_WEIGHT}], got {weight}")
        if any(name == seen for seen, _ in out):
            raise ValueError(f"queue {name!r} is named twice in {text!r}")
        out.append((name, weight))
    return out


def format_queues(queues: Sequence[tuple[str, int]]) -> str:
    """The inverse of ``parse_queues``."""
    return ",".join(name if weight == 1 else f"{name}:{weight}" for name, weight in queues)


class WeightedQueues:
    """Smooth weighted round robin over ``(name, weight)`` pairs. Not thread-safe
    (one claim loop owns it)."""

    def __init__(self, queues: Sequence[tuple[str, int]]) -> None:
        if not queues:
            raise ValueError("name at least one queue")
        self.names = [name for name, _ in queues]
        self._weights = [weight for _, weight in queues]
        self._total = sum(self._weights)
        self._score = [0] * len(queues)

    def pick(self) -> int:
        """Index of the next queue."""
        for i, weight in enumerate(self._weights):
            self._score[i] += weight
        best = max(range(len(self._score)), key=lambda i: self._score[i])
        self._score[best] -= self._total
        return best

    def next(self) -> str:
        """Name of the next queue."""
        return self.names[self.pick()]

    def order(self) -> tuple[str, list[str]]:
        """The next queue, and the others to fall back on when it is empty
        (in their configured order)."""
        first = self.pick()
        return self.names[first], [n for i, n in enumerate(self.names) if i != first]


class IdleBackoff:
    """Poll delays while the queues are empty: ``first_s``, doubling up to
    ``max_s``; ``reset()`` on work. Defaults 5 ms -> 200 ms, so an idle worker
    answers a new job within ~200 ms and costs the store at most ~5 claims a
    second once it has settled."""

    def __init__(self, first_s: float = 0.005, max_s: float = 0.2) -> None:
        if not 0 < first_s <= max_s:
            raise ValueError("need 0 < first_s <= max_s")
        self.first_s = first_s
        self.max_s = max_s
        self._next = first_s

    def next(self) -> float:
        """Seconds to wait now; the following wait doubles."""
        delay = self._next
        self._next = min(self.max_s, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.first_s
