#!/usr/bin/env bash
# replctl create-md looks before it writes: it refuses (without --force)
# to put internal metadata on a disk holding a filesystem (ext4 made on
# the whole disk would be cut off), leaving the disk untouched; external
# metadata on the same disk is fine; --in-sync warns when the disks
# differ in a sample; a plain-number rate that looks like DRBD's KiB/s
# is warned about, by replctl and by the node.
source "$(dirname "$0")/functions.sh"
requires mkfs.ext4 -V
requires jq --version

make_config 2 C 32M
sed -i 's|^\(    disk: node0.img\)$|\1\n    meta: internal|' "$CONFIG"
grep -q "meta: internal" "$CONFIG" || fail "could not set meta: internal"

# ---- ext4 under meta: internal -----------------------------------------
mkfs.ext4 -q -F "$(disk node0)" || fail "mkfs.ext4 failed"
before=$(sha256sum <"$(disk node0)")
if "$REPLCTL" -c "$CONFIG" -n node0 create-md >"$tmpdir/out" 2>"$tmpdir/err"; then
    fail "create-md put internal metadata over an ext4 filesystem: $(cat "$tmpdir/out")"
fi
grep -q "libblkid finds a signature on it (ext4 filesystem)" "$tmpdir/err" ||
    fail "the refusal does not name the filesystem: $(cat "$tmpdir/err")"
grep -q -- "--force" "$tmpdir/err" || fail "no hint at --force: $(cat "$tmpdir/err")"
[ "$(sha256sum <"$(disk node0)")" = "$before" ] || fail "the refused create-md changed the disk"
info "refused: $(cut -c1-160 "$tmpdir/err")..."

"$REPLCTL" -c "$CONFIG" -n node0 create-md --force >/dev/null 2>"$tmpdir/err" ||
    fail "create-md --force failed: $(cat "$tmpdir/err")"
# The metadata is there now: a second create-md speaks of that, not of ext4.
"$REPLCTL" -c "$CONFIG" -n node0 create-md 2>"$tmpdir/err" &&
    fail "create-md overwrote metadata without --force"
grep -q "libblkid" "$tmpdir/err" && fail "existing metadata reported as a filesystem: $(cat "$tmpdir/err")"
info "--force writes it; then the existing metadata is what needs --force"

# External metadata keeps the whole disk: no refusal.
mkfs.ext4 -q -F "$(disk node1)" || fail "mkfs.ext4 failed"
"$REPLCTL" -c "$CONFIG" -n node1 create-md >/dev/null 2>"$tmpdir/err" ||
    fail "create-md refused external metadata beside ext4: $(cat "$tmpdir/err")"
info "external metadata beside ext4: accepted"

# ---- --in-sync on disks that differ --------------------------------------
rm -f "$tmpdir"/node*.img*
make_config 2 C 32M
head -c 1M /dev/urandom | dd of="$(disk node0)" bs=1M seek=7 conv=notrunc status=none
"$REPLCTL" -c "$CONFIG" -n node0 create-md --in-sync >/dev/null 2>"$tmpdir/err" ||
    fail "create-md --in-sync failed: $(cat "$tmpdir/err")"
grep -q "warning: .*--in-sync: disk .*node0.img of node node0 and disk .*node1.img of node node1 differ" "$tmpdir/err" ||
    fail "no warning that the disks differ: $(cat "$tmpdir/err")"
info "differing disks: $(grep -o 'differ (at offset [0-9]*' "$tmpdir/err")"
cp "$(disk node0)" "$(disk node1)"
"$REPLCTL" -c "$CONFIG" -n node1 create-md --in-sync --force >/dev/null 2>"$tmpdir/err" ||
    fail "create-md --in-sync failed: $(cat "$tmpdir/err")"
[ -s "$tmpdir/err" ] && fail "a warning for identical disks: $(cat "$tmpdir/err")"
info "identical disks: no warning"

# ---- a rate in DRBD's unit ---------------------------------------------
rm -f "$tmpdir"/node*.img*
make_config 2 C 16M
printf 'resync:\n  resync-rate: 102400\n' >>"$CONFIG"
"$REPLCTL" -c "$CONFIG" -n node0 create-md >/dev/null 2>"$tmpdir/err" ||
    fail "create-md failed: $(cat "$tmpdir/err")"
grep -q "^replctl: warning: .*r0.yaml:[0-9]*: resync: resync-rate: 102400 is bytes/s (100.0 KiB/s), not KiB/s as in DRBD; write 102400K for 102400 KiB/s" "$tmpdir/err" ||
    fail "no warning naming the unit: $(cat "$tmpdir/err")"
start_node node0
grep -q "repl: warning: .*resync-rate: 102400 is bytes/s" "$tmpdir/node0.log" ||
    fail "the node does not warn about the rate: $(head -n 3 "$tmpdir/node0.log")"
stop_node node0
sed -i 's/resync-rate: 102400$/resync-rate: 100M/' "$CONFIG"
"$REPLCTL" -c "$CONFIG" -n node1 create-md >/dev/null 2>"$tmpdir/err" ||
    fail "create-md failed: $(cat "$tmpdir/err")"
[ -s "$tmpdir/err" ] && fail "a warning for resync-rate: 100M: $(cat "$tmpdir/err")"
info "rate warning: $(grep -o 'resync-rate: 102400 is.*' "$tmpdir/err" 2>/dev/null || grep -o 'resync-rate: 102400 is.*' "$tmpdir/node0.log" | head -n 1)"
