#!/usr/bin/env bash
# A node that stops cleanly says goodbye: its peer logs the disconnection
# as what it is (the peer shutting down), not as an error.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30

stop_node node1
wait_for node0 '.peers[0].connection != "Connected"' 10
grep -q "peer node1: connection closed by peer (it is shutting down); disconnecting" \
    "$tmpdir/node0.log" || fail "node0 did not log node1's clean stop as such: $(tail -n3 "$tmpdir/node0.log")"
grep -q "error: peer node1: connection closed" "$tmpdir/node0.log" &&
    fail "node0 logged node1's clean stop as an error"

start_node node1
wait_uptodate node0 30
stop_node node0
wait_for node1 '.peers[0].connection != "Connected"' 10
grep -q "peer node0: connection closed by peer (it is shutting down)" "$tmpdir/node1.log" ||
    fail "node1 did not log node0's clean stop as such"
grep -q "error: peer node0: connection closed" "$tmpdir/node1.log" &&
    fail "node1 logged node0's clean stop as an error"
info "ok"
