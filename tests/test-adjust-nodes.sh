#!/usr/bin/env bash
# replctl adjust adds and removes a node while the resource runs: a
# two-node resource under a writer gets a third node (adjust on both
# running nodes, then the new node starts with the new file); it is
# fully synced, the three disks end identical, the writer sees no
# error, status and quorum count three nodes.  Removed again by adjust,
# it is disconnected and its connection attempts are refused (a log
# line on both sides), its metadata slot is released, writes go on.
# Changes that cannot happen at run time are refused, naming the key:
# this node's own id, the resource's name, removing the Primary.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires fio --version

make_config 2 C 32M
# node1 gets id 2, so that the node added (id 1) dials it: once
# removed, it keeps trying, and must be refused.
sed -i 's/^    id: 1$/    id: 2/' "$CONFIG"
cp "$CONFIG" "$tmpdir/two.yaml"
start_node node0 role=primary
start_node node1
wait_uptodate node0 60
ctl () { "$REPLCTL" -s "$(sock "$1")" "${@:2}"; }
status_json node0 | jq -e '.quorum_nodes == 2' >/dev/null ||
    fail "quorum_nodes before: $(status_json node0)"

# A writer on the Primary for the whole addition (bounded in time).
writer () {                     # JSON-OUTPUT SECONDS
    timeout 120 fio --name=w --ioengine=nbd --uri="$(uri node0)" \
        --rw=randwrite --bs=4k --size=32M --iodepth=4 --time_based=1 \
        --runtime="$2" --output-format=json --output="$1" &
    fio_pid=$!
}
writer_ok () {                  # JSON-OUTPUT
    local st=0
    wait "$fio_pid" || st=$?
    fio_pid=
    [ "$st" -eq 0 ] || fail "fio exited with $st: $(tail -n 20 "$1")"
    jq -e '[.jobs[] | .error == 0] | all' "$1" >/dev/null ||
        fail "fio saw errors: $(jq -c '[.jobs[] | .error]' "$1")"
    jq -e '[.jobs[] | .write.io_bytes > 0] | all' "$1" >/dev/null ||
        fail "fio wrote nothing"
}
fio_pid=
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid"; wait "$fio_pid"; fi'
writer "$tmpdir/fio1.json" 12

# Add node2 (id 1) to the file, adjust both running nodes.
truncate -s 32M "$(disk node2)"
NBD_PORT[node2]=$(free_port)
cat >>"$CONFIG" <<EOT
  - name: node2
    id: 1
    address: 127.0.0.1:$(free_port)
    disk: node2.img
    control: node2.sock
EOT
cp "$CONFIG" "$tmpdir/three.yaml"
for n in node0 node1; do
    out=$(ctl $n adjust) || fail "adjust on $n (add): $out"
    grep -qF "node node2 (id 1, 127.0.0.1:" <<<"$out" ||
        fail "adjust on $n did not report the addition: $out"
done
status_json node0 | jq -e '(.peers | length) == 2 and
    ([.peers[] | select(.name == "node2")] | length) == 1 and
    .quorum_nodes == 3' >/dev/null ||
    fail "status after the addition: $(status_json node0)"
grep -q "peer slot .* for new peer node2" "$tmpdir/node0.log" ||
    fail "no metadata slot logged for node2: $(tail -n 5 "$tmpdir/node0.log")"
info "node2 added on the running nodes"

start_node node2
wait_for node2 '.disk == "UpToDate"' 60
wait_for node0 '[.peers[] | select(.name == "node2") |
    .connection == "Connected" and .disk == "UpToDate"] | all' 30
wait_for node1 '[.peers[] | select(.name == "node2") |
    .connection == "Connected"] | all' 30
info "node2 connected and synced"

writer_ok "$tmpdir/fio1.json"
wait_uptodate node0 60
same_disks node0 node1 node2
for n in node0 node1 node2; do
    status_json $n | jq -e '.quorum == true and .quorum_nodes == 3 and
        (.peers | length) == 2' >/dev/null ||
        fail "$n: status with three nodes: $(status_json $n)"
done
info "three disks identical, the writer saw no error, quorum of 3 nodes"

# Refusals: nothing changes, the node serves on.
refused () {                    # NODE SED-SCRIPT EXPECTED
    cp "$tmpdir/three.yaml" "$CONFIG"
    sed -i -e "$2" "$CONFIG"
    out=$(ctl "$1" adjust 2>&1) && fail "adjust accepted ($2): $out"
    grep -qF -- "$3" <<<"$out" || fail "adjust ($2): '$out' does not name '$3'"
    grep -qF "nothing changed" <<<"$out" || fail "adjust ($2): $out"
}
refused node0 's/^    id: 0$/    id: 5/' "nodes[0] (node0): name / id (this node's own)"
refused node0 's/^resource: r0$/resource: r1/' "resource cannot change"
refused node1 '/^  - name: node0$/,/^    control: node0.sock$/d' \
    "node0 is the Primary"
cp "$tmpdir/three.yaml" "$CONFIG"
for n in node0 node1; do
    out=$(ctl $n adjust) || fail "adjust on $n after the refusals: $out"
    [ "$out" = "adjusted: nothing changed" ] ||
        fail "a refused adjust changed something on $n: $out"
done
info "own id, resource name and removing the Primary refused"

# Remove node2 again, under a writer.
writer "$tmpdir/fio2.json" 8
cp "$tmpdir/two.yaml" "$CONFIG"
for n in node0 node1; do
    out=$(ctl $n adjust) || fail "adjust on $n (remove): $out"
    grep -qF "node node2 removed" <<<"$out" ||
        fail "adjust on $n did not report the removal: $out"
done
for n in node0 node1; do
    status_json $n | jq -e '(.peers | length) == 1 and
        ([.peers[] | select(.name == "node2")] | length) == 0 and
        .quorum_nodes == 2' >/dev/null ||
        fail "$n: status after the removal: $(status_json $n)"
done
# node2 still runs, with the three-node file: it dials node1 (id 2),
# which refuses it as unknown; node2 logs why.
wait_log node1 "node id 1 is not a peer of node node1" 15
wait_log node2 "refused: node node1 (id 2) does not know this node" 15
# Freed once no request can see it any more, its slot released.
wait_log node0 "peer slot [0-9]* of removed peer node2 released" 15
wait_log node0 "peer node2: removed from the node (memory freed)" 15
status_json node2 | jq -e '[.peers[] | .connection != "Connected"] | all' \
    >/dev/null || fail "node2 still connected: $(status_json node2)"
info "node2 removed: disconnected, refused, its slot released"

writer_ok "$tmpdir/fio2.json"
wait_uptodate node0 60
same_disks node0 node1
status_json node0 | jq -e '.role == "Primary" and .quorum == true' \
    >/dev/null || fail "node0 after the removal: $(status_json node0)"
info "ok"
