#!/usr/bin/env bash
# Make a PostgreSQL and a Redis server reachable for the tests.
#
#   eval "$(scripts/services.sh)"    # prints export lines for the two URLs below
#   scripts/services.sh stop         # stops the throwaway servers this script started
#
# Prints (stdout, nothing else goes there):
#   export LEASEHOLD_TEST_PG_URL='postgresql+psycopg://postgres@127.0.0.1:PORT/postgres'
#   export LEASEHOLD_TEST_REDIS_URL='redis://127.0.0.1:PORT/0'
#
# For each service, in order:
#   1. the variable is already set in the environment: keep it;
#   2. the machine's own server answers on the default port (PostgreSQL 5432 as user
#      postgres without a password, Redis 6379 without auth): use it;
#   3. otherwise start (or reuse) a throwaway server under .services/ on a spare port,
#      installing the Debian packages first if the binaries are missing.
# LEASEHOLD_FORCE_THROWAWAY=1 skips 1 and 2.
#
# The throwaway servers keep no durable data (fsync off, no Redis persistence) and
# are never started on, or stopped at, the machine's default ports.
set -euo pipefail

# Everything goes to stderr; the export lines alone go to the original stdout (fd 3).
exec 3>&1 1>&2

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES_DIR="$REPO_DIR/.services"
PG_LINK="$SERVICES_DIR/pg"
REDIS_DIR="$SERVICES_DIR/redis"

PG_DEFAULT_PORT=5432
REDIS_DEFAULT_PORT=6379
PG_FIRST_SPARE_PORT=55432
REDIS_FIRST_SPARE_PORT=56379
START_TIMEOUT_S=30

log() { printf 'services: %s\n' "$*"; }
die() {
    log "error: $*"
    exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# Quote a value for the shell: 'value' with embedded ' escaped.
shell_quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

emit_export() { printf 'export %s=%s\n' "$1" "$(shell_quote "$2")" >&3; }

# True if something accepts TCP connections on 127.0.0.1:$1.
port_in_use() { timeout 3 bash -c 'exec 4<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null; }

# Print the first port from $1 upwards that nothing listens on.
spare_port() {
    local port
    for port in $(seq "$1" $(($1 + 99))); do
        if ! port_in_use "$port"; then
            echo "$port"
            return 0
        fi
    done
    die "no free port in $1-$(($1 + 99))"
}

# ---------------------------------------------------------------- Redis

# True if a Redis server without auth answers PING on 127.0.0.1:$1.
redis_answers() {
    local reply
    reply="$(timeout 5 bash -c '
        exec 4<>"/dev/tcp/127.0.0.1/$0" || exit 1
        printf "PING\r\n" >&4
        IFS= read -r line <&4 && printf "%s" "$line"' "$1" 2>/dev/null)" || return 1
    [ "$reply" = $'+PONG\r' ]
}

# Print the pid of our throwaway Redis if it is running, else fail.
redis_own_pid() {
    local pid
    [ -f "$REDIS_DIR/redis.pid" ] || return 1
    pid="$(cat "$REDIS_DIR/redis.pid")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q redis-server || return 1
    echo "$pid"
}

start_redis() {
    local port deadline
    mkdir -p "$REDIS_DIR"
    if redis_own_pid >/dev/null && [ -f "$REDIS_DIR/port" ]; then
        port="$(cat "$REDIS_DIR/port")"
        if redis_answers "$port"; then
            log "reusing throwaway Redis on port $port"
            REDIS_URL="redis://127.0.0.1:$port/0"
            return 0
        fi
        die "throwaway Redis (pid $(redis_own_pid)) runs but does not answer on port $port;" \
            "run '$0 stop' and retry"
    fi
    port="$(spare_port "$REDIS_FIRST_SPARE_PORT")"
    log "starting throwaway Redis on port $port in $REDIS_DIR"
    rm -f "$REDIS_DIR/redis.pid"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize yes --dir "$REDIS_DIR" --pidfile "$REDIS_DIR/redis.pid" \
        --logfile "$REDIS_DIR/redis.log" </dev/null 3>&- 9>&-
    echo "$port" >"$REDIS_DIR/port"
    deadline=$((SECONDS + START_TIMEOUT_S))
    until redis_answers "$port"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 20 "$REDIS_DIR/redis.log" 2>/dev/null || true
            die "throwaway Redis did not answer on port $port within ${START_TIMEOUT_S}s"
        fi
        sleep 0.2
    done
    REDIS_URL="redis://127.0.0.1:$port/0"
}

stop_redis() {
    local pid deadline
    if ! pid="$(redis_own_pid)"; then
        log "no throwaway Redis running"
        return 0
    fi
    log "stopping throwaway Redis (pid $pid)"
    kill -TERM "$pid"
    deadline=$((SECONDS + START_TIMEOUT_S))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || die "Redis pid $pid did not stop within ${START_TIMEOUT_S}s"
        sleep 0.2
    done
    rm -f "$REDIS_DIR/redis.pid"
}

# ----------------------------------------------------------- PostgreSQL

# Print the directory holding initdb/pg_ctl/psql, or nothing.
pg_bin_dir() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
        echo "$dir"
    elif command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir
    elif command -v initdb >/dev/null; then
        dirname "$(command -v initdb)"
    fi
}

psql_cmd() {
    local bin
    bin="$(pg_bin_dir)"
    if [ -n "$bin" ] && [ -x "$bin/psql" ]; then
        echo "$bin/psql"
    else
        command -v psql
    fi
}

# True if PostgreSQL on 127.0.0.1:$1 lets user postgres in without a password.
pg_answers() {
    local psql
    psql="$(psql_cmd)" || return 1
    [ "$(env -u PGPASSWORD -u PGSERVICE PGPASSFILE=/dev/null PGCONNECT_TIMEOUT=5 \
        timeout 10 "$psql" -w -X -A -t -q -h 127.0.0.1 -p "$1" -U postgres -d postgres \
        -c 'select 1' 2>/dev/null)" = 1 ]
}

# Run a PostgreSQL server command as the owner of the data directory.
as_pg() {
    if is_root; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

# Set PG_DIR to the throwaway cluster's directory (data/, log, socket), creating it.
# As root the directory belongs to user postgres; if that user cannot reach
# .services/ (e.g. a repository under /root), the directory lives under /tmp and
# .services/pg is a symlink to it.
prepare_pg_dir() {
    local tmp
    mkdir -p "$SERVICES_DIR"
    if [ -L "$PG_LINK" ] && [ ! -d "$PG_LINK" ]; then
        rm -f "$PG_LINK" # our symlink to a /tmp directory that is gone
    fi
    if [ ! -e "$PG_LINK" ]; then
        mkdir -m 700 "$PG_LINK"
        if is_root; then
            id postgres >/dev/null 2>&1 || die "user 'postgres' is missing (install the postgresql package)"
            chown postgres: "$PG_LINK"
            if ! as_pg test -w "$PG_LINK"; then
                rmdir "$PG_LINK"
                tmp="$(mktemp -d /tmp/leasehold-pg.XXXXXX)"
                chown postgres: "$tmp"
                ln -s "$tmp" "$PG_LINK"
                log "user postgres cannot reach $SERVICES_DIR; cluster lives in $tmp"
            fi
        fi
    fi
    PG_DIR="$(readlink -f "$PG_LINK")"
}

# Print the port of our running throwaway cluster, else fail.
pg_own_port() {
    local bin="$1"
    [ -f "$PG_DIR/data/postmaster.pid" ] || return 1
    as_pg "$bin/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1 || return 1
    sed -n 4p "$PG_DIR/data/postmaster.pid"
}

start_pg() {
    local bin port socket_dir deadline
    bin="$(pg_bin_dir)"
    [ -n "$bin" ] || die "PostgreSQL server binaries not found"
    prepare_pg_dir
    if port="$(pg_own_port "$bin")"; then
        if pg_answers "$port"; then
            log "reusing throwaway PostgreSQL on port $port"
            PG_URL="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
            return 0
        fi
    else
        if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
            log "creating throwaway PostgreSQL cluster in $PG_DIR/data"
            as_pg "$bin/initdb" -D "$PG_DIR/data" -A trust -U postgres -E UTF8 --locale=C \
                --no-sync >"$SERVICES_DIR/initdb.log" 2>&1 ||
                {
                    cat "$SERVICES_DIR/initdb.log"
                    die "initdb failed"
                }
            # A unix socket path is limited to ~107 bytes; without one, TCP only.
            socket_dir="$PG_DIR"
            [ "${#PG_DIR}" -le 80 ] || socket_dir=""
            as_pg tee -a "$PG_DIR/data/postgresql.conf" >/dev/null <<EOF

# leasehold throwaway test server (scripts/services.sh)
listen_addresses = '127.0.0.1'
unix_socket_directories = '${socket_dir//\'/\'\'}'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
        fi
        port="$(spare_port "$PG_FIRST_SPARE_PORT")"
        log "starting throwaway PostgreSQL on port $port"
        as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -o "-p $port" -W start \
            </dev/null >/dev/null 3>&- 9>&-
    fi
    deadline=$((SECONDS + START_TIMEOUT_S))
    until pg_answers "$port"; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 20 "$PG_DIR/postgres.log" 2>/dev/null || true
            die "throwaway PostgreSQL did not answer on port $port within ${START_TIMEOUT_S}s"
        fi
        sleep 0.2
    done
    PG_URL="postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
}

stop_pg() {
    local bin
    bin="$(pg_bin_dir)"
    if [ -z "$bin" ] || [ ! -d "$PG_LINK" ]; then
        log "no throwaway PostgreSQL running"
        return 0
    fi
    PG_DIR="$(readlink -f "$PG_LINK")"
    if ! pg_own_port "$bin" >/dev/null; then
        log "no throwaway PostgreSQL running"
        return 0
    fi
    log "stopping throwaway PostgreSQL"
    as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -m fast -w -t "$START_TIMEOUT_S" stop >/dev/null
}

# ------------------------------------------------------------- packages

# Install the Debian packages of the servers we need ($1, $2: 1 if needed) if missing.
install_missing_packages() {
    local packages=() sudo=()
    [ "$1" = 0 ] || [ -n "$(pg_bin_dir)" ] || packages+=(postgresql)
    [ "$2" = 0 ] || command -v redis-server >/dev/null || packages+=(redis-server)
    [ "${#packages[@]}" -gt 0 ] || return 0
    if ! is_root; then
        command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
            die "missing ${packages[*]}; install them (apt-get install ${packages[*]}) or run as root"
        sudo=(sudo -n)
    fi
    log "installing ${packages[*]} with apt-get"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
}

# ----------------------------------------------------------------- main

# Serialise runs of this script. The servers are started with fd 9 (and fd 3, the
# captured stdout) closed so that they hold neither the lock nor the caller's pipe.
with_lock() {
    mkdir -p "$SERVICES_DIR"
    if command -v flock >/dev/null; then
        exec 9>"$SERVICES_DIR/.lock"
        flock -w 120 9 || die "another services.sh holds $SERVICES_DIR/.lock"
    fi
}

main_start() {
    local force="${LEASEHOLD_FORCE_THROWAWAY:-0}" need_pg=1 need_redis=1
    PG_URL=""
    REDIS_URL=""
    if [ "$force" != 1 ]; then
        if [ -n "${LEASEHOLD_TEST_PG_URL:-}" ]; then
            PG_URL="$LEASEHOLD_TEST_PG_URL"
            log "PostgreSQL: using LEASEHOLD_TEST_PG_URL from the environment"
        elif pg_answers "$PG_DEFAULT_PORT"; then
            PG_URL="postgresql+psycopg://postgres@127.0.0.1:$PG_DEFAULT_PORT/postgres"
            log "PostgreSQL: using the server on port $PG_DEFAULT_PORT"
        fi
        if [ -n "${LEASEHOLD_TEST_REDIS_URL:-}" ]; then
            REDIS_URL="$LEASEHOLD_TEST_REDIS_URL"
            log "Redis: using LEASEHOLD_TEST_REDIS_URL from the environment"
        elif redis_answers "$REDIS_DEFAULT_PORT"; then
            REDIS_URL="redis://127.0.0.1:$REDIS_DEFAULT_PORT/0"
            log "Redis: using the server on port $REDIS_DEFAULT_PORT"
        fi
    fi
    [ -z "$PG_URL" ] || need_pg=0
    [ -z "$REDIS_URL" ] || need_redis=0
    if [ "$need_pg" = 1 ] || [ "$need_redis" = 1 ]; then
        with_lock
        install_missing_packages "$need_pg" "$need_redis"
        [ "$need_pg" = 0 ] || start_pg
        [ "$need_redis" = 0 ] || start_redis
    fi
    emit_export LEASEHOLD_TEST_PG_URL "$PG_URL"
    emit_export LEASEHOLD_TEST_REDIS_URL "$REDIS_URL"
}

case "${1:-start}" in
start) main_start ;;
stop)
    with_lock
    stop_pg
    stop_redis
    ;;
*) die "usage: $0 [start|stop]" ;;
esac
