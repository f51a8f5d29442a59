#!/usr/bin/env python3
# nbdrepl: check disks against what tests/ackwrite acknowledged.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
#   ackcheck.py [--no-compare] --log LOG [--log LOG]... DISK...
#
# LOGs are ackwrite logs, oldest run first; DISKs are the backing files
# of the storage nodes (the block format and the log format are
# documented at the top of tests/ackwrite.c).  For every 4096-byte
# block of every disk:
#   - a block no run ever attempted is all zeroes;
#   - any other block is all zeroes (only if no write of it was
#     acknowledged) or a record that parses: magic, its block number is
#     its position (not misdirected), its SHA-256 matches (not torn),
#     it is one of the attempts logged for that block (not garbage),
#     and it is not older than the last acknowledged write of the block
#     (no acknowledged write lost).
# Without --no-compare, the disks are taken as in sync: they must be
# identical, and the first differing block of each pair is shown with
# both headers.  One line per violation, a summary, exit 1 on any.

import argparse
import hashlib
import os
import sys

BLOCK = 4096
MAGIC = b"ACKWRIT1"
ZERO = bytes(BLOCK)


def read_logs(paths):
    """Return (attempts, last_ack, runs): attempts[block] is the set of
    (run, seq) tried there, last_ack[block] the newest acknowledged
    (order, run, seq), order = (log index, seq)."""
    attempts, last_ack, runs = {}, {}, []
    for i, path in enumerate(paths):
        run = None
        with open(path) as f:
            for n, line in enumerate(f, 1):
                w = line.split()
                if not w or w[0] == "#":
                    continue
                if w[0] == "run":
                    run = int(w[1], 16)
                    runs.append(run)
                    continue
                if run is None or w[0] not in ("attempt", "ack", "fail"):
                    sys.exit(f"ackcheck: {path}:{n}: bad record: {line.strip()}")
                block, seq = int(w[1]), int(w[2])
                if w[0] == "attempt":
                    attempts.setdefault(block, set()).add((run, seq))
                elif w[0] == "ack":
                    prev = last_ack.get(block)
                    if prev is None or prev[0] < (i, seq):
                        last_ack[block] = ((i, seq), run, seq)
    return attempts, last_ack, runs


def header(data):
    """The header of a block as text, for messages."""
    if data == ZERO:
        return "zeroes"
    if data[:8] != MAGIC:
        return f"no record (first bytes {data[:16].hex()})"
    return (f"block {int.from_bytes(data[8:16], 'big')} "
            f"seq {int.from_bytes(data[16:24], 'big')} "
            f"run {int.from_bytes(data[24:32], 'big'):016x}")


def check_block(pos, data, attempts, last_ack, run_index):
    """None if the block at position pos is acceptable, else why not.
    run_index: run id -> index of its log (the order of the runs)."""
    ack = last_ack.get(pos)
    if data == ZERO:
        if ack:
            return f"lost ack: zeroes, last acknowledged seq {ack[2]}"
        return None
    if pos not in attempts:
        return f"garbage: never written, holds {header(data)}"
    if data[:8] != MAGIC:
        return f"garbage: {header(data)}"
    block = int.from_bytes(data[8:16], "big")
    seq = int.from_bytes(data[16:24], "big")
    run = int.from_bytes(data[24:32], "big")
    if block != pos:
        return f"misdirected: holds block {block} seq {seq}"
    if hashlib.sha256(data[:32] + bytes(32) + data[64:]).digest() != data[32:64]:
        return f"torn: seq {seq}: checksum mismatch"
    if (run, seq) not in attempts[pos]:
        return f"garbage: seq {seq} run {run:016x} was never attempted here"
    if ack and (run_index[run], seq) < ack[0]:
        return f"lost ack: holds seq {seq}, last acknowledged seq {ack[2]}"
    return None


def blocks(path):
    with open(path, "rb") as f:
        pos = 0
        while True:
            data = f.read(BLOCK)
            if not data:
                return
            if len(data) < BLOCK:
                data += bytes(BLOCK - len(data))
            yield pos, data
            pos += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--log", action="append", required=True)
    ap.add_argument("--no-compare", action="store_true")
    ap.add_argument("disks", nargs="+")
    a = ap.parse_args()

    attempts, last_ack, runs = read_logs(a.log)
    run_index = {r: i for i, r in enumerate(runs)}
    violations = 0

    def violation(text):
        nonlocal violations
        violations += 1
        if violations <= 200:
            print(f"ackcheck: {text}")

    for disk in a.disks:
        for pos, data in blocks(disk):
            why = check_block(pos, data, attempts, last_ack, run_index)
            if why:
                violation(f"{disk}: block {pos}: {why}")

    if not a.no_compare:
        size = os.path.getsize(a.disks[0])
        for other in a.disks[1:]:
            if os.path.getsize(other) != size:
                violation(f"divergence: {a.disks[0]} and {other} differ in size")
            first, ndiff = None, 0
            for (pos, x), (_, y) in zip(blocks(a.disks[0]), blocks(other)):
                if x != y:
                    ndiff += 1
                    first = first or (pos, x, y)
            if first:
                pos, x, y = first
                violation(f"divergence: {a.disks[0]} and {other} differ in "
                          f"{ndiff} blocks, first block {pos}: "
                          f"{header(x)} / {header(y)}")

    nacked = len(last_ack)
    print(f"ackcheck: {len(attempts)} blocks written ({nacked} with an "
          f"acknowledged write) by {len(runs)} run(s), {len(a.disks)} "
          f"disks: {violations} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
