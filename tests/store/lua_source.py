"""Reading the Redis store's Lua source in tests: comments stripped, the
``redis.call`` commands and their argument expressions, a file's header."""

from __future__ import annotations

import re
from pathlib import Path


def strip_comments(code: str) -> str:
    """Lua source without ``--`` comments (string literals respected)."""
    out, i, quote = [], 0, None
    while i < len(code):
        ch = code[i]
        if quote:
            out.append(ch)
            if ch == "\\":
                out.append(code[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif code.startswith("--", i):
            while i < len(code) and code[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def call_args(code: str, start: int) -> list[str]:
    """Top-level arguments of the call whose ``(`` is just before ``start``."""
    args, depth, quote, current = [], 0, None, []
    for i in range(start, len(code)):
        ch = code[i]
        if quote:
            quote = None if ch == quote and code[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    raise AssertionError("unbalanced redis.call")


def redis_calls(code: str) -> list[tuple[str, list[str]]]:
    """``(command, argument expressions)`` of every redis.call / redis.pcall."""
    out = []
    for m in re.finditer(r"redis\.p?call\s*\(", code):
        command, *args = call_args(code, m.end())
        literal = re.fullmatch(r"""['"](\w+)['"]""", command)
        assert literal, f"command must be a string literal, got {command!r}"
        out.append((literal[1].upper(), args))
    return out


def header(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("--") and line.strip():
            break
        lines.append(line)
    return "\n".join(lines)
