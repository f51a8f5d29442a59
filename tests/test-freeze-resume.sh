#!/usr/bin/env bash
# Two Primaries with quorum.  Three nodes in network namespaces, quorum
# majority, protocol C; alpha is Primary, and four clients are connected
# to it.  alpha is frozen (SIGSTOP) past the ping timeout; each client
# sends one write meanwhile (held in alpha's sockets); beta and gamma,
# the majority, promote beta, which writes.  Then alpha is thawed
# (SIGCONT).
#
# Correct: alpha never serves as Primary next to beta.  Its status never
# shows Primary with quorum while beta is Primary; the writes it held
# fail, and so does a new write through it; once it is demoted it
# rejoins, and every disk ends identical with status in sync.
#
# Schedules (HISTORY): "none", alpha is Primary from the start;
# "back-and-forth", a failover alpha -> beta -> alpha, each with a write,
# before the freeze.  Each runs ROUNDS times (default 1).
source "$(dirname "$0")/functions.sh"
requires ip -V
requires jq --version
ns_nodes 10.97.0 alpha beta gamma

ROUNDS=${ROUNDS:-1}
CLIENTS=4                       # clients of alpha, one held write each
HELD_AT=$((1 << 20))            # the write alpha holds while frozen
BETA_AT=$((2 << 20))            # beta's write as the new primary
LATE_AT=$((3 << 20))            # a write through alpha after the thaw

write_at ()     # write_at NODE OFFSET CHAR
{
    timeout 20 ip netns exec "$NS-$1" /usr/bin/python3 -m nbd -u "nbd://${addr[$1]}:10809" \
        -c "h.pwrite(b'$3' * 4096, $2); h.flush()"
}
role () { st "$1" | jq -r .role; }
IN_SYNC='[.peers[] | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | all'
ALL_IN_SYNC="($IN_SYNC) and (.peers | length == 2)"

config () { ns_config alpha beta gamma; }

# failover FROM TO: demote FROM (once its last client has gone),
# promote TO (both connected).
failover ()
{
    local i
    for (( i=0; i<50; i++ )); do
        "$REPLCTL" -s "$tmpdir/$1.sock" secondary >/dev/null 2>&1 && break
        sleep 0.1
    done
    [ "$(role "$1")" = Secondary ] || fail "demoting $1"
    wait_st "$2" "[.peers[] | select(.name == \"$1\") | .role == \"Secondary\"] | all" 10
    "$REPLCTL" -s "$tmpdir/$2.sock" primary >/dev/null || fail "promoting $2"
}

# round HISTORY N: one freeze; prints FAIL lines and returns 1 if alpha
# served as a second Primary or the disks end different.
round ()
{
    local history=$1 label="$1#$2" n i c bad=0 clients sampler held late
    report () { echo "$test_name: FAIL: $label: $*" >&2; bad=1; }
    config
    for n in alpha beta gamma; do : >"$tmpdir/$n.log"; done
    start_ns alpha role=primary
    start_ns beta
    start_ns gamma
    wait_st alpha "$ALL_IN_SYNC" 30
    if [ "$history" = back-and-forth ]; then
        write_at alpha 0 a || fail "$label: write through alpha"
        failover alpha beta
        write_at beta 4096 b || fail "$label: write through beta"
        failover beta alpha
        write_at alpha 8192 c || fail "$label: write through alpha again"
        wait_st alpha "$ALL_IN_SYNC" 30
    fi

    # CLIENTS clients of alpha, connected now; each sends one write once
    # told to (while alpha is frozen) and prints what became of it.
    rm -f "$tmpdir"/connected.* "$tmpdir/go" "$tmpdir"/held.*
    clients=()
    for (( c=0; c<CLIENTS; c++ )); do
        timeout 60 ip netns exec "$NS-alpha" /usr/bin/python3 - "nbd://${addr[alpha]}:10809" \
            "$tmpdir" $((HELD_AT + c * 4096)) $c >"$tmpdir/held.$c" 2>&1 <<'PY' &
import os, sys, time
import nbd
uri, d, off, c = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
h = nbd.NBD()
h.connect_uri(uri)
open(os.path.join(d, "connected." + c), "w").close()
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.02)
try:
    h.pwrite(b"H" * 4096, off)
    print("held write: succeeded", end="")
except nbd.Error as e:
    print("held write: failed: %s" % e, end="")
try:
    h.flush()
    print("; flush: succeeded")
except nbd.Error as e:
    print("; flush: failed: %s" % e)
PY
        clients+=($!)
    done
    for (( i=0; i<100; i++ )); do
        [ "$(ls "$tmpdir"/connected.* 2>/dev/null | wc -l)" -eq $CLIENTS ] && break
        sleep 0.1
    done
    [ "$(ls "$tmpdir"/connected.* 2>/dev/null | wc -l)" -eq $CLIENTS ] ||
        fail "$label: the clients did not connect to alpha"

    # Freeze alpha past the ping timeout; its clients' writes wait in
    # their sockets.
    kill -STOP "${NPID[alpha]}"
    touch "$tmpdir/go"
    wait_st beta '[.peers[] | select(.name == "alpha") | .connection != "Connected"] | all' 20
    wait_st gamma '[.peers[] | select(.name == "alpha") | .connection != "Connected"] | all' 20
    # beta and gamma reconnect to reconcile their activity logs after
    # losing alpha: beta has quorum again once gamma is back (as an
    # administrator checks status before promoting).
    wait_st beta '.quorum == true and ([.peers[] | select(.name == "gamma") | .connection == "Connected"] | all)' 20
    "$REPLCTL" -s "$tmpdir/beta.sock" primary >/dev/null || fail "$label: promoting beta (majority) failed"
    write_at beta $BETA_AT B || fail "$label: beta, the new Primary, could not write"

    # Thaw alpha, and watch it: 0.05 s samples for 3 s.
    /usr/bin/python3 - "$tmpdir/alpha.sock" "$tmpdir/beta.sock" >"$tmpdir/alpha.samples" <<'PY' &
import json, socket, sys, time
def status(path):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(path)
        s.sendall(b"status --json\n")
        out = b""
        while True:
            c = s.recv(65536)
            if not c: break
            out += c
        st = json.loads(out)
        return {"role": st["role"], "quorum": st["quorum"]}
    except (OSError, ValueError):
        return {}
end = time.monotonic() + 3
while time.monotonic() < end:
    print(json.dumps([status(sys.argv[1]), status(sys.argv[2])]), flush=True)
    time.sleep(0.05)
PY
    sampler=$!
    kill -CONT "${NPID[alpha]}"
    wait "${clients[@]}" || true
    held=$(for (( c=0; c<CLIENTS; c++ )); do
               sed 's/; flush.*//; s/held write: \(failed\): .*(\(E[A-Z]*\))/held write: \1 (\2)/' "$tmpdir/held.$c"
           done | sort | uniq -c | sed 's/^ *//' | paste -s -d, -)
    if write_at alpha $LATE_AT L >"$tmpdir/late.out" 2>&1; then
        late="succeeded"
    else
        late="failed: $(tail -n 1 "$tmpdir/late.out")"
    fi
    wait "$sampler" || true
    info "$label: after the thaw: $held; a new write through alpha: $late"
    info "$label: alpha's role/quorum as sampled (with beta's role): $(jq -s -c 'map("alpha \(.[0].role // "?") quorum \(.[0].quorum | tostring), beta \(.[1].role // "?")") | unique' "$tmpdir/alpha.samples")"
    [[ $held == *"held write: succeeded"* ]] && report "alpha acknowledged a write it held while beta was Primary"
    [ "$late" = succeeded ] && report "alpha accepted a new write while beta was Primary"
    if jq -s -e 'map(select(.[0].role == "Primary" and .[0].quorum == true and .[1].role == "Primary")) | length > 0' \
            "$tmpdir/alpha.samples" >/dev/null; then
        report "alpha's status showed Primary with quorum while beta was Primary"
    fi
    info "$label: alpha: $(grep -E "quorum|Primary|Secondary|refus|split" "$tmpdir/alpha.log" | sed 's/^nbdkit: \(repl: \|error: \)//' | tail -n 4 | tr '\n' ';')"

    # Settle: alpha steps down (if it did not) and rejoins.
    for (( i=0; i<50; i++ )); do
        [ "$(role alpha)" = Secondary ] && break
        "$REPLCTL" -s "$tmpdir/alpha.sock" secondary >/dev/null 2>&1 || sleep 0.1
    done
    [ "$(role alpha)" = Secondary ] || report "alpha could not be demoted"
    local ok=1
    for (( i=0; i<150; i++ )); do
        st beta 2>/dev/null | jq -e "$ALL_IN_SYNC" >/dev/null && break
        sleep 0.1
    done
    st beta 2>/dev/null | jq -e "$ALL_IN_SYNC" >/dev/null || {
        ok=0
        report "not in sync 15 s after alpha stepped down: $(st beta | jq -c '[.peers[] | {name, connection, disk, replication, oos: .out_of_sync_bytes, last_error}]')"
    }
    [ $ok = 1 ] && sleep 0.5    # let the last resync's data land
    for n in beta gamma; do
        cmp -s "$tmpdir/alpha.img" "$tmpdir/$n.img" ||
            report "alpha and $n differ at the end ($(cmp "$tmpdir/alpha.img" "$tmpdir/$n.img" 2>&1 | head -n 1))"
    done
    for n in alpha beta gamma; do stop_ns $n; done
    for n in alpha beta gamma; do cp "$tmpdir/$n.log" "$tmpdir/$history-$2-$n.log.txt"; done
    [ $bad = 0 ] && info "$label: ok"
    return $bad
}

failed=0 total=0
for history in none back-and-forth; do
    for (( r=1; r<=ROUNDS; r++ )); do
        total=$((total + 1))
        round $history $r || failed=$((failed + 1))
    done
done
[ $failed = 0 ] || fail "$failed of $total rounds let alpha serve next to beta or ended with different disks"
info "ok"
