# ruff: noqa: F811 - the fixtures are imported from console_fixtures and requested by name
"""The job page's log panel: loaded by htmx, polling while the job runs and
not once it is finished, lines escaped."""

from __future__ import annotations

from store.base import JobStore
from store.job_logs import LogLine, append_logs
from store.lifecycle import JobStatus
from tests.store.helpers import job_in
from tests.web.console_fixtures import ConsoleClient, console_app, viewer  # noqa: F401 - fixtures


def test_the_panel_tails_a_running_job_and_stops_when_it_is_finished(
    viewer: ConsoleClient, store: JobStore
) -> None:
    running = job_in(store, JobStatus.InProgress)
    page = viewer.get(f"/jobs/{running.id}").text
    assert f'hx-get="/jobs/{running.id}/logs"' in page and 'hx-trigger="load"' in page
    empty = viewer.get(f"/jobs/{running.id}/logs", htmx=True)
    assert (
        empty.status_code == 200 and "No log line yet" in empty.text and 'hx-trigger="every 2s"' in empty.text
    )
    append_logs(store, [LogLine(running.id, 1, 1000.0, "WARNING", "<script>alert(1)</script> disk 91%")])
    panel = viewer.get(f"/jobs/{running.id}/logs", htmx=True).text
    assert (
        "#1 WARNING &lt;script&gt;alert(1)&lt;/script&gt; disk 91%" in panel and "<script>alert" not in panel
    )
    done = job_in(store, JobStatus.Completed)
    append_logs(store, [LogLine(done.id, 1, 1000.0, "INFO", "finished")])
    final = viewer.get(f"/jobs/{done.id}/logs", htmx=True).text
    assert "#1 INFO finished" in final and "every 2s" not in final
    assert viewer.get("/jobs/0190c0de-0000-7000-8000-000000000000/logs").status_code == 404
