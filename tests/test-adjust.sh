#!/usr/bin/env bash
# replctl adjust: a changed configuration file applied to running nodes
# under a writer — a handler, net timeouts and the resync rate change
# and take effect; a change to a key that may not change while running
# (protocol, a node's address, a node's id) and a malformed file are
# refused, naming the key or the problem, and change nothing.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires fio --version

make_config 2 C 64M
cat >>"$CONFIG" <<EOT
resync:
  resync-rate: 4M
EOT
start_node node0 role=primary
start_node node1
wait_uptodate node0 60
ctl () { "$REPLCTL" -s "$(sock "$1")" "${@:2}"; }
adjust_all () { ctl node0 adjust && ctl node1 adjust; }

out=$(ctl node0 adjust) || fail "adjust with nothing changed: $out"
[ "$out" = "adjusted: nothing changed" ] || fail "adjust: $out"

# A handler added while running runs.
cp "$CONFIG" "$tmpdir/orig.yaml"
cat >>"$CONFIG" <<EOT
handlers:
  role-change: 'touch $tmpdir/role-changed'
EOT
out=$(adjust_all) || fail "adjust (handler): $out"
grep -q "handlers.role-change" <<<"$out" || fail "adjust (handler): $out"
ctl node0 secondary >/dev/null && ctl node0 primary >/dev/null ||
    fail "demote/promote failed"
for (( i = 0; i < 100; i++ )); do
    [ -e "$tmpdir/role-changed" ] && break
    sleep 0.05
done
[ -e "$tmpdir/role-changed" ] || fail "the handler added by adjust did not run"
info "a handler added by adjust runs"

# Under a writer: net timeouts and the resync rate.
json="$tmpdir/fio.json"
timeout 120 fio --name=w --ioengine=nbd --uri="$(uri node0)" --rw=randwrite \
    --bs=4k --size=16M --iodepth=4 --time_based=1 --runtime=12 \
    --output-format=json --output="$json" &
fio_pid=$!
cleanup_fn 'if [ -n "$fio_pid" ]; then kill "$fio_pid"; wait "$fio_pid"; fi'
sed -i -e 's/^  ping-timeout: 3$/  ping-timeout: 8/' \
       -e 's/^  timeout: 4$/  timeout: 10/' \
       -e 's/^  resync-rate: 4M$/  resync-rate: 32M/' "$CONFIG"
echo "fencing-timeout: 30" >> "$CONFIG"
out=$(adjust_all) || fail "adjust (net, rate): $out"
for k in "net.ping-timeout 3 -> 8" "net.timeout 4 -> 10" \
         "resync.resync-rate 4194304 -> 33554432" "fencing-timeout 60 -> 30"; do
    grep -qF "$k" <<<"$out" || fail "adjust did not report '$k': $out"
done
grep -qF "adjusted from" "$tmpdir/node0.log" || fail "adjust not logged"
# node1 frozen for 4.5 s, longer than the old ping-timeout and timeout
# and shorter than the new: it stays connected.
lines=$(wc -l < "$tmpdir/node0.log")
kill -STOP "${PID[node1]}"
cleanup_fn 'kill -CONT ${PID[node1]} 2>/dev/null'
sleep 4.5
kill -CONT "${PID[node1]}"
wait_for node0 '.peers[0].connection == "Connected"' 10
if tail -n +"$((lines + 1))" "$tmpdir/node0.log" | grep -q "disconnecting"; then
    fail "node1 was dropped within the adjusted timeouts: $(tail -n +"$((lines + 1))" "$tmpdir/node0.log")"
fi
info "net timeouts adjusted: a 4.5 s freeze is survived (it was 3 s)"

# Keys that may not change while running, and a broken file: refused,
# the node goes on serving, nothing changed.
cp "$CONFIG" "$tmpdir/good.yaml"
refused () {                    # SED-SCRIPT EXPECTED
    cp "$tmpdir/good.yaml" "$CONFIG"
    sed -i -e "$1" "$CONFIG"
    out=$(ctl node0 adjust 2>&1) && fail "adjust accepted ($1): $out"
    grep -qF -- "$2" <<<"$out" || fail "adjust ($1): '$out' does not name '$2'"
}
refused 's/^protocol: C$/protocol: A/' "protocol (both nodes must change it together"
port1=$(grep -A2 'name: node1' "$CONFIG" | sed -n 's/.*address: \(.*\)/\1/p')
refused "s/$port1/127.0.0.1:1/" "nodes[1] (node1): address cannot change"
refused 's/^    id: 1$/    id: 3/' "nodes[1] (node1): name / id"
refused 's/^resource: r0$/resource: [r0/' "nothing changed"
refused 's/^protocol: C$/&\ncontrol-group: root/' "control-group"
refused 's/^protocol: C$/&\ntls-allow-wildcard: true/' "tls-allow-wildcard"
refused "s|^    control: node0.sock|&\n    metrics: 127.0.0.1:$(free_port)|" "metrics"
cp "$tmpdir/good.yaml" "$CONFIG"
out=$(ctl node0 adjust) || fail "adjust of the good file: $out"
[ "$out" = "adjusted: nothing changed" ] ||
    fail "a refused adjust changed something: $out"
status_json node0 | jq -e '.role == "Primary" and
    .peers[0].connection == "Connected"' >/dev/null ||
    fail "status after the refusals: $(status_json node0)"

fio_status=0
wait "$fio_pid" || fio_status=$?
fio_pid=
[ "$fio_status" -eq 0 ] || fail "fio exited with $fio_status: $(tail -n 20 "$json")"
jq -e '[.jobs[] | .error == 0] | all' "$json" >/dev/null ||
    fail "fio saw errors: $(jq -c '[.jobs[] | .error]' "$json")"
wait_uptodate node0 60
same_disks node0 node1
info "ok"
