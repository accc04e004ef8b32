"""The shop's handlers (``LEASEHOLD_HANDLERS=examples.flask_orders.jobs``).

A worker imports this module alone: no Flask app, no Flask-SQLAlchemy.
"""

from __future__ import annotations

from leasehold import JobContext, handler


@handler("send-invoice", queue="invoices", max_retries=5)
def send_invoice(ctx: JobContext) -> dict[str, str]:
    """Send the invoice of ``ctx.payload["order_id"]`` (here: name it)."""
    order_id = int(ctx.payload["order_id"])
    return {"invoice": f"INV-{order_id:06d}"}
