#!/usr/bin/env bash
# The Pacemaker resource agent scripts/ocf/repl on a real two-node
# resource on loopback, every action called with the environment
# Pacemaker gives it: meta-data is valid XML, validate-all names what is
# wrong, start/monitor/promote/demote/notify/stop move and report the
# roles (writes through the promoted node reach the other disk), the
# promotion scores follow the disk state, a hung node is reported and
# SIGKILLed at the end of a bounded stop, ocf-tester passes (when the
# resource-agents package is there), and the agent also works without
# ocf-shellfuncs.
source "$(dirname "$0")/functions.sh"
requires jq --version
requires xmllint --version
requires setsid --version

AGENT="$(cd "$(dirname "$0")/.." && pwd)/scripts/ocf/repl"
[ -x "$AGENT" ] || fail "$AGENT is not an executable file"
OCF_SHELLFUNCS=/usr/lib/ocf/lib/heartbeat/ocf-shellfuncs
RA_DTD=/usr/share/resource-agents/ra-api-1.dtd

make_config 2 C 64M
# Under a cluster manager nothing but the cluster may promote a node.
echo "auto-promote: false" >>"$CONFIG"
for n in node0 node1; do
    "$REPLCTL" -c "$CONFIG" -n "$n" create-md --in-sync >/dev/null ||
        fail "create-md on $n failed"
done

# Stand-ins for Pacemaker's crm_master and crm_attribute: they record
# the promotion scores the agent sets, one line per call.
mkdir "$tmpdir/sbin"
for tool in crm_master crm_attribute; do
    cat >"$tmpdir/sbin/$tool" <<EOF
#!/bin/sh
echo "\$OCF_RESKEY_node $tool \$*" >>"$tmpdir/scores"
EOF
    chmod +x "$tmpdir/sbin/$tool"
done

# What Pacemaker 2.1 puts in an agent's environment for one instance of
# a promotable clone; the agent's own parameters come per call.
OCF_ENV=(
    OCF_ROOT=/usr/lib/ocf OCF_RA_VERSION_MAJOR=1 OCF_RA_VERSION_MINOR=1
    OCF_RESOURCE_INSTANCE=p_repl OCF_RESOURCE_TYPE=repl
    OCF_RESOURCE_PROVIDER=nbdrepl OCF_RESKEY_crm_feature_set=3.16.2
    OCF_RESKEY_CRM_meta_timeout=20000 OCF_RESKEY_CRM_meta_interval=0
    OCF_RESKEY_CRM_meta_clone_max=2 OCF_RESKEY_CRM_meta_clone_node_max=1
    OCF_RESKEY_CRM_meta_promoted_max=1 OCF_RESKEY_CRM_meta_promoted_node_max=1
    OCF_RESKEY_CRM_meta_promotable=true OCF_RESKEY_CRM_meta_notify=true
    OCF_RESKEY_config="$CONFIG"
    OCF_RESKEY_plugin="$PLUGIN" OCF_RESKEY_replctl="$REPLCTL"
    HA_SBIN_DIR="$tmpdir/sbin" PATH="$tmpdir/sbin:$PATH"
    HA_LOGFACILITY=none
)
# node0 logs to a file (nbdkit -f under the agent); node1 lets nbdkit
# fork into the background itself (its messages go to syslog).
declare -A NODE_ENV=(
    [node0]="OCF_RESKEY_logfile=$tmpdir/node0.log"
    [node1]=""
)

# ra NODE ACTION [VAR=VALUE...]: run the agent for NODE as Pacemaker
# would (bounded), VARs added to the environment.  Sets RA_RC; the
# output is in $tmpdir/ra.out and appended to agent.log.
ra ()
{
    local node=$1 action=$2; shift 2
    RA_RC=0
    # shellcheck disable=SC2086 # NODE_ENV holds whole VAR=VALUE words
    env "${OCF_ENV[@]}" OCF_RESKEY_node="$node" \
        OCF_RESKEY_nbdkit_port="${NBD_PORT[$node]:-}" \
        OCF_RESKEY_pidfile="$tmpdir/$node.pid" ${NODE_ENV[$node]:-} "$@" \
        timeout 90 "$AGENT" "$action" >"$tmpdir/ra.out" 2>&1 || RA_RC=$?
    { echo "== $node $action $* -> $RA_RC"; cat "$tmpdir/ra.out"; } >>"$tmpdir/agent.log"
}

# expect RC NODE ACTION [VAR=VALUE...]: the action exits with RC.
expect ()
{
    local want=$1; shift
    ra "$@"
    [ "$RA_RC" = "$want" ] ||
        fail "$1 $2: exit $RA_RC, expected $want: $(cat "$tmpdir/ra.out")"
}

# said TEXT: the last action's output contains TEXT.
said ()
{
    grep -qF -- "$1" "$tmpdir/ra.out" ||
        fail "the output does not say '$1': $(cat "$tmpdir/ra.out")"
}

# monitor NODE RC [VAR=VALUE...]: a recurring monitor (not a probe)
# exits with RC.
monitor ()
{
    local node=$1 rc=$2; shift 2
    expect "$rc" "$node" monitor OCF_RESKEY_CRM_meta_interval=10000 "$@"
}

# score NODE: the promotion score the agent last set for NODE ("none"
# when it deleted it).  Cleared by clear_scores.
clear_scores () { : >"$tmpdir/scores"; }
score ()
{
    local line
    line=$(grep "^$1 " "$tmpdir/scores" | tail -n 1)
    case $line in
        "") echo "unset" ;;
        *" -D"*) echo "none" ;;
        *) sed 's/.* -v \([0-9-]*\).*/\1/' <<<"$line" ;;
    esac
}
expect_score ()
{
    local got
    got=$(score "$1")
    [ "$got" = "$2" ] || fail "promotion score of $1 is $got, expected $2 ($(cat "$tmpdir/scores"))"
}

role () { status_json "$1" | jq -r .role; }

# The nbdkit that the agent started for NODE (from its pidfile), or "".
node_pid ()
{
    local pid
    pid=$(cat "$tmpdir/$1.pid" 2>/dev/null) || return 0
    [ -r "/proc/$pid/cmdline" ] &&
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "node=$1 " &&
        ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" &&
        echo "$pid"
    return 0
}

# Whatever happens, stop the nbdkit processes this test started through
# the agent: SIGTERM, a bounded wait, SIGKILL, by pid.
kill_started ()
{
    local n pid i
    for n in node0 node1; do
        pid=$(node_pid "$n")
        [ -n "$pid" ] || continue
        kill -CONT "$pid" 2>/dev/null
        kill "$pid" 2>/dev/null
        for (( i=0; i<50; i++ )); do
            [ -n "$(node_pid "$n")" ] || break
            sleep 0.1
        done
        [ -z "$(node_pid "$n")" ] || kill -9 "$pid" 2>/dev/null
    done
}
cleanup_fn kill_started

# ---- meta-data, usage, validate-all ----------------------------------

ra node0 meta-data
[ "$RA_RC" = 0 ] || fail "meta-data exited $RA_RC"
cp "$tmpdir/ra.out" "$tmpdir/meta-data.xml"
xmllint --noout "$tmpdir/meta-data.xml" || fail "meta-data is not well-formed XML"
if [ -r "$RA_DTD" ]; then
    # As ocf-tester does it: the DOCTYPE names ra-api-1.dtd.
    (cd "$(dirname "$RA_DTD")" && xmllint --noout --valid - <"$tmpdir/meta-data.xml") ||
        fail "meta-data does not conform to $RA_DTD"
    info "meta-data: valid against $RA_DTD"
fi
for a in start stop promote demote monitor notify meta-data validate-all; do
    grep -q "<action name=\"$a\"" "$tmpdir/meta-data.xml" ||
        fail "meta-data lists no $a action"
done
grep -q 'name="monitor".*role="Promoted"' "$tmpdir/meta-data.xml" ||
    fail "meta-data has no monitor for the Promoted role"
for p in config node nbdkit_port nbdkit_args replctl plugin logfile pidfile; do
    grep -q "<parameter name=\"$p\"" "$tmpdir/meta-data.xml" ||
        fail "meta-data lists no parameter $p"
done

expect 0 node0 usage
expect 3 node0 reload
"$AGENT" >/dev/null 2>&1 && fail "the agent without an action succeeded"
[ $? = 2 ] || fail "the agent without an action did not exit 2 (OCF_ERR_ARGS)"

expect 0 node0 validate-all

# Bad configurations and parameters: the OCF code, and a reason that
# says what is wrong.
sed 's/^protocol:/protocl:/' "$CONFIG" >"$tmpdir/bad.yaml"
expect 6 node0 validate-all OCF_RESKEY_config="$tmpdir/bad.yaml"
said "ocf-exit-reason:" ; said "unknown key 'protocl'"
info "bad config: $(grep -m1 ocf-exit-reason "$tmpdir/ra.out")"
expect 6 node0 start OCF_RESKEY_config="$tmpdir/bad.yaml"
said "unknown key 'protocl'"
[ ! -e "$tmpdir/node0.pid" ] || fail "start with a bad config left a pidfile"
expect 6 node0 validate-all OCF_RESKEY_config=
said "parameter config is not set"
expect 5 node0 validate-all OCF_RESKEY_config="$tmpdir/nonexistent.yaml"
said "nonexistent.yaml: no such readable file"
expect 6 nosuch validate-all OCF_RESKEY_nbdkit_port=10809
said "node 'nosuch' is not in $CONFIG"
expect 6 node0 validate-all OCF_RESKEY_node=
said "(this host's name, the default) is not in"
expect 5 node0 validate-all OCF_RESKEY_replctl=/nonexistent/replctl
said "replctl '/nonexistent/replctl' not found"
expect 5 node0 validate-all OCF_RESKEY_plugin="$tmpdir/nonexistent.so"
said "cannot load the plugin"
expect 6 node0 validate-all OCF_RESKEY_nbdkit_port=99999
said "nbdkit_port '99999'"
expect 6 node0 validate-all OCF_RESKEY_CRM_meta_promoted_max=2
said "promoted-max is 2"

# ---- start, monitor ------------------------------------------------------

# The probes Pacemaker runs first: nothing runs.
expect 7 node0 monitor
expect 7 node1 monitor

expect 0 node0 start
expect 0 node1 start
pid0=$(node_pid node0) pid1=$(node_pid node1)
[ -n "$pid0" ] && [ -n "$pid1" ] || fail "no nbdkit behind the pidfiles after start"
info "started: node0 pid $pid0 (nbdkit -f, log file), node1 pid $pid1 (daemonised)"
expect 0 node0 start
[ "$(node_pid node0)" = "$pid0" ] || fail "a second start replaced node0's nbdkit"
said "already runs as Secondary"

wait_for node0 '.peers[0].connection == "Connected"' 30
clear_scores
monitor node0 0
monitor node1 0
expect_score node0 10000
expect_score node1 10000
[ "$(role node0)" = Secondary ] && [ "$(role node1)" = Secondary ] ||
    fail "the nodes are not both Secondary after start"
info "start both: monitor says running (Secondary), score 10000 each"

# ---- promote node0, write through it ---------------------------------

expect 0 node0 promote
clear_scores
monitor node0 8
monitor node1 0
expect_score node0 10000
[ "$(role node0)" = Primary ] || fail "node0 is $(role node0) after promote"
wait_for node1 '.peers[0].role == "Primary"' 10

head -c 8M /dev/urandom >"$tmpdir/data0"
timed 60 nbdcopy "$tmpdir/data0" "$(uri node0)" || fail "nbdcopy to node0 failed"
cmp -n 8M "$tmpdir/data0" "$(disk node1)" ||
    fail "what was written through node0 is not on node1's disk"
info "promote node0: monitor says Promoted (8); 8 MiB through node0 reached node1's disk"

# node1 may not be promoted while node0 is Primary: retried within the
# operation's timeout, then refused with the node's reason.
start_s=$SECONDS
expect 1 node1 promote OCF_RESKEY_CRM_meta_timeout=8000
said "peer node0 is Primary"
(( SECONDS - start_s <= 8 )) || fail "the refused promote took $(( SECONDS - start_s )) s, more than its 8 s timeout"
[ "$(role node1)" = Secondary ] || fail "node1 was promoted while node0 is Primary"

# A client holds node0 open: demote is refused within its timeout.
/usr/bin/python3 - "$(uri node0)" "$AGENT" "${OCF_ENV[@]}" OCF_RESKEY_node=node0 \
    OCF_RESKEY_nbdkit_port="${NBD_PORT[node0]}" OCF_RESKEY_pidfile="$tmpdir/node0.pid" \
    ${NODE_ENV[node0]} >>"$tmpdir/agent.log" 2>&1 <<'PY' ||
import subprocess, sys
import nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
r = subprocess.run(["env"] + sys.argv[3:] + ["OCF_RESKEY_CRM_meta_timeout=7000",
                    sys.argv[2], "demote"], capture_output=True, text=True, timeout=30)
h.shutdown()
print("== node0 demote with a client open -> %d" % r.returncode)
print(r.stdout + r.stderr)
sys.exit(0 if r.returncode == 1 and "client connection(s) are open" in r.stderr else 1)
PY
    fail "demote with a client open did not fail as it should: $(tail -n 5 "$tmpdir/agent.log")"
[ "$(role node0)" = Primary ] || fail "node0 lost its role while a client held it"

# ---- demote node0, promote node1 -------------------------------------

expect 0 node0 demote
monitor node0 0
expect 0 node0 demote                   # demoting a Secondary succeeds
expect 0 node1 promote
monitor node1 8
monitor node0 0
wait_for node0 '.peers[0].role == "Primary"' 10
for t in pre post; do
    expect 0 node0 notify OCF_RESKEY_CRM_meta_notify_type=$t \
        OCF_RESKEY_CRM_meta_notify_operation=promote \
        OCF_RESKEY_CRM_meta_notify_promote_uname=host1
    said "notify: $t-promote"
done

head -c 8M /dev/urandom >"$tmpdir/data1"
timed 60 nbdcopy "$tmpdir/data1" "$(uri node1)" || fail "nbdcopy to node1 failed"
cmp -n 8M "$tmpdir/data1" "$(disk node0)" ||
    fail "what was written through node1 is not on node0's disk"
wait_uptodate node1 30
same_disks node0 node1
info "demote node0, promote node1: 8 MiB through node1 reached node0's disk"

# ---- stop both -----------------------------------------------------------

expect 0 node0 stop
monitor node0 7
[ -z "$(node_pid node0)" ] || fail "node0's nbdkit survived stop"
[ ! -e "$tmpdir/node0.pid" ] || fail "stop left node0's pidfile"
clear_scores
monitor node1 8
expect_score node1 10000                # the Primary, alone
expect 0 node1 stop                     # a Primary: demoted, then stopped
said "still Primary; demoting it before the stop"
monitor node1 7
expect 0 node1 stop                     # stopping a stopped node succeeds
expect 7 node1 monitor
[ -z "$(node_pid node1)" ] || fail "node1's nbdkit survived stop"
grep -q "stopped cleanly" "$tmpdir/node0.log" || fail "node0 did not stop cleanly"
info "stop both: monitor says not running (7)"

# ---- ocf-tester, when the resource-agents package is installed --------

if command -v ocf-tester >/dev/null 2>&1; then
    # ocf-tester runs meta-data as the user nobody, who may not reach
    # this checkout: then it tests a copy in a directory nobody reaches.
    tester_agent=$AGENT
    if ! su nobody -s /bin/sh -c "test -x '$AGENT'" 2>/dev/null; then
        tester_dir=$(mktemp -d /tmp/nbdrepl-ocf-agent.XXXXXX)
        cleanup_fn "rm -rf '$tester_dir'"
        chmod 755 "$tester_dir"
        install -m 755 "$AGENT" "$tester_dir/repl"
        tester_agent=$tester_dir/repl
    fi
    env OCF_ROOT=/usr/lib/ocf HA_SBIN_DIR="$tmpdir/sbin" PATH="$tmpdir/sbin:$PATH" \
        timeout 300 ocf-tester -n p_repl -o config="$CONFIG" -o node=node0 \
        -o nbdkit_port="${NBD_PORT[node0]}" -o plugin="$PLUGIN" \
        -o replctl="$REPLCTL" -o pidfile="$tmpdir/node0.pid" \
        -o logfile="$tmpdir/node0.log" "$tester_agent" >"$tmpdir/ocf-tester.out" 2>&1 ||
        fail "ocf-tester failed: $(cat "$tmpdir/ocf-tester.out")"
    grep -q "passed all tests" "$tmpdir/ocf-tester.out" ||
        fail "ocf-tester: $(cat "$tmpdir/ocf-tester.out")"
    info "ocf-tester: $(tail -n 1 "$tmpdir/ocf-tester.out")"
else
    info "ocf-tester is not installed (resource-agents): not run"
fi

# ---- a hung node: monitor fails, stop ends it with SIGKILL ------------

expect 0 node0 start
clear_scores
monitor node0 0
expect_score node0 1000                 # UpToDate, but node1 is away
pid0=$(node_pid node0)
kill -STOP "$pid0"
start_s=$SECONDS
expect 1 node0 monitor OCF_RESKEY_CRM_meta_interval=10000 OCF_RESKEY_CRM_meta_timeout=8000
said "runs but its control socket does not answer"
expect 0 node0 stop OCF_RESKEY_CRM_meta_timeout=8000
said "sending SIGKILL"
(( SECONDS - start_s <= 8 + 8 )) || fail "monitor and stop of a hung node took $(( SECONDS - start_s )) s"
[ -z "$(node_pid node0)" ] || fail "node0's nbdkit survived the stop"
monitor node0 7
info "hung node: monitor failed (1), stop sent SIGKILL to pid $pid0 after its timeout"

# ---- an Inconsistent node gets no score and is not promoted ----------

"$REPLCTL" -c "$CONFIG" -n node1 create-md --force >/dev/null ||
    fail "create-md --force on node1 failed"
expect 0 node1 start
clear_scores
monitor node1 0
expect_score node1 none
start_s=$SECONDS
expect 1 node1 promote
said "not UpToDate"
(( SECONDS - start_s <= 5 )) || fail "promotion of an Inconsistent node was retried"
expect 0 node1 stop
info "Inconsistent node: no promotion score, promote refused at once"

# ---- stand-alone, without ocf-shellfuncs -----------------------------

mkdir "$tmpdir/no-ocf"
NO_OCF=(OCF_ROOT="$tmpdir/no-ocf" OCF_FUNCTIONS_DIR="$tmpdir/no-ocf")
expect 0 node0 meta-data "${NO_OCF[@]}"
xmllint --noout "$tmpdir/ra.out" || fail "stand-alone meta-data is not well-formed XML"
expect 6 node0 validate-all "${NO_OCF[@]}" OCF_RESKEY_config="$tmpdir/bad.yaml"
said "ocf-exit-reason:"; said "unknown key 'protocl'"
expect 0 node0 start "${NO_OCF[@]}"
clear_scores
monitor node0 0 "${NO_OCF[@]}"
grep -q "^node0 crm_master -l reboot -Q -v 1000$" "$tmpdir/scores" ||
    fail "stand-alone: the score was not set with crm_master: $(cat "$tmpdir/scores")"
expect 0 node0 promote "${NO_OCF[@]}"
expect 8 node0 monitor "${NO_OCF[@]}" OCF_RESKEY_CRM_meta_interval=10000
expect 0 node0 stop "${NO_OCF[@]}"
expect 7 node0 monitor "${NO_OCF[@]}"
if [ -r "$OCF_SHELLFUNCS" ]; then
    info "ran with $OCF_SHELLFUNCS and without it"
else
    info "$OCF_SHELLFUNCS is not installed: ran stand-alone only"
fi

for p in "$pid0" "$pid1"; do
    if [ -r "/proc/$p/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status"; then
        fail "pid $p of a node the agent started is still running"
    fi
done
info "ok: every action of the OCF agent on a real two-node resource"
