#!/usr/bin/env bash
# Resync details:
#  1. zero-aware: a full sync of a volume that is all zeroes sends the
#     chunks as ZEROES commands, not as data;
#  2. resync-rate: a fixed rate holds the resync back (16 MiB of data at
#     4 MiB/s cannot finish in under 3 s; the bound only proves the
#     throttle works, it measures no speed), and the data still arrives.
source "$(dirname "$0")/functions.sh"
requires jq --version

# ---- 1. zeroes ------------------------------------------------------------
make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
st=$(status_json node0)
total=$(jq '.peers[0].resync_total_bytes' <<<"$st")
sent=$(jq '.peers[0].bytes_sent' <<<"$st")
[ "$total" -eq $((64 << 20)) ] || fail "expected a full sync of 64M, got $total bytes"
[ "$sent" -lt $((1 << 20)) ] ||
    fail "a full sync of an all-zero volume sent $sent bytes: zeroes went as data"
same_disks node0 node1
info "1: full sync of 64M of zeroes sent $sent bytes"
stop_node node1
stop_node node0

# ---- 2. a fixed rate ---------------------------------------------------------
rm -f "$tmpdir"/node*.img.meta
head -c 16M /dev/urandom >"$tmpdir/node0.img"
truncate -s 16M "$tmpdir/node1.img"
cat >>"$CONFIG" <<'EOF'
resync:
  resync-rate: 4M
EOF
start_node node0 role=primary
t0=$(date +%s%N)
start_node node1
wait_uptodate node0 60
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -ge 3000 ] || fail "16 MiB resynced in $ms ms despite resync-rate 4M"
same_disks node0 node1
info "2: 16 MiB at resync-rate 4M took $ms ms"
