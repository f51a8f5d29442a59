#!/usr/bin/env bash
# Two nodes, protocol C: an nbdcopy through the primary lands on both
# disks before nbdcopy returns.
source "$(dirname "$0")/functions.sh"
requires nbdcopy --version
requires jq --version

make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0

head -c 64M /dev/urandom > "$tmpdir/data"
nbdcopy "$tmpdir/data" "$(uri node0)"
# No waiting here: protocol C means both disks hold the data already.
cmp "$tmpdir/data" "$(disk node0)" || fail "primary's disk differs from the data"
cmp "$tmpdir/data" "$(disk node1)" || fail "secondary's disk differs from the data"

# Reading back through NBD gives the same bytes.
nbdcopy "$(uri node0)" "$tmpdir/back"
cmp "$tmpdir/data" "$tmpdir/back" || fail "data read back differs"

status_json node0 | jq -e '.writes > 0 and .peers[0].in_flight == 0' >/dev/null ||
    fail "status does not show the writes"
info "ok"
