#!/usr/bin/env bash
# A diskless client over TLS (tls: true, a PSK from the secret): its
# connections to both storage nodes are TLS, writes land on both disks,
# reads come back, and a storage node lost and back is resynced over
# TLS from the other one.
source "$(dirname "$0")/functions.sh"
umask 077                       # its configurations hold a secret
requires jq --version

make_diskless_config 32M
sed -i 's/^protocol: C/&\nsecret: "correct horse battery staple"\ntls: true/' "$CONFIG"
start_node node0
start_node node1
start_node node2
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
[ "$(status_json node2 | jq -r .tls)" = psk ] || fail "node2 does not report tls psk"
status_json node2 | jq -e '[.peers[].tls | . == "openssl" or (. // "" | startswith("ktls"))] | all' >/dev/null ||
    fail "node2 does not say who encrypts on each connection: $(status_json node2 | jq -c '[.peers[].tls]')"

head -c 16M /dev/urandom > "$tmpdir/data"
timed 60 nbdcopy "$tmpdir/data" "$(uri node2)" || fail "nbdcopy to the diskless node failed"
cmp -n $((16 << 20)) "$tmpdir/data" "$(disk node0)" || fail "node0's disk does not hold the data"
cmp -n $((16 << 20)) "$tmpdir/data" "$(disk node1)" || fail "node1's disk does not hold the data"
timed 60 nbdcopy "$(uri node2)" "$tmpdir/back" || fail "nbdcopy from the diskless node failed"
cmp -n $((16 << 20)) "$tmpdir/data" "$tmpdir/back" || fail "data read through the diskless node differs"
info "writes reach both storage nodes over TLS, reads come back"

# node1 away while the client writes; back, it is resynced over TLS.
stop_node node1
wait_for node2 '[.peers[] | select(.name == "node1") | .connection != "Connected"] | all' 30
head -c 8M /dev/urandom > "$tmpdir/more"
timed 60 nbdcopy "$tmpdir/more" "$(uri node2)" || fail "write with node1 away failed"
start_node node1
wait_for node0 '[.peers[] | select(.name == "node1") | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all' 60
wait_for node2 '[.peers[] | .connection == "Connected" and .disk == "UpToDate"] | all' 30
same_disks node0 node1
cmp -n $((8 << 20)) "$tmpdir/more" "$(disk node1)" || fail "node1 did not catch up"
info "ok: node1 caught up over TLS"
