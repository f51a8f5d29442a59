#!/usr/bin/env bash
# net: cork.  With cork (the default) a small write that finds an
# earlier message to the peer unanswered waits for that answer and goes
# with the others that waited, in one send:
#  - at queue depth 1 nothing is ever held: exactly one message per send;
#  - 16 writes at once while the peer is stopped (SIGSTOP: nothing is
#    answered): the first is sent, the other 15 are held (the peer's
#    in_flight says 16, messages_sent moved by the first and pings
#    only); once the peer runs again they go in one or two sends.  This
#    through a primary and through a diskless client (to each storage
#    node);
#  - with cork: false the same 16 writes are all sent while the peer is
#    stopped: nothing is held;
#  - a 4k random-write load at QD16 (replbench --verify) verifies and
#    ends identical on every storage node, with cork and without;
#  - status says cork (JSON .cork, the human link: line).
# (How many messages a free-running load puts in each send depends on
# the machine's speed: a benchmark measures that, this test does not.)
source "$(dirname "$0")/functions.sh"
requires jq --version

RB="$builddir/client/replbench"

# counters NODE PEER: "messages sends" that NODE has sent to PEER.
counters ()
{
    status_json "$1" | jq -r --arg p "$2" '.peers[] | select(.name == $p) | "\(.messages_sent) \(.sends)"'
}

# load NODE PEER QD LABEL: a 2 s verified 4k random-write load at queue
# depth QD through NODE; prints "messages sends" it sent to PEER.
load ()
{
    local node=$1 peer=$2 qd=$3 label=$4 m0 s0 m1 s1 out
    read -r m0 s0 <<<"$(counters "$node" "$peer")"
    out=$(timeout 60 "$RB" --uri "$(uri "$node")" --rw randwrite --bs 4k --qd "$qd" \
              --runtime 2 --size 16M --verify 2>&1) ||
        fail "$label: replbench failed: $out"
    grep -q "verify ok" <<<"$out" || fail "$label: $out"
    read -r m1 s1 <<<"$(counters "$node" "$peer")"
    [ $(( s1 - s0 )) -gt 0 ] || fail "$label: nothing was sent to $peer"
    info "$label: $(( m1 - m0 )) messages in $(( s1 - s0 )) sends to $peer" >&2
    echo "$(( m1 - m0 )) $(( s1 - s0 ))"
}

# in_flight NODE PEER: NODE's messages to PEER not yet answered.
in_flight ()
{
    status_json "$1" | jq -r --arg p "$2" '.peers[] | select(.name == $p) | .in_flight'
}

# stopped_burst NODE PEER CORK LABEL: stop PEER, write 16 blocks at once
# through NODE, and check what NODE sends to PEER: with CORK=on the
# first goes and 15 are held until PEER runs again, then go in at most
# 3 sends; with CORK=off all 16 go while PEER is stopped.  (Pings to
# PEER also count as messages and sends: a few are allowed for.)
stopped_burst ()
{
    local node=$1 peer=$2 cork=$3 label=$4 m0 s0 m1 s1 m2 s2 i writer
    wait_for "$node" "[.peers[] | select(.name == \"$peer\") | .in_flight == 0] | all" 30
    read -r m0 s0 <<<"$(counters "$node" "$peer")"
    kill -STOP "${PID[$peer]}"
    /usr/bin/python3 - "$(uri "$node")" >"$tmpdir/burst.out" 2>&1 <<'PY' &
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
cookies = [h.aio_pwrite(os.urandom(4096), i * 65536) for i in range(16)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    h.aio_command_completed(c)          # raises on a failed write
print("16 writes done")
PY
    writer=$!
    for (( i=0; i<100; i++ )); do
        [ "$(in_flight "$node" "$peer")" -ge 16 ] && break
        sleep 0.1
    done
    [ "$(in_flight "$node" "$peer")" -ge 16 ] ||
        { kill -CONT "${PID[$peer]}"; fail "$label: the 16 writes did not reach the window to $peer within 10 s"; }
    if [ "$cork" = off ]; then
        for (( i=0; i<100; i++ )); do
            read -r m1 s1 <<<"$(counters "$node" "$peer")"
            [ $(( m1 - m0 )) -ge 16 ] && break
            sleep 0.1
        done
    fi
    read -r m1 s1 <<<"$(counters "$node" "$peer")"
    kill -CONT "${PID[$peer]}"
    wait "$writer" || fail "$label: the writes failed: $(cat "$tmpdir/burst.out")"
    read -r m2 s2 <<<"$(counters "$node" "$peer")"
    info "$label: with $peer stopped $(( m1 - m0 )) messages in $(( s1 - s0 )) sends; after it ran again $(( m2 - m1 )) in $(( s2 - s1 ))"
    [ $(( m2 - m0 )) -ge 16 ] || fail "$label: only $(( m2 - m0 )) messages went to $peer for 16 writes"
    if [ "$cork" = on ]; then
        # Held: after the first send nothing more goes before an answer.
        # Writes that reach the queue before that first send has left
        # (a loaded machine: the burst arrives while it is under way)
        # go with it, in the same send or the next: then few sends
        # carried all of them, which is cork's point too.  Without cork
        # (below) each write went in a send of its own here.
        [ $(( m1 - m0 )) -le 4 ] || [ $(( s1 - s0 )) -le 4 ] ||
            fail "$label: $(( m1 - m0 )) messages in $(( s1 - s0 )) sends went to the stopped $peer: the writes were not held"
        [ $(( m1 - m0 )) -gt 4 ] || { [ $(( m2 - m1 )) -ge 12 ] && [ $(( s2 - s1 )) -le 3 ]; } ||
            fail "$label: the held writes went in $(( s2 - s1 )) sends ($(( m2 - m1 )) messages)"
    else
        [ $(( m1 - m0 )) -ge 16 ] ||
            fail "$label: with cork: false only $(( m1 - m0 )) of 16 writes went to the stopped $peer"
    fi
}

# ---- through a primary ----
make_config 2 C 32M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
status_json node0 | jq -e '.peers[0].messages_sent != null and .cork == true' >/dev/null ||
    fail "status has no messages_sent, or does not say cork: true"
"$REPLCTL" -s "$(sock node0)" status | grep -q "link: .* cork:on" ||
    fail "the human status does not say cork:on"

read -r m s <<<"$(load node0 node1 1 "primary QD1")"
[ "$m" -eq "$s" ] || fail "primary QD1: $m messages in $s sends: a write was held with nothing in flight"

stopped_burst node0 node1 on "primary, cork"
load node0 node1 16 "primary QD16" >/dev/null
wait_uptodate node0 30
same_disks node0 node1
stop_node node0; stop_node node1

# The same load without cork.
sed -i 's/^  connect-retry-max: 0.5$/&\n  cork: false/' "$CONFIG"
grep -q '^  cork: false$' "$CONFIG" || fail "could not set cork: false"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
status_json node0 | jq -e '.cork == false' >/dev/null || fail "status does not say cork: false"
"$REPLCTL" -s "$(sock node0)" status | grep -q "link: .* cork:off" ||
    fail "the human status does not say cork:off"
stopped_burst node0 node1 off "primary, cork: false"
load node0 node1 16 "primary QD16, cork: false" >/dev/null
wait_uptodate node0 30
same_disks node0 node1
stop_node node0; stop_node node1

# ---- through a diskless client ----
rm -f "$tmpdir"/node*.img*
make_diskless_config 32M
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
read -r m s <<<"$(load node2 node0 1 "diskless QD1")"
[ "$m" -eq "$s" ] || fail "diskless QD1: $m messages in $s sends to node0"
for peer in node0 node1; do
    stopped_burst node2 "$peer" on "diskless, cork"
done
load node2 node0 16 "diskless QD16" >/dev/null
stop_node node2
wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 30
same_disks node0 node1
info "ok"
