#!/usr/bin/env bash
# Two threads telling a peer our state (STATE) leave in the order they
# read it: the one read earlier is not sent after the later one.
#
# node1's worker announces its new disk state at the end of a resync
# (UpToDate, Secondary), and is held between reading that state and
# queueing it (test hook NBDREPL_TEST_WORKER_STATE_DELAY_MS).  Meanwhile
# node1 is promoted, and its control thread tells node0 "Primary".  The
# held STATE, read before, must not follow it: node0 would take node1
# for a Secondary and accept a second Primary.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
start_node node0 role=primary
NBDREPL_TEST_WORKER_STATE_DELAY_MS=4000 start_node node1
wait_uptodate node0 60
out=$("$REPLCTL" -s "$(sock node0)" secondary 2>&1) || fail "demoting node0 failed: $out"
wait_for node1 '.peers[0].role == "Secondary" and .disk == "UpToDate"' 30

# A full resync of node1 ends with its disk UpToDate: the worker holds
# that STATE.
held=': the worker holds its STATE (Secondary, UpToDate) to node0'
went=": the worker's STATE (Secondary, UpToDate) to node0 goes on"
# count LINE: how often node1's log has it.  more LINE N SECS: bounded
# poll until it has it more than N times.
count () { grep -c -- "$1" "$tmpdir/node1.log" || true; }
more ()
{
    local i
    for (( i=0; i<$3*10; i++ )); do
        [ "$(count "$1")" -gt "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
before=$(count "$held")
out=$("$REPLCTL" -s "$(sock node1)" invalidate) || fail "invalidate failed: $out"
more "$held" "$before" 30 ||
    fail "node1's worker did not hold a STATE (Secondary, UpToDate) after the resync"
done_before=$(count "$went")

# While it is held: node1 becomes Primary.
mark=$(wc -l <"$tmpdir/node0.log")
out=$("$REPLCTL" -s "$(sock node1)" primary 2>&1) || fail "promoting node1 failed: $out"
wait_for node0 '.peers[0].role == "Primary"' 10
[ "$(count "$went")" -eq "$done_before" ] ||
    fail "the held STATE went on before node1 was promoted: the test proves nothing"

# The held STATE is released; a write through node1 is acknowledged by
# node0 after anything node1 queued before it, the STATE included.
more "$went" "$done_before" 10 ||
    fail "node1's worker did not release the held STATE"
timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'p' * 4096, 0); h.flush()" ||
    fail "a write through node1 failed"

# node0 heard node1 say Primary, and nothing older after it.
after=$(tail -n +"$((mark + 1))" "$tmpdir/node0.log")
grep -q "peer node1: now Primary" <<<"$after" ||
    fail "node0 did not log node1's promotion"
if grep -E "peer node1: now Secondary|not our primary" <<<"$after"; then
    fail "node0 took Primary node1 for a Secondary: a STATE read before node1's promotion was sent after it"
fi
role=$(status_json node0 | jq -r '.peers[0].role')
[ "$role" = Primary ] || fail "node0 takes node1 for $role"
if out=$("$REPLCTL" -s "$(sock node0)" primary 2>&1); then
    fail "node0 was promoted beside Primary node1: $out"
fi
info "node0 refuses to be a second Primary: $out"
info "ok: a STATE read earlier does not overtake a later one"
