#!/usr/bin/env bash
# csums: true (checksum-based resync): a secondary invalidated after a
# few of its blocks were damaged gets a full resync in which only the
# chunks whose digests differ travel as data; the disks end identical.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 64M
cat >>"$CONFIG" <<'EOT'
resync:
  csums: true
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
head -c 64M /dev/urandom >"$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
wait_uptodate node0 30

for off in $((3 << 20)) $((30 << 20)) $(((60 << 20) + 8192)); do
    head -c 4096 /dev/urandom |
        dd of="$(disk node1)" bs=4096 seek=$((off / 4096)) conv=notrunc status=none
done
cmp -s "$(disk node0)" "$(disk node1)" && fail "the damage did not take"

sent0=$(status_json node0 | jq '.peers[0].bytes_sent')
"$REPLCTL" -s "$(sock node1)" invalidate >/dev/null || fail "invalidate failed"
for (( i=0; i<300; i++ )); do
    [ "$(grep -c 'resync finished' "$tmpdir/node0.log")" -ge 2 ] && break
    sleep 0.1
done
line=$(grep 'resync finished' "$tmpdir/node0.log" | tail -n1)
[ "$(grep -c 'resync finished' "$tmpdir/node0.log")" -ge 2 ] ||
    fail "no second resync finished within 30 s"
info "$line"
wait_uptodate node0 30
same_disks node0 node1
grep -q "67108864 bytes in .*; 67096576 of them the same on both sides, not sent)" <<<"$line" ||
    fail "expected all but the 3 damaged chunks (12288 bytes) to be the same"
# What the primary sent for the resync must be far below the 64M of data.
sent=$(( $(status_json node0 | jq '.peers[0].bytes_sent') - sent0 ))
[ "$sent" -lt $((4 << 20)) ] ||
    fail "the resync sent $sent bytes: the data of identical chunks travelled"
info "ok: csums resync sent $sent bytes for a 64M full sync with 3 damaged chunks"
