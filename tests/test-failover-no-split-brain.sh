#!/usr/bin/env bash
# A primary that loses its peer but writes nothing has not changed the
# data: after a failover to the peer (which writes) it rejoins as a
# secondary with a bitmap resync, not as half of a split brain.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
kill_node node1                       # node0 goes on alone, idle
wait_for node0 '.peers[0].connection != "Connected"' 10
kill_node node0                       # ... and dies too

start_node node1 role=primary         # failover: node1 takes over, writes
timed 30 nbdsh -u "$(uri node1)" -c "h.pwrite(b'n' * 8192, 4096); h.flush()" ||
    fail "writing through node1 failed"
start_node node0                      # the old primary returns as secondary
wait_uptodate node1 30
grep -q "generations: sync-source-bitmap" "$tmpdir/node1.log" ||
    fail "not a bitmap resync: $(grep generations "$tmpdir/node1.log" | tail -n1)"
grep -q "refusing connection: split-brain" "$tmpdir/node1.log" "$tmpdir/node0.log" &&
    fail "an idle old primary was taken for a split brain"
same_disks node0 node1
info "ok: the idle old primary rejoined with a bitmap resync"
