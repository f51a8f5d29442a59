#!/usr/bin/env bash
# A diskless primary (node3) with three storage nodes (node0..node2)
# under two QD1 writers that log what was acknowledged (tests/ackwrite
# -1: the first failed write fails the test).  One storage node is
# killed, then a second one: the client sees no error while one storage
# node is left.  Both come back while the writers go on; every storage
# node ends UpToDate, the three disks identical, and no acknowledged
# write is lost (tests/ackcheck.py).
#
# Which node dies first: DISKLESS3_FIRST=0|1|2 (default: random, shown);
# the second is the next one round.  DISKLESS3_IDLE=1 stops the writers
# before the two return (then nobody writes during their resyncs),
# 0 keeps them going (default: random, shown).  DISKLESS3_SLOW_FENCE=1
# makes the first sync fence of each of the two that return last 4 s
# (NBDREPL_TEST_SYNC_FENCE_MIN_MS; longer than the ping-timeout of 3 s),
# as when a diskless node's answer comes late: nothing may wait for it
# but the resync it guards (a fence run before the receive loop of the
# source's connection left that node's forwards of the primary's writes
# unread, and the primary dropped: EIO).  Default: random, shown.  The
# resource runs with quorum: off, which lets writes go on with one
# storage node of three.
source "$(dirname "$0")/functions.sh"
requires jq --version

ACKWRITE="$builddir/tests/ackwrite"
ACKCHECK="$(dirname "$0")/ackcheck.py"
[ -x "$ACKWRITE" ] || fail "$ACKWRITE is not built (make tests/ackwrite)"

make_config 4 C 32M
sed -i 's|disk: node3.img|disk: none|' "$CONFIG"
# With quorum (a majority of the 4 nodes) the second loss would stop
# the writes: they are to go on with one storage node left.
sed -i 's|^protocol: C|&\nquorum: off|' "$CONFIG"
rm -f "$(disk node3)"
for n in node0 node1 node2; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
        fail "create-md --in-sync on $n failed"
done
for n in node0 node1 node2 node3; do start_node $n; done
wait_for node3 '[.peers[] | select(.disk != "Diskless") | .connection == "Connected" and .disk == "UpToDate"] | length == 3 and all' 30
wait_for node3 '[.peers[] | select(.disk != "Diskless") | .connection == "Connected" and .disk == "UpToDate"] | all' 30

# acks LOG: how many writes the log says were acknowledged.
acks () { local n; n=$(grep -c '^ack ' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
# wait_acks LOG N SECS: bounded poll until LOG has N acknowledged writes.
wait_acks ()
{
    local log=$1 n=$2 secs=$3 i
    for (( i=0; i<secs*10; i++ )); do
        [ "$(acks "$log")" -ge "$n" ] && return 0
        kill -0 "$w1" 2>/dev/null || fail "a writer stopped: $(grep '^fail' "$tmpdir"/w*.log | head -n 3)"
        sleep 0.1
    done
    fail "$log: fewer than $n writes acknowledged within $secs s ($(acks "$log"))"
}

# Two writers on disjoint 8M ranges; -1: stop (exit 1) at the first error.
"$ACKWRITE" -1 -l "$tmpdir/w1.log" -f 0 -c 2048 -t 240 "$(uri node3)" \
    >"$tmpdir/w1.out" 2>&1 &
w1=$!
cleanup_fn "kill $w1 2>/dev/null || true"
"$ACKWRITE" -1 -l "$tmpdir/w2.log" -f 4096 -c 2048 -t 240 "$(uri node3)" \
    >"$tmpdir/w2.out" 2>&1 &
w2=$!
cleanup_fn "kill $w2 2>/dev/null || true"
wait_acks "$tmpdir/w1.log" 300 20

first=${DISKLESS3_FIRST:-$((RANDOM % 3))}
case $first in 0|1|2) ;; *) fail "DISKLESS3_FIRST=$first: 0, 1 or 2" ;; esac
idle=${DISKLESS3_IDLE:-$((RANDOM % 2))}
case $idle in 0|1) ;; *) fail "DISKLESS3_IDLE=$idle: 0 or 1" ;; esac
slow=${DISKLESS3_SLOW_FENCE:-$((RANDOM % 2))}
case $slow in 0|1) ;; *) fail "DISKLESS3_SLOW_FENCE=$slow: 0 or 1" ;; esac
a=node$first
b=node$(( (first + 1) % 3 ))
c=node$(( (first + 2) % 3 ))
info "killing $a, then $b (DISKLESS3_FIRST=$first DISKLESS3_IDLE=$idle DISKLESS3_SLOW_FENCE=$slow); $c stays"

kill_node $a
wait_acks "$tmpdir/w1.log" $(( $(acks "$tmpdir/w1.log") + 300 )) 20
kill_node $b
wait_for node3 "[.peers[] | select(.name == \"$b\") | .connection != \"Connected\"] | all" 20
wait_acks "$tmpdir/w1.log" $(( $(acks "$tmpdir/w1.log") + 300 )) 20
oos=$(status_json $c | jq "[.peers[] | select(.name == \"$a\" or .name == \"$b\") | .out_of_sync_bytes] | min")
[ "$oos" -gt 0 ] || fail "$c tracks nothing that $a and $b missed"
info "ok: no client error with $a and $b down; $c tracks at least $oos bytes for each"

stop_writers ()
{
    kill -TERM "$w1" "$w2"
    wait "$w1" || fail "writer 1 saw an error: $(grep '^fail' "$tmpdir/w1.log" | head -n 3)"
    wait "$w2" || fail "writer 2 saw an error: $(grep '^fail' "$tmpdir/w2.log" | head -n 3)"
    info "ok: $(acks "$tmpdir/w1.log") + $(acks "$tmpdir/w2.log") writes acknowledged, none failed"
}

# Both return, while the writers go on or after they stopped.
[ "$idle" = 1 ] && stop_writers
[ "$slow" = 1 ] && export NBDREPL_TEST_SYNC_FENCE_MIN_MS=4000
start_node $a
start_node $b
unset NBDREPL_TEST_SYNC_FENCE_MIN_MS
for n in node0 node1 node2; do
    wait_for $n '[.peers[] | select(.name != "node3") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | length == 2 and all' 60
done
wait_for node3 '[.peers[] | select(.disk != "Diskless") | .connection == "Connected" and .disk == "UpToDate"] | length == 3 and all' 30
if [ "$idle" = 0 ]; then
    wait_acks "$tmpdir/w1.log" $(( $(acks "$tmpdir/w1.log") + 300 )) 20
    stop_writers
fi

# Settled: every storage node in sync with the other two.
for n in node0 node1 node2; do
    wait_for $n '[.peers[] | select(.name != "node3") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | length == 2 and all' 60
done
same_disks node0 node1 node2
/usr/bin/python3 "$ACKCHECK" --log "$tmpdir/w1.log" --log "$tmpdir/w2.log" \
    "$(disk node0)" "$(disk node1)" "$(disk node2)" >"$tmpdir/check.out" ||
    fail "ackcheck: $(head -n 5 "$tmpdir/check.out")"
info "ok: the three storage disks are identical and hold every acknowledged write"
