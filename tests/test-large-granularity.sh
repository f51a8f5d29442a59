#!/usr/bin/env bash
# The largest bitmap granularity the manual allows (1M, one bit per
# MiB; refused at start before resync requests grew to 1M): online
# verify and a csums resync work in whole chunks of that size, find
# exactly the damaged chunks and repair them.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 64M
cat >>"$CONFIG" <<'EOT'
metadata:
  bitmap-granularity: 1M
resync:
  csums: true
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
head -c 64M /dev/urandom >"$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
wait_uptodate node0 30
same_disks node0 node1

damage ()
{
    local off
    for off in "$@"; do
        head -c 4096 /dev/urandom |
            dd of="$(disk node1)" bs=4096 seek=$((off / 4096)) conv=notrunc status=none
    done
    if cmp -s "$(disk node0)" "$(disk node1)"; then
        fail "the damage did not take"
    fi
}

# Two 4K blocks in two different 1M chunks: verify finds both chunks.
damage $(((3 << 20) + (100 << 10))) $((30 << 20))
"$REPLCTL" -s "$(sock node0)" verify || fail "replctl verify failed"
wait_for node0 '.peers[0].verify.state == "finished"' 30
line=$(grep "verify finished" "$tmpdir/node0.log") || fail "no 'verify finished' in the log"
info "$line"
grep -q ": 2097152 bytes out of sync" <<<"$line" ||
    fail "verify should find exactly 2 chunks of 1M out of sync"
"$REPLCTL" -s "$(sock node0)" resync || fail "replctl resync failed"
wait_uptodate node0 30
same_disks node0 node1

# One more damaged block, then a full csums resync: all but its chunk
# compare equal and stay.
damage $(((50 << 20) + 8192))
"$REPLCTL" -s "$(sock node1)" invalidate >/dev/null || fail "invalidate failed"
wait_log node0 "resync finished, 67108864 bytes in .*; 66060288 of them the same on both sides" 30
wait_uptodate node0 30
line=$(grep 'resync finished' "$tmpdir/node0.log" | tail -n1)
info "$line"
grep -q "67108864 bytes in .*; 66060288 of them the same on both sides, not sent)" <<<"$line" ||
    fail "expected all but the damaged 1M chunk to be the same"
same_disks node0 node1
info "ok: verify and csums with 1M chunks found and repaired exactly the damaged chunks"
