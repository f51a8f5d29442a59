# nbdrepl: the replication wire protocol for the tests' fake peers.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
# Imported by the Python parts of the shell tests (functions.sh puts
# this directory on PYTHONPATH).  The layouts are common/wire.h's.
#
# A connection starts: HELLO each way (who, no data), the challenge and
# response when both have a secret, then HELLO_STATE each way (role,
# disk state, size, generation UUIDs).  handshake() does all of it.
import hashlib
import hmac
import os
import struct

MAGIC = 0x4e425250              # "NBRP"
VERSION = 5
HELLO, PING, WRITE, TRIM, RESYNC_DATA, ACK = 1, 2, 4, 5, 9, 11
AUTH_CHALLENGE, AUTH_RESPONSE, HELLO_STATE = 24, 25, 26
HDR_SIZE, HELLO_SIZE, HELLO_STATE_SIZE, AUTH_SIZE = 32, 80, 72, 32
FEATURE_AUTH = 1
SECONDARY, PRIMARY = 0, 1
INCONSISTENT, OUTDATED, UPTODATE, DISKLESS = 0, 1, 2, 3


def hdr(t, flags=0, length=0, count=0, seq=0, off=0, magic=MAGIC):
    """A message header."""
    return struct.pack(">IHHIIQQ", magic, t, flags, length, count, seq, off)


def unhdr(b):
    """(magic, type, flags, length, count, seq, offset) of a header."""
    return struct.unpack(">IHHIIQQ", b[:HDR_SIZE])


def hello(node_id, peer_id, resource=b"r0", version=VERSION, features=0):
    """A HELLO message, header included: who the sender is, nothing
    about its data."""
    payload = (struct.pack(">IIII", version, features, node_id, peer_id)
               + resource.ljust(64, b"\0"))
    assert len(payload) == HELLO_SIZE
    return hdr(HELLO, length=len(payload)) + payload


def unhello(payload):
    """dict of a HELLO payload (the version-4 fields)."""
    version, features, node_id, peer_id = struct.unpack(">IIII", payload[:16])
    return dict(version=version, features=features, node_id=node_id,
                peer_id=peer_id, resource=payload[16:80].rstrip(b"\0"))


def hello_v3(node_id, peer_id, role, disk, size, resource=b"r0",
             current=0, bitmap=0, history=(0, 0), flags=0, changes=0,
             features=0, primary_since=0):
    """A HELLO of protocol version 3 (144 bytes, the state included), as
    an old node or an attacker speaking it would send."""
    payload = (struct.pack(">IIIIIIQ", 3, features, node_id, peer_id,
                           role, disk, size)
               + resource.ljust(64, b"\0")
               + struct.pack(">QQQQII", current, bitmap, history[0],
                             history[1], flags, changes)
               + struct.pack(">Q", primary_since))
    assert len(payload) == 144
    return hdr(HELLO, length=len(payload)) + payload


def hello_state(role, disk, size, current=0, bitmap=0, history=(0, 0),
                flags=0, changes=0, primary_since=0, routed=0):
    """A HELLO_STATE message, header included: the sender's role, disk
    state, size and generation UUIDs, sent after the authentication."""
    payload = (struct.pack(">IIQ", role, disk, size)
               + struct.pack(">QQQQII", current, bitmap, history[0],
                             history[1], flags, changes)
               + struct.pack(">QII", primary_since, routed, 0))
    assert len(payload) == HELLO_STATE_SIZE
    return hdr(HELLO_STATE, length=len(payload)) + payload


def unhello_state(payload):
    """dict of a HELLO_STATE payload."""
    role, disk, size = struct.unpack(">IIQ", payload[:16])
    current, bitmap, h0, h1, flags, changes = struct.unpack(
        ">QQQQII", payload[16:56])
    primary_since, routed, _ = struct.unpack(">QII", payload[56:72])
    return dict(role=role, disk=disk, size=size, current=current,
                bitmap=bitmap, history=(h0, h1), flags=flags,
                changes=changes, primary_since=primary_since, routed=routed)


def recv_exact(s, n):
    """n bytes from socket s; ConnectionError if it closes first."""
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise ConnectionError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b


def recv_msg(s):
    """One message: (type, flags, length, count, seq, offset, payload)."""
    h = recv_exact(s, HDR_SIZE)
    magic, t, fl, ln, cnt, seq, off = unhdr(h)
    if magic != MAGIC:
        raise ValueError("bad magic 0x%08x" % magic)
    return t, fl, ln, cnt, seq, off, recv_exact(s, ln) if ln else b""


def expect(s, t):
    """The payload of the next message, which must be of type t."""
    got = recv_msg(s)
    if got[0] != t:
        raise ValueError("expected type %d, got %d" % (t, got[0]))
    return got[6]


def auth_mac(secret, challenge, sender, receiver, resource=b"r0"):
    """The AUTH_RESPONSE of node sender to node receiver's challenge."""
    return hmac.new(secret, challenge + struct.pack(">II", sender, receiver)
                    + resource, hashlib.sha256).digest()


def authenticate(s, secret, node_id, peer_id, resource=b"r0"):
    """The challenge and response, as node node_id talking to peer_id,
    with the given secret (bytes).  Returns True if the peer's answer
    was right; raises ConnectionError if it closed on us."""
    ours = os.urandom(AUTH_SIZE)
    s.sendall(hdr(AUTH_CHALLENGE, length=AUTH_SIZE) + ours)
    theirs = expect(s, AUTH_CHALLENGE)
    s.sendall(hdr(AUTH_RESPONSE, length=AUTH_SIZE)
              + auth_mac(secret, theirs, node_id, peer_id, resource))
    answer = expect(s, AUTH_RESPONSE)
    return hmac.compare_digest(
        answer, auth_mac(secret, ours, peer_id, node_id, resource))


def handshake(s, node_id, peer_id, role, disk, size, secret=None,
              resource=b"r0", **state):
    """The whole handshake on socket s, as node node_id talking to
    peer_id, either side (both send before they read): HELLO, the
    authentication with secret (bytes) if given, HELLO_STATE with role,
    disk, size and the keyword arguments of hello_state().  Returns
    (the peer's HELLO, its HELLO_STATE) as dicts."""
    s.sendall(hello(node_id, peer_id, resource,
                    features=FEATURE_AUTH if secret else 0))
    peer_hello = unhello(expect(s, HELLO))
    if secret and not authenticate(s, secret, node_id, peer_id, resource):
        raise ValueError("the peer's answer to our challenge is wrong")
    s.sendall(hello_state(role, disk, size, **state))
    return peer_hello, unhello_state(expect(s, HELLO_STATE))
