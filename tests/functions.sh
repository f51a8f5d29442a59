# nbdrepl: shared helpers for the shell tests.  Source it first:
#   source ./functions.sh
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
# Every test runs real nbdkit processes on loopback ports it picks
# itself, in a private temporary directory, and stops exactly the
# processes it started (by pid) when it exits, however it exits.

set -e
set -u
set -o pipefail

builddir="${builddir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
PLUGIN="$builddir/plugins/repl/.libs/nbdkit-repl-plugin.so"
REPLCTL="$builddir/client/replctl"
FAULT_INJECT="$builddir/tests/.libs/fault-inject.so"
test_name="$(basename "$0" .sh)"

# The tests' fake peers import tests/peerwire.py.
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"

# Debian's nbdsh is a Python script that needs the system interpreter
# (the nbd module is not in other Pythons that may come first in PATH).
nbdsh () { /usr/bin/python3 -m nbd "$@"; }
export -f nbdsh

# timed SECS CMD...: run CMD (a program or one of the functions above)
# and kill it if it takes longer than SECS.
timed () { local secs=$1; shift; timeout "$secs" bash -c '"$@"' timed "$@"; }

fail () { echo "$test_name: FAIL: $*" >&2; exit 1; }
info () { echo "$test_name: $*"; }

# requires CMD...: skip (exit 77) when a tool is truly absent.
requires ()
{
    if ! "$@" >/dev/null 2>&1; then
        echo "$test_name: '$*' failed: skipping this test"
        exit 77
    fi
}

_cleanup_fns=()
cleanup_fn () { _cleanup_fns+=("$*"); }
_run_cleanup ()
{
    local status=$? i f
    set +e
    # A repl-attach state directory goes with repl-detach (a cleanup):
    # keep its logs (the attached diskless node's among them) to show.
    if [ $status -ne 0 ] && [ $status -ne 77 ] && [ -n "${tmpdir:-}" ]; then
        for f in "$tmpdir"/run/attach-*/*.log; do
            [ -f "$f" ] && cp "$f" "$tmpdir/$(basename "$(dirname "$f")")-$(basename "$f")"
        done
    fi
    for (( i=${#_cleanup_fns[@]}-1; i>=0; i-- )); do
        eval "${_cleanup_fns[$i]}"
    done
    if [ $status -ne 0 ] && [ $status -ne 77 ] && [ -n "${tmpdir:-}" ]; then
        # Show what the nodes said, to diagnose the failure.
        for f in "$tmpdir"/*.log; do
            [ -f "$f" ] || continue
            echo "---- $f"; tail -n 40 "$f"
        done
    fi
    [ -n "${tmpdir:-}" ] && [ -z "${KEEP_TMPDIR:-}" ] && rm -rf "$tmpdir"
    exit $status
}
trap _run_cleanup EXIT
trap 'exit 130' INT TERM

tmpdir="$(mktemp -d "/tmp/nbdrepl-$test_name.XXXXXX")"

# free_port: print a TCP port on 127.0.0.1 that nobody uses now.  It
# is picked at random below the kernel's ephemeral range, so that the
# source port of some outgoing connection (tests make many) cannot take
# it before the node binds it, and never twice in one test.
free_port ()
{
    /usr/bin/python3 - "$tmpdir/.ports" <<'PY'
import random, socket, sys
used = set()
try:
    used = set(open(sys.argv[1]).read().split())
except FileNotFoundError:
    pass
lo = 32768
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except Exception:
    pass
for _ in range(1000):
    port = random.randrange(10000, max(lo, 10001))
    if str(port) in used:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    open(sys.argv[1], "a").write(f"{port}\n")
    print(port)
    sys.exit(0)
sys.exit("free_port: no free port found")
PY
}

# make_config N [PROTOCOL [SIZE]]: write $tmpdir/r0.yaml for nodes
# node0..node(N-1), each with a SIZE (default 64M) disk of zeroes and a
# control socket in $tmpdir.  Sets NBD_PORT_<name> for each node.
declare -A NBD_PORT PID
make_config ()
{
    local n=$1 protocol=${2:-C} size=${3:-64M} i
    CONFIG="$tmpdir/r0.yaml"
    {
        echo "resource: r0"
        echo "protocol: $protocol"
        echo "net:"
        echo "  ping-interval: 0.5"
        echo "  ping-timeout: 3"
        echo "  timeout: 4"
        echo "  connect-retry-max: 0.5"
        echo "nodes:"
        for (( i=0; i<n; i++ )); do
            echo "  - name: node$i"
            echo "    id: $i"
            echo "    address: 127.0.0.1:$(free_port)"
            echo "    disk: node$i.img"
            echo "    control: node$i.sock"
            truncate -s "$size" "$tmpdir/node$i.img"
            NBD_PORT[node$i]=$(free_port)
        done
    } > "$CONFIG"
}

disk () { echo "$tmpdir/$1.img"; }
sock () { echo "$tmpdir/$1.sock"; }
uri () { echo "nbd://127.0.0.1:${NBD_PORT[$1]}"; }

# start_node NAME [PLUGIN-ARGS...]: start nbdkit for a node and wait
# (bounded) until its control socket answers.
start_node ()
{
    local name=$1 i; shift
    rm -f "$(sock "$name")"
    nbdkit -f --exit-with-parent -p "${NBD_PORT[$name]}" \
        "$PLUGIN" config="$CONFIG" node="$name" "$@" \
        >>"$tmpdir/$name.log" 2>&1 &
    PID[$name]=$!
    cleanup_fn "stop_node $name"
    for (( i=0; i<100; i++ )); do
        if "$REPLCTL" -s "$(sock "$name")" status >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "${PID[$name]}" 2>/dev/null ||
            fail "node $name exited during start: $(tail -n 5 "$tmpdir/$name.log")"
        sleep 0.1
    done
    fail "node $name: control socket did not answer within 10 s"
}

# stop_node NAME: SIGTERM the node we started, and reap it.
stop_node ()
{
    local name=$1 pid=${PID[$1]:-}
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    PID[$name]=
}

# kill_node NAME: SIGKILL, as a crash.
kill_node ()
{
    local name=$1 pid=${PID[$1]:-}
    [ -n "$pid" ] || return 0
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    PID[$name]=
}

status_json () { "$REPLCTL" -s "$(sock "$1")" status --json; }

# loop_detach LOOP FILE: detach a loop device and wait (bounded, 60 s)
# until the kernel has let go of FILE, its backing file: losetup -d
# returns before that when the device is still open (the kernel then
# detaches it asynchronously at the last close: more than 10 s once in
# CI on a loaded machine), and an unmount of the file's file system
# then fails with "target is busy".
loop_detach ()
{
    local loop=$1 file=$2 i
    losetup -d "$loop"
    for (( i = 0; i < 600; i++ )); do
        [ -n "$(losetup -j "$file" 2>/dev/null)" ] || return 0
        sleep 0.1
    done
    fail "loop device $loop still holds $file 60 s after losetup -d"
}

# loop_detach_if LOOP FILE: detach LOOP only if it is still FILE's loop
# device — for a cleanup, which may run after the test detached it
# itself: the number may by then be another test's device (a plain
# losetup -d would take that one away from under its file system).
loop_detach_if ()
{
    [ "$(losetup -l -n -O NAME -j "$2" 2>/dev/null)" = "$1" ] || return 0
    losetup -d "$1" 2>/dev/null || true
}

# umount_settled DIR: unmount, retrying (bounded, 10 s) while the kernel
# still holds a reference it drops asynchronously (a detached loop
# device's backing file).
umount_settled ()
{
    local i
    for (( i = 0; i < 100; i++ )); do
        umount "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    umount "$1" || fail "cannot unmount $1 within 10 s"
}

# wait_for NAME JQ-EXPR [SECONDS]: poll the node's status (every 0.1 s,
# at most SECONDS, default 30) until the jq expression is true.
wait_for ()
{
    local name=$1 expr=$2 secs=${3:-30} i
    for (( i=0; i<secs*10; i++ )); do
        if status_json "$name" 2>/dev/null | jq -e "$expr" >/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    status_json "$name" >&2 || true
    fail "node $name: '$expr' not true within $secs s"
}

# wait_uptodate PRIMARY: every peer of PRIMARY connected and UpToDate.
wait_uptodate ()
{
    wait_for "$1" '[.peers[] | .connection == "Connected" and .disk == "UpToDate" and .replication == "Established" and .out_of_sync_bytes == 0] | all' "${2:-60}"
}

# same_disks NAME...: every named node's disk is byte-identical to the first.
same_disks ()
{
    local first=$1 n; shift
    for n in "$@"; do
        cmp "$(disk "$first")" "$(disk "$n")" ||
            fail "disks of $first and $n differ"
    done
}

# wait_log NODE PATTERN [SECS]: bounded wait (default 10 s) until NODE's
# log has a line matching the grep pattern; fails the test otherwise.
wait_log ()
{
    local name=$1 pattern=$2 secs=${3:-10} i
    for (( i=0; i<secs*10; i++ )); do
        grep -q -- "$pattern" "$tmpdir/$name.log" && return 0
        sleep 0.1
    done
    fail "node $name did not log '$pattern' within $secs s: $(tail -n 3 "$tmpdir/$name.log")"
}

# make_diskless_config SIZE [DISKLESS]: node0 and node1 store the data
# (new disks declared in sync with create-md --in-sync), and DISKLESS
# more nodes (default 1: node2, node3, ...) are diskless.
make_diskless_config ()
{
    local n i dl=${2:-1}
    make_config $(( 2 + dl )) C "$1"
    for (( i = 2; i < 2 + dl; i++ )); do
        sed -i "s|disk: node$i.img|disk: none|" "$CONFIG"
        rm -f "$(disk node$i)"
    done
    for n in node0 node1; do
        "$REPLCTL" -c "$CONFIG" -n $n create-md --in-sync >/dev/null ||
            fail "create-md --in-sync on $n failed"
    done
}

# Roles by hand (the allow-two-primaries tests): promote NODE, demote
# NODE, each must succeed; promote_refused NODE TEXT: replctl primary
# on NODE fails saying TEXT; wait_peer_role NODE PEER ROLE: NODE sees
# PEER in ROLE (bounded, 15 s).
promote () { "$REPLCTL" -s "$(sock "$1")" primary >"$tmpdir/err" 2>&1 ||
                 fail "promoting $1 failed: $(cat "$tmpdir/err")"; }
demote () { "$REPLCTL" -s "$(sock "$1")" secondary >"$tmpdir/err" 2>&1 ||
                fail "demoting $1 failed: $(cat "$tmpdir/err")"; }
promote_refused ()
{
    local out
    out=$("$REPLCTL" -s "$(sock "$1")" primary 2>&1) &&
        fail "$1 was promoted: $out"
    grep -qF -- "$2" <<<"$out" || fail "$1: '$out' does not say '$2'"
}
wait_peer_role () {
    wait_for "$1" "[.peers[] | select(.name == \"$2\") | .role == \"$3\"] | all" 15
}

# start_tgtd: a private tgt iSCSI target daemon on 127.0.0.1 (port
# TGT_PORT, management socket /var/run/tgtd/socket.$TGT_CONTROL), so
# that it neither collides with a system tgtd (control port 0, port
# 3260) nor with another test.  Waits (bounded) until it answers.
start_tgtd ()
{
    local i
    TGT_PORT=$(free_port)
    TGT_CONTROL=$(free_port)
    tgtd -f -C "$TGT_CONTROL" --iscsi "portal=127.0.0.1:$TGT_PORT" \
        >>"$tmpdir/tgtd.log" 2>&1 &
    PID[tgtd]=$!
    cleanup_fn "stop_tgtd"
    for (( i=0; i<100; i++ )); do
        tgtadm -C "$TGT_CONTROL" --op show --mode target >/dev/null 2>&1 &&
            return 0
        kill -0 "${PID[tgtd]}" 2>/dev/null ||
            fail "tgtd exited during start: $(tail -n 5 "$tmpdir/tgtd.log")"
        sleep 0.1
    done
    fail "tgtd: no answer on control port $TGT_CONTROL within 10 s"
}

# stop_tgtd: tgtd ignores SIGTERM; it exits on "delete --mode system"
# once it has no targets.  SIGKILL if it has not gone within 5 s.
stop_tgtd ()
{
    local pid=${PID[tgtd]:-} tid i
    [ -n "$pid" ] || return 0
    for tid in $(tgtadm -C "$TGT_CONTROL" --op show --mode target 2>/dev/null |
                 sed -n 's/^Target \([0-9]*\):.*/\1/p'); do
        tgtadm -C "$TGT_CONTROL" --op delete --mode target --tid "$tid" --force || true
    done
    tgtadm -C "$TGT_CONTROL" --op delete --mode system 2>/dev/null || true
    for (( i=0; i<50; i++ )); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    PID[tgtd]=
    rm -f "/var/run/tgtd/socket.$TGT_CONTROL" "/var/run/tgtd/socket.$TGT_CONTROL.lock"
}

# tgt_export TID FILE: export FILE as LUN 1 of target TID (open to any
# initiator: tgtd listens on loopback only) and print its iscsi:// URI.
tgt_export ()
{
    local tid=$1 file=$2 iqn="iqn.2026-01.org.nbdrepl:$test_name-$1"
    tgtadm -C "$TGT_CONTROL" --lld iscsi --op new --mode target --tid "$tid" -T "$iqn" &&
    tgtadm -C "$TGT_CONTROL" --lld iscsi --op new --mode logicalunit --tid "$tid" --lun 1 -b "$file" &&
    tgtadm -C "$TGT_CONTROL" --lld iscsi --op bind --mode target --tid "$tid" -I ALL ||
        fail "tgtadm: could not export $file as target $tid"
    echo "iscsi://127.0.0.1:$TGT_PORT/$iqn/1"
}

# tgt_unexport TID: take target TID away again (its file is closed).
tgt_unexport ()
{
    tgtadm -C "$TGT_CONTROL" --lld iscsi --op delete --mode target --tid "$1" --force ||
        fail "tgtadm: could not delete target $1"
}

# ---- one network namespace per node ------------------------------------
# ns_nodes NET NODE...: a network namespace per node on a bridge
# (scripts/netns.sh; NET is like 10.95.0), named $NS-NODE with
# NS=nbdrepl-PID; sets addr[NODE]; skips the test (77) without root or
# namespaces; deletes them at exit.  The nodes of $CONFIG then run in
# them with start_ns, their NBD export on port 10809 of their address.
declare -A NPID
ns_nodes ()
{
    local net=$1 n; shift
    [ "$(id -u)" -eq 0 ] || { echo "$test_name: SKIP: needs root for network namespaces"; exit 77; }
    NS="nbdrepl-$$"
    source "$(dirname "${BASH_SOURCE[0]}")/../scripts/netns.sh"
    netns_setup "$NS" "$net" "$@"
    [ "$use_netns" = yes ] || { echo "$test_name: SKIP: network namespaces unavailable"; exit 77; }
    for n in "$@" sw; do
        cleanup_fn "ip netns del $NS-$n 2>/dev/null"
    done
}

# start_ns NODE [PLUGIN-ARGS...]: nbdkit for NODE of $CONFIG in NODE's
# namespace (NPID[NODE]); stopped at exit (woken first if frozen).
start_ns ()
{
    local n=$1; shift
    ip netns exec "$NS-$n" nbdkit -f -p 10809 "$PLUGIN" config="$CONFIG" node="$n" "$@" \
        >>"$tmpdir/$n.log" 2>&1 &
    NPID[$n]=$!
    cleanup_fn "kill -CONT ${NPID[$n]} 2>/dev/null; kill ${NPID[$n]} 2>/dev/null; wait ${NPID[$n]} 2>/dev/null"
}
# stop_ns NODE: SIGTERM (after SIGCONT, if frozen), and reap.
stop_ns ()
{
    kill -CONT "${NPID[$1]}" 2>/dev/null || true
    kill "${NPID[$1]}" 2>/dev/null || true
    wait "${NPID[$1]}" 2>/dev/null || true
}
# kill9_ns NODE: SIGKILL, as a crash, and reap.
kill9_ns ()
{
    kill -9 "${NPID[$1]}" 2>/dev/null || true
    wait "${NPID[$1]}" 2>/dev/null || true
}
# ns_config [-d NODE] [-t SECS] [-q POLICY] [-x LINE]... NODE...: write
# $CONFIG ($tmpdir/r0.yaml), resource r0 of the namespaced NODEs (ids in
# the order given): protocol C, quorum majority, on-no-quorum io-error
# (-q: POLICY), auto-promote false, ping-interval 0.5, ping-timeout 2
# and timeout 3 (-t: SECS and SECS + 1), connect-retry-max 0.5; -x adds
# a top-level LINE ("allow-two-primaries: true").  -d NODE is diskless;
# every other node gets a fresh 16 MiB disk, created in sync.
ns_config ()
{
    local diskless= ping=2 policy=io-error extra=() n i=0 opt OPTIND=1
    while getopts d:t:q:x: opt; do
        case $opt in
            d) diskless=$OPTARG ;;
            t) ping=$OPTARG ;;
            q) policy=$OPTARG ;;
            x) extra+=("$OPTARG") ;;
            *) fail "ns_config: bad option" ;;
        esac
    done
    shift $((OPTIND - 1))
    CONFIG="$tmpdir/r0.yaml"
    {
        echo "resource: r0"
        echo "protocol: C"
        for n in "${extra[@]}"; do echo "$n"; done
        echo "quorum: majority"
        echo "on-no-quorum: $policy"
        echo "auto-promote: false"
        echo "net:"
        echo "  ping-interval: 0.5"
        echo "  ping-timeout: $ping"
        echo "  timeout: $((ping + 1))"
        echo "  connect-retry-max: 0.5"
        echo "nodes:"
        for n in "$@"; do
            echo "  - name: $n"
            echo "    id: $i"
            echo "    address: ${addr[$n]}:7789"
            if [ "$n" = "$diskless" ]; then
                echo "    disk: none"
            else
                echo "    disk: $n.img"
            fi
            echo "    control: $n.sock"
            i=$((i + 1))
        done
    } >"$CONFIG"
    for n in "$@"; do
        [ "$n" != "$diskless" ] || continue
        rm -f "$tmpdir/$n.img" "$tmpdir/$n.img.meta"
        truncate -s 16M "$tmpdir/$n.img"
        "$REPLCTL" -c "$CONFIG" -n "$n" create-md --in-sync >/dev/null ||
            fail "create-md on $n"
    done
}
# st NODE: its status, JSON (its control socket is $tmpdir/NODE.sock).
st () { "$REPLCTL" -s "$tmpdir/$1.sock" status --json; }
# wait_st NODE JQ SECS: poll (every 0.1 s, at most SECS) until the jq
# expression is true of NODE's status; fail with what it shows.
wait_st ()
{
    local i
    for (( i=0; i<$3*10; i++ )); do
        st "$1" 2>/dev/null | jq -e "$2" >/dev/null && return 0
        sleep 0.1
    done
    fail "node $1: '$2' not true within $3 s: $(st "$1" 2>&1 | jq -c '{role, disk, quorum, peers: [.peers[] | {name, connection, disk, replication, out_of_sync_bytes, last_error}]}' 2>/dev/null)"
}

# Two writers of tests/twoprim.py at once (allow-two-primaries).
TWOPRIM="/usr/bin/python3 $(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/twoprim.py"

# twoprim_start ROUND SECS BLOCKS URI1 URI2: writer 1 on URI1 and writer
# 2 on URI2 write random 4 KiB blocks of the first BLOCKS, 16 in flight
# each, and stop together SECS s from now (their last writes cross);
# their logs are $tmpdir/w1.ROUND.json and w2.ROUND.json, their output
# w1.out and w2.out.  Sets TP_W1 and TP_W2 (pids).
twoprim_start ()
{
    local r=$1 secs=$2 blocks=$3 deadline first
    deadline=$($TWOPRIM now $(( secs + 1 )))
    first=$(( r * 10000000 ))
    $TWOPRIM write "$4" 1 "$blocks" "$deadline" $first 1000000 \
        "$tmpdir/w1.$r.json" >"$tmpdir/w1.out" 2>&1 &
    TP_W1=$!
    cleanup_fn "kill $TP_W1 2>/dev/null || true"
    $TWOPRIM write "$5" 2 "$blocks" "$deadline" $first 1000000 \
        "$tmpdir/w2.$r.json" >"$tmpdir/w2.out" 2>&1 &
    TP_W2=$!
    cleanup_fn "kill $TP_W2 2>/dev/null || true"
}

# twoprim_wait ROUND SECS: wait (bounded: SECS + 61 s) for the writers
# of twoprim_start; sets TP_RC1 and TP_RC2 to their exit statuses.
twoprim_wait ()
{
    local i
    for (( i = 0; i < ($2 + 61) * 10; i++ )); do
        kill -0 $TP_W1 2>/dev/null || kill -0 $TP_W2 2>/dev/null || break
        sleep 0.1
    done
    kill -0 $TP_W1 2>/dev/null && fail "round $1: writer 1 still running"
    kill -0 $TP_W2 2>/dev/null && fail "round $1: writer 2 still running"
    TP_RC1=0; wait $TP_W1 || TP_RC1=$?
    TP_RC2=0; wait $TP_W2 || TP_RC2=$?
}

# wait_storage_uptodate NODE PEER [SECONDS]: NODE sees storage node PEER
# connected, UpToDate, Established and with nothing out of sync (where
# wait_uptodate would wait for a diskless peer's disk too).
wait_storage_uptodate ()
{
    wait_for "$1" "[.peers[] | select(.name == \"$2\") | .connection == \"Connected\" and .disk == \"UpToDate\" and .replication == \"Established\" and .out_of_sync_bytes == 0] | length == 1 and all" "${3:-60}"
}
