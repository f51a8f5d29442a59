#!/usr/bin/env bash
# A second nbdkit started for a node that is already running is refused
# before it touches the node's disk or metadata: it must not write the
# metadata's "stopped cleanly", which would hide a later crash of the
# running node (and skip the resync of its activity log).
source "$(dirname "$0")/functions.sh"

make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30

out="$tmpdir/second.out"
rc=0
timeout 10 nbdkit -f --exit-with-parent -p "$(free_port)" \
    "$PLUGIN" config="$CONFIG" node=node1 >"$out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a second node1 was not refused (exit $rc)"
grep -q "in use by another process (is this node already running?)" "$out" ||
    fail "the refusal does not say why: $(cat "$out")"
info "second start refused: $(grep 'in use' "$out")"

# The running node1 crashes now: its restart must still see the crash.
kill_node node1
start_node node1
wait_uptodate node0 30
grep -q "did not stop cleanly" "$tmpdir/node1.log" ||
    fail "node1's restart did not notice its crash: the second start marked it clean"
same_disks node0 node1
info "ok: the second start was refused and left the metadata alone"
