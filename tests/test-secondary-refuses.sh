#!/usr/bin/env bash
# A secondary refuses NBD clients, with a log line naming the primary
# so that the operator knows where to go instead.
source "$(dirname "$0")/functions.sh"
requires nbdinfo --version
requires jq --version
requires /usr/bin/python3 -c 'import nbd'

# timed SECS CMD...: CMD, which may be a shell function such as nbdsh,
# killed after SECS seconds (status 124).

make_config 2 C 16M
# First node1 alone: a secondary with no primary in sight.
start_node node1
if timeout 20 nbdinfo "$(uri node1)" >"$tmpdir/info0.out" 2>&1; then
    fail "nbdinfo on a secondary with no primary succeeded: $(cat "$tmpdir/info0.out")"
fi
grep -q "refusing client: node node1 is Secondary for resource r0 and no primary is connected" \
    "$tmpdir/node1.log" ||
    fail "node1's log does not say that it has no primary"

start_node node0 role=primary
wait_uptodate node0
wait_for node1 '.role == "Secondary" and .peers[0].role == "Primary"' 10

# The primary serves clients: the refusal below is about the role.
timeout 20 nbdinfo --size "$(uri node0)" >"$tmpdir/size" ||
    fail "nbdinfo on the primary failed"
[ "$(cat "$tmpdir/size")" -eq $((16 << 20)) ] ||
    fail "the primary's size is $(cat "$tmpdir/size")"

# nbdinfo against the secondary fails ...
if timeout 20 nbdinfo "$(uri node1)" >"$tmpdir/info.out" 2>&1; then
    fail "nbdinfo on the secondary succeeded: $(cat "$tmpdir/info.out")"
fi
grep -q "server replied with error to opt_go request" "$tmpdir/info.out" ||
    fail "nbdinfo failed, but not with a refusal: $(cat "$tmpdir/info.out")"
info "nbdinfo on the secondary: $(tr '\n' ' ' < "$tmpdir/info.out")"
# ... and so does a client that wants to write.
refusals=$(grep -c 'the primary is node0' "$tmpdir/node1.log")
rc=0
timed 20 nbdsh -u "$(uri node1)" \
    -c 'h.pwrite(b"\xff" * 4096, 0)' >"$tmpdir/nbdsh.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "nbdsh wrote to the secondary: $(cat "$tmpdir/nbdsh.out")"
[ "$rc" -ne 124 ] || fail "nbdsh hung on the secondary"
# It failed because the server refused it, not for some other reason.
# (nbdkit answers a failed open as an unknown export: ENOENT.)
grep -q "handshake: server has no export named" "$tmpdir/nbdsh.out" ||
    fail "nbdsh failed, but not with a refusal: $(cat "$tmpdir/nbdsh.out")"

# The secondary's log names the primary, by name and address.
addr0=$(status_json node1 | jq -r '.peers[] | select(.name == "node0") | .address')
grep -F "refusing client: node node1 is Secondary for resource r0; the primary is node0 ($addr0)" \
    "$tmpdir/node1.log" >/dev/null ||
    fail "node1's log does not name the primary node0 ($addr0)"
[ "$refusals" -ge 1 ] || fail "node1 did not log the refusal of nbdinfo"
[ "$(grep -c 'the primary is node0' "$tmpdir/node1.log")" -gt "$refusals" ] ||
    fail "node1 did not log the refusal of nbdsh"

# The write reached neither disk (both started as zeroes).
cmp -s -n $((16 << 20)) "$(disk node1)" /dev/zero ||
    fail "the secondary's disk was written"
cmp -s -n $((16 << 20)) "$(disk node0)" /dev/zero ||
    fail "the primary's disk was written"
status_json node1 | jq -e '.writes == 0 and .reads == 0' >/dev/null ||
    fail "the secondary counted I/O: $(status_json node1)"
info "ok"
