#!/usr/bin/python3
# nbdrepl: a writer and a checker for two primaries writing the same
# blocks at once (tests/test-two-primaries.sh).
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
#   twoprim.py write URI WRITER BLOCKS DEADLINE FIRSTSEQ MAXWRITES LOG
#   twoprim.py check DISK BLOCKS LOG...
#   twoprim.py tamper DISK BLOCKS LOG...
#   twoprim.py now [SECONDS]
#   twoprim.py big URI SEED AREA DEADLINE
#   twoprim.py crossed LOG...
#
# write: WRITER (1..255) writes 4096-byte blocks at random block numbers
# in [0, BLOCKS) of the export, 16 requests in flight (never two to one
# block from this writer), until DEADLINE (CLOCK_MONOTONIC seconds, as
# `now` prints it: two writers given the same one stop together, so
# that their last writes cross; `now` adds SECONDS) or MAXWRITES writes, whichever comes
# first, numbering them from FIRSTSEQ.  Every block it writes is
#
#   offset size field
#        0    8 magic   "TWOPRIM1"
#        8    8 writer  WRITER
#       16    8 block   the block number
#       24    8 seq     this writer's sequence number, FIRSTSEQ, ...
#       32 4064 body    the 8 bytes (writer << 56 | seq) over and over
#
# so that a block that mixes two writes is seen.  LOG (JSON): for every
# write its block, seq, and the monotonic clock (CLOCK_MONOTONIC, the
# same in every process) before it was sent and after its answer was
# seen; and the writes never answered (the connection went: its server
# was killed), with the time they were sent.  Any failed write ends the
# run with status 1 (the log is written all the same).
#
# check: every block of DISK is all zeroes (if no writer wrote it) or
# a whole block of one writer, at its own position, and it is the last
# write that writer made to it (never an older value of the same
# writer: a lost acknowledged write).  And it is consistent with real
# time: if a write of the other writer to the block was sent after the
# write found on the disk was answered, that write must be on the disk
# instead.  A write that was never answered may be on the disk or not
# (its writer's last answered write then).  One line per violation, a
# summary, status 1 on any.  The LOGs of one writer may be several (runs
# one after the other).
#
# crossed: how many pairs of writes of two writers to the same block
# were in flight at the same time (the test's proof that they met).
#
# tamper: the checker's self-test: put back, in DISK, an older write of
# the writer whose write a block holds (the first block where there is
# one); check must then fail.
#
# big: large writes, 1 to 4 MiB each at random 4 KiB-aligned offsets in
# the first AREA MiB of the export, 4 requests in flight, until
# DEADLINE (as for write); the data is random (from SEED).  Prints the
# number of writes answered; any failed write ends the run with status 1.

import json
import random
import struct
import sys
import time

BLOCK = 4096
MAGIC = b"TWOPRIM1"
QD = 16


def make_block(writer, block, seq):
    word = struct.pack(">Q", (writer << 56) | seq)
    head = MAGIC + struct.pack(">QQQ", writer, block, seq)
    return head + word * ((BLOCK - len(head)) // 8)


def write(uri, writer, blocks, deadline, firstseq, maxwrites, log):
    import nbd

    h = nbd.NBD()
    h.connect_uri(uri)
    rng = random.Random(writer * 7919 + int(time.time()))
    inflight = {}               # cookie -> (block, seq, buffer, t_sent)
    busy = set()                # blocks with a write of ours in flight
    done = []                   # [block, seq, t_sent, t_answered]
    seq = firstseq - 1
    end = deadline
    maxseq = firstseq - 1 + maxwrites
    failed = []
    gone = False                # the connection failed: no more answers
    unanswered = []             # [block, seq, t_sent] that failed

    def issue():
        nonlocal seq
        while True:
            block = rng.randrange(blocks)
            if block not in busy:
                break
        seq += 1
        buf = nbd.Buffer.from_bytearray(
            bytearray(make_block(writer, block, seq)))
        t = time.monotonic()
        cookie = h.aio_pwrite(buf, block * BLOCK)
        inflight[cookie] = (block, seq, buf, t)
        busy.add(block)

    while True:
        try:
            while (len(inflight) < QD and seq < maxseq and
                   time.monotonic() < end and not failed):
                issue()
            if not inflight:
                break
            h.poll(-1)
        except nbd.Error as e:
            failed.append(f"connection: {e}")
            gone = True
            break
        for cookie in list(inflight):
            ok = True
            try:
                if not h.aio_command_completed(cookie):
                    continue
            except nbd.Error as e:
                ok = False
                failed.append(f"write of block {inflight[cookie][0]} "
                              f"(seq {inflight[cookie][1]}): {e}")
            block, s, _, t = inflight.pop(cookie)
            busy.discard(block)
            if ok:
                done.append([block, s, t, time.monotonic()])
            else:
                unanswered.append([block, s, t])
    pending = unanswered + [[b, s, t] for b, s, _, t in inflight.values()]
    if not gone:
        try:
            h.shutdown()
        except nbd.Error as e:      # the server is gone
            failed.append(f"shutdown: {e}")
    with open(log, "w") as f:
        json.dump({"writer": writer, "writes": done, "pending": pending}, f)
    if failed:
        for m in failed:
            print(f"writer {writer}: {m}", file=sys.stderr)
        return 1
    print(f"writer {writer}: {len(done)} writes answered")
    return 0


def big(uri, seed, area, deadline):
    import nbd

    h = nbd.NBD()
    h.connect_uri(uri)
    rng = random.Random(seed)
    area_blocks = area * 1024 * 1024 // BLOCK
    inflight = {}               # cookie -> buffer
    done = 0
    failed = []
    while True:
        while len(inflight) < 4 and time.monotonic() < deadline and not failed:
            nblocks = rng.randrange(256, 1025)      # 1 to 4 MiB
            start = rng.randrange(area_blocks - nblocks + 1)
            buf = nbd.Buffer.from_bytearray(
                bytearray(rng.randbytes(nblocks * BLOCK)))
            cookie = h.aio_pwrite(buf, start * BLOCK)
            inflight[cookie] = buf
        if not inflight:
            break
        h.poll(-1)
        for cookie in list(inflight):
            try:
                if not h.aio_command_completed(cookie):
                    continue
                done += 1
            except nbd.Error as e:
                failed.append(str(e))
            del inflight[cookie]
    h.shutdown()
    if failed:
        print(f"seed {seed}: {len(failed)} write(s) failed: {failed[0]}",
              file=sys.stderr)
        return 1
    print(f"seed {seed}: {done} large writes answered")
    return 0


def load(logs, pending=None):
    # Per writer: block -> its writes to the block, in seq order; into
    # pending (if given): writer -> block -> seqs of writes never answered.
    writes = {}
    for path in logs:
        with open(path) as f:
            d = json.load(f)
        writes.setdefault(d["writer"], []).extend(d["writes"])
        if pending is not None:
            for block, seq, _ in d.get("pending", []):
                pending.setdefault(d["writer"], {}).setdefault(
                    block, set()).add(seq)
    writers = {}
    for w, ws in writes.items():
        per_block = {}
        for block, seq, sent, answered in sorted(ws, key=lambda x: x[1]):
            per_block.setdefault(block, []).append((seq, sent, answered))
        writers[w] = per_block
    return writers


def crossed(logs):
    # Pairs of writes of two writers to one block, in flight together.
    import bisect

    writers = load(logs)
    n = 0
    ws = sorted(writers)
    for i, a in enumerate(ws):
        for b in ws[i + 1:]:
            for block, wa in writers[a].items():
                wb = writers[b].get(block, [])
                sent = sorted(x[1] for x in wb)
                answered = sorted(x[2] for x in wb)
                # b's writes that began before a's ended, less those
                # that ended before a's began.
                for _, sa, aa in wa:
                    n += (bisect.bisect_left(sent, aa) -
                          bisect.bisect_right(answered, sa))
    print(n)
    return 0


def tamper(disk, blocks, logs):
    writers = load(logs)
    with open(disk, "r+b") as f:
        for block in range(blocks):
            f.seek(block * BLOCK)
            data = f.read(BLOCK)
            if data[:8] != MAGIC:
                continue
            writer, _, seq = struct.unpack(">QQQ", data[8:32])
            older = [s for s, _, _ in writers[writer][block] if s < seq]
            if older:
                f.seek(block * BLOCK)
                f.write(make_block(writer, block, older[-1]))
                print(f"block {block}: writer {writer}'s seq {seq} replaced "
                      f"by its older seq {older[-1]}")
                return 0
    print("no block with an older write to put back", file=sys.stderr)
    return 1


def check(disk, blocks, logs):
    pending = {}
    writers = load(logs, pending)
    for w in pending:
        writers.setdefault(w, {})
    bad = 0
    counts = {"zero": 0}
    with open(disk, "rb") as f:
        for block in range(blocks):
            data = f.read(BLOCK)
            last = {w: pb[block][-1] for w, pb in writers.items()
                    if block in pb}
            if data == bytes(BLOCK) and not last:
                counts["zero"] += 1
                continue
            if data == bytes(BLOCK):
                counts["zero"] += 1
                if last:
                    print(f"block {block}: zeroes, but written by "
                          f"{sorted(last)}")
                    bad += 1
                continue
            magic = data[:8]
            writer, pos, seq = struct.unpack(">QQQ", data[8:32])
            if (magic != MAGIC or pos != block or writer not in writers or
                    data != make_block(writer, block, seq)):
                print(f"block {block}: not one whole write of a writer "
                      f"(magic {magic!r}, writer {writer}, block {pos}, "
                      f"seq {seq})")
                bad += 1
                continue
            counts[writer] = counts.get(writer, 0) + 1
            if seq in pending.get(writer, {}).get(block, ()):
                counts["unanswered"] = counts.get("unanswered", 0) + 1
                continue        # never answered: may be there or not
            if writer not in last or last[writer][0] != seq:
                print(f"block {block}: writer {writer}'s seq {seq}, but its "
                      f"last write of the block was seq "
                      f"{last.get(writer, (None,))[0]}: a newer "
                      f"acknowledged write was lost")
                bad += 1
                continue
            answered = last[writer][2]
            for other, (oseq, osent, _) in last.items():
                if other != writer and osent > answered:
                    print(f"block {block}: writer {writer}'s seq {seq} "
                          f"(answered at {answered:.6f}) is on the disk, "
                          f"but writer {other}'s seq {oseq} was sent later "
                          f"({osent:.6f})")
                    bad += 1
    total = sum(sum(len(v) for v in pb.values()) for pb in writers.values())
    print(f"checked {blocks} blocks against {total} writes: "
          f"{', '.join(f'{k}: {v}' for k, v in sorted(counts.items(), key=str))}; "
          f"{bad} violation(s)")
    return 1 if bad else 0


def main(argv):
    if len(argv) == 9 and argv[1] == "write":
        return write(argv[2], int(argv[3]), int(argv[4]), float(argv[5]),
                     int(argv[6]), int(argv[7]), argv[8])
    if len(argv) == 6 and argv[1] == "big":
        return big(argv[2], int(argv[3]), int(argv[4]), float(argv[5]))
    if len(argv) >= 5 and argv[1] == "check":
        return check(argv[2], int(argv[3]), argv[4:])
    if len(argv) >= 3 and argv[1] == "crossed":
        return crossed(argv[2:])
    if len(argv) >= 5 and argv[1] == "tamper":
        return tamper(argv[2], int(argv[3]), argv[4:])
    if len(argv) in (2, 3) and argv[1] == "now":
        later = float(argv[2]) if len(argv) == 3 else 0.0
        print(f"{time.monotonic() + later:.6f}")
        return 0
    print(__doc__ if __doc__ else "usage: see the top of twoprim.py",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
