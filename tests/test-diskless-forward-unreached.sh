#!/usr/bin/env bash
# Writes forwarded to a node connected to a third node that the
# forwarder could not reach, and the forwarder never returns.
#
# Three storage nodes F (node0), R (node1), T (node2) and a diskless
# Primary D (node3), quorum off.  The links D-R, D-T and F-T are cut
# (blackhole routes both ways); D-F, F-R and R-T stay up.  D writes
# (its only target is F): F forwards the writes to R, which it reaches,
# and marks them for T, which it does not.  R, connected to T, took
# data that T lacks.  Then F is killed for good and the links come
# back: D can write to R and T only.
#
# Before, R marked nothing for T (a node connected to R "gets its share
# from F"): T, connected to R and behind R's generation, stayed Outdated
# with nobody to resync it (R's bitmap held nothing for it) until some
# connection broke, and with F gone only R's full resync could mend it.
# Now F tells R which nodes it marked (OUT_OF_SYNC after the forwarded
# write), R marks them too and resyncs T at once.
#
# Then the same with R frozen while D writes again: F marks the writes
# for R and T, and resyncs R, with an OUT_OF_SYNC after each chunk
# naming T.  (Before, T could also have decided a full sync of R while
# R was Inconsistent, marked all of it, lost to F as R's source, and,
# R back UpToDate in T's generation, become its source by those marks:
# T's copy without the writes replaced R's.  A full sync now marks only
# once the target has taken its source.)
#
# FORWARD_UNREACHED_IDS=reverse gives F the highest storage id and T
# the lowest.  It is not in make check: at the cut, R, which lost D,
# may resync F (lower id) with D's fence granted just before D gives R
# up, and D, left with an Inconsistent F, fails the writes (no write is
# lost; with quorum: majority D would have no quorum there anyway).
#
# Checked: every write answered; T resynced by R while F is still up
# (in sync with R, holding what D wrote), both times; after F is gone
# and D is back with R and T, both in sync and identical, every block
# holding the last write.
source "$(dirname "$0")/functions.sh"
requires ip -V
requires jq --version
requires /usr/bin/python3 -c "import nbd"
ns_nodes 10.92.0 node0 node1 node2 node3
F=node0 R=node1 T=node2 D=node3
BLOCKS=32

if [ "${FORWARD_UNREACHED_IDS:-}" = reverse ]; then
    ns_config -d $D $T $R $F $D
else
    ns_config -d $D $F $R $T $D
fi
sed -i 's|^quorum: majority|quorum: off|' "$CONFIG"
for n in $F $R $T $D; do start_ns $n; done
each_peer () {                  # each_peer JQ PEER...: JQ true of each
    local p q= t=$1; shift
    for p in "$@"; do
        q+="${q:+ and }"'([.peers[] | select(.name == "'$p'") | '"$t"'] | length == 1 and all)'
    done
    echo "$q"
}
connected () { each_peer '.connection == "Connected" and .disk == "UpToDate"' "$@"; }
lost () { each_peer '.connection != "Connected"' "$@"; }
in_sync () {                    # in_sync PEER: a jq test
    echo '[.peers[] | select(.name == "'$1'") | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | length == 1 and all'
}
wait_st $D "$(connected $F $R $T)" 30
for n in $F $R; do wait_st $n "$(in_sync $T)" 30; done
wait_st $F "$(in_sync $R)" 30
promote $D

write_blocks ()         # write_blocks BYTE
{
    timeout 60 ip netns exec "$NS-$D" /usr/bin/python3 -c "
import nbd
h = nbd.NBD()
h.connect_uri('nbd://${addr[$D]}:10809')
for i in range($BLOCKS):
    h.pwrite(b'$1' * 4096, i * 4096)
h.shutdown()
"
}
write_blocks A || fail "writing A failed"

cut () {                        # cut X Y: both ways
    ip -n "$NS-$1" route add blackhole "${addr[$2]}/32"
    ip -n "$NS-$2" route add blackhole "${addr[$1]}/32"
    cleanup_fn "ip -n $NS-$1 route del blackhole ${addr[$2]}/32 2>/dev/null"
    cleanup_fn "ip -n $NS-$2 route del blackhole ${addr[$1]}/32 2>/dev/null"
}
mend () {                       # mend X Y
    ip -n "$NS-$1" route del blackhole "${addr[$2]}/32"
    ip -n "$NS-$2" route del blackhole "${addr[$1]}/32"
}
cut $D $R; cut $D $T; cut $F $T
wait_st $D "$(lost $R $T)" 30
wait_st $F "$(lost $T)" 30
wait_st $F "$(in_sync $R)" 30
wait_st $R "$(in_sync $T)" 30
info "cut: $D reaches $F only, $F reaches $R, $R reaches $T"

write_blocks B || fail "writing B with $D reaching $F only failed: $(grep -E 'failed|refus' "$tmpdir/$D.log" | tail -n 2)"
wait_st $F '[.peers[] | select(.name == "'$T'") | .out_of_sync_bytes > 0] | length == 1 and all' 10
info "B written: $F marked $(st $F | jq '.peers[] | select(.name == "'$T'") | .out_of_sync_bytes') bytes for $T"

# R got B from F, and F's mark for T: R resyncs T, with F still up.
wait_st $R "$(in_sync $T)" 30
wait_st $T "$(in_sync $R)" 30
head -c $((BLOCKS * 4096)) /dev/zero | tr '\0' B > "$tmpdir/B"
cmp -s "$tmpdir/B" <(head -c $((BLOCKS * 4096)) "$tmpdir/$T.img") ||
    fail "$T reports in sync with $R without the writes $F forwarded to $R"
info "ok: $R resynced $T while $F is up"

# The same by resync: R frozen while D writes C, so that F gives R up
# and marks C for it too; thawed, R is resynced by F, which tells it
# what it marked for T (an OUT_OF_SYNC after each chunk), and R
# resyncs T.
kill -STOP "${NPID[$R]}"
write_blocks C || fail "writing C with $R frozen failed: $(grep -E 'failed|refus' "$tmpdir/$D.log" | tail -n 2)"
wait_st $F '[.peers[] | select(.name == "'$R'") | .out_of_sync_bytes > 0] | length == 1 and all' 10
kill -CONT "${NPID[$R]}"
wait_st $F "$(in_sync $R)" 60
wait_st $R "$(in_sync $T)" 60
wait_st $T "$(in_sync $R)" 60
head -c $((BLOCKS * 4096)) /dev/zero | tr '\0' C > "$tmpdir/C"
cmp -s "$tmpdir/C" <(head -c $((BLOCKS * 4096)) "$tmpdir/$R.img") ||
    fail "$R reports in sync with $F without C"
cmp -s "$tmpdir/C" <(head -c $((BLOCKS * 4096)) "$tmpdir/$T.img") ||
    fail "$T reports in sync with $R without C, which $F resynced to $R"
info "ok: $F resynced C to $R, $R resynced it to $T"

# F never returns.  D gets R and T back.
kill9_ns $F
mend $D $R; mend $D $T
wait_st $D "$(connected $R $T)" 60
wait_st $R "$(in_sync $T)" 60
wait_st $T "$(in_sync $R)" 60
info "settled: $(grep -hE "resync (started|finished)|generation|marked" "$tmpdir/$R.log" "$tmpdir/$T.log" | sed -E 's/^[0-9-]+ ([0-9:.]+) nbdkit: repl: /\1 /' | tail -n 6 | tr '\n' ';')"

cmp "$tmpdir/$R.img" "$tmpdir/$T.img" ||
    fail "the disks of $R and $T differ while both report in sync: $(cmp -l "$tmpdir/$R.img" "$tmpdir/$T.img" | awk '{ print int(($1 - 1) / 4096) }' | uniq | wc -l) blocks"
cmp -s "$tmpdir/C" <(head -c $((BLOCKS * 4096)) "$tmpdir/$T.img") ||
    fail "acknowledged writes lost: the disks do not hold C"
info "ok: the $BLOCKS answered writes of C are on $R and $T, identical"
