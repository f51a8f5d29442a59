#!/usr/bin/env bash
# replbench's iSCSI transport (libiscsi) against a private tgtd on
# 127.0.0.1: a verified random write and a multi-session random
# read/write find every block as last written; a sequential --verify
# write is in the LUN's backing file (read back over NBD by nbdkit's
# file plugin) and --verify-only on a zeroed LUN fails.  Then the
# replicated path: tgt exporting an nbdfuse file of a two-node repl
# primary; what is written over iSCSI is on the secondary's disk.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires tgtd --version
requires tgtadm --help
requires nbdfuse --version
requires test -c /dev/fuse

RB="$builddir/client/replbench"

# verify_file FILE SEED: FILE holds, in its first 8M, what a sequential
# --verify write of 64k blocks with SEED leaves (read over NBD).
verify_file ()
{
    local s="$tmpdir/file.sock" pid rc=0
    rm -f "$s"
    nbdkit -f --exit-with-parent -r -U "$s" file "$1" >>"$tmpdir/nbdkit-file.log" 2>&1 &
    pid=$!
    for (( i=0; i<100; i++ )); do [ -S "$s" ] && break; sleep 0.1; done
    timed 60 "$RB" --uri "nbd+unix:///?socket=$s" --verify-only --bs 64k --size 8M --seed "$2" || rc=1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    return $rc
}

start_tgtd
truncate -s 32M "$tmpdir/lun1.img" "$tmpdir/lun2.img"
u1=$(tgt_export 1 "$tmpdir/lun1.img")
u2=$(tgt_export 2 "$tmpdir/lun2.img")

out=$(timed 60 "$RB" --uri "$u1" --rw randwrite --qd 16 --runtime 2 --verify) ||
    fail "iSCSI randwrite --verify failed: $out"
grep -q "verify ok" <<<"$out" || fail "iSCSI randwrite --verify: $out"
info "$out"

json=$(timed 60 "$RB" --uri "$u1" --rw randrw --jobs 3 --qd 4 --runtime 1 --verify --json) ||
    fail "iSCSI randrw --jobs 3 --json failed: $json"
jq -e '.transport == "iscsi" and .jobs == 3 and .errors == 0 and .verify_bad_blocks == 0 and .reads > 0 and .writes > 0 and .p999_us >= .p99_us and .p99_us >= .p50_us and .cpu_user_s + .cpu_sys_s > 0' \
    >/dev/null <<<"$json" || fail "iSCSI randrw --json: $json"

timed 60 "$RB" --uri "$u1" --rw write --bs 64k --qd 8 --size 8M --runtime 30 --verify --seed 5 >/dev/null ||
    fail "iSCSI sequential --verify write failed"
timed 60 "$RB" --uri "$u1" --verify-only --bs 64k --size 8M --seed 5 >/dev/null ||
    fail "iSCSI --verify-only with the same seed failed"
verify_file "$tmpdir/lun1.img" 5 || fail "the LUN's backing file does not hold what was written over iSCSI"
if timed 60 "$RB" --uri "$u2" --verify-only --bs 64k --size 8M --seed 5 >/dev/null 2>&1; then
    fail "--verify-only on a zeroed LUN passed"
fi
info "ok: a zeroed LUN fails --verify-only, the written one passes (over iSCSI and over NBD)"

# The replicated volume behind tgt, through nbdfuse.
make_config 2 C 32M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
fusedir="$tmpdir/fuse"
mkdir -p "$fusedir"
nbdfuse "$fusedir" "$(uri node0)" &
fusepid=$!
cleanup_fn "umount '$fusedir' 2>/dev/null; kill $fusepid 2>/dev/null; wait $fusepid 2>/dev/null"
for (( i=0; i<100; i++ )); do [ -f "$fusedir/nbd" ] && break; sleep 0.1; done
[ -f "$fusedir/nbd" ] || fail "nbdfuse did not expose the export within 10 s"
u3=$(tgt_export 3 "$fusedir/nbd")

timed 60 "$RB" --uri "$u3" --rw write --bs 64k --qd 8 --size 8M --runtime 30 --verify --seed 9 >/dev/null ||
    fail "sequential --verify write over iSCSI to the repl volume failed"
out=$(timed 60 "$RB" --uri "$u3" --rw randwrite --qd 16 --runtime 1 --size 8M --verify) ||
    fail "randwrite --verify over iSCSI to the repl volume failed: $out"
info "$out"
timed 60 "$RB" --uri "$u3" --rw write --bs 64k --qd 8 --size 8M --runtime 30 --seed 9 --verify >/dev/null ||
    fail "second sequential --verify write over iSCSI failed"
# Close the LUN and the FUSE file: whatever the kernel still held is
# written to the primary, which (protocol C) has it on node1 too.
tgt_unexport 3
umount "$fusedir"
wait $fusepid 2>/dev/null || true
wait_uptodate node0 30
verify_file "$(disk node1)" 9 || fail "the secondary's disk does not hold what was written over iSCSI"
same_disks node0 node1
info "ok: written over iSCSI through tgt and nbdfuse, found on the secondary"
