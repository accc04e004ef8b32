"""The Redis functions' clock texts (lua/lib/clock.lua) and the rank built
from them (lua/lib/job.lua ``rank``): with no clock offset the times are
TIME's own digits ("<seconds>.<6 digits>", no number formatting), with an
offset the 17-digit text of the sum; either way a job's stored times read
back as the times the store returns, its listing score is those times in
whole microseconds, and its rank is priority, due time and id in claim
order, as the Python side parses it (store/redis/keys.py)."""

from __future__ import annotations

import re

import pytest

from store.redis.keys import RANK_HEAD, rank_job_id
from store.redis.store import RedisStore
from tests.conftest import handle_fixture

handle = handle_fixture(["redis"])


def expected_rank(priority: int, due: float, job_id: str) -> str:
    return f"{1_000_000 - priority:07d}{round(due * 1_000_000):017d}:{job_id}"


@pytest.mark.parametrize("offset_s", [0.0, 3600.25])
def test_times_ranks_and_scores_agree(store: RedisStore, offset_s: float) -> None:
    store.clock_offset_s = offset_s
    jobs = [
        store.enqueue("t", priority=priority, delay_s=delay)
        for priority in (0, 7, -3)
        for delay in (0, 5.5)
    ]
    client = store._client
    for job in jobs:
        stored = client.hgetall(store.keys.job(job.id))
        created, due = stored["created_at"], stored["due_at"]
        if offset_s == 0:
            assert re.fullmatch(r"\d{10}\.\d{6}", created), created
        assert float(created) == job.created_at.timestamp()
        assert stored["rank"] == expected_rank(job.priority, float(due), job.id)
        assert len(stored["rank"]) == RANK_HEAD + 1 + len(job.id) and rank_job_id(stored["rank"]) == job.id
        status = stored["status"]
        score = client.zscore(f"{store.keys._key('updated:' + status)}", job.id)
        assert score == round(float(stored["last_updated_at"]) * 1_000_000)
    ready = client.zrange(store.keys.ready("default"), 0, -1)
    undelayed = sorted(jobs[::2], key=lambda j: (-j.priority, j.id))  # delay 0: every other job
    assert [rank_job_id(m) for m in ready] == [j.id for j in undelayed]
