"""Dependency graphs of the job and batch pages: the nodes (jobs, each with
its status) and edges (parent -> child) as JSON, which ``static/graph.js``
draws with cytoscape (from the npm registry, vendored in ``static/vendor/``).

The pages keep their lists of parents, children and members: those are the
graph's text alternative, and what a browser without JavaScript shows.
"""

from __future__ import annotations

import itertools
from typing import Any

from flask import Response, abort, jsonify, url_for

from store.base import JobStore
from store.contract_flow import FlowUnsupported
from store.errors import JobNotFound
from store.models import Job
from webapp.console.blueprint import bp, store
from webapp.console.flow_pages import _batch_id

#: Children a job's graph shows; members a batch's graph shows.
JOB_CHILDREN = 50
BATCH_MEMBERS = 100


def _node(job: Job, role: str = "") -> dict[str, Any]:
    return {
        "id": job.id,
        "label": f"{job.name} …{job.id[-6:]}",
        "status": job.status.name,
        "role": role,
        "url": url_for("console.job", job_id=job.id),
    }


def job_graph(st: JobStore, job: Job) -> dict[str, Any]:
    """The job, its parents and (the first JOB_CHILDREN of) its children."""
    try:
        parents = st.parents(job.id) if job.pending_parents is not None else []
        children = st.children(job.id, JOB_CHILDREN)
    except FlowUnsupported:
        parents, children = [], []
    nodes = [_node(job, "self"), *(_node(p) for p in parents), *(_node(c) for c in children)]
    edges = [{"source": p.id, "target": job.id} for p in parents]
    edges += [{"source": job.id, "target": c.id} for c in children]
    return {"nodes": list({n["id"]: n for n in nodes}.values()), "edges": edges}


def batch_graph(st: JobStore, batch_id: str) -> dict[str, Any]:
    """A batch's first BATCH_MEMBERS jobs and its callback: a chain's jobs each
    after the one before; every job of a batch before its callback."""
    batch = st.get_batch(batch_id)
    members = st.batch_jobs(batch.id, BATCH_MEMBERS)
    nodes = [_node(j) for j in members]
    edges = []
    if batch.kind == "chain":
        edges = [{"source": a.id, "target": b.id} for a, b in itertools.pairwise(members)]
    if batch.callback_job_id:
        callback = st.get(batch.callback_job_id)
        nodes.append(_node(callback, "callback"))
        edges += [{"source": j.id, "target": callback.id} for j in members]
    return {"nodes": nodes, "edges": edges, "shown": len(members), "size": batch.size}


@bp.get("/jobs/<job_id>/graph.json")
def job_graph_json(job_id: str) -> Response:
    try:
        job = store().get(job_id)
    except JobNotFound:
        abort(404, f"No job has id {job_id}.")
    return jsonify(job_graph(store(), job))


@bp.get("/batches/<batch_id>/graph.json")
def batch_graph_json(batch_id: str) -> Response:
    try:
        return jsonify(batch_graph(store(), _batch_id(batch_id)))
    except (JobNotFound, FlowUnsupported):
        abort(404, f"No batch has id {batch_id}.")
