#!/usr/bin/env bash
# allow-two-primaries with a diskless node: the storage Primary (node0)
# is frozen (SIGSTOP) while it and the diskless Primary (node2), which
# writes through it, write the same blocks (tests/twoprim.py, 16
# requests in flight each).
#
# Unlike a SIGKILL (test-two-primaries-diskless-kill.sh), whose closed
# sockets tell every peer at once, a frozen node is noticed only by
# ping-timeout, and node2 and the storage Secondary node1 notice it at
# slightly different moments: node2 then sends its writes straight to a
# node1 that may still follow node0 (it waits for node0's loss, bounded,
# and refuses the write if node0 is still its Primary then).  Correct:
# node2's writer ends without a single failed write, its writes going
# straight to node1 once node0 is seen gone.
#
# Then node0 is thawed (SIGCONT).  Its writer's writes were held while
# it was frozen; cut off from the majority, node0 is expected to fail
# them: how they end (and how many were answered after the thaw) is
# reported, not judged here.  node0 is made Secondary and resynced;
# node0's and node1's disks must end byte-identical, and every block
# must hold the last answered write of one of the writers, or one never
# answered (tests/twoprim.py check): no acknowledged write of either
# writer is lost.  A node0 that answered held writes in a generation of
# its own, which node1 (in node2's newer one) never saw, ends in a
# split brain: the test fails at once then, saying so.
#
# Each of ROUNDS rounds (default 3) freezes node0 once.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires /usr/bin/python3 -c "import nbd"

BLOCKS=64                       # 256 KiB: the two writers meet all the time
SECS=8                          # writing time per round
ROUNDS=${ROUNDS:-3}

make_diskless_config 16M
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
wait_storage_uptodate node0 node1

logs=()
for (( r = 1; r <= ROUNDS; r++ )); do
    wait_for node0 '.role == "Secondary"' 15
    wait_for node2 '.role == "Secondary" and .writes_through == null' 15
    lines1=$(wc -l <"$tmpdir/node1.log")
    lines2=$(wc -l <"$tmpdir/node2.log")

    # Both writers auto-promote their nodes; node2 writes through node0.
    twoprim_start $r $SECS $BLOCKS "$(uri node0)" "$(uri node2)"
    wait_for node0 '.role == "Primary" and .writes > 200' 15
    wait_for node2 '.role == "Primary" and .writes > 200 and .writes_through == "node0"' 15

    # node0 freezes: no RST, no FIN, only silence.  (It is thawed
    # first at exit: a frozen process does not die of SIGTERM.)
    pid0=${PID[node0]}
    kill -STOP "$pid0"
    cleanup_fn "kill -CONT $pid0 2>/dev/null || true"
    info "round $r: node0 frozen (SIGSTOP) while both write"

    # node2 (its own status: node0 is not asked, it would not answer)
    # and node1 give node0 up by ping-timeout; node2 writes straight.
    wait_for node2 '[.peers[] | select(.name == "node0") | .connection != "Connected"] | all' 20
    wait_for node1 '[.peers[] | select(.name == "node0") | .connection != "Connected"] | all' 20
    for (( i = 0; i < 150; i++ )); do
        tail -n +$(( lines2 + 1 )) "$tmpdir/node2.log" |
            grep -q "no storage node is Primary: writes go straight" && break
        sleep 0.1
    done
    tail -n +$(( lines2 + 1 )) "$tmpdir/node2.log" |
        grep -q "no storage node is Primary: writes go straight" ||
        fail "round $r: node2 did not say that its writes go straight within 15 s of node0's loss"
    writes_then=$(status_json node2 | jq .writes)

    # node2's writer must not see a single failed write.
    for (( i = 0; i < (SECS + 30) * 10; i++ )); do
        kill -0 $TP_W2 2>/dev/null || break
        sleep 0.1
    done
    kill -0 $TP_W2 2>/dev/null &&
        fail "round $r: node2's writer still running $(( SECS + 30 )) s after it started"
    TP_RC2=0; wait $TP_W2 || TP_RC2=$?
    [ $TP_RC2 = 0 ] ||
        fail "round $r: node2's writer failed after node0 froze: $(tail -n 5 "$tmpdir/w2.out")"
    writes_end=$(status_json node2 | jq .writes)
    [ "$writes_end" -gt "$writes_then" ] ||
        fail "round $r: node2 took no write once it wrote straight to node1 ($writes_then, then $writes_end): the test proves nothing"
    info "round $r: node2's writer: $(cat "$tmpdir/w2.out") ($(( writes_end - writes_then )) of node2's writes after it wrote straight to node1)"
    info "round $r: node1 on node0's loss: $(tail -n +$(( lines1 + 1 )) "$tmpdir/node1.log" | grep -E "peer node0: .*(ping-timeout|timeout)|directly again|refus" | sed -E 's/^[0-9-]+ ([0-9:.]+) nbdkit: repl: (error: |warning: )?/\1 /' | tail -n 3 | tr '\n' ';')"

    # node0 thaws.  Its writer's writes were held while it was frozen;
    # they may fail (no quorum) or not: either is reported, and the
    # checker decides whether what it says was answered is on the disks.
    thawed=$($TWOPRIM now)
    lines0=$(wc -l <"$tmpdir/node0.log")
    lines1=$(wc -l <"$tmpdir/node1.log")
    kill -CONT "$pid0"
    for (( i = 0; i < 300; i++ )); do
        kill -0 $TP_W1 2>/dev/null || break
        sleep 0.1
    done
    kill -0 $TP_W1 2>/dev/null &&
        fail "round $r: node0's writer still running 30 s after node0 was thawed"
    TP_RC1=0; wait $TP_W1 || TP_RC1=$?
    late=$(jq --argjson t "$thawed" '[.writes[] | select(.[3] > $t)] | length' "$tmpdir/w1.$r.json")
    info "round $r: node0's writer: $late write(s) answered after the thaw (held while node0 was frozen)"
    if [ $TP_RC1 = 0 ]; then
        info "round $r: node0's writer after the thaw: succeeded: $(cat "$tmpdir/w1.out")"
    else
        info "round $r: node0's writer after the thaw: failed ($TP_RC1): $(sed 's/ (seq [0-9]*)//; s/block [0-9]*/block N/' "$tmpdir/w1.out" | sort | uniq -c | sed 's/^ *//' | head -n 3 | tr '\n' ';')"
    fi
    logs+=("$tmpdir/w1.$r.json" "$tmpdir/w2.$r.json")

    # node0 steps down (it may have done so itself: auto-promoted, its
    # last client gone) and is resynced.
    if status_json node0 | jq -e '.role == "Primary"' >/dev/null; then
        "$REPLCTL" -s "$(sock node0)" secondary >"$tmpdir/err" 2>&1 ||
            fail "round $r: demoting node0 failed: $(cat "$tmpdir/err")"
    fi
    wait_for node0 '.role == "Secondary"' 15
    info "round $r: node0 after the thaw: $(tail -n +$(( lines0 + 1 )) "$tmpdir/node0.log" | grep -E "quorum|ping-timeout|generations:|split|refus|new current UUID|acknowledged" | sed -E 's/^[0-9-]+ ([0-9:.]+) nbdkit: repl: (error: |warning: )?/\1 /' | tail -n 4 | tr '\n' ';')"
    # Resynced (a split brain, which no resync ends, fails at once).
    for (( i = 0; i < 600; i++ )); do
        sb=$( { tail -n +$(( lines0 + 1 )) "$tmpdir/node0.log"; tail -n +$(( lines1 + 1 )) "$tmpdir/node1.log"; } |
              grep -m 1 "split-brain" | sed 's/^.*refusing connection: //' || true)
        [ -z "$sb" ] ||
            fail "round $r: node0 and node1 in split brain after the thaw (node0 answered $late write(s) of its writer after it): $sb"
        status_json node1 | jq -e "[.peers[] | select(.name == \"node0\") | .connection == \"Connected\" and .disk == \"UpToDate\" and .out_of_sync_bytes == 0] | length == 1 and all" >/dev/null && break
        sleep 0.1
    done
    wait_storage_uptodate node1 node0 5
    wait_storage_uptodate node0 node1 30
    wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
    same_disks node0 node1
    $TWOPRIM check "$(disk node0)" $BLOCKS "${logs[@]}" >"$tmpdir/check.out" 2>&1 ||
        fail "round $r: after node0's freeze: $(tail -n 20 "$tmpdir/check.out")"
    info "round $r: node0 resynced, disks identical: $(tail -n 1 "$tmpdir/check.out")"
done
info "ok: the storage Primary froze $ROUNDS times; the diskless Primary went on without a failed write; no answered write lost"
