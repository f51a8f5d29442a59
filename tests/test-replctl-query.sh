#!/usr/bin/env bash
# replctl's one-word queries for scripts (role, quorum, dstate [PEER],
# cstate [PEER]), a one-line usage after a mistake, and the peer disk
# states the manual describes: Outdated for a peer that missed writes of
# this primary, DUnknown for one this process has never been connected
# to, whatever its bitmap says.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdsh --version

make_config 2 C 16M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
q () { "$REPLCTL" -s "$(sock "$1")" "${@:2}"; }

[ "$(q node0 role)" = Primary ] || fail "role node0: $(q node0 role)"
[ "$(q node1 role)" = Secondary ] || fail "role node1: $(q node1 role)"
[ "$(q node0 dstate)" = UpToDate ] || fail "dstate node0: $(q node0 dstate)"
[ "$(q node0 dstate node1)" = UpToDate ] || fail "dstate node0 node1: $(q node0 dstate node1)"
[ "$(q node0 cstate)" = "node1 Connected" ] || fail "cstate node0: $(q node0 cstate)"
[ "$(q node0 cstate node1)" = Connected ] || fail "cstate node0 node1: $(q node0 cstate node1)"
[ "$(q node0 quorum)" = yes ] || fail "quorum node0: $(q node0 quorum)"
# By configuration and host name rules, as status.
[ "$("$REPLCTL" -c "$CONFIG" -n node1 role)" = Secondary ] || fail "role -c -n"
info "connected: node0 $(q node0 role) $(q node0 dstate), cstate '$(q node0 cstate)', quorum $(q node0 quorum)"

if q node0 dstate nosuch >"$tmpdir/out" 2>&1; then
    fail "dstate of an unknown peer succeeded: $(cat "$tmpdir/out")"
fi
grep -q "error: dstate: no peer named 'nosuch' (peers: node1)" "$tmpdir/out" ||
    fail "unknown peer: $(cat "$tmpdir/out")"

# Mistakes: the error and one line of usage, not the whole help.
for args in "stauts" "--bogus status" "role extra" "dstate node1 node1"; do
    # shellcheck disable=SC2086 # the words are the arguments
    if "$REPLCTL" -s "$(sock node0)" $args >"$tmpdir/out" 2>"$tmpdir/err"; then
        fail "replctl $args succeeded"
    fi
    [ "$(wc -l <"$tmpdir/err")" -eq 2 ] ||
        fail "replctl $args: not two lines (error, usage): $(cat "$tmpdir/err")"
    grep -q "^usage: replctl .*'replctl --help' lists the commands$" "$tmpdir/err" ||
        fail "replctl $args: no one-line usage: $(cat "$tmpdir/err")"
done
"$REPLCTL" --help >"$tmpdir/help" || fail "replctl --help failed"
[ "$(wc -l <"$tmpdir/help")" -gt 20 ] || fail "replctl --help is short: $(cat "$tmpdir/help")"
info "typo: $(head -n 1 "$tmpdir/err") / $(tail -n 1 "$tmpdir/err")"

# node1 away: Connecting; a write of the primary makes it Outdated.
stop_node node1
wait_for node0 '.peers[0].connection == "Connecting"' 10
[ "$(q node0 cstate node1)" = Connecting ] || fail "cstate after stop: $(q node0 cstate node1)"
[ "$(q node0 dstate node1)" = DUnknown ] ||
    fail "dstate of a peer that left cleanly with nothing missed: $(q node0 dstate node1)"
timed 30 nbdsh -u "$(uri node0)" -c 'h.pwrite(b"x" * 4096, 0)' ||
    fail "write through node0 failed"
[ "$(q node0 dstate node1)" = Outdated ] ||
    fail "dstate of a peer that missed a write: $(q node0 dstate node1)"
info "node1 away: cstate $(q node0 cstate node1), after a write dstate $(q node0 dstate node1)"

# The primary restarts while node1 is still away: the bitmap says node1
# misses 4 KiB, but this process has never been connected to it.
stop_node node0
start_node node0 role=primary
st=$(status_json node0)
[ "$(jq '.peers[0].out_of_sync_bytes' <<<"$st")" -eq 4096 ] ||
    fail "node0 does not remember what node1 misses: $(jq -c '.peers[0]' <<<"$st")"
[ "$(q node0 dstate node1)" = DUnknown ] ||
    fail "dstate after the primary's restart: $(q node0 dstate node1)"
info "after node0's restart: dstate node1 $(q node0 dstate node1), out-of-sync $(jq '.peers[0].out_of_sync_bytes' <<<"$st")"
