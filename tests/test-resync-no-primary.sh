#!/usr/bin/env bash
# A resync that needs no primary.  Two storage nodes, both Secondary
# (auto-promote off, no client): node0 is UpToDate and holds 32 MiB of
# a recognisable pattern (written while it was Primary with node1 down,
# then demoted); node1 comes back with fresh metadata (create-md without
# --in-sync): Inconsistent.  Nobody is promoted, and nobody needs to be:
# node0 resyncs node1 (DESIGN.md: "Any UpToDate node resyncs an
# Inconsistent or Outdated one, Primary or not").
#
# While the resync runs (resync-rate holds it to a few seconds), status
# shows SyncSource on node0 and SyncTarget on node1, never SyncTarget on
# both ends, and node0 shows what is really out of sync (not 0 while
# its peer is not UpToDate).  At the end both are Established, node1 is
# UpToDate, out of sync 0 in status and in the metadata (dump-md), the
# disks are identical (cmp), and neither node was ever Primary.
#
# Two configurations, the same story:
#   plain:  two storage nodes only;
#   pair:   the same plus a diskless node (never started): the engine's
#           "storage secondaries resync each other" path.
source "$(dirname "$0")/functions.sh"
requires jq --version

SIZE=64M
MIB=$((1 << 20))

# config NAME WITH_DISKLESS: $tmpdir/NAME.yaml for NAME0, NAME1 (and
# NAME2, diskless), both disks new and declared in sync.
config ()
{
    local name=$1 diskless=$2 n i
    CONFIG="$tmpdir/$name.yaml"
    {
        echo "resource: r0"
        echo "protocol: C"
        echo "auto-promote: false"
        echo "quorum: off"
        echo "net:"
        echo "  ping-interval: 0.5"
        echo "  ping-timeout: 3"
        echo "  timeout: 4"
        echo "  connect-retry-max: 0.5"
        echo "resync:"
        echo "  resync-rate: 16M"
        echo "nodes:"
        for i in 0 1 2; do
            n=$name$i
            [ $i -lt 2 ] || [ "$diskless" = yes ] || continue
            echo "  - name: $n"
            echo "    id: $i"
            echo "    address: 127.0.0.1:$(free_port)"
            if [ $i -lt 2 ]; then
                echo "    disk: $n.img"
                truncate -s $SIZE "$tmpdir/$n.img"
            else
                echo "    disk: none"
            fi
            echo "    control: $n.sock"
            NBD_PORT[$n]=$(free_port)
        done
    } >"$CONFIG"
    for i in 0 1; do
        "$REPLCTL" -c "$CONFIG" -n "$name$i" create-md --in-sync >/dev/null ||
            fail "create-md --in-sync on $name$i"
    done
}

# peer_oos NODE: out-of-sync bytes of NODE's only storage peer in its
# metadata (dump-md).
md_oos ()
{
    "$REPLCTL" -c "$CONFIG" -n "$1" dump-md |
        sed -n 's/^  slot [0-9]*: node-id [01] .* out-of-sync \([0-9]*\) .*/\1/p' | head -n 1
}

# scenario NAME WITH_DISKLESS: the whole story; prints FAIL lines and
# returns 1 on a failure, so that both configurations always run.
scenario ()
{
    local name=$1 a=${1}0 b=${1}1 i sa sb bad=0 seen_src=0 seen_tgt=0
    local samples="$tmpdir/$name.samples"
    config "$name" "$2"

    # node a, Primary with b down, writes the pattern, then steps down.
    start_node "$a" role=primary
    timed 60 nbdsh -u "$(uri "$a")" -c '
for i in range(32):
    h.pwrite((b"%s-%02d-" % (b"nbdrepl-no-primary", i)).ljust(512, b".") * 2048,
             (16 + i) << 20)
h.flush()' || fail "$name: writing the pattern through $a failed"
    for (( i=0; i<50; i++ )); do
        "$REPLCTL" -s "$(sock "$a")" secondary >/dev/null 2>&1 && break
        sleep 0.1
    done
    [ "$(status_json "$a" | jq -r .role)" = Secondary ] || fail "$name: demoting $a failed"

    # node b returns with fresh metadata: Inconsistent.
    "$REPLCTL" -c "$CONFIG" -n "$b" create-md --force >/dev/null ||
        fail "$name: create-md on $b"
    cmp -s "$(disk "$a")" "$(disk "$b")" &&
        fail "$name: the disks are already identical: the test would prove nothing"
    start_node "$b"

    # Watch both nodes (every 0.1 s, 20 s at most; the resync takes
    # about 4 s) until b is UpToDate and both are Established with
    # nothing out of sync.  One sample a line: [a's status, b's status].
    /usr/bin/python3 - "$(sock "$a")" "$(sock "$b")" >"$samples" <<'PY'
import json, socket, sys, time

def status(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"status --json\n")
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
        s.close()
        st = json.loads(out)
    except (OSError, ValueError):
        return {}
    p = [q for q in st["peers"] if q["name"][-1] in "01"][0]
    return {"role": st["role"], "disk": st["disk"],
            "p": {"connection": p["connection"], "disk": p["disk"],
                  "replication": p["replication"],
                  "oos": p["out_of_sync_bytes"],
                  "decision": p["sync_decision"]}}

deadline = time.monotonic() + 20
while True:
    a, b = status(sys.argv[1]), status(sys.argv[2])
    print(json.dumps([a, b], separators=(",", ":")), flush=True)
    done = (b.get("disk") == "UpToDate" and
            all(x.get("p", {}).get("connection") == "Connected" and
                x["p"]["replication"] == "Established" and
                x["p"]["oos"] == 0 for x in (a, b)))
    if done or time.monotonic() > deadline:
        break
    time.sleep(0.1)
PY
    sa=$(tail -n 1 "$samples" | jq -c '.[0]')
    sb=$(tail -n 1 "$samples" | jq -c '.[1]')
    info "$name: $(wc -l <"$samples") samples; the last ($a, $b):"
    echo "  $sa"; echo "  $sb"

    report () { echo "$test_name: FAIL: $name: $*" >&2; bad=1; }
    jq -e -n --argjson a "$sa" --argjson b "$sb" '$b.disk == "UpToDate"' >/dev/null ||
        report "$b never became UpToDate: $a $sa, $b $sb ($(grep -h -E 'generations|resync' "$tmpdir/$a.log" "$tmpdir/$b.log" | tail -n 3 | tr '\n' '|'))"
    jq -e -n --argjson a "$sa" --argjson b "$sb" \
        '[$a, $b] | all(.p.replication == "Established" and .p.oos == 0)' >/dev/null ||
        report "not Established with 0 out of sync at the end: $a $sa, $b $sb"
    if grep -q '"role":"Primary"' "$samples"; then
        report "a node was Primary during the resync"
    fi
    # Every sample at once: the replication states each side showed,
    # and any sample where a showed 0 out of sync while its peer was not
    # UpToDate (the decision made, so the bitmap is set) and no resync
    # was running: Established, as the bug showed it.  (SyncSource with
    # 0 left is the end of the resync: everything sent and acknowledged,
    # RESYNC_DONE on its way.)
    local summary
    summary=$(jq -s -c '{
        a: (map(.[0].p.replication // empty) | unique),
        b: (map(.[1].p.replication // empty) | unique),
        zero: (map(.[0] | select(.p.connection == "Connected" and
                                 .p.decision != null and
                                 .p.replication == "Established" and
                                 .p.disk != "UpToDate" and .p.oos == 0))
               | first)}' "$samples")
    info "$name: replication states seen: $summary"
    jq -e '.a | index("SyncTarget") | not' <<<"$summary" >/dev/null ||
        report "$a, the UpToDate side, showed SyncTarget"
    jq -e '.b | index("SyncSource") | not' <<<"$summary" >/dev/null ||
        report "$b, the Inconsistent side, showed SyncSource"
    jq -e '.a | index("SyncSource")' <<<"$summary" >/dev/null && seen_src=1
    jq -e '.b | index("SyncTarget")' <<<"$summary" >/dev/null && seen_tgt=1
    jq -e '.zero == null' <<<"$summary" >/dev/null ||
        report "$a showed 0 bytes out of sync while $b was not UpToDate: $(jq -c .zero <<<"$summary")"
    [ $seen_src = 1 ] || report "$a never showed SyncSource"
    [ $seen_tgt = 1 ] || report "$b never showed SyncTarget"
    local ma mb
    ma=$(md_oos "$a") mb=$(md_oos "$b")
    [ "$ma" = 0 ] && [ "$mb" = 0 ] ||
        report "the metadata still has bytes out of sync: $a ${ma:-?}, $b ${mb:-?}"
    if ! cmp "$(disk "$a")" "$(disk "$b")"; then
        report "the disks of $a and $b differ"
    fi
    stop_node "$a"
    stop_node "$b"
    [ $bad = 0 ] && info "$name: ok"
    return $bad
}

failed=0
scenario plain no || failed=$((failed + 1))
scenario pair yes || failed=$((failed + 1))
[ $failed = 0 ] || fail "$failed of 2 configurations did not resync correctly"
info "ok"
