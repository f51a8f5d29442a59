#!/usr/bin/env bash
# Who may use the control socket.  It is created mode 0660 even under
# umask 0; a user outside the node's group cannot connect at all; a
# user in the group (not root, not the node's uid) gets status, and
# every state-changing command is refused with one line on both sides
# (SO_PEERCRED), the node's role unchanged.  root may change the role.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires setpriv --version
[ "$(id -u)" -eq 0 ] || { echo "$test_name: SKIP: needs root to run as another user"; exit 77; }
nobody_uid=$(id -u nobody) || { echo "$test_name: SKIP: no user nobody"; exit 77; }

make_config 2 C 16M
chmod 755 "$tmpdir"             # nobody may reach the socket's directory
old_umask=$(umask)
umask 000
start_node node0 role=primary
start_node node1
umask "$old_umask"
wait_uptodate node0 30

mode=$(stat -c %a "$(sock node0)")
[ "$mode" = 660 ] || fail "the control socket has mode $mode under umask 0, not 660"

# as_nobody GROUP CMD...: run as nobody with GROUP as its only group.
as_nobody () {
    local g=$1; shift
    setpriv --reuid="$nobody_uid" --regid="$g" --clear-groups "$@"
}

# Outside the group: no connection.
if as_nobody nogroup "$REPLCTL" -s "$(sock node0)" status >"$tmpdir/out" 2>&1; then
    fail "nobody (group nogroup) got status: $(cat "$tmpdir/out")"
fi
grep -q "Permission denied" "$tmpdir/out" ||
    fail "unexpected error for nobody outside the group: $(cat "$tmpdir/out")"
info "outside the group: cannot connect"

# In the group (root's, the node's): status yes, state changes no.
as_nobody 0 "$REPLCTL" -s "$(sock node0)" status --json >"$tmpdir/st.json" ||
    fail "nobody in the node's group could not get status: $(cat "$tmpdir/st.json")"
[ "$(jq -r .role "$tmpdir/st.json")" = Primary ] || fail "status as nobody: $(cat "$tmpdir/st.json")"
as_nobody 0 "$REPLCTL" -s "$(sock node0)" status >/dev/null ||
    fail "nobody in the node's group could not get the human status"
for cmd in secondary primary "primary --force" invalidate verify resync; do
    sock_node=node0
    [ "$cmd" = primary ] || [ "$cmd" = "primary --force" ] && sock_node=node1
    if as_nobody 0 "$REPLCTL" -s "$(sock $sock_node)" $cmd >"$tmpdir/out" 2>&1; then
        fail "nobody's '$cmd' on $sock_node succeeded: $(cat "$tmpdir/out")"
    fi
    grep -q "^error: $cmd: permission denied: uid $nobody_uid may only ask for status" "$tmpdir/out" ||
        fail "nobody's '$cmd' on $sock_node: not one clear refusal: $(cat "$tmpdir/out")"
    wait_log $sock_node "control: '$cmd' from uid $nobody_uid (pid [0-9]*) refused: only root may change the node's state"
done
[ "$(status_json node0 | jq -r .role)" = Primary ] || fail "node0's role changed"
[ "$(status_json node1 | jq -r .role)" = Secondary ] || fail "node1's role changed"
wait_uptodate node0 30
info "in the group, not root: status only"

# root may.
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "root could not demote node0"
wait_for node0 '.role == "Secondary"' 10
info "status for the group, state changes for root only"

# control-group: the sockets belong to that group: its members get
# status, state changes still only root.
stop_node node1
stop_node node0
echo "control-group: nogroup" >> "$CONFIG"
start_node node0 role=primary
[ "$(stat -c %G "$(sock node0)")" = nogroup ] ||
    fail "control-group: the socket's group is $(stat -c %G "$(sock node0)")"
as_nobody nogroup "$REPLCTL" -s "$(sock node0)" status --json >"$tmpdir/st.json" ||
    fail "nobody in control-group could not get status: $(cat "$tmpdir/st.json")"
if as_nobody nogroup "$REPLCTL" -s "$(sock node0)" secondary >"$tmpdir/out" 2>&1; then
    fail "nobody in control-group could demote: $(cat "$tmpdir/out")"
fi
sed -i 's/^control-group: nogroup$/control-group: no-such-group-here/' "$CONFIG"
stop_node node0
out=$(timeout 10 nbdkit -f --exit-with-parent -p "$(free_port)" "$PLUGIN" \
          config="$CONFIG" node=node0 2>&1 </dev/null) &&
    fail "a node with an unknown control-group started"
grep -q "control-group: no group 'no-such-group-here'" <<<"$out" ||
    fail "unknown control-group: $(tail -n 3 <<<"$out")"
info "ok: control-group gives its members status only; an unknown group is refused"
