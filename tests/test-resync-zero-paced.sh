#!/usr/bin/env bash
# All-zero chunks travel as commands without data, but count against
# resync-rate as if they were data (the pace is charged before the chunk
# is read): a full sync of 32 MiB of zeroes at 8 MiB/s sends almost no
# bytes and still takes about 4 s (at least 3 s here; load only slows).
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 32M
printf 'resync:\n  resync-rate: 8M\n' >>"$CONFIG"
start_node node0 role=primary
t0=$(date +%s.%N)
start_node node1
wait_uptodate node0 60
t1=$(date +%s.%N)
st=$(status_json node0)
sent=$(jq '.peers[0].bytes_sent' <<<"$st")
[ "$sent" -lt $((1 << 20)) ] || fail "the zero chunks went as data: $sent bytes sent"
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
awk -v s="$secs" 'BEGIN { exit !(s >= 3) }' ||
    fail "32 MiB of zeroes synced in $secs s at resync-rate 8M: zero chunks were not paced"
info "32 MiB of zeroes at 8 MiB/s: $sent bytes sent, $secs s"
