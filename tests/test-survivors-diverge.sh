#!/usr/bin/env bash
# Survivors must not diverge silently.  Three storage nodes in network
# namespaces, quorum majority, protocol C; alpha is Primary.  alpha's
# packets to gamma are dropped (a blackhole route in alpha's namespace),
# so a write through alpha reaches beta but not gamma, and waits for
# gamma's ACK; alpha is SIGKILLed in that moment.  beta and gamma, still
# connected to each other, are the majority; one of them is promoted:
#
#   promote=beta    the survivor that has the write;
#   promote=gamma   the one that lacks it.
#
# The old primary then returns (Secondary) and rejoins.  Correct: once
# everything has settled, every disk is identical (cmp) and status
# reports every peer in sync.  The survivors may not end different while
# both say UpToDate with nothing out of sync.
source "$(dirname "$0")/functions.sh"
requires ip -V
requires jq --version
ns_nodes 10.96.0 alpha beta gamma

BLOCK=$((1 << 20))              # where the lost write goes

block_is ()     # block_is NODE CHAR: NODE's disk holds 4 KiB of CHAR at BLOCK
{
    cmp -s <(dd if="$tmpdir/$1.img" bs=4096 skip=$((BLOCK / 4096)) count=1 status=none) \
           <(head -c 4096 /dev/zero | tr '\0' "$2")
}
IN_SYNC='[.peers[] | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | all'

# scenario PROMOTE: the whole story on fresh disks; returns 1 (with FAIL
# lines) if the disks end different.
scenario ()
{
    local promote=$1 other n i bad=0
    [ "$promote" = beta ] && other=gamma || other=beta
    ns_config -t 3 alpha beta gamma

    start_ns alpha role=primary
    start_ns beta
    start_ns gamma
    wait_st alpha "($IN_SYNC) and (.peers | length == 2)" 30

    # alpha can no longer reach gamma; a write goes to beta only, and
    # waits for gamma.
    ip -n "$NS-alpha" route add blackhole "${addr[gamma]}/32"
    timeout 20 ip netns exec "$NS-alpha" /usr/bin/python3 -m nbd \
        -u "nbd://${addr[alpha]}:10809" \
        -c "h.pwrite(b'w' * 4096, $BLOCK); h.flush()" \
        >"$tmpdir/write-$promote.out" 2>&1 &
    local writer=$!
    for (( i=0; i<100; i++ )); do
        block_is beta w && break
        sleep 0.02
    done
    block_is beta w || fail "$promote: the write did not reach beta within 2 s"
    # Mid-write: the client has no answer yet (gamma's ACK is missing).
    kill -0 "$writer" 2>/dev/null ||
        info "$promote: note: the write completed before alpha was killed: $(cat "$tmpdir/write-$promote.out")"
    # (Checked before the kill: once the survivors notice that alpha is
    # gone, which a SIGKILL's closed sockets tell beta at once, they
    # reconcile, and gamma then gets the block from beta.)
    block_is gamma w && fail "$promote: gamma has the write: the test would prove nothing"
    kill9_ns alpha
    wait "$writer" 2>/dev/null || true
    # The survivors, connected to each other, see alpha gone.  The route
    # stays until gamma has given alpha up (ping-timeout): the killed
    # process's socket would otherwise still deliver the write to gamma
    # once the route is back, which a crashed machine does not.
    wait_st beta '[.peers[] | select(.name == "alpha") | .connection != "Connected"] | all' 20
    wait_st gamma '[.peers[] | select(.name == "alpha") | .connection != "Connected"] | all' 20
    ip -n "$NS-alpha" route del blackhole "${addr[gamma]}/32"
    info "$promote: alpha killed mid-write: beta has the block, gamma has not"

    # One survivor is promoted (majority: 2 of 3).
    wait_st beta '[.peers[] | select(.name == "gamma") | .connection == "Connected"] | all' 20
    "$REPLCTL" -s "$tmpdir/$promote.sock" primary >/dev/null ||
        fail "$promote: promoting $promote failed"

    # The old primary returns, Secondary, and rejoins.
    start_ns alpha
    wait_st "$promote" "($IN_SYNC) and (.peers | length == 2)" 60
    wait_st "$other" "$IN_SYNC" 30
    wait_st alpha "$IN_SYNC" 30
    info "$promote: settled: $(grep -h "generations:" "$tmpdir"/{alpha,beta,gamma}.log | sed 's/^nbdkit: repl: //' | tail -n 6 | tr '\n' ';')"
    for n in alpha beta gamma; do
        info "$promote:   $n: $(st $n | jq -c '{role, disk, peers: [.peers[] | {name, disk, replication, oos: .out_of_sync_bytes}]}')"
    done
    for n in beta gamma; do
        if ! cmp "$tmpdir/alpha.img" "$tmpdir/$n.img"; then
            echo "$test_name: FAIL: promote=$promote: alpha and $n differ, while status reports them in sync (the block at $BLOCK: $(for m in alpha beta gamma; do block_is $m w && echo -n "$m:written " || echo -n "$m:old "; done))" >&2
            bad=1
        fi
    done
    info "$promote: the block at the end: $(for m in alpha beta gamma; do block_is $m w && echo -n "$m:written " || echo -n "$m:old "; done)"
    for n in alpha beta gamma; do stop_ns $n; done
    for n in alpha beta gamma; do mv "$tmpdir/$n.log" "$tmpdir/$promote-$n.log"; done
    [ $bad = 0 ] && info "promote=$promote: ok: every disk identical"
    return $bad
}

failed=0
scenario beta || failed=$((failed + 1))
scenario gamma || failed=$((failed + 1))
[ $failed = 0 ] || fail "$failed of 2 schedules left the survivors' disks different"
info "ok"
