#!/usr/bin/env python3
# nbdrepl: random faults under an acknowledged-write load.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
#   fault-random.py [--seed N] [--nodes 2|3] [--diskless] [--duration SECS]
#                   [--faults kill,stop,partition,promote] [--keep]
#                   [--converge SECS] [--rate N] [--blocks N] [--mode M]
#                   [--tls] [--two-primaries] [--idle-diskless N]
#
# Builds network namespaces (as scripts/netns.sh does, named with this
# process's pid, deleted at the end however it ends), starts one real
# nbdkit repl node in each, makes the first primary and runs
# tests/ackwrite against the primary while a schedule of faults, drawn
# from the seed before the run, is applied:
#
#   kill       SIGKILL a node, restart it (as Secondary) after a while
#   stop       SIGSTOP a node, SIGCONT it after a while (shorter or
#              longer than ping-timeout)
#   partition  cut a node's replication link (ip link set eth0 down),
#              or only its traffic to one peer (a blackhole route)
#   promote    when a fault hits the primary, promote another node with
#              replctl primary a little later (it may refuse: then try
#              the others, for a while) and demote the old primary once
#              its fault is over.  With 2 nodes (quorum off) only after
#              the primary was killed and while it is still down: the
#              README's failover procedure; freezing or cutting it off
#              and promoting the peer is its documented split brain.
#
# Every node has two links: eth0 on the replication network, which the
# partitions cut, and eth1 on a client network that no fault touches,
# over which the writer (in a namespace of its own) reaches the nodes,
# as a client on the primary's host would.  With --diskless a diskless
# node, never faulted, is the primary; the writer uses it over a unix
# socket and the faults hit the storage nodes.  With --two-primaries
# (and --diskless) the resource has allow-two-primaries: the first
# storage node is Primary too, with a second writer of its own (over
# the client network, on the blocks after the first writer's); the
# faults hit it as "the primary".  When it comes back from a fault
# Secondary (killed) or as a Primary its peers no longer follow
# (frozen, cut off), the driver stops its writer, demotes it if need
# be, promotes it once it is in sync, and starts a new run of the
# writer (a log per run, all checked in order).  --idle-diskless N
# adds N diskless nodes that only stay Secondary and count for quorum
# (issue 18: several diskless nodes in one resource); "other" faults
# and the partitions' peers may hit them as well as the storage nodes.
#
# At the end every fault is healed, dead nodes restarted, extra
# primaries demoted, and the driver waits (bounded) until every node is
# connected and in sync; then it stops the writer and the nodes and runs
# tests/ackcheck.py on every storage node's disk.  It prints the seed,
# the schedule, each fault as it is applied, and the verdict; exit 0
# only when the cluster converged, no node reported a split brain and
# the checker found nothing.  The same seed replays the same schedule
# (what the engine does in between may still vary).

import argparse
import json
import os
import random
import signal
import shutil
import subprocess
import sys
import tempfile
import time

PING_TIMEOUT = 2.0           # net: ping-timeout in the config below
FAILOVER_PATIENCE = 15.0     # how long a failover keeps trying
CLASSES = ("kill", "stop", "partition", "promote")
NET = "10.97"                # .0.x replication, .1.x clients
NBD_PORT = 10809


def plan(rng, classes, nstorage, duration, diskless):
    """The schedule: a list of fault events, from the seed alone.
    Targets are "primary" or "other" plus a number that picks among the
    nodes free at the time; resolved when the event is applied."""
    kinds = [k for k in ("kill", "stop", "partition") if k in classes]
    promote = "promote" in classes and not diskless
    overlap = nstorage >= 3 and not diskless
    events, t = [], rng.uniform(2, 4)
    while kinds and t < duration:
        ev = {"t": round(t, 1), "kind": rng.choice(kinds),
              "target": rng.choice(("primary", "other")),
              "pick": rng.randrange(1 << 16)}
        if ev["kind"] == "kill":
            hold = rng.uniform(0.5, 6)
        elif ev["kind"] == "stop":
            ev["sub"] = rng.choice(("short", "long"))
            hold = (rng.uniform(0.3, PING_TIMEOUT * 0.6) if ev["sub"] == "short"
                    else rng.uniform(PING_TIMEOUT + 1, PING_TIMEOUT + 6))
        else:
            ev["sub"] = rng.choice(("link", "peer"))
            hold = rng.uniform(1, 8)
        may_fail_over = ev["kind"] == "kill" or (
            nstorage >= 3 and ev.get("sub") != "short")
        if promote and ev["target"] == "primary" and may_fail_over:
            ev["failover"] = round(rng.uniform(PING_TIMEOUT + 0.5,
                                               PING_TIMEOUT + 3), 1)
            hold = max(hold, ev["failover"] + rng.uniform(1, 5))
        ev["hold"] = round(hold, 1)
        events.append(ev)
        if overlap and rng.random() < 0.3:
            t += rng.uniform(0.5, hold)
        else:
            t += hold + rng.uniform(1, 4)
    return events


def describe(ev):
    s = f"{ev['t']:6.1f}s {ev['kind']}"
    if "sub" in ev:
        s += f"/{ev['sub']}"
    s += f" {ev['target']} for {ev['hold']}s"
    if "failover" in ev:
        s += f", failover after {ev['failover']}s"
    return s


def run(cmd, timeout=10, **kw):
    """Run a command; (returncode, stdout + stderr), rc None on timeout."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, **kw)
        return p.returncode, p.stdout.strip()
    except subprocess.TimeoutExpired:
        return None, "timed out"


def must(cmd):
    rc, out = run(cmd)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out}")


class Node:
    def __init__(self, name, nid, diskless=False):
        self.name, self.id, self.diskless = name, nid, diskless
        self.proc = None
        self.fault = None          # the event of the fault it is under
        self.killed = self.frozen = False


class Driver:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)            # the schedule
        self.choice = random.Random(a.seed + 1)     # failover candidates
        self.prefix = f"nbdrepl-rf-{os.getpid()}"
        self.tmp = tempfile.mkdtemp(prefix="nbdrepl-fault-random.")
        self.namespaces = []
        names = ["alpha", "beta", "gamma"][:a.nodes]
        self.storage = [Node(n, i) for i, n in enumerate(names)]
        self.nodes = list(self.storage)
        if a.diskless:
            self.nodes.append(Node("client", len(names), diskless=True))
        self.chosen = self.nodes[-1] if a.diskless else self.storage[0]
        self.idle = [Node(f"idle{i + 1}", len(self.nodes) + i, diskless=True)
                     for i in range(a.idle_diskless)]
        self.nodes += self.idle
        # --two-primaries: the storage Primary beside the diskless one,
        # its writer, the logs of its runs, and how long it has been
        # Primary with a peer that is neither connected nor faulted.
        # (--second-diskless: the first idle diskless node instead.)
        self.second = (self.idle[0] if a.second_diskless else
                       self.storage[0] if a.two_primaries else None)
        self.writer2 = None
        self.logs2 = []
        self.stale2 = 0
        self.writers_stopped = False
        self.writer = None
        self.t0 = None              # when the writer started
        self.active = []            # faults in force
        self.failovers = []         # pending failover attempts
        self.said = {}              # last message per (node, topic)
        self.problems = []

    # ---- output ----

    def say(self, msg):
        when = f"{self.now():7.1f}s" if self.t0 else "  setup"
        print(f"[{when}] {msg}", flush=True)

    def say_once(self, key, msg):
        if self.said.get(key) != msg:
            self.said[key] = msg
            self.say(msg)

    # ---- namespaces ----

    def ns(self, node_or_name):
        name = getattr(node_or_name, "name", node_or_name)
        return f"{self.prefix}-{name}"

    def addr(self, node, net=0):
        return f"{NET}.{net}.{node.id + 1}"

    def add_ns(self, name):
        must(["ip", "netns", "add", self.ns(name)])
        self.namespaces.append(self.ns(name))
        must(["ip", "-n", self.ns(name), "link", "set", "lo", "up"])

    def add_link(self, host, dev, bridge, address):
        """A veth from namespace host (named dev) to bridge on the switch."""
        tmp, port = f"v{len(self.namespaces)}{dev}-{os.getpid()}", f"p-{host}-{dev}"
        must(["ip", "link", "add", tmp[:15], "netns", self.ns(host), "type",
              "veth", "peer", "name", port, "netns", self.ns("sw")])
        must(["ip", "-n", self.ns("sw"), "link", "set", port, "master", bridge, "up"])
        must(["ip", "-n", self.ns(host), "link", "set", tmp[:15], "name", dev])
        must(["ip", "-n", self.ns(host), "addr", "add", f"{address}/24", "dev", dev])
        must(["ip", "-n", self.ns(host), "link", "set", dev, "up"])

    def net_setup(self):
        self.add_ns("sw")
        for br in ("br0", "br1"):
            must(["ip", "-n", self.ns("sw"), "link", "add", br, "type", "bridge"])
            must(["ip", "-n", self.ns("sw"), "link", "set", br, "up"])
        for n in self.nodes:
            self.add_ns(n.name)
            self.add_link(n.name, "eth0", "br0", self.addr(n))
            if not n.diskless:
                self.add_link(n.name, "eth1", "br1", self.addr(n, 1))
        if not self.a.diskless or (self.second and not self.second.diskless):
            self.add_ns("writer")
            self.add_link("writer", "eth1", "br1", f"{NET}.1.100")

    def net_teardown(self):
        for ns in reversed(self.namespaces):
            run(["ip", "netns", "del", ns])
        self.namespaces = []

    # ---- nodes ----

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write_config(self):
        quorum = "majority" if len(self.nodes) >= 3 else "off"
        lines = ["resource: r0", "protocol: C", f"quorum: {quorum}",
                 *(["allow-two-primaries: true"] if self.second else []),
                 "on-no-quorum: io-error", "auto-promote: false", "net:",
                 "  ping-interval: 0.5", f"  ping-timeout: {PING_TIMEOUT:g}",
                 "  timeout: 3", "  connect-retry-max: 0.5", "nodes:"]
        if self.a.tls:          # TLS 1.3 with a key from the secret
            lines[2:2] = ['secret: "fault-random tls secret"', "tls: true"]
        for n in self.nodes:
            lines += [f"  - name: {n.name}", f"    id: {n.id}",
                      f"    address: {self.addr(n)}:7789",
                      f"    disk: {'none' if n.diskless else n.name + '.img'}",
                      f"    control: {n.name}.sock"]
        self.config = self.path("r0.yaml")
        # 0600: it may hold a secret (--tls), which the nodes insist on.
        fd = os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        for n in self.storage:
            with open(self.path(n.name + ".img"), "wb") as f:
                f.truncate(self.a.size_mb << 20)
            must([self.a.replctl, "-c", self.config, "-n", n.name,
                  "create-md", "--in-sync"])

    def start_node(self, n, *extra):
        listen = (["-U", self.path(n.name + ".nbd")] if n.diskless
                  else ["-p", str(NBD_PORT)])
        if n.diskless and os.path.exists(self.path(n.name + ".nbd")):
            os.unlink(self.path(n.name + ".nbd"))   # left by a SIGKILL
        log = open(self.path(n.name + ".log"), "a")
        n.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(n), "nbdkit", "-f", *listen,
             self.a.plugin, f"config={self.config}", f"node={n.name}", *extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp)
        log.close()
        n.killed = n.frozen = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.status(n) is not None:
                return
            if n.proc.poll() is not None:
                raise RuntimeError(f"node {n.name} exited during start")
            time.sleep(0.1)
        raise RuntimeError(f"node {n.name}: control socket silent for 10 s")

    def replctl(self, n, *args, timeout=10):
        return run([self.a.replctl, "-s", self.path(n.name + ".sock"), *args],
                   timeout=timeout)

    def status(self, n):
        """The node's status --json, or None (dead, frozen, no answer)."""
        if n.proc is None or n.killed or n.frozen:
            return None
        rc, out = self.replctl(n, "status", "--json", timeout=3)
        if rc != 0:
            return None
        try:
            return json.loads(out)
        except ValueError:
            return None

    # ---- faults: one begin and one end function per kind ----

    def kill_begin(self, n, ev):
        n.proc.send_signal(signal.SIGKILL)
        n.proc.wait()
        n.killed = True

    def kill_end(self, n, ev):
        self.start_node(n)

    def stop_begin(self, n, ev):
        n.proc.send_signal(signal.SIGSTOP)
        n.frozen = True

    def stop_end(self, n, ev):
        n.proc.send_signal(signal.SIGCONT)
        n.frozen = False

    def partition_begin(self, n, ev):
        if ev["sub"] == "link":
            must(["ip", "-n", self.ns(n), "link", "set", "eth0", "down"])
        else:
            must(["ip", "-n", self.ns(n), "route", "add", "blackhole",
                  self.addr(ev["peer"]) + "/32"])

    def partition_end(self, n, ev):
        if ev["sub"] == "link":
            must(["ip", "-n", self.ns(n), "link", "set", "eth0", "up"])
        else:
            must(["ip", "-n", self.ns(n), "route", "del", "blackhole",
                  self.addr(ev["peer"]) + "/32"])

    def begin(self, ev):
        """Apply a scheduled fault to the node it resolves to now."""
        free = [n for n in self.storage + self.idle if n.fault is None]
        primary = self.second or self.chosen
        if ev["target"] == "primary" and primary in free:
            n = primary
        else:
            others = [n for n in free if n is not primary]
            if not others:
                self.say(f"skip {ev['kind']}: every other node is faulted")
                return
            n = others[ev["pick"] % len(others)]
        what = ev["kind"] + (f"/{ev['sub']}" if "sub" in ev else "")
        if ev.get("sub") == "peer":
            peers = [p for p in self.nodes if p is not n]
            ev["peer"] = peers[(ev["pick"] >> 8) % len(peers)]
            what += f" to {ev['peer'].name}"
        ev = dict(ev, node=n, ends=self.now() + ev["hold"],
                  was_primary=n is primary)
        getattr(self, ev["kind"] + "_begin")(n, ev)
        n.fault = ev
        self.active.append(ev)
        self.say(f"{what} {n.name}{' (primary)' if ev['was_primary'] else ''}"
                 f" for {ev['hold']}s")
        if "failover" in ev and ev["was_primary"]:
            self.failovers.append({"at": self.now() + ev["failover"],
                                   "until": self.now() + ev["failover"]
                                   + FAILOVER_PATIENCE, "ev": ev})

    def end(self, ev):
        n = ev["node"]
        getattr(self, ev["kind"] + "_end")(n, ev)
        n.fault = None
        self.active.remove(ev)
        self.say(f"end {ev['kind']} {n.name}")

    # ---- roles ----

    def may_fail_over(self, ev):
        """The README's rules: with quorum (3+ nodes) always; with 2
        nodes only while the killed primary is still down."""
        old = ev["node"]
        if old.fault is not ev or self.chosen is not old:
            return False
        return len(self.nodes) >= 3 or (ev["kind"] == "kill" and old.killed)

    def failover(self, ev):
        """One attempt: promote the first other node that accepts."""
        old = ev["node"]
        cands = [n for n in self.storage if n is not old and not n.killed
                 and not n.frozen]
        self.choice.shuffle(cands)
        for n in cands:
            rc, out = self.replctl(n, "primary")
            if rc == 0:
                self.say(f"failover: {n.name} promoted ({old.name} under "
                         f"{ev['kind']})")
                self.chosen = n
                return True
            self.say_once((n.name, "promote"), f"failover: {n.name} refused: {out}")
        return False

    def run_failovers(self):
        """Pending failovers: try each when due, then every second, until
        one node accepts, the rules forbid it, or the patience is out."""
        for fo in list(self.failovers):
            if self.now() < fo["at"]:
                continue
            ev = fo["ev"]
            if not self.may_fail_over(ev):
                self.say(f"failover for {ev['node'].name} dropped: it is back")
                self.failovers.remove(fo)
            elif self.failover(ev):
                self.failovers.remove(fo)
            elif self.now() > fo["until"]:
                self.say(f"failover for {ev['node'].name}: every node refused")
                self.failovers.remove(fo)
            else:
                fo["at"] = self.now() + 1

    def reconcile(self):
        """Promote the chosen primary if it is Secondary (after a restart),
        demote any other Primary whose fault is over; move the writer off
        a primary that refuses to step down because it has it open."""
        for n in self.nodes:
            if n.fault is not None:
                continue
            st = self.status(n)
            if st is None:
                continue
            if n is self.second:
                self.reconcile_second(n, st)
            elif n is self.chosen and st["role"] != "Primary":
                rc, out = self.replctl(n, "primary")
                self.tell(n, rc, f"promote {n.name}", out)
            elif n is not self.chosen and st["role"] == "Primary":
                rc, out = self.replctl(n, "secondary")
                self.tell(n, rc, f"demote {n.name}", out)
                if rc != 0 and self.writer and self.writer.poll() is None:
                    self.writer.send_signal(signal.SIGUSR1)

    def reconcile_second(self, n, st):
        """--two-primaries: keep the second node beside the diskless
        Primary Primary with its writer running, once it is in sync."""
        peers_ok = all(p["connection"] == "Connected" or
                       self.node(p["name"]).fault is not None
                       for p in st["peers"])
        if st["role"] == "Primary" and not peers_ok:
            self.stale2 += 1
            if self.stale2 < 4:
                return
            self.say(f"{n.name}: Primary, but its peers do not follow it: "
                     f"stopping its writer and demoting it")
            self.stop_writer2()
            rc, out = self.replctl(n, "secondary")
            self.tell(n, rc, f"demote {n.name}", out)
            return
        self.stale2 = 0
        if st["role"] == "Primary":
            if self.writer2 is None and self.t0 is not None and \
                    not self.writers_stopped:
                self.start_writer2()
            return
        if self.writer2 is not None:
            self.stop_writer2()
        if (st["disk"] in ("UpToDate", "Diskless") and peers_ok and
                all(p["replication"] == "Established" for p in st["peers"])):
            rc, out = self.replctl(n, "primary")
            self.tell(n, rc, f"promote {n.name}", out)

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def tell(self, n, rc, what, out):
        """Report a role change, and a refusal once until it changes."""
        if rc == 0:
            self.said.pop((n.name, "role"), None)
            self.say(f"{what}: ok")
        else:
            self.say_once((n.name, "role"), f"{what}: refused: {out}")

    def converged(self):
        """None when every node is connected, UpToDate and in sync with
        one primary, the chosen one; else what is not."""
        for n in self.nodes:
            st = self.status(n)
            if st is None:
                return f"{n.name}: no status"
            want = ("Primary" if n is self.chosen or n is self.second
                    else "Secondary")
            if st["role"] != want:
                return f"{n.name}: {st['role']}, not {want}"
            if st["disk"] not in ("UpToDate", "Diskless"):
                return f"{n.name}: disk {st['disk']}"
            for p in st["peers"]:
                if (p["connection"] != "Connected" or
                        p["disk"] not in ("UpToDate", "Diskless") or
                        p["replication"] != "Established" or
                        p["out_of_sync_bytes"] != 0):
                    return (f"{n.name}: peer {p['name']} {p['connection']} "
                            f"{p['disk']} {p['replication']} "
                            f"oos {p['out_of_sync_bytes']}")
        return None

    def wait_converged(self, secs):
        deadline = time.monotonic() + secs
        why = "not checked"
        while time.monotonic() < deadline:
            self.reconcile()
            why = self.converged()
            if why is None:
                return None
            self.say_once(("cluster", "converge"), f"waiting: {why}")
            time.sleep(0.5)
        return why

    # ---- the run ----

    def now(self):
        return time.monotonic() - self.t0

    def start_writer(self):
        if self.a.diskless:
            uris = [f"nbd+unix:///?socket={self.path('client.nbd')}"]
            prefix = []
        else:
            uris = [f"nbd://{self.addr(n, 1)}:{NBD_PORT}" for n in self.storage]
            prefix = ["ip", "netns", "exec", self.ns("writer")]
        secs = self.a.duration + self.a.converge + 60
        cmd = prefix + [self.a.ackwrite, "-l", self.path("writer.log"),
                        "-c", str(self.a.blocks), "-t", str(secs),
                        "-s", str(self.a.seed), "-T", "8", "-m", self.a.mode]
        if self.a.rate:
            cmd += ["-R", str(self.a.rate)]
        self.writer = subprocess.Popen(cmd + uris, stdout=subprocess.PIPE,
                                       stderr=open(self.path("writer.err"), "w"),
                                       text=True)

    def start_writer2(self):
        """A new run of the second writer, on the blocks after the
        first writer's, through the second Primary only."""
        log = self.path(f"writer2-{len(self.logs2) + 1}.log")
        self.logs2.append(log)
        secs = self.a.duration + self.a.converge + 60
        if self.second.diskless:
            prefix = []
            uri = f"nbd+unix:///?socket={self.path(self.second.name + '.nbd')}"
        else:
            prefix = ["ip", "netns", "exec", self.ns("writer")]
            uri = f"nbd://{self.addr(self.second, 1)}:{NBD_PORT}"
        cmd = prefix + [self.a.ackwrite, "-l", log, "-f", str(self.a.blocks), "-c", str(self.a.blocks),
               "-t", str(secs), "-s", str(self.a.seed + len(self.logs2)),
               "-T", "8", "-m", self.a.mode]
        if self.a.rate:
            cmd += ["-R", str(self.a.rate)]
        self.writer2 = subprocess.Popen(
            cmd + [uri],
            stdout=subprocess.PIPE,
            stderr=open(self.path("writer2.err"), "a"), text=True)
        self.say(f"second writer: run {len(self.logs2)} on {self.second.name}")

    def stop_writer2(self):
        if self.writer2 is None:
            return
        self.writer2.send_signal(signal.SIGTERM)
        try:
            out, _ = self.writer2.communicate(timeout=20)
            self.say(f"second writer run {len(self.logs2)}: {out.strip()}")
        except subprocess.TimeoutExpired:
            self.writer2.kill()
            self.writer2.wait()
            self.problems.append("the second writer did not stop within 20 s of SIGTERM")
        self.writer2 = None

    def stop_writer(self):
        self.writer.send_signal(signal.SIGTERM)
        try:
            out, _ = self.writer.communicate(timeout=20)
            self.say(out.strip())
        except subprocess.TimeoutExpired:
            self.writer.kill()
            self.writer.wait()
            self.problems.append("the writer did not stop within 20 s of SIGTERM")

    def stop_nodes(self):
        for n in self.nodes:
            if n.proc and n.proc.poll() is None:
                if n.frozen:
                    n.proc.send_signal(signal.SIGCONT)
                n.proc.terminate()
        for n in self.nodes:
            if n.proc:
                try:
                    n.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.problems.append(f"{n.name} did not stop on SIGTERM")
                    n.proc.kill()
                    n.proc.wait()

    def split_brains(self):
        lines = []
        for n in self.nodes:
            try:
                with open(self.path(n.name + ".log"), errors="replace") as f:
                    lines += [f"{n.name}: {l.strip()}" for l in f
                              if ("split brain" in l or "split-brain" in l)
                              and f"{n.name}: {l.strip()}" not in lines]
            except FileNotFoundError:
                pass
        return lines

    def check(self, compare):
        cmd = [sys.executable, self.a.ackcheck, "--log", self.path("writer.log")]
        for log in self.logs2:
            cmd += ["--log", log]
        if not compare:
            cmd.append("--no-compare")
        disks = [self.path(n.name + ".img") for n in self.storage]
        if not compare:
            disks = [self.path(self.chosen.name + ".img")] if not self.chosen.diskless else disks
        rc, out = run(cmd + disks, timeout=300)
        for line in out.splitlines():
            self.say(line.replace(self.tmp + "/", ""))
        return rc == 0

    def main_loop(self):
        schedule = plan(self.rng, self.a.faults, len(self.storage),
                        self.a.duration, self.a.diskless)
        print(f"fault-random: schedule ({len(schedule)} faults):")
        for ev in schedule:
            print(f"  {describe(ev)}")
        sys.stdout.flush()
        self.net_setup()
        self.write_config()
        for n in self.nodes:
            self.start_node(n, *(["role=primary"] if n is self.chosen
                                 and not n.diskless else []))
        why = self.wait_converged(30)
        if why:
            raise RuntimeError(f"the cluster did not come up: {why}")
        self.start_writer()
        self.t0 = time.monotonic()
        self.say("writer started; faults begin")
        pending = list(schedule)
        last_reconcile = 0
        while self.now() < self.a.duration:
            while pending and pending[0]["t"] <= self.now():
                self.begin(pending.pop(0))
            for ev in [e for e in self.active if e["ends"] <= self.now()]:
                self.end(ev)
            self.run_failovers()
            if self.now() - last_reconcile >= 1:
                self.reconcile()
                last_reconcile = self.now()
            if self.writer.poll() is not None:
                self.problems.append(f"the writer exited early ({self.writer.returncode})")
                break
            time.sleep(0.1)

        self.say("heal: ending every fault")
        self.failovers = []
        for ev in list(self.active):
            self.end(ev)
        why = self.wait_converged(self.a.converge)
        self.stop_writer()
        self.writers_stopped = True
        self.stop_writer2()
        if why is None:
            why = self.wait_converged(30)
        if why:
            self.problems.append(f"no convergence within {self.a.converge}s: {why}")
            for n in self.nodes:
                rc, out = self.replctl(n, "status", timeout=3)
                print(out if rc == 0 else f"{n.name}: no status ({out})")
        else:
            self.say("converged: every node connected, UpToDate, in sync")
        self.stop_nodes()
        sb = self.split_brains()
        if sb:
            self.problems.append("split brain reported: " +
                                 "; ".join(l[:300] for l in sb[:3]))
        if not self.check(compare=why is None):
            self.problems.append("the checker found violations")
        with open(self.path("writer.log")) as f:
            acks = sum(1 for l in f if l.startswith("ack "))
        if acks == 0:
            self.problems.append("the writer had no write acknowledged")
        if self.second:
            acks2 = 0
            for log in self.logs2:
                with open(log) as f:
                    acks2 += sum(1 for l in f if l.startswith("ack "))
            self.say(f"second writer: {len(self.logs2)} run(s), "
                     f"{acks2} writes acknowledged")
            if acks2 == 0:
                self.problems.append("the second writer had no write acknowledged")

    def tail_logs(self):
        for n in self.nodes:
            p = self.path(n.name + ".log")
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    lines = [l for l in f if "refusing client" not in l][-25:]
                print(f"---- {n.name}.log (last {len(lines)} lines)")
                sys.stdout.writelines(lines)
        p = self.path("writer.err")
        if os.path.exists(p):
            with open(p) as f:
                print("---- writer.err (last 10 lines)")
                sys.stdout.writelines(f.readlines()[-10:])

    def cleanup(self):
        for w in (self.writer, self.writer2):
            if w and w.poll() is None:
                w.kill()
                w.wait()
        for n in self.nodes:
            if n.proc and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()
        self.net_teardown()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    builddir = os.environ.get("builddir", os.path.dirname(here))
    ap = argparse.ArgumentParser(description="random faults under an "
                                 "acknowledged-write load (see the top of the file)")
    ap.add_argument("--seed", type=int, default=random.randrange(1, 1 << 31))
    ap.add_argument("--nodes", type=int, choices=(2, 3), default=3,
                    help="storage nodes (with --diskless too: issue 18)")
    ap.add_argument("--diskless", action="store_true")
    ap.add_argument("--duration", type=float, default=40)
    ap.add_argument("--faults", default="kill,stop,partition,promote")
    ap.add_argument("--converge", type=float, default=60,
                    help="seconds to wait for the healed cluster to sync")
    ap.add_argument("--rate", type=float, default=500, help="writes a second (0: no limit)")
    ap.add_argument("--blocks", type=int, default=1024, help="blocks written to")
    ap.add_argument("--mode", choices=("plain", "fua", "flush"), default="plain",
                    help="what acknowledges a write (ackwrite -m)")
    ap.add_argument("--size-mb", type=int, default=16)
    ap.add_argument("--keep", action="store_true", help="keep the directory")
    ap.add_argument("--two-primaries", action="store_true",
                    help="with --diskless: allow-two-primaries, the first "
                    "storage node Primary too, with a writer of its own")
    ap.add_argument("--second-diskless", action="store_true",
                    help="with --two-primaries and --idle-diskless: the "
                    "second Primary is the first idle diskless node "
                    "(two diskless Primaries)")
    ap.add_argument("--tls", action="store_true",
                    help="tls: true (with a secret) on the replication links")
    ap.add_argument("--idle-diskless", type=int, choices=range(0, 4), default=0,
                    metavar="N", help="N more diskless nodes, Secondary, "
                    "voting for quorum and hit by faults (0-3)")
    a = ap.parse_args()
    a.faults = [c for c in a.faults.split(",") if c]
    if a.two_primaries and not a.diskless:
        ap.error("--two-primaries needs --diskless")
    if a.second_diskless and (not a.two_primaries or a.idle_diskless < 1):
        ap.error("--second-diskless needs --two-primaries and --idle-diskless")
    bad = [c for c in a.faults if c not in CLASSES]
    if bad:
        ap.error(f"unknown fault classes: {','.join(bad)}")
    a.plugin = os.path.join(builddir, "plugins/repl/.libs/nbdkit-repl-plugin.so")
    a.replctl = os.path.join(builddir, "client/replctl")
    a.ackwrite = os.path.join(builddir, "tests/ackwrite")
    a.ackcheck = os.path.join(here, "ackcheck.py")

    print(f"fault-random: seed {a.seed} nodes {a.nodes}"
          f"{' +diskless' if a.diskless else ''}{' +tls' if a.tls else ''}"
          f"{' +two-primaries' if a.two_primaries else ''}"
          f"{' (second diskless)' if a.second_diskless else ''}"
          f"{f' +{a.idle_diskless} idle diskless' if a.idle_diskless else ''}"
          f" duration {a.duration:g}s "
          f"faults {','.join(a.faults) or 'none'}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    d = Driver(a)
    interrupted = False
    try:
        d.main_loop()
    except (RuntimeError, OSError) as e:
        d.problems.append(f"driver: {e}")
    except (KeyboardInterrupt, SystemExit):
        interrupted = True
        d.problems.append("interrupted")
    finally:
        d.cleanup()
    if d.problems:
        d.tail_logs()
        for p in d.problems:
            print(f"fault-random: seed {a.seed}: FAIL: {p}")
    else:
        print(f"fault-random: seed {a.seed}: PASS")
    if a.keep or d.problems and os.environ.get("KEEP_TMPDIR"):
        print(f"fault-random: files kept in {d.tmp}")
    else:
        shutil.rmtree(d.tmp, ignore_errors=True)
    return 130 if interrupted else 1 if d.problems else 0


if __name__ == "__main__":
    sys.exit(main())
