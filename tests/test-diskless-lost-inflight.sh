#!/usr/bin/env bash
# A diskless Primary D (node2) loses one storage node S (node0) while
# writes are in flight to it: the link between D and S is cut (a
# blackhole route for D's packets to S; S-T and D-T stay up).  S gives D
# up first; D answers those writes once it loses S, on the word of the
# other storage node T (node1), which marks them for S.  Then D writes
# no more, and the link comes back.
#
# S, which lost its Primary too, has reconciled its activity log: it
# marked those extents for T.  Before, D's generation stayed the one S
# held, so S came back as D's target in it, D let it resync T (lower id,
# both sides' marks: SYNC_FENCE granted), and T's copy of the
# acknowledged writes was overwritten with S's older one: both disks
# identical and without them.  Now D starts a generation with S away
# before it answers, T takes it, and S is resynced from T.
#
# Checked: every write answered, the storage nodes in sync and
# identical, every block holding the answered write (B), not the
# earlier one (A).
source "$(dirname "$0")/functions.sh"
requires ip -V
requires jq --version
requires /usr/bin/python3 -c "import nbd"
ns_nodes 10.93.0 node0 node1 node2
S=node0 T=node1 D=node2
BLOCKS=16

ns_config -d $D $S $T $D
for n in $S $T $D; do start_ns $n; done
D_CONNECTED='[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | length == 2 and all'
IN_SYNC='[.peers[] | select(.name == "'$T'") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | length == 1 and all'
wait_st $D "$D_CONNECTED" 30
wait_st $S "$IN_SYNC" 30
"$REPLCTL" -s "$tmpdir/$D.sock" primary >/dev/null || fail "promoting $D failed"

# BLOCKS blocks of A, then of B with all of them in flight at the cut.
# (The writer sends them all before it waits for any answer.)
write_blocks ()         # write_blocks BYTE
{
    timeout 60 ip netns exec "$NS-$D" /usr/bin/python3 -c "
import nbd, sys
h = nbd.NBD()
h.connect_uri('nbd://${addr[$D]}:10809')
cookies = [h.aio_pwrite(b'$1' * 4096, i * 4096) for i in range($BLOCKS)]
for c in cookies:
    while not h.aio_command_completed(c):
        h.poll(-1)
h.shutdown()
"
}
write_blocks A || fail "writing A failed"
wait_st $S "$IN_SYNC" 30

# Only D's packets to S are lost (a blackhole route in D's namespace):
# S hears nothing from D and gives it up first (ping-timeout), while D
# hears S and waits for its answers, until S's close reaches it.
ip -n "$NS-$D" route add blackhole "${addr[$S]}/32"
cleanup_fn "ip -n $NS-$D route del blackhole ${addr[$S]}/32 2>/dev/null"
write_blocks B > "$tmpdir/wb.out" 2>&1 ||
    fail "writing B with the D-S link cut failed: $(cat "$tmpdir/wb.out"); $D: $(grep -E 'failed|lost' "$tmpdir/$D.log" | tail -n 2)"
grep -q "peer $D: nothing received .*ping-timeout" "$tmpdir/$S.log" ||
    fail "$D answered B before $S gave it up: B was not in flight to $S at the cut"
grep -q "the diskless primary $D was lost: reconciling" "$tmpdir/$S.log" ||
    fail "$S did not reconcile its activity log with $T when it lost $D"
info "B answered: $S gave $D up first (ping-timeout), with B in flight to it"

ip -n "$NS-$D" route del blackhole "${addr[$S]}/32"
wait_st $D "$D_CONNECTED" 30
wait_st $S "$IN_SYNC" 60
wait_st $T '[.peers[] | select(.name == "'$S'") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | length == 1 and all' 30
info "settled: $(grep -hE "resync (started|finished)|generation" "$tmpdir/$S.log" "$tmpdir/$T.log" | sed -E 's/^[0-9-]+ ([0-9:.]+) nbdkit: repl: /\1 /' | tail -n 4 | tr '\n' ';')"

cmp "$tmpdir/$S.img" "$tmpdir/$T.img" || fail "the disks of $S and $T differ while both report in sync"
head -c $((BLOCKS * 4096)) /dev/zero | tr '\0' B > "$tmpdir/B"
cmp -s "$tmpdir/B" <(head -c $((BLOCKS * 4096)) "$tmpdir/$T.img") ||
    fail "acknowledged writes lost: $(cmp -l "$tmpdir/B" <(head -c $((BLOCKS * 4096)) "$tmpdir/$T.img") | awk '{ print int(($1 - 1) / 4096) }' | uniq | wc -l) of $BLOCKS blocks of B are not on the storage nodes (both identical)"
info "ok: the $BLOCKS answered writes of B are on both storage nodes, identical"

# ---- (2) The D-S link cut with nothing written, this time S's packets
# to D only: D gives S up first (ping-timeout) and closes; S, losing D
# on that close, reconciles its activity log and would resync T, which
# D, no longer writing to S, refuses.  (With the cut both ways, S could
# give D up first and T's fence reach D before D gave S up: granted, no
# refusal.)  The two storage nodes ask again after connect-retry-max
# (0.5 s here), not as fast as they can reconnect (before: 50 to 70
# times a second, a log line each time on all three).
ip -n "$NS-$S" route add blackhole "${addr[$D]}/32"
cleanup_fn "ip -n $NS-$S route del blackhole ${addr[$D]}/32 2>/dev/null"
wait_log $D "refusing its resync from $S" 30
before=$(grep -c "refusing its resync from $S" "$tmpdir/$D.log")
sleep 4                         # the span the refusals are counted over
n=$(( $(grep -c "refusing its resync from $S" "$tmpdir/$D.log") - before ))
[ "$n" -le 16 ] ||
    fail "$D refused $n resyncs of $T from $S in 4 s: they are not paced by connect-retry-max"
info "$D refused $n resyncs of $T from $S in 4 s (paced by connect-retry-max)"
ip -n "$NS-$S" route del blackhole "${addr[$D]}/32"
wait_st $D "$D_CONNECTED" 30
wait_st $S "$IN_SYNC" 60
cmp "$tmpdir/$S.img" "$tmpdir/$T.img" || fail "the disks of $S and $T differ after the second cut"
cmp -s "$tmpdir/B" <(head -c $((BLOCKS * 4096)) "$tmpdir/$T.img") ||
    fail "B is not on the storage nodes after the second cut"
info "ok: after the second cut, disks identical, B kept"
