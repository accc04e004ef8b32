#!/usr/bin/env bash
# Dead code check (vulture): names defined and never used, in the product, its tests and benches.
# Names a framework calls (routes, commands, Jinja filters, pydantic fields, gunicorn settings,
# Alembic revisions) are ignored by decorator or name here, or listed in .ci/vulture_whitelist.py
# (regenerate its candidates with --make-whitelist, and keep only what is public or framework-read).
set -euo pipefail
cd "$(dirname "$0")/.."
DECORATORS="@*.route,@*.get,@*.post,@*.put,@*.delete,@*.command,@*.group,@click.*,@*.before_request,\
@*.after_request,@*.errorhandler,@*.app_template_filter,@*.template_filter,@*.context_processor,\
@*.app_context_processor,@*.app_errorhandler,@*.listens_for,@event.listens_for,@*.setter,@property,\
@*.teardown_appcontext,@*.hookimpl,@compiles,@*.field_validator,@*.model_validator,@field_validator,\
@model_validator,@handler"
NAMES="upgrade,downgrade,revision,down_revision,branch_labels,depends_on,__getattr__,__dir__,pytest_*,\
model_config,inherit_cache,cache_ok,impl,load_dialect_impl,collect"
exec "${VULTURE:-.venv/bin/vulture}" leasehold store workers webapp tests bench wsgi.py gunicorn.conf.py \
    .ci/vulture_whitelist.py --exclude "bench/.peers-venv,build,node_modules" --min-confidence 60 \
    --ignore-decorators "$DECORATORS" --ignore-names "$NAMES" "$@"
