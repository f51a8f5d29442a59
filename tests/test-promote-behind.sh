#!/usr/bin/env bash
# Stale decisions after a promotion.  Three nodes, alpha Primary.  gamma
# is killed; alpha writes 8 MiB that beta gets and gamma misses; alpha
# dies.  gamma returns and connects to beta while both are Secondary:
# beta is ahead (gamma's generation is in beta's history).  Then:
#
#   promote=beta    the node that is ahead is promoted: gamma must be
#                   resynced from it (beta shows SyncSource towards
#                   gamma, then Established with 0 out of sync), and
#                   the disks end identical;
#   promote=gamma   the node that is behind is asked to be promoted: it
#                   must not serve its stale data as Primary (refused,
#                   or resynced first: a read through it returns what
#                   alpha wrote); the disks end identical.
#
# Reported: a Primary showing "sync-target-full (rule 60: history-peer)"
# towards its own secondary, the peer Established with non-zero
# out-of-sync, never resynced.
source "$(dirname "$0")/functions.sh"
requires jq --version

SIZE=32M
PATTERN_AT=$((4 << 20))         # alpha's 8 MiB: [4 MiB, 12 MiB)

IN_SYNC='[.peers[] | select(.name != "alpha") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | all'

# config: alpha, beta, gamma (quorum majority, as by default with three
# nodes), resync held to 8 MiB/s so that a resync shows in status.
config ()
{
    local n i=0
    CONFIG="$tmpdir/r0.yaml"
    {
        echo "resource: r0"
        echo "protocol: C"
        echo "quorum: majority"
        echo "auto-promote: false"
        echo "net:"
        echo "  ping-interval: 0.5"
        echo "  ping-timeout: 3"
        echo "  timeout: 4"
        echo "  connect-retry-max: 0.5"
        echo "resync:"
        echo "  resync-rate: 8M"
        echo "nodes:"
        for n in alpha beta gamma; do
            echo "  - name: $n"
            echo "    id: $i"
            echo "    address: 127.0.0.1:$(free_port)"
            echo "    disk: $n.img"
            echo "    control: $n.sock"
            rm -f "$tmpdir/$n.img" "$tmpdir/$n.img.meta"
            truncate -s $SIZE "$tmpdir/$n.img"
            NBD_PORT[$n]=$(free_port)
            i=$((i + 1))
        done
    } >"$CONFIG"
    for n in alpha beta gamma; do
        "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
            fail "create-md --in-sync on $n"
    done
}

# pattern_ok NODE: NODE's disk holds alpha's 8 MiB.
pattern_ok ()
{
    cmp -s <(dd if="$(disk "$1")" bs=1M skip=$((PATTERN_AT >> 20)) count=8 status=none) \
           "$tmpdir/pattern"
}

scenario ()
{
    local promote=$1 bad=0 i s sampler
    report () { echo "$test_name: FAIL: promote=$promote: $*" >&2; bad=1; }
    config
    start_node alpha role=primary
    start_node beta
    start_node gamma
    wait_for alpha "($IN_SYNC) and (.peers | length == 2)" 30

    # gamma away; alpha writes 8 MiB that only beta gets; alpha dies.
    kill_node gamma
    wait_for alpha '.peers[] | select(.name == "gamma") | .connection != "Connected"' 20
    timed 60 nbdsh -u "$(uri alpha)" -c "
data = open('$tmpdir/pattern', 'rb').read()
for i in range(8):
    h.pwrite(data[i << 20:(i + 1) << 20], $PATTERN_AT + (i << 20))
h.flush()" || fail "$promote: writing through alpha failed"
    pattern_ok beta || fail "$promote: beta does not have alpha's writes"
    kill_node alpha
    wait_for beta '.peers[] | select(.name == "alpha") | .connection != "Connected"' 20

    # gamma returns: it connects to beta, both Secondary.  From now on
    # beta's and gamma's status are sampled every 0.1 s (a resync may
    # start as soon as they connect).
    rm -f "$tmpdir/stop"
    /usr/bin/python3 "$tmpdir/sampler.py" "$tmpdir/stop" "$(sock beta)" "$(sock gamma)" \
        >"$tmpdir/$promote.samples" &
    sampler=$!
    cleanup_fn "kill $sampler 2>/dev/null"
    start_node gamma
    wait_for beta '.peers[] | select(.name == "gamma") | .connection == "Connected"' 20
    wait_for gamma '.peers[] | select(.name == "beta") | .connection == "Connected"' 20
    pattern_ok gamma && fail "$promote: gamma has alpha's writes: the test would prove nothing"
    info "$promote: gamma connected to beta: beta: $(grep "peer gamma: generations:" "$tmpdir/beta.log" | tail -n 1 | sed 's/^nbdkit: repl: //'); gamma: $(grep "peer beta: generations:" "$tmpdir/gamma.log" | tail -n 1 | sed 's/^nbdkit: repl: //')"

    if "$REPLCTL" -s "$(sock "$promote")" primary >"$tmpdir/promote.err" 2>&1; then
        info "$promote: promoted"
    else
        info "$promote: promotion refused: $(cat "$tmpdir/promote.err")"
        [ "$promote" = gamma ] || report "promoting beta, which has the newest data, was refused: $(cat "$tmpdir/promote.err")"
        # gamma refused: beta takes over, which must then resync gamma.
        "$REPLCTL" -s "$(sock beta)" primary >/dev/null 2>&1 ||
            report "beta could not be promoted either"
    fi
    local primary
    primary=$(for n in beta gamma; do [ "$(status_json $n | jq -r .role)" = Primary ] && echo $n; done | head -n 1)
    [ -n "$primary" ] || { report "no Primary"; return 1; }

    # A Primary never serves data older than what alpha wrote.
    if ! timed 20 nbdsh -u "$(uri "$primary")" -c "
import sys
data = open('$tmpdir/pattern', 'rb').read()
got = h.pread(1 << 20, $PATTERN_AT)
sys.exit(0 if got == data[:1 << 20] else 1)"; then
        report "$primary, Primary, serves data older than alpha's writes"
    fi

    # Wait (20 s at most) until the primary sees the other node in sync
    # with alpha's data; then the samples: beta, which is ahead, showed
    # SyncSource towards gamma (before or after the promotion), gamma
    # never SyncSource, and both end Established with 0 out of sync.
    local other
    [ "$primary" = beta ] && other=gamma || other=beta
    for (( i=0; i<200; i++ )); do
        s=$(status_json "$primary" 2>/dev/null | jq -c --arg o "$other" '.peers[]? | select(.name == $o) | {connection, disk, replication, oos: .out_of_sync_bytes, decision: .sync_decision}') || s='{}'
        if jq -e '.connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .oos == 0' <<<"$s" >/dev/null &&
           pattern_ok "$other"; then
            break
        fi
        sleep 0.1
    done
    touch "$tmpdir/stop"
    wait $sampler || true
    info "$promote: $primary (Primary) sees $other: $s"
    local summary
    summary=$(jq -s -c '{
        beta: (map(.[0].p.replication // empty) | unique),
        gamma: (map(.[1].p.replication // empty) | unique),
        last: (last | map({role, disk, p}))}' "$tmpdir/$promote.samples")
    info "$promote: replication states seen: $summary"
    jq -e '.beta | index("SyncSource")' <<<"$summary" >/dev/null ||
        report "beta, which is ahead, never showed SyncSource towards gamma"
    jq -e '.gamma | index("SyncSource") | not' <<<"$summary" >/dev/null ||
        report "gamma, which is behind, showed SyncSource towards beta"
    jq -e '.connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .oos == 0' <<<"$s" >/dev/null ||
        report "$primary does not see $other in sync: $s"
    if ! cmp "$(disk beta)" "$(disk gamma)"; then
        report "the disks of beta and gamma differ (alpha's 8 MiB on beta: $(pattern_ok beta && echo yes || echo no), on gamma: $(pattern_ok gamma && echo yes || echo no))"
    fi
    stop_node beta
    stop_node gamma
    for n in alpha beta gamma; do mv "$tmpdir/$n.log" "$tmpdir/$promote-$n.log"; done
    [ $bad = 0 ] && info "promote=$promote: ok"
    return $bad
}

# sampler.py STOPFILE SOCKET...: print one line every 0.1 s, a list of
# each node's {role, disk, p: its view of the other node}, until
# STOPFILE exists (60 s at most).
cat >"$tmpdir/sampler.py" <<'PY'
import json, os, socket, sys, time

def status(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"status --json\n")
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
        s.close()
        st = json.loads(out)
    except (OSError, ValueError):
        return {}
    others = [os.path.basename(p)[:-5] for p in sys.argv[2:]]
    p = [q for q in st["peers"] if q["name"] in others][0]
    return {"role": st["role"], "disk": st["disk"],
            "p": {"name": p["name"], "connection": p["connection"],
                  "disk": p["disk"], "replication": p["replication"],
                  "oos": p["out_of_sync_bytes"],
                  "decision": p["sync_decision"]}}

deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    print(json.dumps([status(p) for p in sys.argv[2:]],
                     separators=(",", ":")), flush=True)
    time.sleep(0.1)
PY

/usr/bin/python3 -c "
import sys
sys.stdout.buffer.write(b''.join((b'promote-behind %06d ' % i).ljust(512, b'.') for i in range(16384)))" \
    >"$tmpdir/pattern"

failed=0
scenario beta || failed=$((failed + 1))
scenario gamma || failed=$((failed + 1))
[ $failed = 0 ] || fail "$failed of 2 schedules left a node behind"
info "ok"
