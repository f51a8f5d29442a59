#!/usr/bin/env bash
# replctl create-md: --in-sync on every node declares the disks identical,
# so the nodes start UpToDate and connect without any sync; create-md
# refuses to overwrite metadata without --force; dump-md shows it.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 32M
head -c 32M /dev/urandom >"$tmpdir/node0.img"
cp "$tmpdir/node0.img" "$tmpdir/node1.img"
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
        fail "create-md --in-sync on $n failed"
done
"$REPLCTL" -c "$CONFIG" -n node1 create-md --in-sync 2>"$tmpdir/err" &&
    fail "create-md overwrote existing metadata without --force"
grep -q -- "--force" "$tmpdir/err" || fail "no hint at --force: $(cat "$tmpdir/err")"
out=$("$REPLCTL" -c "$CONFIG" -n node1 dump-md) || fail "dump-md failed"
grep -q consistent <<<"$out" || fail "dump-md does not show the disk consistent: $out"

start_node node0 role=primary
start_node node1
wait_uptodate node0 30
st=$(status_json node0)
# (The primary starts a new generation since its peer is away at its
# start, so the decision is a bitmap resync of an empty bitmap, rule 70.)
d=$(jq -r '.peers[0].sync_decision' <<<"$st")
case $d in no-sync|sync-source-bitmap) ;; *) fail "decision: $d, expected no sync or an empty bitmap resync" ;; esac
[ "$(jq '.peers[0].resync_total_bytes' <<<"$st")" -eq 0 ] ||
    fail "a resync moved data between disks declared in sync"
same_disks node0 node1
info "ok: nodes made with create-md --in-sync connected without a sync"
