#!/usr/bin/env python3
# nbdrepl: the writer of tests/test-cluster.sh, and its checker.
#
#   writer.py write NODES_DIR MOUNT OUT_DIR MAX_SECONDS
#     appends numbered records to MOUNT/data.log on whichever node has
#     the resource's file system mounted (the node whose
#     NODES_DIR/NODE/run/nbdrepl/attach-r0.mounted exists and whose
#     namespace, entered through /proc/PID/root with PID in
#     NODES_DIR/NODE/holder.pid, has MOUNT in its mount table): open,
#     write, fsync, close; a record counts as acknowledged once fsync
#     returned 0, and only then is it added to OUT_DIR/acked ("SEQ NODE
#     TIME").  A failed record is retried (same number) on whatever node
#     has the file system next.  Stops when OUT_DIR/stop exists or after
#     MAX_SECONDS.
#   writer.py check NODES_DIR MOUNT OUT_DIR SINCE WAIT_SECONDS
#     reads MOUNT/data.log on the node that has it mounted (waiting at
#     most WAIT_SECONDS for one) and checks that every acknowledged
#     record is there, whole; prints one line: the node, the records
#     acknowledged, those found, the records acknowledged since SINCE
#     (a time(2) value) and the longest pause of the writer since then.
#     Exits 1 if an acknowledged record is missing.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
import hashlib
import os
import sys
import time

RESOURCE = "r0"


def payload(seq):
    return hashlib.sha256(f"nbdrepl-cluster-{seq}".encode()).hexdigest() * 3


def record(seq, node):
    return f"{seq} {node} {payload(seq)}\n".encode()


def current(nodes_dir, mount):
    """(node, path of data.log through its namespace) or (None, None)."""
    for node in sorted(os.listdir(nodes_dir)):
        d = os.path.join(nodes_dir, node)
        if not os.path.exists(f"{d}/run/nbdrepl/attach-{RESOURCE}.mounted"):
            continue
        try:
            pid = open(f"{d}/holder.pid").read().strip()
            mounts = open(f"/proc/{pid}/mounts").read().split("\n")
        except OSError:
            continue
        if any(len(m.split()) > 1 and m.split()[1] == mount for m in mounts):
            return node, f"/proc/{pid}/root{mount}/data.log"
    return None, None


def on_mounted_fs(fd, path):
    """Is the open file fd on the file system mounted at path's
    directory, not on the one under it (the mount point's parent's)?"""
    under = os.stat(os.path.dirname(os.path.dirname(path))).st_dev
    return os.fstat(fd).st_dev != under


def write(nodes_dir, mount, out, max_seconds):
    end = time.monotonic() + float(max_seconds)
    seq = 1
    last_path = None
    acked = open(f"{out}/acked", "a", buffering=1)
    log = open(f"{out}/writer.log", "a", buffering=1)
    while time.monotonic() < end and not os.path.exists(f"{out}/stop"):
        node, path = current(nodes_dir, mount)
        if path is None:
            time.sleep(0.1)
            continue
        fd = -1
        try:
            # Created by the first record only: a later open that finds
            # no file is on a bare mount point, and fails.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND |
                         (os.O_CREAT if seq == 1 else 0), 0o644)
            if not on_mounted_fs(fd, path):
                # The file system went between current() and the open
                # (the agent unmounted it): this is the bare mount point
                # of the node's root, not the volume.
                raise OSError(f"{path}: not on the mounted volume (unmounted meanwhile)")
            if path != last_path:
                # A record cut short by the last failure ends here.
                os.write(fd, b"\n")
                log.write(f"{time.time():.3f} writing on {node}, from record {seq}\n")
                last_path = path
            os.write(fd, record(seq, node))
            os.fsync(fd)
            os.close(fd)
            fd = -1
        except OSError as e:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
            log.write(f"{time.time():.3f} record {seq} on {node}: {e}\n")
            last_path = None
            time.sleep(0.2)
            continue
        acked.write(f"{seq} {node} {time.time():.3f}\n")
        seq += 1
        time.sleep(0.05)
    log.write(f"{time.time():.3f} stopped after record {seq - 1}\n")


def check(nodes_dir, mount, out, since, wait_seconds):
    end = time.monotonic() + float(wait_seconds)
    while True:
        acked = []
        for line in open(f"{out}/acked"):
            f = line.split()
            if len(f) == 3:
                acked.append((int(f[0]), f[1], float(f[2])))
        node, path = current(nodes_dir, mount)
        data = None
        if path is not None:
            try:
                with open(path, "rb") as f:
                    data = f.read()
                    if not on_mounted_fs(f.fileno(), path):
                        data = None     # unmounted meanwhile: look again
            except OSError as e:
                print(f"check: {path}: {e}", file=sys.stderr)
        if data is not None or time.monotonic() >= end:
            break
        time.sleep(0.2)
    if data is None:
        print(f"check: no node has {mount} mounted within {wait_seconds} s")
        return 1
    found = set()
    for line in data.split(b"\n"):
        f = line.split(b" ")
        if len(f) == 3 and f[0].isdigit() and f[2].decode(errors="replace") == payload(int(f[0])):
            found.add(int(f[0]))
    missing = [s for s, _, _ in acked if s not in found]
    recent = [t for _, _, t in acked if t >= float(since)]
    times = [float(since)] + recent
    pause = max((b - a for a, b in zip(times, times[1:])), default=0.0)
    where = sorted({n for _, n, t in acked if t >= float(since)})
    print(f"{len(acked)} writes acknowledged, {len(found)} records on {node}, "
          f"{len(missing)} acknowledged missing; {len(recent)} acknowledged since "
          f"the event (on {','.join(where) or '-'}), longest pause {pause:.1f} s")
    if missing:
        print(f"check: missing acknowledged records: {missing[:20]}")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "write":
        write(*sys.argv[2:])
    elif len(sys.argv) == 7 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    else:
        sys.exit("usage: writer.py write NODES_DIR MOUNT OUT MAX_SECONDS | check NODES_DIR MOUNT OUT SINCE WAIT")
