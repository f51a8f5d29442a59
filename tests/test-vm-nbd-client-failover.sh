#!/usr/bin/env bash
# In the guest (tests/vm/vm-run), with the kernel's NBD client: a
# storage primary attached through nbd-client, and the failovers the
# README documents.  (1) repl-attach --remote (nbd-client on a local
# nbdkit that follows the primary): ext4 and fio writing with verify
# while the primary is SIGKILLed; the other node takes over, fio ends
# without an error, fsck is clean, and the old primary, started again
# as Secondary, is resynced to identical disks; repl-detach releases
# the device.  (2) The planned move by hand ("Moving the primary by
# hand"): nbd-client over TCP to the primary, unmount, nbd-client -d,
# replctl secondary there and primary on the other node, nbd-client to
# it: the file system and its files are intact.
vm_timeout=400
source "$(dirname "$0")/vm/guest.sh"
source "$(dirname "$0")/functions.sh"
requires nbd-client --version
requires mkfs.ext4 -V
requires fio --version
requires jq --version
requires socat -V

ATTACH="$(dirname "$0")/../client/repl-attach"
DETACH="$(dirname "$0")/../client/repl-detach"
export NBDREPL_RUN_DIR="$tmpdir/run"
mnt="$tmpdir/mnt"
mkdir -p "$mnt"

dmesg -C
no_kernel_io_errors ()
{
    if dmesg | grep -iE "(I/O|critical medium|buffer i/o) error|EXT4-fs error|${1#/dev/}: .*error"; then
        fail "the kernel logged I/O errors on $1"
    fi
}
replctl_on () { local n=$1; shift; "$REPLCTL" -s "$(sock "$n")" "$@"; }

# ---- (1) repl-attach --remote, the primary SIGKILLed under fio
make_config 2 C 128M
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null || fail "create-md on $n failed"
done
start_node node0 role=primary
start_node node1
wait_uptodate node0 60

dev=$("$ATTACH" r0 --remote "$(uri node0)" "$(uri node1)") ||
    fail "repl-attach --remote failed: $(tail -n 5 "$NBDREPL_RUN_DIR"/attach-r0/*.log 2>/dev/null)"
cleanup_fn "umount '$mnt' 2>/dev/null; '$DETACH' r0 2>/dev/null"
case $dev in
    /dev/nbd[0-9]*) ;;
    *) fail "repl-attach --remote printed '$dev', not an NBD device" ;;
esac
info "repl-attach --remote attached the primary node0 as $dev (nbd-client)"
mkfs.ext4 -q -F "$dev"
mount "$dev" "$mnt"
head -c 4M /dev/urandom > "$mnt/before"
sync -f "$mnt/before"
sha_before=$(sha256sum < "$mnt/before" | cut -d' ' -f1)
base=$(status_json node0 | jq .write_bytes)

# fio writes with verify, for about 15 s (rate-limited, and the remote
# path takes ~0.2 s a write under TCG); node0 dies
# once its writes flow.
fio --name=failover --directory="$mnt" --size=4M --bs=16k --rw=randwrite \
    --ioengine=libaio --direct=1 --iodepth=4 --rate_iops=35 --eta=never \
    --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --output="$tmpdir/fio.out" &
fio_pid=$!
cleanup_fn "kill $fio_pid 2>/dev/null; wait $fio_pid 2>/dev/null"
wait_for node0 ".write_bytes > $base + 1048576" 60
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before the primary could be killed"
kill_node node0
killed=$(date +%s.%N)
info "primary node0 killed while fio writes"
wait_for node1 '.role == "Primary"' 60
kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before node1 took over"
relay=$(tail -n 1 "$NBDREPL_RUN_DIR/attach-r0/relay.log")
case $relay in
    *"$(uri node1)") ;;
    *) fail "the relay's last connection went to '$relay', not to node1" ;;
esac
info "node1 is Primary $(awk -v s="$killed" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s after the kill (relay: $relay)"
wait "$fio_pid" || fail "fio failed across the failover: $(cat "$tmpdir/fio.out")"
grep -q "err= 0" "$tmpdir/fio.out" || fail "fio reported errors: $(cat "$tmpdir/fio.out")"
info "fio: $(grep -E 'err=|READ:|WRITE:' "$tmpdir/fio.out" | tr -s ' ' | tr '\n' ' ')"
info "fio's longest write: $(grep -A3 -E '^ *write:' "$tmpdir/fio.out" | grep -E 'clat.*max=' | head -n 1 | tr -s ' ')"
[ "$(status_json node1 | jq .write_bytes)" -gt 0 ] || fail "no write reached node1 as Primary"
no_kernel_io_errors "$dev"
[ "$(sha256sum < "$mnt/before" | cut -d' ' -f1)" = "$sha_before" ] ||
    fail "a file written before the failover differs after it"
umount "$mnt"
e2fsck -fn "$dev" > "$tmpdir/fsck.out" 2>&1 ||
    { cat "$tmpdir/fsck.out"; fail "e2fsck found problems after the failover"; }
info "fsck: $(tail -n 1 "$tmpdir/fsck.out")"
"$DETACH" r0 || fail "repl-detach failed"
[ ! -e "$NBDREPL_RUN_DIR/attach-r0" ] || fail "repl-detach left its state behind"
[ "$(cat "/sys/block/${dev#/dev/}/size")" -eq 0 ] || fail "$dev is still connected after repl-detach"
info "repl-detach released $dev"

# The old primary returns as Secondary and is resynced from node1.
start_node node0
wait_for node1 '[.peers[] | select(.name == "node0") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 120
same_disks node0 node1
info "node0 back as Secondary, resynced; disks identical"

# ---- (2) the planned move by hand, nbd-client over TCP
replctl_on node1 primary >/dev/null 2>&1 ||
    status_json node1 | jq -e '.role == "Primary"' >/dev/null ||
    fail "node1 could not be made Primary: $(replctl_on node1 primary 2>&1)"
nbd-client 127.0.0.1 "${NBD_PORT[node1]}" "$dev" > "$tmpdir/nbd-client.out" 2>&1 ||
    fail "nbd-client to node1 failed: $(cat "$tmpdir/nbd-client.out")"
cleanup_fn "nbd-client -d $dev >/dev/null 2>&1"
mount "$dev" "$mnt"
head -c 2M /dev/urandom > "$mnt/moved"
sha_moved=$(sha256sum < "$mnt/moved" | cut -d' ' -f1)
umount "$mnt"
nbd-client -d "$dev" >/dev/null 2>&1 || fail "nbd-client -d failed"
# A Primary with clients open is not demoted; it has none now.
wait_for node1 '.role == "Primary"' 10
replctl_on node1 secondary >/dev/null || fail "replctl secondary on node1 failed: $(replctl_on node1 secondary 2>&1)"
replctl_on node0 primary >/dev/null || fail "replctl primary on node0 failed: $(replctl_on node0 primary 2>&1)"
nbd-client 127.0.0.1 "${NBD_PORT[node0]}" "$dev" > "$tmpdir/nbd-client.out" 2>&1 ||
    fail "nbd-client to node0 failed: $(cat "$tmpdir/nbd-client.out")"
mount "$dev" "$mnt"
[ "$(sha256sum < "$mnt/before" | cut -d' ' -f1)" = "$sha_before" ] || fail "'before' differs on node0"
[ "$(sha256sum < "$mnt/moved" | cut -d' ' -f1)" = "$sha_moved" ] || fail "'moved' differs on node0"
umount "$mnt"
e2fsck -fn "$dev" > "$tmpdir/fsck2.out" 2>&1 ||
    { cat "$tmpdir/fsck2.out"; fail "e2fsck found problems after the planned move"; }
nbd-client -d "$dev" >/dev/null 2>&1 || fail "nbd-client -d failed"
no_kernel_io_errors "$dev"
wait_uptodate node0 60
same_disks node0 node1
info "ok: planned move node1 -> node0 with nbd-client: files intact, fsck clean, disks identical"
