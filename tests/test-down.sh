#!/usr/bin/env bash
# replctl down (drbdadm down): a Primary with an NBD client attached
# refuses and keeps serving; a Secondary stops cleanly, nbdkit exits
# with status 0 and the log says who asked; started again ("up") it
# reconnects and is resynced; a Primary with no client is demoted
# first and stops too, and its peer sees a clean shutdown.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires nbdsh --version

make_config 2 C 64M
start_node node0 role=primary
start_node node1
wait_uptodate node0 30
ctl () { "$REPLCTL" -s "$(sock "$1")" "${@:2}"; }

# exited NAME SECS: the node's nbdkit has exited (bounded); its exit
# status in $rc.
exited ()
{
    local name=$1 pid=${PID[$1]} i
    for (( i = 0; i < $2 * 10; i++ )); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rc=0; wait "$pid" || rc=$?
            PID[$name]=
            return 0
        fi
        sleep 0.1
    done
    fail "node $name still runs $2 s after replctl down"
}

# ---- A client holds node0 (until $tmpdir/release exists, at most 60 s).
nbdsh -u "$(uri node0)" -c "
import os, time
open('$tmpdir/attached', 'w').close()
for i in range(600):
    if os.path.exists('$tmpdir/release'):
        break
    time.sleep(0.1)
h.pwrite(b'x' * 4096, 0)
" > "$tmpdir/client.log" 2>&1 &
client_pid=$!
cleanup_fn 'touch "$tmpdir/release"; [ -n "$client_pid" ] && wait $client_pid 2>/dev/null'
for (( i = 0; i < 100; i++ )); do
    [ -e "$tmpdir/attached" ] && break
    sleep 0.1
done
[ -e "$tmpdir/attached" ] || fail "the client did not attach: $(cat "$tmpdir/client.log")"

out=$(ctl node0 down 2>&1) && fail "down on a Primary with a client succeeded: $out"
grep -q "client connection(s) are open" <<<"$out" ||
    fail "down on a busy Primary: unexpected message: $out"
kill -0 "${PID[node0]}" || fail "node0 stopped although down was refused"
[ "$(ctl node0 role)" = Primary ] || fail "node0 is no longer Primary after a refused down"
info "a Primary with a client attached refuses: $out"

# ---- down on the Secondary: it exits 0, and says why.
out=$(ctl node1 down 2>&1) || fail "down on node1: $out"
exited node1 20
[ "$rc" = 0 ] || fail "node1's nbdkit exited with status $rc after replctl down"
grep -q "stopping: replctl down from uid $(id -u)" "$tmpdir/node1.log" ||
    fail "node1's log does not say replctl down stopped it: $(tail -n 5 "$tmpdir/node1.log")"
grep -q "stopped cleanly" "$tmpdir/node1.log" ||
    fail "node1 did not stop cleanly: $(tail -n 5 "$tmpdir/node1.log")"
wait_for node0 '.peers[0].connection != "Connected"' 10
info "a Secondary stops: exit status 0, 'stopping: replctl down' in its log"

# ---- The client writes while node1 is down, and leaves.
touch "$tmpdir/release"
wait "$client_pid" || fail "the client failed: $(cat "$tmpdir/client.log")"
client_pid=

# ---- "up": started again, it is resynced.
start_node node1
wait_uptodate node0 30
same_disks node0 node1
info "started again, node1 is resynced"

# ---- down on the Primary with no client: demoted, then stopped.
out=$(ctl node0 down 2>&1) || fail "down on an idle Primary: $out"
exited node0 20
[ "$rc" = 0 ] || fail "node0's nbdkit exited with status $rc after replctl down"
grep -q "node node0: now Secondary" "$tmpdir/node0.log" ||
    fail "node0 was not demoted before it stopped: $(tail -n 8 "$tmpdir/node0.log")"
wait_for node1 '.peers[0].connection != "Connected"' 10
grep -q "peer node0: .*shutting down" "$tmpdir/node1.log" ||
    fail "node1 did not see node0 shut down: $(tail -n 5 "$tmpdir/node1.log")"
grep -q "fence" "$tmpdir/node1.log" && fail "node1 fenced a peer that went down cleanly"
info "an idle Primary is demoted, then stops; its peer sees a clean shutdown"
echo "test-down: ok"
