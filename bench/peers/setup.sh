#!/bin/sh
# Creates bench/.peers-venv and installs each peer on its own, so that one
# failed install only skips that peer. Writes the names that installed to
# bench/.peers-venv/installed (one a line); run.py reads it. An entry of the list
# below may name several packages (space separated); the first one names the peer.
# arq gets a venv of its own (bench/.peers-venv/arq): it pins redis<6, celery's
# kombu[redis] wants redis>=6.4.
set -u
set -f  # the specs' brackets are not globs
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/../.peers-venv"
py="${PYTHON:-python3}"
quiet() { grep -v '^WARNING: Location' || true; }
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv" || { echo "peers: cannot create $venv" >&2; exit 1; }
"$venv/bin/pip" install -q --disable-pip-version-check "redis>=5" hiredis 2>&1 | quiet
: > "$venv/installed.tmp"
for spec in huey "dramatiq[redis]" rq "celery[redis]" "procrastinate psycopg[binary]"; do
	name="${spec%%[ []*}"
	# $spec unquoted: one word per package
	if "$venv/bin/pip" install -q --disable-pip-version-check $spec 2>&1 | quiet; "$venv/bin/python" -c "import $name" 2>/dev/null; then
		echo "$name" >> "$venv/installed.tmp"
	else
		echo "peers: $spec did not install; it will be skipped" >&2
	fi
done
arq="$venv/arq"
[ -x "$arq/bin/python" ] || "$py" -m venv "$arq"
if "$arq/bin/pip" install -q --disable-pip-version-check arq hiredis 2>&1 | quiet; "$arq/bin/python" -c "import arq" 2>/dev/null; then
	echo arq >> "$venv/installed.tmp"
else
	echo "peers: arq did not install; it will be skipped" >&2
fi
mv "$venv/installed.tmp" "$venv/installed"
{ "$venv/bin/pip" list --disable-pip-version-check; "$arq/bin/pip" list --disable-pip-version-check; } 2>/dev/null |
	grep -iE '^(huey|dramatiq|rq|celery|kombu|arq|redis|hiredis|procrastinate|psycopg|psycopg-binary|psycopg-pool) '
