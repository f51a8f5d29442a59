# nbdrepl benchmark harness: `scripts/bench --table` and `--scale`, the
# comparison users run: nbdrepl against a raw file, an unreplicated NBD
# server, iSCSI (tgt) and itself, in one run.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
"""scripts/bench --table | --scale

--table: the seed table.  Rows (each on its own backing files, all on a
  tmpfs mounted in the temporary directory):

  raw          fio on the backing file itself (bench/fio/file.fio:
               libaio, direct=0: tmpfs has no O_DIRECT, so every request
               completes in io_submit; a memory-speed reference)
  nbd-file     nbdkit's file plugin over NBD (the unreplicated NBD
               reference)
  nbd-wait     bench/wait-plugin.c: the same file, but each write then
               waits until another thread wakes it, at once, as a
               replicated write waits for its ACK (no peer): what
               nbdkit's request model costs a plugin whose writes wait,
               the floor under repl-2n (only with BENCH_ROWS)
  repl-2n      repl primary + 1 peer, protocol C; client over NBD to the
               primary ("local": DRBD's primary row)
  repl-2n-nocork  repl-2n with `net: cork: false` (what cork does for
               it; only with BENCH_ROWS)
  repl-3n      repl primary + 2 peers
  diskless     a diskless node (disk: none, read-balancing: round-robin)
               on the client's host replicating to two storage nodes;
               the client talks NBD to it on a unix socket, as
               repl-attach attaches it ("DRBD diskless-client transport")
  diskless-tcp the same, the client talking NBD to it over 127.0.0.1
  diskless-nocork  the diskless row with `net: cork: false` (what cork
               does for it; only with BENCH_ROWS)
  diskless-3   a diskless node replicating to three storage nodes (the
               3-way replica of LINSTOR's default), unix socket
  diskless-1   the same with read-balancing: prefer-node0, which reads
               from one storage node only: the reference for read
               balancing (read workloads only)
  tgt-file     tgt's iSCSI target on a plain file (the unreplicated
               iSCSI reference)
  tgt-repl     tgt exporting the repl-2n volume through nbdfuse
               ("iSCSI target on DRBD")
  repl-2n-base, diskless-base  with BENCH_BASE: repl-2n and diskless
               with another build's plugin
  lio          not here: `scripts/bench --table-vm` (scripts/bench-vm)
               measures LIO in a guest kernel

  Workloads: 4k randwrite QD1, 4k randwrite QD16, 4k randread QD16, 1M
  sequential write QD8 (time based), 4k 70/30 randrw QD16.  The load
  generator is replbench for every row but raw (like for like across NBD
  and iSCSI); fio's nbd engine (bench/fio/nbd.fio) runs once more on
  nbd-file and diskless at 4k randwrite QD16 and QD1, right after the
  replbench point it checks, as a cross-check of replbench.

  Each row starts its servers, measures every workload and stops them;
  the rows run in the same order in every repetition (a row and its
  -base row trade places in every other one), so that the
  references (raw, nbd-file, tgt-file, diskless) and the rows quoted
  against them alternate through the run, and every ratio is against a
  reference measured in the same run (medians of its repetitions).

--scale: the repl primary with 0..3 peers (1..4 storage nodes) at 4k
  randwrite QD16 and 1M write QD8; then 1, 2, 4 and 8 client connections
  (replbench --jobs, NBD multi-conn, QD16 each) against the 2-node
  primary at 4k randwrite.

Hosts are network namespaces (client, a, b, c, d on a bridge of veth
pairs this program makes, as scripts/netns.sh does); without them
everything runs on 127.0.0.1.  Storage nodes and tgtd run on a..d,
replbench and the diskless node on client.  The report (markdown, with
the commands and the machine) goes to stdout and
bench/out/table-DATE-COMMIT.md (or scale-DATE-COMMIT.md); replbench/fio
JSON, points.tsv, points.json and logs to bench/out/DATE-COMMIT/; with
--table, PNG bar charts (gnuplot, one per workload) to
bench/table-WORKLOAD.png (full runs only).

Environment: BENCH_RUNTIME (seconds per point, default 5), BENCH_REPEAT
(--table: run every row this many times, the rows in the same order each
time, and report the median of each point; default 1), BENCH_SIZE_MIB
(per backing file, default 256), BENCH_KEEP_TMPDIR, BENCH_ROWS (--table:
the rows to run, e.g. "tgt-file diskless"; the default is all of them
but the optional ones; the targets need their rows), BENCH_BASE=DIR
(--table: another build of the tree, e.g. an earlier commit checked out
with `git worktree add` and built with scripts/build; adds the rows
repl-2n-base and diskless-base, run with its plugin beside repl-2n and
diskless: both builds' servers up at once, each workload on one and
then on the other, which first alternating by repetition; and a
comparison of the two builds), BENCH_PERF=1
(--table: one extra diskless 4k randwrite QD16 point under `perf record
-g` of the diskless nbdkit; report in bench/out/DATE-COMMIT/perf-diskless.txt),
BENCH_PREBUILT (no install-deps, no build: scripts/bench), BENCH_OUTDIR
(where the reports and run directories go; default bench/out).

Everything is bounded (replbench and fio with deadlines, bounded polls);
only the processes, mounts and namespaces this program made are stopped
or removed (by pid, path and name), however it exits.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import common as c
from common import say, die, median

ROWS = ["raw", "nbd-file", "nbd-wait", "repl-2n", "repl-2n-base",
        "repl-2n-nocork", "repl-3n", "diskless", "diskless-base",
        "diskless-tcp", "diskless-nocork", "diskless-3", "diskless-1",
        "tgt-file", "tgt-repl"]
RUN_ROWS = ["raw", "nbd-file", "repl-3n", "diskless", "diskless-tcp",
            "diskless-3", "diskless-1", "repl-2n", "tgt-file", "tgt-repl"]
RUN_ROWS_BASE = ["raw", "nbd-file", "repl-3n", "diskless", "diskless-base",
                 "diskless-tcp", "diskless-1", "repl-2n", "repl-2n-base",
                 "tgt-file", "tgt-repl"]
WORKLOADS = {   # name: (title, replbench arguments); fio: bench/fio/NAME.fio
    "rw4k-qd1": ("4k randwrite QD1", "--rw randwrite --bs 4k --qd 1"),
    "rw4k-qd16": ("4k randwrite QD16", "--rw randwrite --bs 4k --qd 16"),
    "rr4k-qd16": ("4k randread QD16", "--rw randread --bs 4k --qd 16"),
    "sw1m-qd8": ("1M seq write QD8", "--rw write --bs 1M --qd 8 --time-based"),
    "rrw4k-qd16": ("4k randrw 70/30 QD16",
                   "--rw randrw --rwmixread 70 --bs 4k --qd 16"),
}
# The workloads where fio's nbd engine checks replbench: QD16, where both
# are bound by the CPU they share with the servers, and QD1, where latency
# bounds them and a miscounting load generator would show.
CROSS_CHECK = ["rw4k-qd16", "rw4k-qd1"]
COLS = ["rep", "row", "workload", "tool", "iops", "mib_s", "p50_us",
        "p99_us", "p999_us", "cpu_us_io", "server_cpu_us_io"]
HOSTS = ["a", "b", "c", "d"]

ROW_DESC = {
    "raw": "fio, libaio, direct=0, on the tmpfs backing file",
    "nbd-file": "nbdkit file plugin, NBD",
    "nbd-wait": "the same file, each write then waiting until another thread "
                "wakes it (bench/wait-plugin.c, no peer)",
    "repl-2n": "repl primary + 1 peer, NBD to the primary",
    "repl-2n-nocork": "repl-2n with net: cork: false",
    "repl-3n": "repl primary + 2 peers, NBD to the primary",
    "diskless": "diskless node → 2 storage nodes; NBD to the diskless node on "
                "a unix socket (as repl-attach)",
    "diskless-tcp": "the same, NBD to the diskless node over TCP (127.0.0.1)",
    "diskless-nocork": "the diskless row with net: cork: false",
    "diskless-3": "diskless node → 3 storage nodes; NBD to it on a unix socket",
    "diskless-1": "the same, reading from node0 only (read-balancing: prefer-node0)",
    "tgt-file": "tgt on a plain file, iSCSI",
    "tgt-repl": "tgt on nbdfuse of a repl 2-node volume, iSCSI",
    "repl-2n-base": "repl-2n with BENCH_BASE's plugin",
    "diskless-base": "diskless with BENCH_BASE's plugin",
}
# What each row's ratio is quoted against (measured in the same run).
ROW_REF = {"raw": "raw", "nbd-file": "raw", "nbd-wait": "nbd-file",
           "repl-2n": "nbd-file", "repl-2n-nocork": "repl-2n",
           "repl-3n": "nbd-file", "diskless": "nbd-file",
           "diskless-tcp": "diskless", "diskless-nocork": "diskless",
           "diskless-1": "diskless", "diskless-3": "diskless",
           "repl-2n-base": "repl-2n",
           "diskless-base": "diskless", "tgt-file": "nbd-file",
           "tgt-repl": "tgt-file"}


def settings(mode):
    s = {"mode": mode}
    s["runtime"] = c.env_int("BENCH_RUNTIME", 5, 1)
    s["repeat"] = c.env_int("BENCH_REPEAT", 1, 1)
    s["size_mib"] = c.env_int("BENCH_SIZE_MIB", 256, 64)
    s["base"] = os.environ.get("BENCH_BASE") or ""
    run_rows = RUN_ROWS
    if s["base"]:
        b = s["base"]
        if not (os.path.isfile(f"{b}/plugins/repl/.libs/nbdkit-repl-plugin.so")
                and os.access(f"{b}/client/replctl", os.X_OK)):
            die(f"BENCH_BASE={b}: no built plugin and replctl there")
        run_rows = RUN_ROWS_BASE
    s["rows_given"] = bool((os.environ.get("BENCH_ROWS") or "").strip())
    s["run_rows"] = c.env_words("BENCH_ROWS", run_rows)
    for r in s["run_rows"]:
        if r not in ROWS:
            die(f"BENCH_ROWS: no row '{r}' (rows: {' '.join(ROWS)})")
        if r.endswith("-base") and not s["base"]:
            die(f"BENCH_ROWS: the row {r} needs BENCH_BASE")
    s["perf"] = bool(os.environ.get("BENCH_PERF"))
    return s


def f1(v):
    return c.fmt(v, 0)


def f10(v):
    return c.fmt(v, 1)


def verdict(v, op, t):
    if v is None:
        return "n/a"
    v = round(v, 2)
    return "met" if (v >= t if op == ">=" else v <= t) else "missed"


def rx(v):
    return "n/a" if v is None else f"{v:.2f}"


class Table:
    def __init__(self, s):
        self.s = s
        self.procs = c.Procs()
        self.tmpdir = self.shm = None
        self.mounted = []           # tmpfs and nbdfuse mounts, unmounted last first
        self.netns = []             # namespaces made
        self.tgt_pid = None
        self.fio = None
        self.points = []
        self.rep = 1
        self.servers = []           # the row's server pids (CPU per I/O)
        self.dl_listen, self.cork = "unix", "true"

    # ---- set-up and clean-up ---------------------------------------------
    def setup(self):
        s = self.s
        self.stamp = c.run_stamp()
        self.outdir = os.path.join(c.out_dir(), self.stamp)
        self.out = c.out_name(self.outdir)     # as the report names it
        self.report_path = os.path.join(c.out_dir(), f"{s['mode']}-{self.stamp}.md")
        os.makedirs(self.outdir, exist_ok=True)
        self.tmpdir = tempfile.mkdtemp(prefix="nbdrepl-table.", dir="/var/tmp")
        self.shm = os.path.join(self.tmpdir, "shm")
        b = os.path.join(self.tmpdir, "bin")
        os.makedirs(self.shm)
        os.makedirs(b)
        # Backing files for the biggest set of rows alive at once
        # (repl-3n's three or scale's four) plus the fuse/tgt rows.
        if c.run(["mount", "-t", "tmpfs", "-o", f"size={s['size_mib'] * 6 + 64}M",
                  "nbdrepl-bench", self.shm], 30).returncode != 0:
            die(f"could not mount a tmpfs on {self.shm}")
        self.mounted.append(self.shm)
        for f in ("plugins/repl/.libs/nbdkit-repl-plugin.so", "client/replctl",
                  "client/replbench"):
            shutil.copy2(os.path.join(c.TOP, f), b)
        self.plugin = os.path.join(b, "nbdkit-repl-plugin.so")
        self.replctl = os.path.join(b, "replctl")
        self.rb_bin = os.path.join(b, "replbench")
        self.wait_plugin = os.path.join(b, "wait-plugin.so")
        if "nbd-wait" in s["run_rows"]:
            cflags = c.run(["pkg-config", "--cflags", "nbdkit"], 30,
                           capture_output=True, text=True).stdout.split()
            if c.run([os.environ.get("CC") or "cc", "-std=gnu11", "-O2", "-Wall",
                      "-Wextra", "-Werror", "-Wno-unused-parameter", *cflags,
                      "-fPIC", "-shared", "-o", self.wait_plugin,
                      os.path.join(c.TOP, "bench/wait-plugin.c"), "-lpthread"],
                     300).returncode != 0:
                die("could not build bench/wait-plugin.c")
        if s["base"]:
            d = os.path.join(self.tmpdir, "base")
            os.makedirs(d)
            for f in ("plugins/repl/.libs/nbdkit-repl-plugin.so", "client/replctl"):
                shutil.copy2(os.path.join(s["base"], f), d)
            self.base_head = c.git_head(s["base"])
        self.hosts()

    def cleanup(self):
        if self.fio is not None and self.fio.poll() is None:
            self.fio.kill()
            self.fio.wait()
        self.stop_tgtd()
        for m in reversed(self.mounted[1:]):
            c.run(["umount", m], 30, capture_output=True)
        self.procs.stop_all()
        if self.tmpdir:
            for f in sorted(os.listdir(self.tmpdir)):
                if f.endswith(".log"):
                    shutil.copy(os.path.join(self.tmpdir, f), self.outdir)
            if self.mounted:
                c.run(["umount", self.mounted[0]], 30, capture_output=True)
            if os.environ.get("BENCH_KEEP_TMPDIR"):
                say(f"kept {self.tmpdir}")
            else:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
        for ns in self.netns:
            c.run(["ip", "netns", "del", ns], 30, capture_output=True)

    # ---- hosts: network namespaces, as scripts/netns.sh makes them -------
    def hosts(self):
        pid = os.getpid()
        prefix = f"nbt{pid}"
        net = f"10.{100 + pid % 100}.{pid % 250 + 1}"
        names = ["client", *HOSTS]
        self.addr = {h: "127.0.0.1" for h in names}
        self.ns = {}

        def ip(*a):
            return c.run(["ip", *a], 30, capture_output=True).returncode == 0

        ok = os.geteuid() == 0
        if ok:
            self.netns.append(f"{prefix}-sw")
            ok = (ip("netns", "add", f"{prefix}-sw")
                  and ip("-n", f"{prefix}-sw", "link", "add", "br0", "type", "bridge")
                  and ip("-n", f"{prefix}-sw", "link", "set", "br0", "up"))
        for i, h in enumerate(names, 1):
            if not ok:
                break
            ns = f"{prefix}-{h}"
            self.netns.append(ns)
            ok = (ip("netns", "add", ns)
                  and ip("link", "add", f"v{i}-{pid}", "netns", ns, "type", "veth",
                         "peer", "name", f"p-{h}", "netns", f"{prefix}-sw")
                  and ip("-n", f"{prefix}-sw", "link", "set", f"p-{h}", "master",
                         "br0", "up")
                  and ip("-n", ns, "link", "set", f"v{i}-{pid}", "name", "eth0")
                  and ip("-n", ns, "addr", "add", f"{net}.{i}/24", "dev", "eth0")
                  and ip("-n", ns, "link", "set", "eth0", "up")
                  and ip("-n", ns, "link", "set", "lo", "up"))
            self.addr[h], self.ns[h] = f"{net}.{i}", ns
        if ok:
            say(f"hosts: network namespaces {prefix}-{{client,a,b,c,d}} on a "
                "bridge of veth pairs")
            self.hosts_note = ("network namespaces (client, a, b, c, d) joined by "
                               "veth pairs on a bridge")
        else:
            for ns in self.netns:
                c.run(["ip", "netns", "del", ns], 30, capture_output=True)
            self.netns = []
            self.addr = {h: "127.0.0.1" for h in names}
            self.ns = {}
            say("hosts: no network namespaces here; everything on 127.0.0.1")
            self.hosts_note = "no network namespaces available: every host is 127.0.0.1"

    # ---- servers ---------------------------------------------------------
    def command(self, line):
        with open(os.path.join(self.outdir, "commands.txt"), "a") as f:
            f.write(line + "\n")

    def bg(self, name, host, *argv):
        """Start a server on host, its log in the temporary directory."""
        self.command(f"[{host}] {c.qcmd(argv)}")
        return self.procs.start(list(argv), os.path.join(self.tmpdir, f"{name}.log"),
                                netns=self.ns.get(host))

    def log_tail(self, name, n=3):
        try:
            with open(os.path.join(self.tmpdir, f"{name}.log"), errors="replace") as f:
                return " ".join(f.read().splitlines()[-n:])
        except OSError:
            return ""

    def wait_nbd(self, host, uri, pid):
        if not c.bounded_poll(lambda: c.nbd_answers(uri, self.ns.get(host)), 15,
                              0.1, lambda: self.procs.alive(pid)):
            if not self.procs.alive(pid):
                die(f"the server for {uri} exited during start")
            die(f"{uri} did not answer within 15 s")

    def wait_peers(self, sock, secs):
        if not c.bounded_poll(lambda: c.peers_in_sync(
                c.status_json(self.replctl, sock), strict=False), secs, 0.1):
            say(json.dumps(c.status_json(self.replctl, sock)))
            die(f"peers of {sock} not connected and UpToDate within {secs} s")

    def new_file(self, path):
        if c.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M",
                  f"count={self.s['size_mib']}", "status=none"], 300).returncode != 0:
            die(f"could not write {path}")

    def remove(self, prefix):
        for f in os.listdir(self.shm):
            if f.startswith(prefix):
                os.unlink(os.path.join(self.shm, f))

    def start_repl(self, name, n, dl=False, balance="round-robin"):
        """A resource name with n storage nodes on hosts a..d (node0 on a
        is the primary) and, with dl, node "dl" on client with disk: none.
        Returns (the NBD URI a client on host client uses, the pids)."""
        cfg = os.path.join(self.tmpdir, f"{name}.yaml")
        lines = [f"resource: {name}", "protocol: C", "net:",
                 "  connect-retry-max: 0.5", f"  cork: {self.cork}"]
        if dl:
            lines.append(f"read-balancing: {balance}")
        lines.append("nodes:")
        for i in range(n):
            lines += [f"  - name: node{i}", f"    id: {i}",
                      f"    address: {self.addr[HOSTS[i]]}:{c.free_port()}",
                      f"    disk: {self.shm}/{name}-node{i}.img",
                      f"    control: {self.tmpdir}/{name}-node{i}.sock"]
        if dl:
            lines += ["  - name: dl", f"    id: {n}",
                      f"    address: {self.addr['client']}:{c.free_port()}",
                      "    disk: none", f"    control: {self.tmpdir}/{name}-dl.sock"]
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        shutil.copy(cfg, self.outdir)
        for i in range(n):
            self.new_file(f"{self.shm}/{name}-node{i}.img")
            if c.run([self.replctl, "-c", cfg, "-n", f"node{i}", "create-md",
                      "--in-sync"], 60, capture_output=True).returncode != 0:
                die(f"create-md --in-sync for {name} node{i} failed")
        pids, uri = [], None
        for i in reversed(range(n)):
            p = c.free_port()
            h = HOSTS[i]
            args = ["nbdkit", "-f", "--exit-with-parent", "-i", self.addr[h],
                    "-p", str(p), self.plugin, f"config={cfg}", f"node=node{i}"]
            if i == 0 and not dl:
                args.append("role=primary")
                uri = f"nbd://{self.addr[h]}:{p}"
            pids.append(self.bg(f"{name}-node{i}", h, *args))
        if dl and self.dl_listen == "tcp":
            p = c.free_port()
            pids.append(self.bg(f"{name}-dl", "client", "nbdkit", "-f",
                                "--exit-with-parent", "-i", "127.0.0.1", "-p",
                                str(p), self.plugin, f"config={cfg}", "node=dl"))
            uri = f"nbd://127.0.0.1:{p}"
        elif dl:
            # As repl-attach runs it: the client's own host, a unix socket.
            sock = f"{self.tmpdir}/{name}-dl.nbd"
            if os.path.exists(sock):
                os.unlink(sock)
            pids.append(self.bg(f"{name}-dl", "client", "nbdkit", "-f",
                                "--exit-with-parent", "-U", sock, self.plugin,
                                f"config={cfg}", "node=dl"))
            uri = f"nbd+unix:///?socket={sock}"
        if dl:
            self.wait_peers(f"{self.tmpdir}/{name}-dl.sock", 60)
        elif n > 1:
            self.wait_peers(f"{self.tmpdir}/{name}-node0.sock", 60)
        self.wait_nbd("client", uri, pids[0])
        self.servers = list(pids)
        return uri, pids

    def stop(self, pids, prefix):
        self.procs.stop(pids)
        self.remove(prefix)

    def start_tgtd(self):
        self.tgt_port = c.free_port()
        # The control port only names a unix socket; one no other tgtd has.
        for _ in range(20):
            self.tgt_control = random.randrange(20000, 32000)  # tgtd takes < 32768
            if not os.path.exists(f"/var/run/tgtd/socket.{self.tgt_control}.lock"):
                break
        self.tgt_pid = self.bg("tgtd", "a", "tgtd", "-f", "-C", str(self.tgt_control),
                               "--iscsi", f"portal={self.addr['a']}:{self.tgt_port}")
        self.servers = [self.tgt_pid]
        ok = c.bounded_poll(lambda: self.tgtadm("--op", "show", "--mode", "target"),
                            10, 0.1, lambda: self.procs.alive(self.tgt_pid))
        if not ok:
            if not self.procs.alive(self.tgt_pid):
                die(f"tgtd exited during start: {self.log_tail('tgtd')}")
            die("tgtd did not answer within 10 s")

    def tgtadm(self, *args, out=False):
        r = c.run(["tgtadm", "-C", str(self.tgt_control), *args], 30,
                  capture_output=True, text=True)
        return r.stdout if out else r.returncode == 0

    def stop_tgtd(self):
        """tgtd ignores SIGTERM; "delete --mode system" ends it once it
        has no targets.  SIGKILL if it is still there."""
        if not self.tgt_pid:
            return
        for line in (self.tgtadm("--op", "show", "--mode", "target", out=True) or "").splitlines():
            if line.startswith("Target ") and ":" in line:
                tid = line[7:line.index(":")]
                self.tgtadm("--op", "delete", "--mode", "target", "--tid", tid, "--force")
        # It may hang up before it answers.
        self.tgtadm("--op", "delete", "--mode", "system")
        pid = self.tgt_pid
        c.bounded_poll(lambda: not self.procs.alive(pid), 5, 0.1)
        if self.procs.alive(pid):
            self.procs.procs[pid].kill()
        self.procs.stop([pid])
        for f in (f"socket.{self.tgt_control}", f"socket.{self.tgt_control}.lock"):
            try:
                os.unlink(f"/var/run/tgtd/{f}")
            except OSError:
                pass
        self.tgt_pid = None

    def tgt_export(self, tid, path):
        iqn = f"iqn.2026-01.org.nbdrepl:bench-{tid}"
        self.command(f"tgtadm -C {self.tgt_control} --lld iscsi --op new --mode target "
                     f"--tid {tid} -T {iqn}; ... logicalunit --lun 1 -b {path}; bind -I ALL")
        if not (self.tgtadm("--lld", "iscsi", "--op", "new", "--mode", "target",
                            "--tid", str(tid), "-T", iqn)
                and self.tgtadm("--lld", "iscsi", "--op", "new", "--mode",
                                "logicalunit", "--tid", str(tid), "--lun", "1", "-b", path)
                and self.tgtadm("--lld", "iscsi", "--op", "bind", "--mode", "target",
                                "--tid", str(tid), "-I", "ALL")):
            die(f"tgtadm: could not export {path}")
        return f"iscsi://{self.addr['a']}:{self.tgt_port}/{iqn}/1"

    # ---- measuring -------------------------------------------------------
    def point(self, row, w, tool, v):
        p = dict(zip(COLS, [self.rep, row, w, tool, *v]))
        self.points.append(p)

    def on(self, host, argv):
        ns = self.ns.get(host)
        return ["nsenter", f"--net=/run/netns/{ns}", "--", *argv] if ns else list(argv)

    def rb(self, row, w, uri, *extra):
        """One replbench point from host client."""
        s = self.s
        jsonf = os.path.join(self.outdir, f"{row}-{w}-r{self.rep}.json")
        argv = [self.rb_bin, "--uri", uri, *WORKLOADS[w][1].split(), "--runtime",
                str(s["runtime"]), "--size", f"{s['size_mib']}M", "--json", *extra]
        self.command("[client] " + c.qcmd(argv).replace(
            os.path.join(self.tmpdir, "bin") + "/", ""))
        say(f"[{self.rep}/{s['repeat']}] {row} / {WORKLOADS[w][0]}"
            + (f" ({' '.join(extra)})" if extra else ""))
        t0 = sum(c.proc_ticks(self.servers).values())
        with open(jsonf, "w") as out, open(os.path.join(self.tmpdir, "replbench.log"), "a") as err:
            r = c.run(self.on("client", argv), s["runtime"] + 60, stdout=out, stderr=err)
        if r.returncode != 0:
            die(f"replbench failed on {row} / {w}: {self.log_tail('replbench')}")
        t1 = sum(c.proc_ticks(self.servers).values())
        j = c.read_json(jsonf)
        if j is None:
            die(f"replbench wrote no JSON on {row} / {w}")
        # Server CPU per I/O: the row's server processes' user + system
        # time over the point (replbench's connect and teardown included,
        # a few ms), divided by its I/Os.
        ios = j["reads"] + j["writes"]
        self.point(row, w, "replbench", [
            j["iops"], j["mib_s"], j["p50_us"], j["p99_us"], j["p999_us"],
            j["cpu_us_per_io"], (t1 - t0) / c.CLK_TCK * 1e6 / ios if ios > 0 else 0])

    def fio_point(self, row, w, host, engine, **kv):
        """One fio run on bench/fio/ENGINE.fio and bench/fio/W.fio."""
        s = self.s
        base = os.path.join(self.outdir, f"{row}-{w}-r{self.rep}-fio")
        c.fio_job(base + ".fio", row, engine, w)
        kv.update(size=f"{s['size_mib']}M", runtime=s["runtime"], ramp=1)
        argv = c.fio_argv(base + ".fio", base + ".json")
        self.command(f"[{host}] {c.fio_env_words(**kv)} {c.qcmd(argv)}")
        say(f"[{self.rep}/{s['repeat']}] {row} / {WORKLOADS[w][0]} (fio)")
        t0 = sum(c.proc_ticks(self.servers).values())
        with open(os.path.join(self.tmpdir, "fio.log"), "a") as log:
            self.fio = subprocess.Popen(self.on(host, argv), env=c.fio_env(**kv),
                                        stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        try:
            rc = self.fio.wait(timeout=s["runtime"] + 60)
        except subprocess.TimeoutExpired:
            self.fio.kill()
            rc = self.fio.wait()
        self.fio = None
        if rc != 0:
            die(f"fio failed on {row} / {w}: {self.log_tail('fio')}")
        t1 = sum(c.proc_ticks(self.servers).values())
        res = c.read_json(base + ".json")
        if not res or res["jobs"][0].get("error") != 0:
            die(f"fio reported an error on {row} / {w}: see {base}.json")
        jb = res["jobs"][0]
        # Latency: the write side's for writes and the mix, the read
        # side's for pure reads (fio reports them apart; replbench
        # together).  CPU µs/IO as rates over rates: fio's own (usr_cpu +
        # sys_cpu, in % of one CPU) per I/O per second; the servers' over
        # the whole run, ramp second included, at the measured rate.
        d = jb["write"] if jb["write"]["iops"] > 0 else jb["read"]
        iops = jb["read"]["iops"] + jb["write"]["iops"]
        secs = s["runtime"] + 1
        self.point(row, w, "fio", [
            iops, (jb["read"]["bw_bytes"] + jb["write"]["bw_bytes"]) / 1048576,
            c.clat_us(d, "50.000000"), c.clat_us(d, "99.000000"),
            c.clat_us(d, "99.900000"),
            (jb["usr_cpu"] + jb["sys_cpu"]) / 100 * 1e6 / iops if iops > 0 else 0,
            (t1 - t0) / c.CLK_TCK / secs * 1e6 / iops if iops > 0 else 0])

    # ---- --table: one method per row; each starts its servers, measures
    # every workload and stops what it started.
    def row_raw(self):
        path = f"{self.shm}/raw.img"
        self.new_file(path)
        self.servers = []
        for w in WORKLOADS:
            # fio on the backing file, on host a (where the files "are").
            self.fio_point("raw", w, "a", "file", file=path)
        os.unlink(path)

    def file_row(self, name, check, plugin):
        """nbdkit with plugin file=FILE on host a; check: fio's nbd engine
        too, right after the replbench points it checks, so that both see
        the same machine."""
        self.new_file(f"{self.shm}/file.img")
        p = c.free_port()
        a = self.addr["a"]
        pid = self.bg(name, "a", "nbdkit", "-f", "--exit-with-parent", "-i", a,
                      "-p", str(p), plugin, f"file={self.shm}/file.img")
        self.servers = [pid]
        uri = f"nbd://{a}:{p}"
        self.wait_nbd("client", uri, pid)
        for w in WORKLOADS:
            self.rb(name, w, uri)
            if check and w in CROSS_CHECK:
                self.fio_point(name, w, "client", "nbd", uri=uri)
        self.stop([pid], "file.img")

    def row_nbd_file(self):
        self.file_row("nbd-file", True, "file")

    def row_nbd_wait(self):
        self.file_row("nbd-wait", False, self.wait_plugin)

    def row_repl_3n(self):
        uri, pids = self.start_repl("r3", 3)
        for w in WORKLOADS:
            self.rb("repl-3n", w, uri)
        self.stop(pids, "r3-")

    def row_repl_2n(self, row="repl-2n"):
        uri, pids = self.start_repl("r2", 2)
        for w in WORKLOADS:
            self.rb(row, w, uri)
        self.stop(pids, "r2-")

    def row_repl_2n_nocork(self):
        self.cork = "false"
        try:
            self.row_repl_2n("repl-2n-nocork")
        finally:
            self.cork = "true"

    def with_base(self, fn, *args):
        """Run a row (or start its servers) with BENCH_BASE's plugin and
        replctl; returns what fn returns."""
        plugin, replctl = self.plugin, self.replctl
        self.plugin = os.path.join(self.tmpdir, "base", "nbdkit-repl-plugin.so")
        self.replctl = os.path.join(self.tmpdir, "base", "replctl")
        try:
            return fn(*args)
        finally:
            self.plugin, self.replctl = plugin, replctl

    # The rows that have a -base row: the resource name and diskless?
    PAIRED = {"repl-2n": ("r2", False), "diskless": ("dl", True)}

    def start_paired(self, row):
        """Start the servers of repl-2n, diskless or their -base rows
        (the base ones under another resource name, so that both can run
        at once).  Returns (uri, pids, name)."""
        base = row.endswith("-base")
        name, dl = self.PAIRED[row[:-5] if base else row]
        if base:
            name += "b"
        start = lambda: self.start_repl(name, 2, dl=dl)
        uri, pids = self.with_base(start) if base else start()
        return uri, pids, name

    def run_pair(self, first, second):
        """A row and its -base row with both builds' servers up at once:
        each workload runs on one, then at once on the other, so that the
        two points of a comparison are seconds apart, not a whole row
        (on this shared machine the speed moves by half from one minute
        to the next)."""
        up = [(first, *self.start_paired(first)),
              (second, *self.start_paired(second))]
        for w in WORKLOADS:
            for row, uri, pids, _ in up:
                self.servers = list(pids)
                self.rb(row, w, uri)
                if row == "diskless" and w in CROSS_CHECK:
                    self.fio_point(row, w, "client", "nbd", uri=uri)
        for row, uri, pids, _ in up:
            if row == "diskless" and self.s["perf"]:
                self.servers = list(pids)
                self.perf(uri, pids[-1])
        for _, _, pids, name in up:
            self.stop(pids, name + "-")

    def row_repl_2n_base(self):
        self.with_base(self.row_repl_2n, "repl-2n-base")

    def diskless_row(self, row, listen):
        """diskless (unix socket, as repl-attach attaches it) or
        diskless-tcp (the same node listening on 127.0.0.1)."""
        self.dl_listen = listen
        try:
            uri, pids = self.start_repl("dl", 2, dl=True)
            for w in WORKLOADS:
                self.rb(row, w, uri)
                if row != "diskless-base" and w in CROSS_CHECK:
                    self.fio_point(row, w, "client", "nbd", uri=uri)
            if row == "diskless" and self.s["perf"]:
                self.perf(uri, pids[-1])
            self.stop(pids, "dl-")
        finally:
            self.dl_listen = "unix"

    def perf(self, uri, pid):
        """Where the diskless node's time goes: one more point, profiled."""
        if not shutil.which("perf"):
            say("BENCH_PERF: perf is not installed (apt-get install linux-perf); no profile")
            return
        data = os.path.join(self.outdir, "perf-diskless.data")
        with open(os.path.join(self.tmpdir, "perf.log"), "a") as log:
            pp = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-g",
                                   "-p", str(pid), "-o", data, "--", "sleep",
                                   str(self.s["runtime"])], stdout=log, stderr=log)
        try:
            self.rb("diskless-perf", "rw4k-qd16", uri)
        finally:
            try:
                rc = pp.wait(timeout=self.s["runtime"] + 60)
            except subprocess.TimeoutExpired:
                pp.kill()
                rc = pp.wait()
        if rc != 0:
            say(f"perf record failed: {self.log_tail('perf', 2)}")
        r = c.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                   "--sort", "comm,dso,symbol"], 120, capture_output=True, text=True)
        with open(os.path.join(self.outdir, "perf-diskless.txt"), "w") as f:
            f.write("\n".join([l for l in (r.stdout or "").splitlines() if l][:120]) + "\n")

    def row_diskless(self):
        self.diskless_row("diskless", "unix")

    def row_diskless_tcp(self):
        self.diskless_row("diskless-tcp", "tcp")

    def row_diskless_nocork(self):
        self.cork = "false"
        try:
            self.diskless_row("diskless-nocork", "unix")
        finally:
            self.cork = "true"

    def row_diskless_base(self):
        self.with_base(self.diskless_row, "diskless-base", "unix")

    def row_diskless_3(self):
        """Three storage nodes behind the diskless node (issue 18)."""
        uri, pids = self.start_repl("d3", 3, dl=True)
        for w in WORKLOADS:
            self.rb("diskless-3", w, uri)
        self.stop(pids, "d3-")

    def row_diskless_1(self):
        """The reference for read balancing, reads only."""
        uri, pids = self.start_repl("d1", 2, dl=True, balance="prefer-node0")
        for w in ("rr4k-qd16", "rrw4k-qd16"):
            self.rb("diskless-1", w, uri)
        self.stop(pids, "d1-")

    def row_tgt_file(self):
        self.start_tgtd()
        path = f"{self.shm}/tgt.img"
        self.new_file(path)
        uri = self.tgt_export(1, path)
        for w in WORKLOADS:
            self.rb("tgt-file", w, uri)
        self.stop_tgtd()
        os.unlink(path)

    def row_tgt_repl(self):
        """tgt exporting a repl-2n volume of its own through nbdfuse, all
        on a."""
        r2_uri, r2_pids = self.start_repl("tr", 2)
        self.start_tgtd()
        fuse = os.path.join(self.tmpdir, "fuse")
        os.makedirs(fuse, exist_ok=True)
        fpid = self.bg("nbdfuse", "a", "nbdfuse", fuse, r2_uri)
        self.mounted.append(fuse)
        self.servers = [self.tgt_pid, fpid, *r2_pids]
        if not c.bounded_poll(lambda: os.path.isfile(f"{fuse}/nbd"), 10, 0.1):
            die("nbdfuse did not expose the repl-2n volume within 10 s")
        uri = self.tgt_export(2, f"{fuse}/nbd")
        for w in WORKLOADS:
            self.rb("tgt-repl", w, uri)
        self.stop_tgtd()
        c.run(["umount", fuse], 30)
        self.mounted.remove(fuse)
        self.procs.stop([fpid])
        self.stop(r2_pids, "tr-")

    def rows_this_rep(self):
        """The rows in this repetition's order: a row and its -base row
        right after it trade places in every other repetition, so that
        neither build always runs first (a bias of the position, of
        what ran before, falls on both)."""
        rows = list(self.s["run_rows"])
        if self.rep % 2 == 0:
            for i in range(len(rows) - 1):
                if rows[i + 1] == rows[i] + "-base":
                    rows[i], rows[i + 1] = rows[i + 1], rows[i]
        return rows

    def run_table(self):
        rows, i = self.rows_this_rep(), 0
        while i < len(rows):
            r = rows[i]
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            if nxt is not None and (nxt == r + "-base" or r == nxt + "-base"):
                self.run_pair(r, nxt)
                i += 2
                continue
            getattr(self, "row_" + r.replace("-", "_"))()
            i += 1
        how = ("`scripts/bench --table-vm` measures LIO against the diskless transport "
               "and nbdrepl on /dev/nbd0, all in one guest kernel under TCG.")
        if os.path.isdir("/sys/kernel/config/target") and shutil.which("targetcli"):
            self.lio_note = ("LIO: not in this table, whose rows run on the host; " + how)
        else:
            self.lio_note = ("LIO: not on this host (no /sys/kernel/config/target or "
                             "no targetcli); " + how)
        say(self.lio_note)

    # ---- --scale -----------------------------------------------------------
    def run_scale(self):
        for n in (1, 2, 3, 4):
            uri, pids = self.start_repl(f"s{n}", n)
            for w in ("rw4k-qd16", "sw1m-qd8"):
                self.rb(f"nodes-{n}", w, uri)
            if n == 2:
                for j in (1, 2, 4, 8):
                    self.rb(f"conns-{j}", "rw4k-qd16", uri, "--jobs", str(j))
            self.stop(pids, f"s{n}-")

    # ---- medians, reports, charts ------------------------------------------
    def take_medians(self):
        """Each (row, workload)'s median over the repetitions, from the
        replbench points (fio's only for raw; the cross-check points stay
        in points.tsv)."""
        self.m = {}
        keys = {(p["row"], p["workload"]) for p in self.points}
        for k in keys:
            pts = [p for p in self.points if (p["row"], p["workload"]) == k
                   and (p["tool"] == "replbench" or p["row"] == "raw")]
            if pts:
                self.m[k] = {col: median(p[col] for p in pts) for col in COLS[4:]}

    def pair_ratios(self, row, w, col):
        """row / row-base for each repetition that has both (replbench)."""
        v = {}
        for p in self.points:
            if p["workload"] == w and p["tool"] == "replbench" and p["row"] in (row, row + "-base"):
                v.setdefault(p["rep"], {})[p["row"]] = p[col]
        return [x[row] / x[row + "-base"] for _, x in sorted(v.items())
                if row in x and x.get(row + "-base")]

    def g(self, row, w, col="iops"):
        return self.m.get((row, w), {}).get(col)

    def machine(self):
        self.machine_desc = (f"{c.NPROC} CPUs ({c.cpu_model()}), {c.mem_gib()}, "
                             f"{c.kernel()}, {c.os_name()}")
        pk = lambda m: c.run(["pkg-config", "--modversion", m], 10, capture_output=True,
                             text=True).stdout.strip() or "?"
        self.versions = (f"{c.version_of(['nbdkit', '--version'])}, libnbd {pk('libnbd')}, "
                         f"libiscsi {pk('libiscsi')}, tgt {c.version_of(['tgtd', '--version'])}, "
                         f"{c.version_of(['fio', '--version'])}")
        self.load_start = c.loadavg()
        self.git_head = c.git_head()

    def report_table(self):
        s, g, o = self.s, self.g, []
        add = o.append
        add(f"## nbdrepl: the seed table ({self.stamp})\n")
        add("The issue's table, for nbdrepl on one machine: 4k random write, QD16 (IOPS).\n")
        add("| raw (fio on the file) | repl 2-node, via the primary | diskless transport "
            "(2 storage nodes) | iSCSI (tgt) on the repl volume | iSCSI (tgt) on a plain "
            "file | nbdkit file (NBD) |")
        add("|---:|---:|---:|---:|---:|---:|")
        add("| " + " | ".join(f1(g(r, "rw4k-qd16")) for r in
                              ("raw", "repl-2n", "diskless", "tgt-repl", "tgt-file",
                               "nbd-file")) + " |\n")
        for w, (title, _) in WORKLOADS.items():
            add(f"### {title}\n")
            add("| row | what | IOPS | MiB/s | p50 µs | p99 µs | CPU µs/IO client | "
                "CPU µs/IO servers | vs reference |")
            add("|---|---|---:|---:|---:|---:|---:|---:|---|")
            for r in ROWS:
                if g(r, w) is None:
                    continue
                v = "" if r == "raw" else f"{rx(c.ratio(g(r, w), g(ROW_REF[r], w)))}× {ROW_REF[r]}"
                cpu = (lambda col: "n/a" if r == "raw" else f10(g(r, w, col)))
                add(f"| {r} | {ROW_DESC[r]} | {f1(g(r, w))} | {f10(g(r, w, 'mib_s'))} | "
                    f"{f10(g(r, w, 'p50_us'))} | {f10(g(r, w, 'p99_us'))} | "
                    f"{cpu('cpu_us_io')} | {cpu('server_cpu_us_io')} | {v} |")
            add("")
        add(self.lio_note + "\n")
        add("### replbench against fio's nbd engine (4k randwrite, same export)\n")
        add("Each fio point runs right after the replbench point it checks; per repetition "
            "the ratio of the two, and their median.  CPU µs/IO (medians): the load "
            "generator's own, and the servers' under each; on these 2 CPUs a load generator "
            "that costs more leaves less for the servers (IOPS ≈ 2 s / total CPU per I/O), "
            "so at QD16 the ratio also measures the two tools' own costs; at QD1 latency "
            "bounds both.\n")
        add("| row | workload | replbench IOPS (median) | fio IOPS (median) | replbench / fio, "
            "each repetition | median | client CPU µs/IO replbench / fio | servers CPU µs/IO "
            "replbench / fio |")
        add("|---|---|---:|---:|---|---:|---:|---:|")
        for w in CROSS_CHECK:
            for r in ("nbd-file", "diskless", "diskless-tcp", "diskless-nocork"):
                if g(r, w) is None:
                    continue
                fio = [p for p in self.points if p["row"] == r and p["workload"] == w
                       and p["tool"] == "fio"]
                rbp = {p["rep"]: p["iops"] for p in self.points if p["row"] == r
                       and p["workload"] == w and p["tool"] == "replbench"}
                ratios = [rbp[p["rep"]] / p["iops"] for p in fio
                          if p["iops"] > 0 and p["rep"] in rbp]
                rs = " ".join(f"{x:.2f}" for x in ratios) or "n/a"
                add(f"| {r} | {WORKLOADS[w][0]} | {f1(g(r, w))} | "
                    f"{f1(median(p['iops'] for p in fio))} | {rs} | "
                    f"{rx(median(round(x, 2) for x in ratios))} | "
                    f"{f10(g(r, w, 'cpu_us_io'))} / {f10(median(p['cpu_us_io'] for p in fio))} | "
                    f"{f10(g(r, w, 'server_cpu_us_io'))} / "
                    f"{f10(median(p['server_cpu_us_io'] for p in fio))} |")
        add("\n(target: within 10%, i.e. 0.90–1.10)\n")
        add("### The issue's targets\n")
        t1 = c.ratio(g("diskless", "rw4k-qd16"), g("tgt-file", "rw4k-qd16"))
        t2 = c.ratio(g("diskless", "rw4k-qd16"), g("tgt-repl", "rw4k-qd16"))
        t3 = c.ratio(g("repl-2n", "rw4k-qd16"), g("nbd-file", "rw4k-qd16"))
        t4 = c.ratio(g("repl-2n", "rw4k-qd1", "p50_us"), g("nbd-file", "rw4k-qd1", "p50_us"))
        t5 = c.ratio(g("diskless", "rr4k-qd16"), g("diskless-1", "rr4k-qd16"))
        add("| target | measured | goal | |")
        add("|---|---:|---:|---|")
        for name, v, op, lim, goal in (
                ("diskless transport vs tgt on a plain file, 4k randwrite QD16 IOPS", t1, ">=", 1.0, "≥ 1.0×"),
                ("diskless transport vs tgt over nbdfuse on the repl volume, 4k randwrite QD16 IOPS", t2, ">=", 3, "≥ 3×"),
                ("2-node via the primary vs nbdkit file, 4k randwrite QD16 IOPS", t3, ">=", 0.5, "≥ 0.5×"),
                ("2-node via the primary vs nbdkit file, 4k randwrite QD1 p50 latency", t4, "<=", 2, "≤ 2×"),
                ("diskless reads, round-robin over 2 nodes, vs the same diskless node reading "
                 "from one node (prefer-node0), 4k randread QD16 IOPS", t5, ">=", 1.0, "≥ 1.0×")):
            add(f"| {name} | {rx(v)}× | {goal} | {verdict(v, op, lim)} |")
        add("")
        if g("repl-2n-base", "rw4k-qd16") is not None or g("diskless-base", "rw4k-qd16") is not None:
            b1 = c.ratio(g("diskless-base", "rw4k-qd16"), g("tgt-file", "rw4k-qd16"))
            b3 = c.ratio(g("repl-2n-base", "rw4k-qd16"), g("nbd-file", "rw4k-qd16"))
            b4 = c.ratio(g("repl-2n-base", "rw4k-qd1", "p50_us"), g("nbd-file", "rw4k-qd1", "p50_us"))
            r2 = lambda x: None if x is None else round(x, 2)
            add("### This build against the base build\n")
            add(f"The base build (BENCH_BASE={s['base']}, git {self.base_head}) ran the rows "
                "repl-2n-base and diskless-base beside repl-2n and diskless: both builds' "
                "servers up at once, each workload on one and then at once on the other "
                "(which first alternates by repetition), against the same references.\n")
            add("| ratio | this build | base build | this / base | this / base, each "
                "repetition's pair | their median |")
            add("|---|---:|---:|---:|---|---:|")
            for name, t, b, row, w, col in (
                    ("repl-2n / nbd-file, 4k randwrite QD16 IOPS", t3, b3, "repl-2n", "rw4k-qd16", "iops"),
                    ("diskless / tgt-file, 4k randwrite QD16 IOPS", t1, b1, "diskless", "rw4k-qd16", "iops"),
                    ("repl-2n / nbd-file, 4k randwrite QD1 p50 latency (lower is better)", t4, b4,
                     "repl-2n", "rw4k-qd1", "p50_us")):
                pairs = self.pair_ratios(row, w, col)
                add(f"| {name} | {rx(t)}× | {rx(b)}× | {c.fratio(r2(t), r2(b))} | "
                    f"{' '.join(f'{x:.2f}' for x in pairs) or 'n/a'} | "
                    f"{rx(median(pairs)) if pairs else 'n/a'} |")
            add("\nThe two builds ran side by side, so each repetition's pair of points "
                "(seconds apart) is the comparison that the machine's swings move least; "
                "the median of those pairs is the figure to quote.  The references "
                "(nbd-file, tgt-file) are the same for both builds and drop out of it.\n")
        if g("nbd-wait", "rw4k-qd16") is not None:
            add("The floor under the 2-node row, 4k randwrite QD16 IOPS: a plugin whose writes "
                f"only wait to be woken (nbd-wait) does {c.fratio(g('nbd-wait', 'rw4k-qd16'), g('nbd-file', 'rw4k-qd16'))}× "
                f"nbd-file; repl-2n does {c.fratio(g('repl-2n', 'rw4k-qd16'), g('nbd-wait', 'rw4k-qd16'))}× nbd-wait.\n")
        add("### How\n")
        add(f"- command: `{self.command_line()}` (BENCH_RUNTIME={s['runtime']} s per point, "
            f"BENCH_SIZE_MIB={s['size_mib']} per backing file); git {self.git_head}; load "
            f"average at the end: {c.loadavg()}")
        add(f"- every row ran {s['repeat']} time(s); each number is the median of its "
            "repetitions (all of them in points.tsv and points.json)")
        add(f"- machine: {self.machine_desc}; load average at the start: {self.load_start}")
        add(f"- {self.versions}")
        add(f"- hosts: {self.hosts_note}; backing files on a tmpfs; storage nodes and tgtd on "
            "a, b, c; client and the diskless node on client")
        add("- load generator: replbench (one connection, one thread, the queue depth given) "
            "for every row but raw; raw is fio (bench/fio/file.fio: ioengine=libaio, "
            "direct=0; tmpfs: every request completes inside io_submit, so QD>1 is not real "
            "parallelism there). p50 is over reads and writes together in replbench rows; "
            "fio rows report the write side (the read side for pure reads).")
        add("- CPU µs/IO: client = replbench's own user + system time per I/O; servers = the "
            "user + system time of the row's server processes (every nbdkit of the resource, "
            "tgtd, and for tgt-repl also nbdfuse and the repl-2n nodes) per I/O, from "
            "/proc/PID/stat around the point.  With 2 CPUs for everything, IOPS is about 2 s "
            "/ (client + servers + kernel work on no one's account).")
        add("- rows run one after another (each target started, measured on all workloads, "
            "stopped), in the same order in every repetition (but a row and its -base row, "
            "which trade places in every other one), so a noisy period of the "
            "shared machine hits whichever row ran then; the repetitions spread that over time")
        add(f"- every command: {self.out}/commands.txt; every point: "
            f"{self.out}/points.tsv")
        add("")
        return "\n".join(o) + "\n"

    def command_line(self):
        s = self.s
        env = f"BENCH_REPEAT={s['repeat']} "
        if s["base"]:
            env = f"BENCH_BASE={s['base']} " + env
        if s["rows_given"]:
            env += f"BENCH_ROWS=\"{' '.join(s['run_rows'])}\" "
        return env + "scripts/bench --table"

    def charts(self):
        if not shutil.which("gnuplot"):
            say("no gnuplot: no charts")
            return
        for w, (title, _) in WORKLOADS.items():
            col = "mib_s" if w == "sw1m-qd8" else "iops"
            dat = os.path.join(self.outdir, f"chart-{w}.dat")
            with open(dat, "w") as f:
                for r in ROWS:
                    if self.g(r, w) is not None:
                        f.write(f"{r} {self.g(r, w, col)}\n")
            gp = f"""set terminal pngcairo size 900,420 font "sans,10"
set output "{c.TOP}/bench/table-{w}.png"
set title "nbdrepl seed table: {title} ({c.NPROC} CPUs, tmpfs, {self.stamp})"
set ylabel "{'MiB/s' if col == 'mib_s' else 'IOPS'}"
set style fill solid 0.7 border -1
set boxwidth 0.6
set yrange [0:*]
set grid ytics
unset key
plot "{dat}" using 0:2:xtic(1) with boxes lc rgb "#3b6ea5", "" using 0:2:(sprintf("%.0f", $2)) with labels offset 0,0.7 notitle
"""
            if c.run(["gnuplot"], 60, input=gp, text=True).returncode != 0:
                say(f"gnuplot failed for {w}")
        say("charts: bench/table-*.png")

    def report_scale(self):
        s, g, o = self.s, self.g, []
        add = o.append
        add(f"## nbdrepl: scaling ({self.stamp})\n")
        add("### Storage nodes (repl primary with 0..3 peers, protocol C, one NBD connection "
            "to the primary)\n")
        add("| storage nodes | 4k randwrite QD16 IOPS | p50 µs | p99 µs | vs 1 node | 1M write "
            "QD8 MiB/s | vs 1 node |")
        add("|---:|---:|---:|---:|---:|---:|---:|")
        for n in (1, 2, 3, 4):
            k = f"nodes-{n}"
            add(f"| {n} | {f1(g(k, 'rw4k-qd16'))} | {f10(g(k, 'rw4k-qd16', 'p50_us'))} | "
                f"{f10(g(k, 'rw4k-qd16', 'p99_us'))} | "
                f"{c.fratio(g(k, 'rw4k-qd16'), g('nodes-1', 'rw4k-qd16'))} | "
                f"{f10(g(k, 'sw1m-qd8', 'mib_s'))} | "
                f"{c.fratio(g(k, 'sw1m-qd8', 'mib_s'), g('nodes-1', 'sw1m-qd8', 'mib_s'))} |")
        add("\n### Client connections (2-node primary, replbench --jobs N, QD16 each, NBD "
            "multi-conn; the plugin allows multi-conn, nbdkit's default 16 threads)\n")
        add("| connections | 4k randwrite IOPS | p50 µs | p99 µs | vs 1 connection |")
        add("|---:|---:|---:|---:|---:|")
        for j in (1, 2, 4, 8):
            k = f"conns-{j}"
            add(f"| {j} | {f1(g(k, 'rw4k-qd16'))} | {f10(g(k, 'rw4k-qd16', 'p50_us'))} | "
                f"{f10(g(k, 'rw4k-qd16', 'p99_us'))} | "
                f"{c.fratio(g(k, 'rw4k-qd16'), g('conns-1', 'rw4k-qd16'))} |")
        add(f"\n- command: `scripts/bench --scale` (BENCH_RUNTIME={s['runtime']}, "
            f"BENCH_SIZE_MIB={s['size_mib']}); git {self.git_head}")
        add(f"- machine: {self.machine_desc}; load average at the start: {self.load_start}")
        add(f"- hosts: {self.hosts_note}; backing files on a tmpfs. Diskless mode takes at "
            "most 2 storage nodes, so the node count scales through the primary.")
        add("")
        return "\n".join(o) + "\n"


def main(args, build):
    mode = None
    for a in args:
        if a in ("--table", "--scale"):
            mode = a[2:]
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print(f"bench: unknown argument '{a}' (try --help)", file=sys.stderr)
            return 2
    c.NAME = "bench-table"
    s = settings(mode)
    build()
    t = Table(s)
    try:
        t.setup()
        t.machine()
        if mode == "table":
            for t.rep in range(1, s["repeat"] + 1):
                t.run_table()
            t.take_medians()
            text = t.report_table()
        else:
            t.run_scale()
            t.take_medians()
            text = t.report_scale()
        c.write_points(t.outdir, COLS, t.points)
    finally:
        t.cleanup()
    with open(t.report_path, "w") as f:
        f.write(text)
    print(text, end="")
    # The README's charts come from full runs only.
    if mode == "table" and not s["rows_given"]:
        t.charts()
    elif mode == "table":
        say("BENCH_ROWS: a partial run, no charts")
    say(f"report: {t.report_path}")
    return 0
