#!/usr/bin/env bash
# A resync target takes its source's generation UUIDs at RESYNC_DONE
# from what the source last told it on that connection.  A resync run
# on a connection that is up already (a resize's new area here; before
# the sync fence, a diskless primary's AWAY) must end with the source's
# UUIDs as they are then, not as the hello or an older UUIDS gave them:
# else the target names its data with a generation it is not in.  (That
# is how tests/test-resize-attach.sh once saw both storage nodes go
# back to the generation before the diskless primary's: the target kept
# the parent, and a later full sync from it set the other node back.)
#
# Made deterministic with a storage Primary: node0 writes with node2
# away, which starts a tentative generation (node1 follows it, still
# tentative); the write completes, node0's generation is no longer
# tentative, and its worker tells node1 so only 8 s later
# (NBDREPL_TEST_WORKER_UUIDS_DELAY_MS, server/worker.c), as a loaded
# machine may.  replctl resize runs meanwhile: node0 resyncs the new
# area to node1.  When that ends node1 must hold node0's generation as
# node0 has it, not tentative: a tentative copy of a generation holding
# an acknowledged write gives way to a sibling generation (rule 85), and
# the write would be lost if node0 were lost.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdcopy --version

make_config 3 C 16M
NBDREPL_TEST_WORKER_UUIDS_DELAY_MS=8000 start_node node0 role=primary
start_node node1
start_node node2
wait_uptodate node0 90

stop_node node2
wait_for node0 '[.peers[] | select(.name == "node2") | .connection != "Connected"] | all' 15
for n in node0 node1 node2; do truncate -s 32M "$(disk $n)"; done

head -c 65536 /dev/urandom >"$tmpdir/data"
timed 30 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "the write to node0 failed"
wait_log node0 "first write with peer node2 away" 10
wait_log node0 "no longer tentative" 10
t0=$(date +%s.%N)
gen=$(status_json node0 | jq -r .current_uuid)
status_json node0 | jq -e '.meta_flags | index("tentative") == null' >/dev/null ||
    fail "node0's generation is still tentative after its write completed"

out=$("$REPLCTL" -s "$(sock node0)" resize 2>&1) || fail "resize failed: $out"
info "$out"
wait_log node1 "resync finished" 10
st=$(status_json node1)
# Still inside node0's worker's delay: what node1 holds came from the
# resync, not from a later UUIDS.
awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { exit !(t1 - t0 < 7) }' ||
    fail "the resize took too long to tell (more than 7 s of node0's 8 s delay)"
[ "$(jq -r .current_uuid <<<"$st")" = "$gen" ] ||
    fail "node1 ended the resync in generation $(jq -r .current_uuid <<<"$st"), not node0's $gen"
jq -e '.meta_flags | index("tentative") == null' <<<"$st" >/dev/null ||
    fail "node1 ended the resync with generation $gen tentative ($(jq -c .meta_flags <<<"$st")), though node0's write in it was acknowledged"
info "node1 took generation $gen, not tentative, at the end of the new area's resync"

# In the end all three agree (node2 is resynced when it returns).
start_node node2
wait_uptodate node0 60
wait_for node1 ".current_uuid == \"$gen\" and (.meta_flags | index(\"tentative\") == null)" 20
same_disks node0 node1 node2
info "ok"
