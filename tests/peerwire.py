# nbdrepl: the replication wire protocol for the tests' fake peers.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
# Imported by the Python parts of the shell tests (functions.sh puts
# this directory on PYTHONPATH).  The layouts are common/wire.h's.
import struct

MAGIC = 0x4e425250              # "NBRP"
HELLO, PING, WRITE, TRIM, RESYNC_DATA, ACK, AUTH_CHALLENGE = 1, 2, 4, 5, 9, 11, 24
HDR_SIZE, HELLO_SIZE = 32, 144
SECONDARY, PRIMARY = 0, 1
INCONSISTENT, OUTDATED, UPTODATE = 0, 1, 2


def hdr(t, flags=0, length=0, count=0, seq=0, off=0, magic=MAGIC):
    """A message header."""
    return struct.pack(">IHHIIQQ", magic, t, flags, length, count, seq, off)


def hello(node_id, peer_id, role, disk, size, resource=b"r0",
          current=0, bitmap=0, history=(0, 0), flags=0, changes=0,
          version=3, features=0, primary_since=0):
    """A HELLO message, header included."""
    payload = (struct.pack(">IIIIIIQ", version, features, node_id, peer_id,
                           role, disk, size)
               + resource.ljust(64, b"\0")
               + struct.pack(">QQQQII", current, bitmap, history[0],
                             history[1], flags, changes)
               + struct.pack(">Q", primary_since))
    assert len(payload) == HELLO_SIZE
    return hdr(HELLO, length=len(payload)) + payload


def recv_exact(s, n):
    """n bytes from socket s; ConnectionError if it closes first."""
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise ConnectionError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b
