# nbdrepl: helpers for scripts/bench-vm (`scripts/bench --table-vm`),
# which runs inside a guest; the other benchmarks are the Python harness
# in bench/harness/ (common.py has the same helpers there).
# Sourced, not run.  Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause.
#
# The sourcing script sets BENCH_NAME (the prefix of its messages) and,
# before calling status_json, REPLCTL.

die () { echo "$BENCH_NAME: $*" >&2; exit 1; }
say () { echo "$BENCH_NAME: $*" >&2; }

# stop_pids PID...: SIGTERM, a bounded wait (10 s) for each, then
# SIGKILL, and reap.  Only ever given pids this script started.
stop_pids ()
{
    local p i
    [ $# -gt 0 ] || return 0
    for p in "$@"; do kill "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for (( i=0; i<100; i++ )); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$p" 2>/dev/null && { say "pid $p ignored SIGTERM for 10 s: SIGKILL"; kill -9 "$p" 2>/dev/null; }
        wait "$p" 2>/dev/null || true
    done
}

# free_port: a TCP port that was free a moment ago.
free_port ()
{
    /usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# status_json SOCK: a node's status as JSON (bounded).
status_json () { timeout 10 "$REPLCTL" -s "$1" status --json; }
