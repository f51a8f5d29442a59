#!/usr/bin/env bash
# allow-two-primaries with a diskless node: the link between the
# diskless Primary D (node2) and a storage node S (node0) breaks while S
# is being promoted beside it.  Three nodes in network namespaces, quorum
# majority, protocol C; node1 (T) is the other storage node.
#
# Promoting S beside D is a handover: S tells D it is Primary, waits for
# D's ROUTED (D's writes go through S from then on, and none that went
# straight to S and T is in flight), and only then tells T.  Here D
# writes random 4 KiB blocks (tests/twoprim.py, 16 requests in flight)
# when `replctl primary` runs on S and, a few milliseconds before or
# after, the D-S link is cut (a blackhole route for S's address in D's
# namespace and one for D's in S's; every other link stays up): in some
# rounds before D's ROUTED reaches S, in others after.  D's writes in
# flight to S then wait until one side gives the other up (ping-timeout),
# and D names them to T as missed by S (OUT_OF_SYNC), while S announces
# itself Primary to T, or has done so.
#
# Correct, in every round: `replctl primary` on S either fails with a
# message and S stays Secondary, or S is Primary.  D's writer may see
# its writes fail (D cut off from a live storage Primary must not write
# beside it), but no write it saw answered is lost: once the link is
# restored, S is Secondary again and the storage nodes report each
# other in sync, S's and T's disks are byte-identical and every block
# holds D's last answered write to it, or one never answered
# (tests/twoprim.py check); and D, still Primary, writes again.  What happened in each round (the
# promotion, ROUTED, D's writer) is printed.
#
# Each round starts a fresh resource (new disks, new processes), so
# that one round's failure does not spill into the next; every round
# runs, and the test fails if any did.  ROUNDS (default 5) rounds; the
# cut follows the promotion by the round's entry of CUT_AFTER (seconds;
# negative: the cut comes first).  Each round's logs stay in the
# temporary directory as rROUND-NODE.log.txt, and a failed round's disks
# as rROUND-NODE.img (KEEP_TMPDIR=1 keeps it).
source "$(dirname "$0")/functions.sh"
requires ip -V
requires jq --version
requires /usr/bin/python3 -c "import nbd"
ns_nodes 10.92.0 node0 node1 node2

ROUNDS=${ROUNDS:-5}
CUT_AFTER=(-0.02 0.05 0 0.1 0.01 -0.05 0.02 0.005)
BLOCKS=64                       # 256 KiB
WSECS=4                         # the writer's time per round, at most
S=node0 T=node1 D=node2

config () { ns_config -x "allow-two-primaries: true" -d $D $S $T $D; }

# The nodes are started afresh every round: NPID[NODE] is the running
# one, and the cleanup stops whichever that is then (start_ns would
# register each round's pid, which may be another process's by the
# end).
start_round_node ()
{
    local n=$1
    ip netns exec "$NS-$n" nbdkit -f -p 10809 "$PLUGIN" config="$CONFIG" node="$n" \
        >>"$tmpdir/$n.log" 2>&1 &
    NPID[$n]=$!
}
stop_round_nodes ()
{
    local n
    for n in $S $T $D; do
        [ -n "${NPID[$n]:-}" ] || continue
        stop_ns $n
        NPID[$n]=
    done
}
cleanup_fn stop_round_nodes
WRITER=                         # the round's writer, while it runs
cleanup_fn '[ -z "$WRITER" ] || { kill $WRITER 2>/dev/null; wait $WRITER 2>/dev/null; }'

cut_link ()
{
    ip -n "$NS-$D" route add blackhole "${addr[$S]}/32"
    ip -n "$NS-$S" route add blackhole "${addr[$D]}/32"
}
heal_link ()
{
    ip -n "$NS-$D" route del blackhole "${addr[$S]}/32" 2>/dev/null || true
    ip -n "$NS-$S" route del blackhole "${addr[$D]}/32" 2>/dev/null || true
}
cleanup_fn heal_link

peer_is () { echo "[.peers[] | select(.name == \"$1\") | $2] | length == 1 and all"; }
STORAGE_IN_SYNC='.connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0'
D_CONNECTED='[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | length == 2 and all'
# poll_st NODE JQ SECS: as wait_st, but returns 1 instead of failing.
poll_st ()
{
    local i
    for (( i=0; i<$3*10; i++ )); do
        st "$1" 2>/dev/null | jq -e "$2" >/dev/null && return 0
        sleep 0.1
    done
    return 1
}
brief () { st "$1" 2>&1 | jq -c '{role, writes_through, peers: [.peers[] | {name, connection, role, disk, replication, oos: .out_of_sync_bytes, last_error}]}' 2>/dev/null; }
# log_lines NODE: NODE's log this round, each line the time of day and
# the message.
log_lines () { sed -E 's/^[0-9-]+ ([0-9:.]+) nbdkit: repl: (error: |warning: )?/\1 /' "$tmpdir/$1.log"; }

# round R: one race on a fresh resource; prints FAIL lines and returns
# 1 if it went wrong.
round ()
{
    local r=$1 cut_after label n i bad=0 before promoter prc wrc
    local promote_msg promoted wrote routed
    cut_after=${CUT_AFTER[$(( (r - 1) % ${#CUT_AFTER[@]} ))]}
    if [[ $cut_after == -* ]]; then
        label="round $r (cut ${cut_after#-} s before the promotion)"
    else
        label="round $r (cut $cut_after s after the promotion)"
    fi
    report () { echo "$test_name: FAIL: $label: $*" >&2; bad=1; }

    config
    for n in $S $T $D; do : >"$tmpdir/$n.log"; done
    for n in $S $T $D; do start_round_node $n; done
    wait_st $D "$D_CONNECTED" 30
    wait_st $S "$(peer_is $T "$STORAGE_IN_SYNC")" 30
    "$REPLCTL" -s "$tmpdir/$D.sock" primary >"$tmpdir/err" 2>&1 ||
        fail "$label: promoting $D failed: $(cat "$tmpdir/err")"
    wait_st $S "$(peer_is $D '.role == "Primary"')" 10
    wait_st $T "$(peer_is $D '.role == "Primary"')" 10

    # D writes, 16 requests in flight.
    before=$(st $D | jq .writes)
    ip netns exec "$NS-$D" $TWOPRIM write "nbd://${addr[$D]}:10809" 1 $BLOCKS \
        "$($TWOPRIM now $WSECS)" $(( r * 10000000 )) 1000000 \
        "$tmpdir/w.$r.json" >"$tmpdir/w.$r.out" 2>&1 &
    WRITER=$!
    wait_st $D ".writes > $before + 100" 15

    # The race: S's promotion and the cut of the D-S link.  (The pause
    # is the round's parameter, where the cut falls, not a wait.)
    if [[ $cut_after == -* ]]; then
        cut_link
        sleep "${cut_after#-}"
    fi
    timeout 20 "$REPLCTL" -s "$tmpdir/$S.sock" primary >"$tmpdir/promote.$r.out" 2>&1 &
    promoter=$!
    if [[ $cut_after != -* ]]; then
        sleep "$cut_after"
        cut_link
    fi
    prc=0; wait $promoter || prc=$?
    promote_msg=$(tr '\n' ' ' <"$tmpdir/promote.$r.out")
    if [ $prc = 0 ]; then
        promoted="succeeded"
        poll_st $S '.role == "Primary"' 5 ||
            report "replctl primary on $S succeeded, but $S is not Primary: $(brief $S)"
    elif [ $prc = 124 ]; then
        promoted="no answer"
        report "replctl primary on $S did not answer within 20 s"
    else
        promoted="refused: $promote_msg"
        [ -n "$promote_msg" ] || report "replctl primary on $S failed ($prc) without a message"
        st $S | jq -e '.role == "Secondary"' >/dev/null ||
            report "replctl primary on $S failed ($promote_msg), but $S is $(st $S | jq -r .role)"
    fi

    # D's writer ends (at its deadline, or on a failed write).
    for (( i = 0; i < (WSECS + 30) * 10; i++ )); do
        kill -0 $WRITER 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 $WRITER 2>/dev/null; then
        report "$D's writer still running $(( WSECS + 30 )) s after it started; $D: $(brief $D)"
        kill $WRITER 2>/dev/null || true
        wait $WRITER 2>/dev/null || true
        WRITER=
        stop_round_nodes
        return 1
    fi
    wrc=0; wait $WRITER || wrc=$?
    WRITER=
    if [ $wrc = 0 ]; then
        wrote="no write failed: $(cat "$tmpdir/w.$r.out")"
    else
        wrote="writes failed: $(jq '.writes | length' "$tmpdir/w.$r.json") answered, $(jq '.pending | length' "$tmpdir/w.$r.json") not; $(head -n 1 "$tmpdir/w.$r.out" | sed 's/ (seq [0-9]*)//')"
    fi

    # The old D-S connection is given up on both sides before the link
    # comes back (nothing of it is delivered late).
    poll_st $D "$(peer_is $S '.connection != "Connected"')" 20 ||
        report "$D still shows $S connected 20 s after the cut: $(brief $D)"
    poll_st $S "$(peer_is $D '.connection != "Connected"')" 20 ||
        report "$S still shows $D connected 20 s after the cut: $(brief $S)"

    # What S did with D's ROUTED.
    if grep -q "peer $D: writes through this node now" "$tmpdir/$S.log"; then
        routed="ROUTED reached $S before the cut"
    elif grep -q "peer $D: .*no ROUTED within net: timeout" "$tmpdir/$S.log"; then
        routed="no ROUTED: $S dropped $D at net: timeout"
    elif [ $prc = 0 ]; then
        routed="no ROUTED: $S became Primary without it ($D's connection failed first)"
    else
        routed="no ROUTED"
    fi
    info "$label: promotion of $S: $promoted; $routed; $D's writer: $wrote"
    info "$label:   $S: $(log_lines $S | grep -E "now Primary|ROUTED|writes through|peer $D: .*(ping-timeout|timeout|refus)" | tail -n 4 | tr '\n' ';')"
    info "$label:   $T: $(log_lines $T | grep -E "now Primary|refus|directly|straight|reconnecting" | tail -n 4 | tr '\n' ';')"
    info "$label:   $D: $(log_lines $D | grep -E "writes go|failed|lost|peer $S: (now|nothing|connected)" | sed 's/offset [0-9]*/offset N/g' | uniq -c -f 1 | sed 's/^ *//' | tail -n 6 | tr '\n' ';')"

    # The link comes back; S steps down if it was promoted.
    heal_link
    if st $S | jq -e '.role == "Primary"' >/dev/null; then
        if poll_st $D "$(peer_is $S '.connection == "Connected"')" 20; then
            info "$label: $D reconnected to Primary $S: its writes go $(st $D | jq -r 'if .writes_through then "through \(.writes_through)" else "straight to the storage nodes" end')"
        else
            info "$label: $D did not reconnect to Primary $S within 20 s: $(brief $D)"
        fi
        "$REPLCTL" -s "$tmpdir/$S.sock" secondary >"$tmpdir/err" 2>&1 ||
            report "demoting $S failed: $(cat "$tmpdir/err")"
    fi
    poll_st $S '.role == "Secondary"' 10 || report "$S is not Secondary: $(brief $S)"

    # Settled: everything connected and the storage nodes in sync.
    if ! poll_st $D "$D_CONNECTED" 30 ||
       ! poll_st $S "$(peer_is $T "$STORAGE_IN_SYNC")" 60 ||
       ! poll_st $T "$(peer_is $S "$STORAGE_IN_SYNC")" 30; then
        report "not settled after the link came back: $S: $(brief $S); $T: $(brief $T); $D: $(brief $D)"
    elif ! cmp -s "$(disk $S)" "$(disk $T)"; then
        $TWOPRIM check "$(disk $T)" $BLOCKS "$tmpdir/w.$r.json" >"$tmpdir/check.$r-$T.out" 2>&1 || true
        $TWOPRIM check "$(disk $S)" $BLOCKS "$tmpdir/w.$r.json" >"$tmpdir/check.$r-$S.out" 2>&1 || true
        report "the disks of $S and $T differ in $(cmp -l "$(disk $S)" "$(disk $T)" | awk '{ print int(($1 - 1) / 4096) }' | uniq | wc -l) of $BLOCKS blocks, while each reports the other UpToDate with nothing out of sync; checker on $S: $(tail -n 1 "$tmpdir/check.$r-$S.out"); on $T: $(tail -n 1 "$tmpdir/check.$r-$T.out")"
    else
        if $TWOPRIM check "$(disk $S)" $BLOCKS "$tmpdir/w.$r.json" >"$tmpdir/check.$r.out" 2>&1; then
            info "$label: settled, disks identical: $(tail -n 1 "$tmpdir/check.$r.out")"
        else
            report "an answered write of $D is lost: $(tail -n 20 "$tmpdir/check.$r.out")"
        fi
    fi

    # D, still Primary, writes again (beyond the blocks checked; tried
    # for about 5 s).
    if [ $bad = 0 ]; then
        for (( i = 0; i < 10; i++ )); do
            timeout 20 ip netns exec "$NS-$D" /usr/bin/python3 -m nbd -u "nbd://${addr[$D]}:10809" \
                -c "h.pwrite(b'z' * 4096, $(( BLOCKS * 4096 )))" >"$tmpdir/late.out" 2>&1 && break
            sleep 0.5
        done
        [ $i -lt 10 ] ||
            report "$D, Primary with both storage nodes connected and in sync, still cannot write 5 s later: $(tail -n 1 "$tmpdir/late.out"); its log: $(log_lines $D | tail -n 1)"
        [ $i = 0 ] || [ $i = 10 ] || info "$label: $D's first write once settled failed; it wrote after $i retries"
    fi

    stop_round_nodes
    heal_link
    for n in $S $T $D; do mv "$tmpdir/$n.log" "$tmpdir/r$r-$n.log.txt"; done
    if [ $bad != 0 ]; then          # the next round starts on new disks
        for n in $S $T; do cp "$(disk $n)" "$tmpdir/r$r-$n.img"; done
    fi
    [ $bad = 0 ] && info "$label: ok"
    return $bad
}

failed=0
for (( r = 1; r <= ROUNDS; r++ )); do
    round $r || failed=$((failed + 1))
done
[ $failed = 0 ] || fail "$failed of $ROUNDS rounds went wrong (FAIL lines above; logs: $tmpdir/r*-node*.log.txt with KEEP_TMPDIR=1)"
info "ok: $ROUNDS promotions of $S with the D-S link cut; no answered write of $D lost; disks identical"
