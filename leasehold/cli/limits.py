"""``leasehold queue limits QUEUE``: show, set or clear a queue's flow
control limits (decided in the claim; workers see a change at their next
claim). Audited with the operator's name."""

from __future__ import annotations

import json

import click

from leasehold.cli.base import friendly_errors, runtime
from leasehold.cli.operate import operator
from store.errors import ValidationError
from store.flow_rules import MAX_LIMIT, QueueLimits, parse_count_text, parse_limits, parse_rate_text
from store.spec import check_queue_name


def _rate(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
    if value is None:
        return None
    try:
        return parse_rate_text(param.name or "rate", value).to_json()
    except ValidationError as exc:
        raise click.BadParameter(exc.message) from None


def _count(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A count by the one rule of ``store.flow_rules`` (``parse_count_text``)."""
    if value is None:
        return None
    try:
        return parse_count_text(param.name or "count", value)
    except ValidationError as exc:
        raise click.BadParameter(exc.message) from None


def describe(limits: QueueLimits) -> str:
    """One line: ``concurrency 3, per-key concurrency -, rate 10/1s, per-key rate -``."""

    def rate(r: object) -> str:
        return "-" if r is None else f"{r.limit}/{r.period_s:g}s"  # type: ignore[attr-defined]

    return (
        f"concurrency {limits.concurrency or '-'}, per-key concurrency {limits.per_key_concurrency or '-'}, "
        f"rate {rate(limits.rate)}, per-key rate {rate(limits.per_key_rate)}"
    )


@click.command("limits")
@click.argument("queue")
@click.option(
    "--concurrency", callback=_count, default=None, help=f"Most jobs running at once (1 to {MAX_LIMIT})."
)
@click.option(
    "--per-key-concurrency",
    callback=_count,
    default=None,
    help="Most jobs running at once per limit key.",
)
@click.option("--rate", callback=_rate, default=None, help="Most starts per period: N/S (N per S seconds).")
@click.option(
    "--per-key-rate", callback=_rate, default=None, help="Most starts per period per limit key: N/S."
)
@click.option("--clear", is_flag=True, help="Clear every limit of QUEUE (before setting any given).")
@click.option("--json", "as_json", is_flag=True, help="Print the limits as JSON.")
@friendly_errors
def limits_command(
    queue: str,
    concurrency: int | None,
    per_key_concurrency: int | None,
    rate: dict[str, float] | None,
    per_key_rate: dict[str, float] | None,
    clear: bool,
    as_json: bool,
) -> None:
    """Show QUEUE's limits, or set those given (others kept; --clear first).
    Stored limits that no longer pass the rules are named on stderr (they
    are not applied; setting any limit of QUEUE replaces them)."""
    check_queue_name(queue)
    store = runtime().store()
    current = QueueLimits() if clear else store.queue_limits().get(queue, QueueLimits())
    given = {
        k: v
        for k, v in {
            "concurrency": concurrency,
            "per_key_concurrency": per_key_concurrency,
            "rate": rate,
            "per_key_rate": per_key_rate,
        }.items()
        if v is not None
    }
    limits = current
    if given or clear:
        limits = store.set_queue_limits(queue, parse_limits(given, current), actor=operator())
    if limits.invalid:
        click.echo(f"Warning: queue {queue}: {limits.invalid}", err=True)
    if as_json:
        click.echo(json.dumps({"queue": queue, **limits.to_json(), "invalid": limits.invalid}))
    else:
        click.echo(f"queue {queue}: {describe(limits)}")
