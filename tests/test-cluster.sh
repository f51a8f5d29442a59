#!/usr/bin/env bash
# Failover driven by a real cluster manager: a three-node Corosync 3
# (knet) + Pacemaker 2.1 cluster on this machine, each node in its own
# network, mount and UTS namespaces (tests/cluster/node-init), each also
# a storage node of the nbdrepl resource r0.  Pacemaker runs the
# project's agents, a promotable clone of ocf:nbdrepl:repl and
# ocf:nbdrepl:attach (repl-attach + ext4) colocated with the promoted
# instance and ordered after the promotion, configured with crm; a
# fence device (tests/cluster/fence_nbdrepl_ns) powers a node off by
# killing every process of its namespace.  A writer appends records to
# a file on the mounted ext4, fsync after each, logging those
# acknowledged; after each scenario every acknowledged record must be
# in the file on whichever node has it mounted:
#   1. the cluster starts, promotes one node, the file system starts there;
#   2. crm node standby of the Primary's node: everything moves cleanly;
#   3. SIGKILL of the Primary's nbdkit: the monitor sees it, Pacemaker
#      recovers, the writer resumes;
#   4. the Primary's node cut off (its link down): it loses nbdrepl
#      quorum and stops completing writes, the majority fences it and
#      promotes; the node boots again with the link back, rejoins as
#      Secondary and resyncs, no split brain;
#   5. a Secondary's Corosync/Pacemaker stopped and started again: it
#      rejoins and resyncs.
# Then the file system is stopped and the three disks compared.
# Everything is bounded; whatever happens, every process of the nodes'
# namespaces is killed and their loop devices detached.
source "$(dirname "$0")/functions.sh"
requires corosync -v
requires pacemakerd --version
requires crm --version
requires crm_mon --version
requires xmllint --version
requires nsenter --version
requires unshare --version
requires nbdfuse --version
requires socat -V
requires mkfs.ext4 -V
requires losetup --version
requires jq --version
requires test -c /dev/fuse
requires test -w /dev/loop-control
[ "$(id -u)" -eq 0 ] || { echo "$test_name: SKIP: needs root (namespaces, mounts, loop devices)"; exit 77; }
# The scenarios run in the plain build (make check).  Under the
# sanitizers (scripts/sanitize sets ASAN_OPTIONS) the nodes are started
# by Pacemaker's executor, not by the test, and the run would take
# another three minutes of CI's time for code the other tests already
# run instrumented.
if [ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
    echo "$test_name: SKIP: the cluster scenarios run in the plain build, not under the sanitizers"
    exit 77
fi

HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "$HERE/.." && pwd)"
NODES="$tmpdir/nodes"           # one directory per node: its "machine"
OVL="$tmpdir/overlay"           # what the nodes see in /usr/lib/ocf and /usr/sbin
MNT="$tmpdir/mnt"               # the mount point, the same path on every node
WOUT="$tmpdir/writer"
ALL=(n1 n2 n3)
START=$(date +%s)
declare -A HOLDER

# elapsed: seconds since the test started.
elapsed () { echo $(( $(date +%s) - START )); }
say () { info "[$(elapsed) s] $*"; }

# on NODE CMD...: run CMD on NODE (in its namespaces).
on () { local n=$1; shift; nsenter -t "${HOLDER[$n]}" -m -u -n -- "$@"; }
crm_on () { local n=$1; shift; HOME="$tmpdir/home" timeout 60 nsenter -t "${HOLDER[$n]}" -m -u -n -- crm "$@"; }

# until_true SECS WHAT CMD...: bounded poll (every 0.5 s) until CMD succeeds.
until_true ()
{
    local secs=$1 what=$2 i; shift 2
    for (( i = 0; i < secs * 2; i++ )); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    say "not true within $secs s: $what"
    mon_xml "$(alive_node)" | xmllint --xpath '//nodes | //resources' - 2>/dev/null | head -n 40 >&2 || true
    fail "$what: not true within $secs s"
}

# ---- the nodes ------------------------------------------------------

ns_nodes 10.93.0 "${ALL[@]}"

mkdir -p "$NODES" "$OVL/ocf/nbdrepl" "$OVL/sbin" "$MNT" "$WOUT" "$tmpdir/home"
cp "$SRC/scripts/ocf/repl" "$SRC/scripts/ocf/attach" "$OVL/ocf/nbdrepl/"
cp "$HERE/cluster/fence_nbdrepl_ns" "$OVL/sbin/"

for n in "${ALL[@]}"; do
    mkdir -p "$NODES/$n/etc-corosync"
    stat -L -c %i "/run/netns/$NS-$n" >"$NODES/$n/netns"
done
{
    cat <<EOF
totem {
    version: 2
    cluster_name: nbdrepl
    transport: knet
    crypto_cipher: none
    crypto_hash: none
    token: 3000
}
quorum {
    provider: corosync_votequorum
}
logging {
    to_syslog: no
    to_stderr: no
    to_logfile: yes
    logfile: /var/log/pacemaker/corosync.log
    timestamp: on
}
nodelist {
EOF
    i=1
    for n in "${ALL[@]}"; do
        printf '    node {\n        ring0_addr: %s\n        name: %s\n        nodeid: %d\n    }\n' \
            "${addr[$n]}" "$n" "$i"
        i=$((i + 1))
    done
    echo "}"
} >"$tmpdir/corosync.conf"
{
    echo "127.0.0.1 localhost"
    for n in "${ALL[@]}"; do echo "${addr[$n]} $n"; done
} >"$tmpdir/hosts"
for n in "${ALL[@]}"; do
    cp "$tmpdir/corosync.conf" "$NODES/$n/etc-corosync/"
    cp "$tmpdir/hosts" "$NODES/$n/hosts"
done

# node_boot NODE: start NODE's cluster stack (node-init) in its namespaces.
node_boot ()
{
    local n=$1
    ip netns exec "$NS-$n" unshare --mount --uts --propagation private \
        "$HERE/cluster/node-init" "$n" "$NODES/$n" "$OVL" >>"$NODES/$n/init.log" 2>&1 &
    HOLDER[$n]=$!
    echo "${HOLDER[$n]}" >"$NODES/$n/holder.pid"
}

# node_off NODE: power NODE off as the fence device does (SIGKILL of
# every process of its network namespace), then detach the loop device
# its attachment left and wait for its mounts to go with the namespace.
node_off ()
{
    local n=$1 kind dev
    printf 'action=off\nplug=%s\nnodes_dir=%s\n' "$n" "$NODES" |
        "$HERE/cluster/fence_nbdrepl_ns" >/dev/null 2>&1 || true
    node_reap "$n"
}
node_reap ()
{
    local n=$1 kind dev res
    wait "${HOLDER[$n]:-}" 2>/dev/null || true
    for f in "$NODES/$n/run/nbdrepl"/attach-*/device; do
        [ -f "$f" ] || continue
        read -r kind dev <"$f" || continue
        # Only if it is still this attachment's device (the number may
        # be another test's by now).
        res=$(basename "$(dirname "$f")")
        [ "$kind" = loop ] &&
            loop_detach_if "$dev" "$(dirname "$f")/fuse/${res#attach-}" || true
    done
}
# reboot_fenced: boot again every node whose stack the fence device
# killed, as a machine that reboots after it was fenced; sets FENCED to
# their names.
reboot_fenced ()
{
    local n
    FENCED=
    for n in "${ALL[@]}"; do
        if ! kill -0 "${HOLDER[$n]}" 2>/dev/null; then
            node_reap "$n"
            node_boot "$n"
            FENCED="${FENCED:+$FENCED }$n"
        fi
    done
}
cleanup_all ()
{
    local n
    [ -z "${WRITER:-}" ] || { kill -9 "$WRITER" 2>/dev/null; wait "$WRITER" 2>/dev/null; }
    for n in "${ALL[@]}"; do node_off "$n"; done
    # Keep the cluster's own logs for a failed run's diagnosis.
    for n in "${ALL[@]}"; do
        for f in "$NODES/$n/var-log-pacemaker/nbdkit.log" "$NODES/$n/init.log"; do
            [ -f "$f" ] && cp "$f" "$tmpdir/$n-$(basename "$f")"
        done
    done
}
cleanup_fn cleanup_all

# ---- the nbdrepl resource ------------------------------------------

CONFIG="$tmpdir/r0.yaml"
{
    echo "resource: r0"
    echo "protocol: C"
    echo "auto-promote: false"
    echo "net:"
    echo "  ping-interval: 0.5"
    echo "  ping-timeout: 2"
    echo "  timeout: 3"
    echo "  connect-retry-max: 0.5"
    echo "nodes:"
    i=0
    for n in "${ALL[@]}"; do
        echo "  - name: $n"
        echo "    id: $i"
        echo "    address: ${addr[$n]}:7789"
        echo "    disk: $tmpdir/$n.img"
        echo "    control: $tmpdir/$n.sock"
        i=$((i + 1))
    done
} >"$CONFIG"
# One ext4 file system, the same on every disk, declared in sync.
truncate -s 64M "$tmpdir/n1.img"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$tmpdir/n1.img"
for n in "${ALL[@]}"; do
    [ "$n" = n1 ] || cp "$tmpdir/n1.img" "$tmpdir/$n.img"
    "$REPLCTL" -c "$CONFIG" -n "$n" create-md --in-sync >/dev/null ||
        fail "create-md on $n failed"
done

# ---- what the cluster shows ------------------------------------------

# mon_xml NODE: crm_mon's XML as NODE sees it.
mon_xml () { on "$1" timeout 20 crm_mon -1 --output-as=xml 2>/dev/null; }
xp () { xmllint --xpath "$1" - 2>/dev/null; }
# alive_node: a node whose cluster stack runs.
alive_node ()
{
    local n
    for n in "${ALL[@]}"; do
        [ -n "${HOLDER[$n]:-}" ] && kill -0 "${HOLDER[$n]}" 2>/dev/null &&
            { echo "$n"; return; }
    done
    echo n1
}
# promoted: the node where ms_repl is promoted (empty if none).
promoted ()
{
    mon_xml "$(alive_node)" |
        xp 'string(//clone[@id="ms_repl"]/resource[@role="Promoted" and @active="true" and @failed="false"]/node/@name)'
}
fs_node ()
{
    mon_xml "$(alive_node)" |
        xp 'string(//resource[@id="p_fs" and @role="Started" and @active="true" and @failed="false"]/node/@name)'
}
# online_count: nodes online, with quorum, as the DC sees it.
quorate_online ()
{
    local x
    x=$(mon_xml "$(alive_node)") || return 1
    [ "$(xp 'string(//current_dc/@with_quorum)' <<<"$x")" = true ] &&
        [ "$(xp 'count(//nodes/node[@online="true"])' <<<"$x")" = "$1" ]
}
# role_of NODE: Promoted, Unpromoted, Stopped ... of NODE's ms_repl instance.
role_of ()
{
    mon_xml "$(alive_node)" |
        xp "string(//clone[@id=\"ms_repl\"]/resource[node/@name=\"$1\" and @active=\"true\" and @failed=\"false\"]/@role)"
}
role_is () { [ "$(role_of "$1")" = "$2" ]; }
fs_stopped () { [ -z "$(fs_node)" ]; }
# Placed P: ms_repl promoted on P and p_fs started on P.
placed () { local p; p=$(promoted); [ -n "$p" ] && [ "$(fs_node)" = "$p" ] && echo "$p"; }
placed_on () { [ "$(placed)" = "$1" ]; }
# placed_now: that node, asked again (every 0.5 s, 60 s at most) while
# crm_mon cannot say (after a cleanup Pacemaker probes again); a bare
# P=$(placed) would end the test silently there (set -e).
placed_now ()
{
    local p i
    for (( i = 0; i < 120; i++ )); do
        p=$(placed) && [ -n "$p" ] && { echo "$p"; return 0; }
        sleep 0.5
    done
    return 1
}
placed_not_on () { local p; p=$(placed) && [ -n "$p" ] && [ "$p" != "$1" ]; }

# repl NODE JQ: true if JQ holds of NODE's nbdrepl status.
repl () { "$REPLCTL" -s "$tmpdir/$1.sock" status --json 2>/dev/null | jq -e "$2" >/dev/null; }
repl_uptodate ()
{
    repl "$1" '.disk == "UpToDate" and ([.peers[] | .connection == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0] | all) and (.peers | length) == 2'
}
all_uptodate () { local n; for n in "${ALL[@]}"; do repl_uptodate "$n" || return 1; done; }
repl_summary ()
{
    "$REPLCTL" -s "$tmpdir/$1.sock" status --json 2>/dev/null |
        jq -c '{role, disk, quorum, peers: [.peers[] | {name, connection, disk, out_of_sync_bytes}]}' 2>/dev/null ||
        echo "(not running)"
}
nbdkit_pid () { cat "$NODES/$1/run/resource-agents/nbdrepl-p_repl-$1.pid" 2>/dev/null; }

# acks_since T NODE: the writer acknowledged at least 20 records on
# NODE after time T.
acks_since ()
{
    [ "$(awk -v t="$1" -v n="$2" '$3 >= t && $2 == n' "$WOUT/acked" | wc -l)" -ge 20 ]
}
# check_writes T: every acknowledged record is in the file; prints the
# checker's line.
check_writes ()
{
    local out
    out=$(timeout 60 python3 "$HERE/cluster/writer.py" check "$NODES" "$MNT" "$WOUT" "$1" 30) ||
        fail "writer check: $out"
    say "  writer: $out"
}
split_brains ()
{
    local n c=0
    for n in "${ALL[@]}"; do
        c=$(( c + $(grep -ci 'split.brain' "$NODES/$n/var-log-pacemaker/nbdkit.log" 2>/dev/null || true) ))
    done
    echo "$c"
}

# ---- bring the cluster up ---------------------------------------------

for n in "${ALL[@]}"; do node_boot "$n"; done
until_true 90 "three nodes online with quorum" quorate_online 3
say "cluster up: corosync + pacemaker on n1 n2 n3, quorate"

cat >"$tmpdir/cluster.crm" <<EOF
property cib-bootstrap-options: \\
    stonith-enabled=true \\
    stonith-timeout=30s \\
    no-quorum-policy=stop \\
    cluster-recheck-interval=30s
rsc_defaults rsc-options: \\
    resource-stickiness=100
primitive st_ns stonith:fence_nbdrepl_ns \\
    params nodes_dir="$NODES" pcmk_host_list="n1 n2 n3" pcmk_delay_base=5s \\
    op monitor interval=60s
primitive p_repl ocf:nbdrepl:repl \\
    params config="$CONFIG" plugin="$PLUGIN" replctl="$REPLCTL" \\
        logfile=/var/log/pacemaker/nbdkit.log nbdkit_port=10809 \\
    op start timeout=60s interval=0 \\
    op stop timeout=60s interval=0 \\
    op promote timeout=60s interval=0 \\
    op demote timeout=60s interval=0 \\
    op notify timeout=20s interval=0 \\
    op monitor interval=3s role=Promoted timeout=20s \\
    op monitor interval=4s role=Unpromoted timeout=20s
clone ms_repl p_repl \\
    meta promotable=true promoted-max=1 promoted-node-max=1 \\
        clone-max=3 clone-node-max=1 notify=true
primitive p_fs ocf:nbdrepl:attach \\
    params resource=r0 directory="$MNT" repl_attach="$SRC/client/repl-attach" \\
    op start timeout=90s interval=0 \\
    op stop timeout=90s interval=0 \\
    op monitor interval=5s timeout=20s
colocation fs_with_primary inf: p_fs ms_repl:Promoted
order fs_after_promote Mandatory: ms_repl:promote p_fs:start
EOF
crm_on n1 configure load update "$tmpdir/cluster.crm" >"$tmpdir/crm.out" 2>&1 ||
    fail "crm configure load update failed: $(cat "$tmpdir/crm.out")"

# ---- 1. start ------------------------------------------------------------

T=$(date +%s)
until_true 120 "ms_repl promoted and p_fs started on the same node" placed
P=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
for n in "${ALL[@]}"; do
    [ "$n" = "$P" ] && continue
    until_true 30 "$n Unpromoted" role_is "$n" Unpromoted
done
repl "$P" '.role == "Primary"' || fail "$P is promoted but nbdrepl says $(repl_summary "$P")"
until_true 60 "all three disks UpToDate and connected" all_uptodate
TW=$(date +%s)
python3 "$HERE/cluster/writer.py" write "$NODES" "$MNT" "$WOUT" 600 &
WRITER=$!
until_true 30 "the writer acknowledged records on $P" acks_since "$TW" "$P"
say "scenario 1 passed ($(( $(date +%s) - T )) s): promoted $P, p_fs (ext4) mounted there, the others Unpromoted, all UpToDate"
check_writes "$TW"

# ---- 2. standby --------------------------------------------------------

T=$(date +%s)
crm_on "$P" node standby "$P" >/dev/null || fail "crm node standby $P failed"
until_true 120 "everything moved off $P" placed_not_on "$P"
Q=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
until_true 30 "the writer resumed on $Q" acks_since "$T" "$Q"
repl "$Q" '.role == "Primary"' || fail "$Q is promoted but nbdrepl says $(repl_summary "$Q")"
repl "$P" '.' && fail "$P is in standby but its nbdkit still answers: $(repl_summary "$P")"
[ "$(mon_xml "$Q" | xp 'count(//failures/failure)')" = 0 ] ||
    fail "failed actions after the standby: $(mon_xml "$Q" | xp '//failures')"
say "scenario 2 passed ($(( $(date +%s) - T )) s): standby $P moved the Primary and p_fs to $Q"
check_writes "$T"
crm_on "$P" node online "$P" >/dev/null || fail "crm node online $P failed"
until_true 60 "$P back as Unpromoted" role_is "$P" Unpromoted
until_true 90 "$P resynced" all_uptodate
say "  $P back online as Secondary, UpToDate"

# ---- 3. SIGKILL of the Primary's nbdkit --------------------------------

P=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
pid=$(nbdkit_pid "$P")
[ -n "$pid" ] || fail "no nbdkit pid for $P"
T=$(date +%s)
kill -9 "$pid"
say "  SIGKILL of $P's nbdkit (pid $pid)"
until_true 60 "Pacemaker saw the failure of p_repl on $P" \
    bash -c "nsenter -t ${HOLDER[$P]} -m -u -n -- timeout 20 crm_mon -1 --output-as=xml | grep -q 'failure op_key=\"p_repl_monitor'"
until_true 150 "promoted and p_fs started again" placed
Q=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
until_true 60 "the writer resumed on $Q" acks_since "$T" "$Q"
reboot_fenced
say "scenario 3 passed ($(( $(date +%s) - T )) s): the monitor saw $P's nbdkit gone; promoted $Q ($([ "$Q" = "$P" ] && echo recovered in place || echo moved))${FENCED:+; fenced and rebooted: $FENCED}"
check_writes "$T"
crm_on "$Q" resource cleanup ms_repl >/dev/null 2>&1 || true
[ -z "$FENCED" ] || until_true 90 "three nodes online again" quorate_online 3
until_true 90 "all three connected and UpToDate after the recovery" all_uptodate

# ---- 4. the Primary's node cut off -------------------------------------

P=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
T=$(date +%s)
TCUT=$(date +%s.%N)
ip -n "$NS-$P" link set eth0 down
say "  $P's link down"
# The minority: its nbdrepl has no quorum and completes no writes (the
# fence device waits pcmk_delay_base, 5 s, before powering it off).
saw_no_quorum=no
for (( i = 0; i < 40; i++ )); do
    if repl "$P" '.quorum == false'; then saw_no_quorum=yes; break; fi
    kill -0 "$(nbdkit_pid "$P")" 2>/dev/null || break
    sleep 0.25
done
[ "$saw_no_quorum" = yes ] || fail "$P's nbdrepl did not report the loss of quorum before it went"
until_true 90 "$P fenced" grep -q "reboot $P\|off $P" "$NODES/fence.log"
until_true 120 "promoted and p_fs started on the majority" placed_not_on "$P"
Q=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
until_true 60 "the writer resumed on $Q" acks_since "$T" "$Q"
say "scenario 4: $P lost nbdrepl quorum; $(awk -v n="$P" -v t="$TCUT" '$2 == n && $3 >= t' "$WOUT/acked" | wc -l) write(s) acknowledged on it after the cut; fenced by the majority ($(grep -c "reboot $P:\|off $P:" "$NODES/fence.log") fence action(s)); $Q promoted"
check_writes "$T"
node_reap "$P"
ip -n "$NS-$P" link set eth0 up
node_boot "$P"
until_true 90 "$P back in the cluster" quorate_online 3
until_true 90 "$P back as Unpromoted" role_is "$P" Unpromoted
until_true 120 "$P resynced" all_uptodate
[ "$(split_brains)" = 0 ] || fail "split brain logged: $(grep -i 'split.brain' "$NODES"/*/var-log-pacemaker/nbdkit.log | head -n 3)"
say "scenario 4 passed ($(( $(date +%s) - T )) s): $P rejoined as Secondary and resynced, no split brain"

# ---- 5. a node's cluster stack stopped and started ---------------------

P=$(placed_now) || fail "no node has p_fs beside the promoted ms_repl within 60 s"
for R in "${ALL[@]}"; do [ "$R" != "$P" ] && break; done
T=$(date +%s)
kill -TERM "${HOLDER[$R]}"
until_true 90 "$R's Corosync and Pacemaker stopped" bash -c "! kill -0 ${HOLDER[$R]}"
wait "${HOLDER[$R]}" 2>/dev/null || true
repl "$R" '.' && fail "$R's nbdkit still answers after its Pacemaker stopped"
# Writes go on with two nodes of three; R misses them.
until_true 60 "$P counts out-of-sync data for $R" \
    repl "$P" "[.peers[] | select(.name == \"$R\") | .out_of_sync_bytes > 0] | any"
oos=$("$REPLCTL" -s "$tmpdir/$P.sock" status --json | jq "[.peers[] | select(.name == \"$R\") | .out_of_sync_bytes] | add")
node_boot "$R"
until_true 90 "$R back in the cluster" quorate_online 3
until_true 90 "$R back as Unpromoted" role_is "$R" Unpromoted
until_true 120 "$R resynced" all_uptodate
[ "$(placed)" = "$P" ] || fail "the Primary moved when $R came back"
say "scenario 5 passed ($(( $(date +%s) - T )) s): $R stopped ($oos bytes out of sync on $P), started, rejoined as Secondary, resynced"
check_writes "$T"

# ---- the end: every disk the same ---------------------------------------

touch "$WOUT/stop"
until_true 30 "the writer stopped" bash -c "! kill -0 $WRITER"
wait "$WRITER" || fail "the writer failed"
WRITER=
check_writes "$T"
crm_on "$P" resource stop p_fs >/dev/null || fail "crm resource stop p_fs failed"
until_true 60 "p_fs stopped" fs_stopped
until_true 60 "all UpToDate after the unmount" all_uptodate
for n in "${ALL[@]}"; do
    [ "$n" = "$P" ] || cmp "$tmpdir/$P.img" "$tmpdir/$n.img" ||
        fail "the disks of $P and $n differ"
done
say "all passed: the three disks are identical ($(wc -l <"$WOUT/acked") writes acknowledged in all)"
