"""How an engine is put together: named parts behind the port
(docs/architecture.md, "Stores").

An engine class (``SqlStore``, ``RedisStore``) inherits only its plumbing and
the port (``store.base.JobStore``). Each public method is one line in the
engine's class body, ``enqueue = delegate("shared")``, naming the part that
runs it; a part is an object of one class from one module (``store/sql/flow.py``
holds the flow part) that reaches the engine's plumbing (engine, connection,
keys, clock, settings) through the engine it was made for.
"""

from __future__ import annotations

from typing import Any


class delegate:  # noqa: N801 - read as a declaration in the engine's class body
    """``name = delegate("part")``: the engine's ``name`` is its part's ``name``
    (a method bound to the part, or the part's value)."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, engine: Any, owner: type | None = None) -> Any:
        if engine is None:
            return self
        return getattr(engine.__dict__["_parts"][self.part], self.name)


class Part:
    """One named part of an engine. Attributes the part's class does not
    define are the engine's (read and written there), so a part's methods use
    ``self._tx()``, ``self.keys``, ``self.settings`` as the engine does. A name
    the part's class defines but the engine routes elsewhere (a shared default
    an engine part replaces) is the engine's choice too."""

    def __init__(self, engine: Any, name: str) -> None:
        object.__setattr__(self, "_engine", engine)
        object.__setattr__(self, "_name", name)
        engine.__dict__.setdefault("_parts", {})[name] = self

    def _defer(self) -> None:
        """Take the engine's choice for the names this part's class defines
        but the engine routes elsewhere (once every part is made)."""
        engine, name = self._engine, self._name
        kind = type(engine)
        for cls in type(self).__mro__[:-2]:
            for attr in vars(cls):
                if attr.startswith("__") or attr in self.__dict__:
                    continue
                route = _route(kind, attr)
                if route is not None and route != name:
                    object.__setattr__(self, attr, getattr(engine, attr))

    def __getattr__(self, attr: str) -> Any:
        return getattr(object.__getattribute__(self, "_engine"), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_engine"), attr, value)


def _route(kind: type, attr: str) -> str | None:
    """The part that runs ``attr`` on an engine class; "" for the engine's own
    (its class, plumbing or port); None when the engine has no such name."""
    for cls in kind.__mro__:
        if attr in vars(cls):
            found = vars(cls)[attr]
            return found.part if isinstance(found, delegate) else ""
    return None


def assemble(engine: Any) -> None:
    """Make the parts an engine class lists in ``parts`` (name -> class)."""
    made = [cls(engine, name) for name, cls in type(engine).parts.items()]
    for part in made:
        part._defer()
