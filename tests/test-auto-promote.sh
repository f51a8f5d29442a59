#!/usr/bin/env bash
# auto-promote (default): with no primary, the first client of an
# UpToDate secondary promotes it and the last one's close demotes it
# again; a client of the other node meanwhile is refused; with
# auto-promote: false nothing is promoted.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demoting node0 failed"
wait_for node1 '.peers[0].role == "Secondary"' 10

# A client of node1 holds it open; meanwhile node0 refuses clients.
/usr/bin/python3 - "$(uri node1)" "$(uri node0)" "$REPLCTL" "$(sock node1)" <<'PY' ||
import json, subprocess, sys
import nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
st = json.loads(subprocess.run([sys.argv[3], "-s", sys.argv[4], "status", "--json"],
                               capture_output=True, text=True).stdout)
assert st["role"] == "Primary", "node1 not auto-promoted: " + st["role"]
h.pwrite(b"A" * 65536, 1 << 20)
h.flush()
g = nbd.NBD()
try:
    g.connect_uri(sys.argv[2])
    sys.exit("node0 accepted a client while node1 is primary")
except nbd.Error:
    pass
h.shutdown()
PY
    fail "auto-promote of node1 did not work as expected"
wait_for node1 '.role == "Secondary"' 10
wait_for node0 '.peers[0].role == "Secondary"' 10
grep -q "auto-promoted by a client" "$tmpdir/node1.log" || fail "no auto-promote in node1's log"
cmp -n 16M "$(disk node0)" "$(disk node1)" || fail "the write through node1 did not reach node0"

# Without auto-promote, the same open is refused.
stop_node node1
stop_node node0
sed -i 's/^protocol: C/&\nauto-promote: false/' "$CONFIG"
start_node node0
start_node node1
wait_for node0 '.peers[0].connection == "Connected"' 20
nbdinfo "$(uri node1)" >/dev/null 2>&1 && fail "node1 served a client with auto-promote: false"
[ "$(status_json node1 | jq -r .role)" = Secondary ] || fail "node1 promoted itself"
info "ok"
