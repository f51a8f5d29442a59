#!/usr/bin/env bash
# Handlers: configured commands run on events with the resource, node,
# role and peer in the environment; how each ended is logged.
source "$(dirname "$0")/functions.sh"
requires jq --version

make_config 2 C 16M
ev="$tmpdir/events"
log='echo "$NBDREPL_EVENT node=$NBDREPL_NODE role=$NBDREPL_ROLE peer=$NBDREPL_PEER res=$NBDREPL_RESOURCE" >>'"$ev"
cat >>"$CONFIG" <<EOT
handlers:
  before-resync-target: '$log'
  after-resync-target: '$log'
  role-change: '$log'
  fence-peer: '$log; exit 3'
EOT
# wait_event LINE: bounded wait for a line in the events file.
wait_event () {
    for (( i=0; i<100; i++ )); do
        grep -qxF "$1" "$ev" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "no event '$1' (events: $(tr '\n' '|' <"$ev" 2>/dev/null))"
}

start_node node0 role=primary
start_node node1
wait_uptodate node0 30
wait_event "before-resync-target node=node1 role=Secondary peer=node0 res=r0"
wait_event "after-resync-target node=node1 role=Secondary peer=node0 res=r0"

kill_node node1
wait_event "fence-peer node=node0 role=Primary peer=node1 res=r0"
for (( i=0; i<100; i++ )); do
    grep -q "handler fence-peer (pid [0-9]*): exited with status 3" "$tmpdir/node0.log" && break
    sleep 0.1
done
grep -q "handler fence-peer (pid [0-9]*): exited with status 3" "$tmpdir/node0.log" ||
    fail "the fence-peer handler's exit status was not logged"

start_node node1
wait_uptodate node0 30
"$REPLCTL" -s "$(sock node0)" secondary >/dev/null || fail "demote failed"
wait_event "role-change node=node0 role=Secondary peer= res=r0"
"$REPLCTL" -s "$(sock node1)" primary >/dev/null || fail "promote failed"
wait_event "role-change node=node1 role=Primary peer= res=r0"
info "ok: $(wc -l <"$ev") handler runs"
