"""``search_jobs`` of the SQL store (a mixin of SqlStore) and its statements.

What an index answers is asked of the whole table: the listing filters
(status, queue, name) and, on PostgreSQL, a payload field (``payload @>
'{"key": value}'`` on the GIN index leasehold_ix_jobs_payload, migration
0005). What no index answers is tested within a bounded window, the
``scan_limit`` newest jobs that pass those, as on Redis (store/search.py):

* part of the id, by ``LIKE`` on the id as stored (lower-case, as the part is
  made);
* error text, by a case-insensitive ``LIKE`` on the error's type and message
  (Failed and Scheduled jobs only);
* on SQLite, a payload field, found by ``json_each``.

A second query counts that window: ``complete`` is False when the window was
full and the page was not, and ``scanned`` says how many jobs it held. A
search by indexed criteria alone is complete, ``scanned`` the rows read.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    bindparam,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    union_all,
)

from store.parts import Part
from store.search import SearchPage, SearchQuery, like_pattern
from store.sql.rows import job_from_row
from store.sql.schema import jobs

#: json_type of a value of each Python type, as SQLite's JSON functions name them.
_SQLITE_JSON_TYPES: dict[type, tuple[str, ...]] = {
    str: ("text",),
    bool: ("true", "false"),
    int: ("integer", "real"),
    float: ("integer", "real"),
    type(None): ("null",),
}


def listing_terms(query: SearchQuery) -> tuple[list[ColumnElement[bool]], dict[str, Any]]:
    """The WHERE terms an index answers (status, queue, name), and their params."""
    terms: list[ColumnElement[bool]] = []
    params: dict[str, Any] = {}
    statuses = query.statuses()
    if len(statuses) == 1:
        terms.append(jobs.c.status == int(statuses[0]))
    elif query.error is not None or query.status is not None:
        terms.append(jobs.c.status.in_([int(s) for s in statuses]))
    if query.queue is not None:
        terms.append(jobs.c.queue == bindparam("s_queue"))
        params["s_queue"] = query.queue
    if query.name is not None:
        terms.append(jobs.c.name == bindparam("s_name"))
        params["s_name"] = query.name
    return terms, params


def text_terms(table: Any, query: SearchQuery) -> tuple[list[ColumnElement[bool]], dict[str, Any]]:
    """The WHERE terms no index answers, part of the id and error text, on
    ``table`` (the jobs, or a window of them), and their params."""
    terms: list[ColumnElement[bool]] = []
    params: dict[str, Any] = {}
    if query.id_part is not None:
        # Ids are lower-case UUID text written by the store and id_part is
        # lower-cased (SharedStore.search_jobs): no lower() on each id.
        terms.append(table.c.id.like(bindparam("s_id"), escape="\\"))
        params["s_id"] = like_pattern(query.id_part)
    if query.error is not None:
        pattern = bindparam("s_error")
        terms.append(
            or_(
                func.lower(table.c.error["message"].as_string()).like(pattern, escape="\\"),
                func.lower(table.c.error["type"].as_string()).like(pattern, escape="\\"),
            )
        )
        params["s_error"] = like_pattern(query.error)
    return terms, params


def payload_contains() -> ColumnElement[bool]:
    """PostgreSQL: the payload contains the document. Param: s_doc (JSON text)."""
    from sqlalchemy.dialects.postgresql import JSONB  # PostgreSQL only: not loaded on SQLite

    return jobs.c.payload.op("@>")(cast(bindparam("s_doc", type_=Text), JSONB))


def payload_field_sqlite(table: Any, value: Any) -> ColumnElement[bool]:
    """SQLite: the payload has a top-level field ``s_key`` holding ``value``
    (type and value, as JSON compares them), found with ``json_each``: any
    key matches, quotes and dots included (a JSON path cannot quote ``"``).
    Params: s_key, s_value."""
    field = func.json_each(table.c.payload).table_valued("key", "value", "type").alias("field")
    terms: list[ColumnElement[bool]] = [field.c.key == bindparam("s_key")]
    if value is None or isinstance(value, bool):
        terms.append(field.c.type == ("null" if value is None else "true" if value else "false"))
    else:
        terms += [field.c.type.in_(_SQLITE_JSON_TYPES[type(value)]), field.c.value == bindparam("s_value")]
    return exists(select(literal(1)).select_from(field).where(*terms))


def newest(stmt: Select, table: Any, limit: str) -> Select:
    """``stmt`` newest update first, at most the param ``limit`` rows."""
    return stmt.order_by(table.c.last_updated_at.desc(), table.c.id.desc()).limit(bindparam(limit))


def _window(query: SearchQuery, indexed: list[ColumnElement[bool]], columns: list[Any]) -> Any:
    """The ``s_scan`` newest jobs passing ``indexed``, with ``columns``, as a
    subquery. Error text is kept on two statuses: their windows are read
    apart, each newest first on leasehold_ix_jobs_status_updated, then merged
    (``status IN (…)`` would read and sort every job of both)."""
    statuses = query.statuses()
    if query.status is not None or len(statuses) == 1 or query.error is None:
        return newest(select(*columns).where(*indexed), jobs, "s_scan").subquery()
    others = [t for t in indexed if t is not indexed[0]]  # listing_terms puts the status term first
    arms = [
        select(newest(select(*columns).where(jobs.c.status == int(s), *others), jobs, "s_scan").subquery())
        for s in statuses
    ]
    merged = union_all(*arms).subquery()
    return newest(select(merged), merged, "s_scan").subquery()


class SqlSearchPart(Part):
    """The engine half of ``search_jobs``."""

    def _search(self, query: SearchQuery, limit: int, scan_limit: int) -> SearchPage:
        indexed, params = listing_terms(query)
        params["s_limit"] = limit
        payload_indexed = self.read_engine.dialect.name == "postgresql"
        if query.payload is not None and payload_indexed:
            key, value = query.payload
            indexed.append(payload_contains())
            params["s_doc"] = orjson.dumps({key: value}).decode()
        if query.id_part is None and query.error is None and (query.payload is None or payload_indexed):
            rows = self.read(newest(select(jobs).where(*indexed), jobs, "s_limit"), params)
            return SearchPage([job_from_row(r) for r in rows], True, len(rows))
        params["s_scan"] = scan_limit
        # The window holds only the columns tested (the id alone is an
        # index-only scan); the page's whole rows are read for the matches.
        tested_columns = [jobs.c.id, jobs.c.last_updated_at]
        if query.error is not None:
            tested_columns.append(jobs.c.error)
        if query.payload is not None and not payload_indexed:
            tested_columns.append(jobs.c.payload)
        window = _window(query, indexed, tested_columns)
        tested, text_params = text_terms(window, query)
        params.update(text_params)
        if query.payload is not None and not payload_indexed:
            key, value = query.payload
            tested.append(payload_field_sqlite(window, value))
            params.update(s_key=key, s_value=value)
        matched = newest(select(window.c.id).where(*tested), window, "s_limit").subquery()
        page = select(jobs).join(matched, jobs.c.id == matched.c.id)
        rows = self.read(page.order_by(jobs.c.last_updated_at.desc(), jobs.c.id.desc()), params)
        counted = select(func.count()).select_from(
            _window(query, indexed, [jobs.c.id, jobs.c.last_updated_at])
        )
        scanned = self.tx(lambda c: c.execute(counted, params).scalar_one(), write=False)
        return SearchPage(
            [job_from_row(r) for r in rows], len(rows) >= limit or scanned < scan_limit, scanned
        )
