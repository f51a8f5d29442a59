#!/usr/bin/env bash
# What a node's control: path may replace at start: a stale socket only
# (left by a node that crashed).  A regular file there is refused and
# kept; the live control socket of a running node (here: a node of
# another resource given the same path) is refused and keeps answering
# for its own node.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 1 C 16M
# try_start CONFIG NODE OUT: start nbdkit, expecting it to refuse to start.
try_start () {
    if timeout 20 nbdkit -f -p "$(free_port)" "$PLUGIN" config="$1" node="$2" \
            > "$3" 2>&1; then
        fail "node $2 of $1 started: $(cat "$3")"
    fi
}

# A regular file at the control path.
echo "precious data" > "$(sock node0)"
try_start "$CONFIG" node0 "$tmpdir/file.out"
grep -q "control $(sock node0): exists and is not a socket; refusing to replace it" "$tmpdir/file.out" ||
    fail "no clear error for a regular file at control: $(cat "$tmpdir/file.out")"
[ "$(cat "$(sock node0)")" = "precious data" ] || fail "the regular file was changed"
[ ! -e "$(disk node0).meta" ] || fail "the refused start left metadata behind"
rm "$(sock node0)"
info "a regular file at control: refused and kept"

# The live socket of another resource's node.
start_node node0
sed -e 's/^resource: r0/resource: r9/' -e 's/name: node0/name: node1/' \
    -e "s/127.0.0.1:[0-9]*/127.0.0.1:$(free_port)/" -e 's/disk: node0.img/disk: r9.img/' \
    "$CONFIG" > "$tmpdir/r9.yaml"
truncate -s 16M "$tmpdir/r9.img"
try_start "$tmpdir/r9.yaml" node1 "$tmpdir/live.out"
grep -q "control $(sock node0): a running server answers on it (another node?); refusing to take it over" "$tmpdir/live.out" ||
    fail "no clear error for a live control socket: $(cat "$tmpdir/live.out")"
[ "$(status_json node0 | jq -r .resource)" = r0 ] ||
    fail "the control socket no longer answers for r0's node0: $(status_json node0)"
info "another node's live control socket: refused, still node0's"

# A stale socket (node0 killed): replaced.
kill_node node0
[ -S "$(sock node0)" ] || fail "no stale socket after the crash"
nbdkit -f --exit-with-parent -p "${NBD_PORT[node0]}" "$PLUGIN" config="$CONFIG" \
    node=node0 >>"$tmpdir/node0.log" 2>&1 &
PID[node0]=$!
wait_for node0 '.resource == "r0"' 10
info "ok: a stale socket is replaced, a file or a live socket never"

# A start that fails on its replication address (in use) leaves no new
# metadata behind.
stop_node node0
rm -f "$(disk node0).meta"
port0=$(sed -n 's/.*address: 127.0.0.1:\([0-9]*\)/\1/p' "$CONFIG")
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
print("ready", flush=True); time.sleep(60)' "$port0" > "$tmpdir/squat.out" &
squat=$!
cleanup_fn "kill $squat 2>/dev/null || true"
for (( i=0; i<100; i++ )); do grep -q ready "$tmpdir/squat.out" && break; sleep 0.1; done
grep -q ready "$tmpdir/squat.out" || fail "could not occupy port $port0"
try_start "$CONFIG" node0 "$tmpdir/listen.out"
grep -q "node node0: address 127.0.0.1:$port0: cannot listen: Address already in use" "$tmpdir/listen.out" ||
    fail "no clear error for an address in use: $(cat "$tmpdir/listen.out")"
[ ! -e "$(disk node0).meta" ] || fail "the start that failed on listen left metadata behind"
[ ! -e "$(sock node0)" ] || fail "the start that failed on listen left its control socket behind"
kill "$squat"; wait "$squat" 2>/dev/null || true
info "ok: a start failing on listen creates no metadata"
