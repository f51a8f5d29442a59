#!/usr/bin/env bash
# Online verify: blocks of the secondary's backing file are corrupted
# behind its back; `replctl verify` on the primary, while a client keeps
# writing elsewhere, finds exactly those blocks (and nothing the writes
# touch), and `replctl resync` repairs them.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires fio --version

make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
head -c 64M /dev/urandom >"$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node0)" || fail "nbdcopy failed"
wait_uptodate node0 30
same_disks node0 node1

# Three 4K blocks of node1's disk go bad; node1 does not know.
for off in $((1 << 20)) $(((17 << 20) + 4096)) $((40 << 20)); do
    head -c 4096 /dev/urandom |
        dd of="$(disk node1)" bs=4096 seek=$((off / 4096)) conv=notrunc status=none
done
cmp -s "$(disk node0)" "$(disk node1)" && fail "the corruption did not take"

# A client writes to the last 16M (no corrupted block there) meanwhile.
timeout 60 fio --name=load --ioengine=nbd --uri="$(uri node0)" \
    --rw=randwrite --bs=4k --iodepth=8 --offset=48M --size=16M \
    --time_based=1 --runtime=4 --output=/dev/null &
fio_pid=$!
"$REPLCTL" -s "$(sock node0)" verify || fail "replctl verify failed"
for (( i=0; i<300; i++ )); do
    grep -q "verify finished" "$tmpdir/node0.log" && break
    sleep 0.1
done
line=$(grep "verify finished" "$tmpdir/node0.log") || fail "verify did not finish within 30 s"
wait "$fio_pid" || fail "the client's writes failed during verify"
info "$line"
grep -q ": 12288 bytes out of sync" <<<"$line" ||
    fail "verify should find exactly 3 blocks (12288 bytes) out of sync"
st=$(status_json node0)
oos=$(jq '.peers[0].out_of_sync_bytes' <<<"$st")
[ "$oos" -eq 12288 ] || fail "status: $oos bytes out of sync after verify, expected 12288"
[ "$(jq -r '.peers[0].verify.state' <<<"$st")" = finished ] &&
[ "$(jq '.peers[0].verify.out_of_sync_bytes' <<<"$st")" -eq 12288 ] &&
[ "$(jq '.peers[0].verify.done_bytes' <<<"$st")" -eq $((64 << 20)) ] ||
    fail "status does not show the finished verify: $(jq -c '.peers[0].verify' <<<"$st")"

"$REPLCTL" -s "$(sock node0)" resync || fail "replctl resync failed"
wait_uptodate node0 30
same_disks node0 node1
info "ok: verify found the 3 corrupted blocks, resync repaired them"
