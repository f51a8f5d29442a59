#!/usr/bin/env bash
# allow-two-primaries: true, both nodes Primary.  replctl verify, resync,
# invalidate-remote and resize (with or without --assume-clean) start an
# exchange only a Secondary takes: the other Primary would refuse it and
# end the connection, a split brain.  So each is refused on either node
# with a message that says why, and the connection stays up.  Once node1
# is Secondary again, verify and invalidate-remote run on node0.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
sed -i 's/^protocol: C/&\nallow-two-primaries: true/' "$CONFIG"
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
"$REPLCTL" -s "$(sock node1)" primary >"$tmpdir/err" 2>&1 ||
    fail "promoting node1 beside node0 failed: $(cat "$tmpdir/err")"
wait_for node0 '.role == "Primary" and .peers[0].role == "Primary"' 15
wait_for node1 '.role == "Primary" and .peers[0].role == "Primary"' 15
since=$(status_json node0 | jq .peers[0].connected_ms)

# The disks may grow: resize is refused for the roles, not the size.
truncate -s 24M "$tmpdir/node0.img" "$tmpdir/node1.img"

refused () {                    # NODE PEER COMMAND...
    local n=$1 peer=$2 out; shift 2
    out=$("$REPLCTL" -s "$(sock "$n")" "$@" 2>&1) &&
        fail "$n: '$*' accepted while both are Primary: $out"
    grep -qF "peer $peer is Primary too (allow-two-primaries): $1 runs only while one of the two is Secondary" <<<"$out" ||
        fail "$n: '$*': '$out' does not say why"
}
for pair in "node0 node1" "node1 node0"; do
    set -- $pair
    refused "$1" "$2" verify
    refused "$1" "$2" resync
    refused "$1" "$2" invalidate-remote "$2"
    refused "$1" "$2" resize
    refused "$1" "$2" resize --assume-clean
done
info "verify, resync, invalidate-remote, resize refused on both Primaries"
sleep 1                         # anything started would have ended it by now
for n in node0 node1; do
    if grep -E "disconnecting|lost the other Primary|protocol error" "$tmpdir/$n.log"; then
        fail "$n: the connection dropped"
    fi
done
[ "$(status_json node0 | jq .peers[0].connected_ms)" -ge "$since" ] ||
    fail "node0 reconnected meanwhile"
[ "$(status_json node0 | jq -r .size)" = $(( 16 << 20 )) ] ||
    fail "the volume changed size"

# One Primary again: they run.
"$REPLCTL" -s "$(sock node1)" secondary >/dev/null || fail "demoting node1 failed"
wait_for node0 '.peers[0].role == "Secondary"' 15
"$REPLCTL" -s "$(sock node0)" verify >"$tmpdir/out" 2>&1 ||
    fail "verify with node1 Secondary: $(cat "$tmpdir/out")"
wait_log node0 "verify finished" 30
"$REPLCTL" -s "$(sock node0)" invalidate-remote node1 >"$tmpdir/out" 2>&1 ||
    fail "invalidate-remote with node1 Secondary: $(cat "$tmpdir/out")"
wait_log node0 "resync finished" 30
wait_uptodate node0 30
same_disks node0 node1
info "ok: refused beside the other Primary, run once it is Secondary"
