#!/usr/bin/env bash
# A throwaway PostgreSQL server for agentmesh's PostgresStore tests, on loopback only.
#
#     eval "$(scripts/pg_test_server.sh start)"   # exports AGENTMESH_TEST_POSTGRES_DSN
#     python3 dev.py test
#     scripts/pg_test_server.sh stop              # stops the server, deletes its files
#
# `start [DIR]` creates a cluster in DIR (default: a folder under $TMPDIR named after you)
# with a random password, starts it on 127.0.0.1 at a free port with its socket inside
# DIR, creates the database `agentmesh_test`, and prints the `export` line; started
# again, it only prints the line. `stop [DIR]` stops the server and removes DIR.
#
# Needs PostgreSQL's server programs (initdb, pg_ctl; Debian: apt-get install postgresql)
# and python3. As root it runs the server as the `postgres` user, since PostgreSQL
# refuses to run as root.
set -euo pipefail

usage() {
    echo "usage: $0 start|stop [DIR]" >&2
    exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
action=$1
dir=${2:-${TMPDIR:-/tmp}/agentmesh-pg-test-$(id -un)}
[[ $dir == /* ]] || dir=$PWD/$dir

bindir() {
    if [[ -n ${PG_BINDIR:-} ]]; then
        echo "$PG_BINDIR"
    elif command -v initdb >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v initdb)")"
    else
        # Debian keeps the server programs out of PATH, one folder per major version.
        local found
        found=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
        [[ -n $found ]] || {
            echo "$0: PostgreSQL's initdb not found (Debian: apt-get install postgresql;" \
                "or set PG_BINDIR)" >&2
            exit 1
        }
        echo "$found"
    fi
}

# Only a folder this script made (or an empty or missing one) is ever deleted.
MARKER=.agentmesh-pg-test
ours() {
    if [[ -e $dir && ! -f $dir/$MARKER && -n $(ls -A "$dir" 2>/dev/null) ]]; then
        echo "$0: $dir exists and was not made by this script; it was left alone" >&2
        return 1
    fi
}

# Run a PostgreSQL program as the user that owns the cluster (from /, since that user
# may not be allowed into the working directory).
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    else
        "$@"
    fi
}

start() {
    if [[ -f $dir/dsn ]] && as_owner "$(bindir)/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        echo "export AGENTMESH_TEST_POSTGRES_DSN='$(cat "$dir/dsn")'"
        return
    fi
    local bin port password
    bin=$(bindir)
    stop
    mkdir -p "$dir"
    touch "$dir/$MARKER"
    chmod 700 "$dir"
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$dir"
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    (umask 077 && printf '%s\n' "$password" >"$dir/pwfile")
    if [[ $(id -u) -eq 0 ]]; then
        chown postgres: "$dir/pwfile"
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U agentmesh --pwfile="$dir/pwfile" \
        --auth=scram-sha-256 --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    rm -f "$dir/pwfile"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$dir'" \
        start >/dev/null || {
        cat "$dir/server.log" >&2
        stop
        exit 1
    }
    PGPASSWORD=$password "$bin/createdb" -h 127.0.0.1 -p "$port" -U agentmesh agentmesh_test || {
        stop
        exit 1
    }
    echo "postgresql://agentmesh:$password@127.0.0.1:$port/agentmesh_test" >"$dir/dsn"
    echo "export AGENTMESH_TEST_POSTGRES_DSN='$(cat "$dir/dsn")'"
}

stop() {
    [[ -e $dir ]] || return 0
    ours || exit 1
    if [[ -d $dir/data ]]; then
        as_owner "$(bindir)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

case $action in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
