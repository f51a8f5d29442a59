#!/usr/bin/env bash
# net: cork.  With cork (the default) a small write that finds an
# earlier message to the peer unanswered waits for that answer and goes
# with the others that waited, in one send:
#  - at queue depth 1 nothing is ever held: exactly one message per send;
#  - under a 4k random-write load at QD16 (replbench --verify) sends
#    carry several messages each, through a primary and through a
#    diskless client, and the data verifies and ends identical on every
#    storage node;
#  - with cork: false the same load verifies too, and no send carries
#    as many messages on average as with cork (the held writes are what
#    makes the batches);
#  - status says cork (JSON .cork, the human link: line).
source "$(dirname "$0")/functions.sh"
requires jq --version

RB="$builddir/client/replbench"

# counters NODE PEER: "messages sends" that NODE has sent to PEER.
counters ()
{
    status_json "$1" | jq -r --arg p "$2" '.peers[] | select(.name == $p) | "\(.messages_sent) \(.sends)"'
}

# load NODE PEER QD LABEL: a 2 s verified 4k random-write load at queue
# depth QD through NODE; prints messages per send to PEER over it.
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

read -r m s <<<"$(load node0 node1 16 "primary QD16")"
cork_ratio=$(awk -v m="$m" -v s="$s" 'BEGIN { printf "%.2f", m / s }')
awk -v r="$cork_ratio" 'BEGIN { exit !(r >= 1.5) }' ||
    fail "primary QD16 with cork: $cork_ratio messages per send (expected >= 1.5)"
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
read -r m s <<<"$(load node0 node1 16 "primary QD16, cork: false")"
plain_ratio=$(awk -v m="$m" -v s="$s" 'BEGIN { printf "%.2f", m / s }')
awk -v a="$cork_ratio" -v b="$plain_ratio" 'BEGIN { exit !(a > b) }' ||
    fail "cork: false sent $plain_ratio messages per send, cork: true $cork_ratio"
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
    read -r m s <<<"$(load node2 "$peer" 16 "diskless QD16")"
    awk -v m="$m" -v s="$s" 'BEGIN { exit !(m / s >= 1.5) }' ||
        fail "diskless QD16 with cork: $m messages in $s sends to $peer (expected >= 1.5 per send)"
done
stop_node node2
wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 30
same_disks node0 node1
info "ok"
