# nbdrepl benchmark harness: the default mode, `scripts/bench [--quick]`:
# the repl plugin against nbdkit's own file plugin, with fio's nbd engine.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
"""scripts/bench [--quick]

Measures, in one run, with fio's nbd engine (the job files in bench/fio/),
these targets, each on a preallocated (fully written, not sparse) backing
file of the same size in one temporary directory:

  file      nbdkit's file plugin: the reference
  forward   nbdkit's nbd plugin in front of a second nbdkit file (a
            naive forwarder over loopback TCP: a second reference)
  repl-1    nbdkit repl, a one-node resource (no peers)
  repl-2    nbdkit repl, primary + 1 secondary, protocol C, loopback
  repl-3    nbdkit repl, primary + 2 secondaries, protocol C, loopback
  repl-2-noal  repl-2 with `metadata: al-updates: false` (no activity
            log: what the activity log costs; not in the default set)
  repl-2-tls   repl-2 with `tls: true` and a secret (TLS 1.3 with a
            pre-shared key on the replication link: what TLS costs;
            not in the default set)
  repl-2-nocork  repl-2 with `net: cork: false` (every write sent the
            moment it arrives: what cork gains; not in the default set)

on these workloads (one fio job, one NBD connection each; resync: below):

  randwrite-qd1    4k random write, iodepth 1   (IOPS, p50/p99 clat)
  randwrite-qd16   4k random write, iodepth 16  (IOPS, p50/p99 clat)
  randread-qd16    4k random read, iodepth 16   (IOPS)
  seqwrite-1m      1M sequential write, iodepth 4 (MiB/s)
  resync           repl-2 only (n/a for the other targets): a full,
                   unthrottled resync of the whole volume (MiB/s)

resync: the repl-2 primary's volume is filled with non-zero data
(nbdcopy from a file of random data made once in the temporary
directory: a resync sends all-zero chunks as commands without data, so
the zeroes of the backing files would measure nothing), the secondary is
waited for until it is UpToDate with nothing out of sync, then `replctl
invalidate` makes it discard its data and the primary resyncs all of
it.  The time runs from the invalidate until the primary's `replctl
status --json`, polled every 50 ms, shows the peer Connected, UpToDate,
Established, out_of_sync_bytes 0 on a connection made after the
invalidate; MiB/s = resync_total_bytes / that time.  Afterwards the
secondary's backing file is compared with the random data.

Targets are interleaved per workload (file, forward, repl-1, repl-2,
repl-3, then the next workload) so that a noisy period of the shared
machine hits all of them alike: the reference and its subjects are
measured in turn, and ratios are always against `file` measured in the
same run.  The whole set can be repeated (the order rotating from one
repetition to the next) and the median is reported.  The report
(markdown) goes to stdout and to bench/out/results-DATE-COMMIT.md; the
fio job files and JSON, the node logs, points.tsv and points.json (every
point) go to bench/out/DATE-COMMIT/.  Progress goes to stderr.  The
benchmark never fails on a number: it exits non-zero only when something
broke (build, a node that would not start or died, a fio run that
failed).

Environment:
  BENCH_RUNTIME    seconds measured per point (default 10; --quick: 3)
  BENCH_RAMP       fio ramp_time in seconds (default 2; --quick: 1)
  BENCH_REPEAT     how many times to run the whole set (default 1)
  BENCH_SIZE       backing file size, e.g. 1G, 512M (default 1G)
  BENCH_TARGETS    subset/order of targets (default the first five)
  BENCH_WORKLOADS  subset/order of workloads (default all five)
  BENCH_TMPDIR     where the temporary directory is made (default
                   /var/tmp; must be a real disk file system)
  BENCH_SYNC_TIMEOUT  bound on the initial sync wait (default 600 s)
  BENCH_RESYNC_TIMEOUT  bound on one measured resync (default 300 s)
  BENCH_QUIET_WAIT    before each point, wait up to this many seconds
                      (default 15) while more than BENCH_QUIET_PCT
                      (default 25) % of the CPUs are busy with
                      something else; the point then runs anyway
  BENCH_NOISY_CORES   a point during which more than this many cores
                      (default 0.3) went to anything but the target's
                      nbdkit processes and fio (others' work, kernel
                      threads; not steal) is "noisy": it is run again, up
                      to BENCH_RETRY (default 1) times, and only the
                      last attempt counts
  BENCH_ROTATE        1 (default): repetition r runs each workload's
                      targets starting from the r-th, rotating the
                      order, because the first place in the sequence
                      measured consistently lower here; 0: always the
                      order of BENCH_TARGETS
  BENCH_KEEP_TMPDIR   set to keep the temporary directory
  BENCH_PREBUILT      set: no install-deps, no build (scripts/bench)
  BENCH_OUTDIR        where the reports and run directories go (default
                      bench/out)

Everything is bounded: every wait is a bounded poll, every fio run has a
deadline, only loopback addresses are used, and only the processes this
program started are stopped (by pid), however it exits.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import common as c
from common import say, die, fmt, fratio, ratio, median

ALL_TARGETS = ["file", "forward", "repl-1", "repl-2", "repl-3",
               "repl-2-noal", "repl-2-tls", "repl-2-nocork"]
DEFAULT_TARGETS = ALL_TARGETS[:5]
WORKLOADS = {   # name: (title, fio job file, the fio result side)
    "randwrite-qd1": ("4k randwrite QD1", "randwrite-qd1", "write"),
    "randwrite-qd16": ("4k randwrite QD16", "randwrite-qd16", "write"),
    "randread-qd16": ("4k randread QD16", "randread-qd16", "read"),
    "seqwrite-1m": ("1M seq write QD4", "seqwrite-1m", "write"),
    "resync": (None, None, None),    # not fio: see resync_point
}
COLS = ["rep", "workload", "target", "status", "iops", "p50_us", "p99_us",
        "mibs", "front_us_io", "all_us_io", "nbdkit_cores", "fio_cores",
        "machine_cores", "steal_pct", "busy_before", "foreign", "load1",
        "note", "other_cores", "warm_s", "diskread_mib"]
RESYNC_POLL = 0.05
ENV_SHOWN = ["BENCH_RUNTIME", "BENCH_RAMP", "BENCH_REPEAT", "BENCH_SIZE",
             "BENCH_TARGETS", "BENCH_WORKLOADS", "BENCH_TMPDIR",
             "BENCH_QUIET_WAIT", "BENCH_QUIET_PCT", "BENCH_NOISY_CORES",
             "BENCH_RETRY", "BENCH_ROTATE"]


def settings(quick):
    s = {}
    if quick:
        s["runtime"], s["ramp"] = 3, 1
    else:
        s["runtime"] = c.env_int("BENCH_RUNTIME", 10, 1)
        s["ramp"] = c.env_int("BENCH_RAMP", 2)
    s["repeat"] = c.env_int("BENCH_REPEAT", 1, 1)
    size = os.environ.get("BENCH_SIZE") or "1G"
    m = re.fullmatch(r"([0-9]+)([gGmM])", size)
    if not m:
        die(f"BENCH_SIZE must look like 1G or 512M, not '{size}'")
    s["size"] = size
    s["size_mib"] = int(m[1]) * (1024 if m[2] in "gG" else 1)
    if s["size_mib"] < 64:
        die("BENCH_SIZE must be at least 64M")
    s["targets"] = c.env_words("BENCH_TARGETS", DEFAULT_TARGETS)
    for t in s["targets"]:
        if t not in ALL_TARGETS:
            die(f"unknown target '{t}' ({' '.join(ALL_TARGETS)})")
    s["workloads"] = c.env_words("BENCH_WORKLOADS", WORKLOADS)
    for w in s["workloads"]:
        if w not in WORKLOADS:
            die(f"unknown workload '{w}' ({' '.join(WORKLOADS)})")
    s["sync_timeout"] = c.env_int("BENCH_SYNC_TIMEOUT", 600)
    s["resync_timeout"] = c.env_int("BENCH_RESYNC_TIMEOUT", 300, 1)
    s["quiet_wait"] = c.env_int("BENCH_QUIET_WAIT", 15)
    s["quiet_pct"] = c.env_int("BENCH_QUIET_PCT", 25)
    s["noisy_cores"] = c.env_float("BENCH_NOISY_CORES", 0.3)
    s["retry"] = c.env_int("BENCH_RETRY", 1)
    s["rotate"] = c.env_int("BENCH_ROTATE", 1)
    s["tmpbase"] = os.environ.get("BENCH_TMPDIR") or "/var/tmp"
    s["do_resync"] = "resync" in s["workloads"] and "repl-2" in s["targets"]
    return s


def title(s, w):
    if w != "resync":
        return WORKLOADS[w][0]
    mib = s["size_mib"]
    return (f"resync {mib // 1024} GiB (full, unthrottled)" if mib % 1024 == 0
            else f"resync {mib} MiB (full, unthrottled)")


def nodes_of(t):
    """The number of repl nodes of target t (0: not a repl target)."""
    return int(t.split("-")[1]) if t.startswith("repl-") else 0


def backing_files(t):
    if t in ("file", "forward"):
        return [f"{t}.img"]
    return [f"{t}-node{i}.img" for i in range(nodes_of(t))]


class Run:
    def __init__(self, s, quick):
        self.s, self.quick = s, quick
        self.procs = c.Procs()
        self.tmpdir = None
        self.logs_copied = False
        self.port, self.pids, self.front, self.sock = {}, {}, {}, {}
        self.cmds = {}              # server name -> command line
        self.fio_shown = {}         # (w, t) -> the command shown
        self.points = []            # every point, a dict of COLS
        self.failures = 0
        self.resync_cmds = None

    # ---- set-up ----------------------------------------------------------
    def setup(self):
        s = self.s
        self.stamp = c.run_stamp()
        self.outdir = os.path.join(c.out_dir(), self.stamp)
        self.out = c.out_name(self.outdir)     # as the report names it
        self.report_path = os.path.join(c.out_dir(), f"results-{self.stamp}.md")
        for d in ("fio", "logs"):
            os.makedirs(os.path.join(self.outdir, d), exist_ok=True)
        os.makedirs(s["tmpbase"], exist_ok=True)
        self.tmpdir = tempfile.mkdtemp(prefix="nbdrepl-bench.", dir=s["tmpbase"])
        # One consistent build for the whole run, even if someone
        # rebuilds the tree meanwhile.
        b = os.path.join(self.tmpdir, "bin")
        os.mkdir(b)
        for f in ("plugins/repl/.libs/nbdkit-repl-plugin.so", "client/replctl"):
            shutil.copy2(os.path.join(c.TOP, f), b)
        self.plugin = os.path.join(b, "nbdkit-repl-plugin.so")
        self.replctl = os.path.join(b, "replctl")

    def cleanup(self):
        self.procs.stop_all()
        if not self.tmpdir:
            return
        if not self.logs_copied:
            self.copy_logs()
        if os.environ.get("BENCH_KEEP_TMPDIR"):
            say(f"kept {self.tmpdir}")
        else:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def copy_logs(self):
        for f in sorted(os.listdir(self.tmpdir)):
            if f.endswith(".log"):
                shutil.copy(os.path.join(self.tmpdir, f),
                            os.path.join(self.outdir, "logs"))

    def machine(self):
        say("checking how busy the machine is")
        self.load_start = c.loadavg()
        self.busy_start = c.busy_pct(3)
        self.foreign_start = c.foreign_procs(set())
        ps = c.run(["ps", "-eo", "pid=,pcpu=,etime=,args=", "--sort=-pcpu"], 10,
                   capture_output=True, text=True).stdout or ""
        ps = [l.split(None, 1) for l in ps.splitlines() if l.strip()]
        self.top_start = "\n".join([       # not this program itself
            l[1].strip()[:160] for l in ps if int(l[0]) != os.getpid()
            and float(l[1].split()[0]) > 1.0][:8])
        self.busy_warn = ""
        if float(self.load_start.split()[0]) > c.NPROC / 2 or self.busy_start > 20:
            self.busy_warn = (
                f"WARNING: the machine was busy when the benchmark started "
                f"(loadavg {self.load_start} on {c.NPROC} CPUs, "
                f"{self.busy_start}% CPU busy over 3 s, {self.foreign_start} "
                f"nbdkit/fio processes of others): expect noise.")
            say(self.busy_warn)
        df = c.run(["df", "-T", self.tmpdir], 10, capture_output=True,
                   text=True).stdout.splitlines()
        f = df[1].split() if len(df) > 1 else ["?", "?"]
        self.fstype = f"{f[1]} ({f[0]})"
        self.nbdkit_version = c.version_of(["nbdkit", "--version"])
        self.fio_version = c.version_of(["fio", "--version"])
        self.git_head, self.git_dirty = c.git_head(), c.git_dirty()
        r = c.run(["sha256sum", self.plugin], 30, capture_output=True, text=True)
        self.plugin_sha = r.stdout[:16]
        self.cflags = ""
        try:
            with open(os.path.join(c.TOP, "Makefile")) as mk:
                for line in mk:
                    if line.startswith("CFLAGS = "):
                        self.cflags = line[9:].strip()
                        break
        except OSError:
            pass

    def backing(self):
        s = self.s
        files = [f for t in s["targets"] for f in backing_files(t)]
        st = os.statvfs(self.tmpdir)
        avail = st.f_bavail * st.f_frsize // 1048576
        need = (len(files) + s["do_resync"]) * s["size_mib"] + 1024
        if avail < need:
            die(f"{self.tmpdir}: {avail} MiB free, need {need} MiB for "
                f"{len(files) + s['do_resync']} x {s['size']}")
        say(f"writing {len(files)} backing files of {s['size']} (zeroes, "
            f"fully allocated) in {self.tmpdir}")
        for f in files:
            if c.run(["dd", "if=/dev/zero", f"of={self.tmpdir}/{f}", "bs=1M",
                      f"count={s['size_mib']}", "conv=fsync", "status=none"],
                     600).returncode != 0:
                die(f"dd {f} failed")
        self.random_data = os.path.join(self.tmpdir, "random.data")
        if s["do_resync"]:
            say(f"writing {s['size']} of random data for the resync workload")
            if c.run(["dd", "if=/dev/urandom", f"of={self.random_data}",
                      "bs=1M", f"count={s['size_mib']}", "iflag=fullblock",
                      "status=none"], 600).returncode != 0:
                die(f"dd {self.random_data} failed")

    # ---- targets ---------------------------------------------------------
    def start_nbdkit(self, name, *args):
        argv = ["nbdkit", "-f", "--exit-with-parent", "-i", "127.0.0.1", *args]
        self.cmds[name] = c.qcmd(argv)
        return self.procs.start(argv, os.path.join(self.tmpdir, f"{name}.log"))

    def log_tail(self, name, n=5):
        try:
            with open(os.path.join(self.tmpdir, f"{name}.log")) as f:
                return " ".join(f.read().splitlines()[-n:])
        except OSError:
            return ""

    def wait_nbd(self, name, pid, port):
        if not c.bounded_poll(lambda: c.nbd_answers(f"nbd://127.0.0.1:{port}"),
                              15, 0.1, lambda: self.procs.alive(pid)):
            if not self.procs.alive(pid):
                die(f"{name} exited during start: {self.log_tail(name)}")
            die(f"{name}: NBD port {port} did not answer within 15 s")

    def wait_ctl(self, name, pid, sock):
        ok = c.bounded_poll(
            lambda: c.run([self.replctl, "-s", sock, "status"], 5,
                          capture_output=True).returncode == 0,
            15, 0.1, lambda: self.procs.alive(pid))
        if not ok:
            if not self.procs.alive(pid):
                die(f"{name} exited during start: {self.log_tail(name)}")
            die(f"{name}: control socket did not answer within 15 s")

    def repl_config(self, t):
        n = nodes_of(t)
        lines = [f"resource: bench{n}", "protocol: C"]
        if t.endswith("-tls"):
            lines += [f"secret: bench-secret-for-{t}", "tls: true"]
        lines += ["net:", "  connect-retry-max: 0.5"]
        if t.endswith("-nocork"):
            lines.append("  cork: false")
        if t.endswith("-noal"):
            lines += ["metadata:", "  al-updates: false"]
        lines.append("nodes:")
        for i in range(n):
            lines += [f"  - name: node{i}", f"    id: {i}",
                      f"    address: 127.0.0.1:{c.free_port()}",
                      f"    disk: {t}-node{i}.img",
                      f"    control: {t}-node{i}.sock"]
        return "\n".join(lines) + "\n"

    def start_target(self, t):
        tmp = self.tmpdir
        if t == "file":
            p = c.free_port()
            pid = self.start_nbdkit("file", "-p", str(p), "file",
                                    f"file={tmp}/file.img")
            self.port[t], self.pids[t], self.front[t] = p, [pid], pid
            self.wait_nbd("file", pid, p)
        elif t == "forward":
            p2 = c.free_port()
            back = self.start_nbdkit("forward-back", "-p", str(p2), "file",
                                     f"file={tmp}/forward.img")
            self.wait_nbd("forward-back", back, p2)
            p = c.free_port()
            pid = self.start_nbdkit("forward", "-p", str(p), "nbd",
                                    "hostname=127.0.0.1", f"port={p2}")
            self.port[t], self.pids[t], self.front[t] = p, [pid, back], pid
            self.wait_nbd("forward", pid, p)
        else:
            n = nodes_of(t)
            cfg = os.path.join(tmp, f"{t}.yaml")
            # Owner-only: a node refuses a config holding a secret that
            # others can read (repl-2-tls).
            fd = os.open(cfg, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(self.repl_config(t))
            self.pids[t] = []
            for i in reversed(range(n)):
                p = c.free_port()
                args = ["-p", str(p), self.plugin, f"config={cfg}", f"node=node{i}"]
                if i == 0:
                    args.append("role=primary")
                pid = self.start_nbdkit(f"{t}-node{i}", *args)
                if i == 0:
                    self.port[t], self.front[t] = p, pid
                self.pids[t].insert(0, pid)
                self.wait_ctl(f"{t}-node{i}", pid, f"{tmp}/{t}-node{i}.sock")
            self.sock[t] = f"{tmp}/{t}-node0.sock"

    def alive(self, t):
        return all(self.procs.alive(p) for p in self.pids[t])

    def status(self, t):
        return c.status_json(self.replctl, self.sock[t])

    def wait_synced(self, t, secs):
        return c.bounded_poll(lambda: c.peers_in_sync(self.status(t)), secs,
                              0.2, lambda: self.alive(t))

    def start_targets(self):
        s = self.s
        say(f"starting targets: {' '.join(s['targets'])}")
        t0 = time.monotonic()
        for t in s["targets"]:
            self.start_target(t)
        for t in s["targets"]:
            if t in self.sock and not self.wait_synced(t, s["sync_timeout"]):
                say(json.dumps(self.status(t)))
                die(f"{t}: peers not UpToDate within {s['sync_timeout']} s (initial sync)")
        for t in s["targets"]:
            if t in self.sock:
                self.wait_nbd(f"{t}-node0", self.front[t], self.port[t])
        self.sync_secs = f"{time.monotonic() - t0:.1f}"
        say(f"all targets up; initial syncs done after {self.sync_secs} s")
        self.sync_files([f for t in s["targets"] for f in backing_files(t)], None)

    def sync_files(self, files, point):
        paths = [os.path.join(self.tmpdir, f) for f in files]
        if c.run(["sync", *paths], 300).returncode != 0:
            if point is None:
                say("sync of the backing files timed out")
            else:
                add_note(point, "sync after the point timed out")

    # ---- one point -------------------------------------------------------
    def new_point(self, rep, w, t):
        p = {k: "" for k in COLS}
        p.update(rep=rep, workload=w, target=t, status="ok")
        return p

    def before_point(self, t, point):
        """Warm the page cache, wait a bounded time for a quieter
        machine; fills warm_s, busy_before, load1, foreign."""
        # This VM pages out memory left idle for a minute (DAMON), and a
        # target waits longer than that between its points: without this
        # a point would start with a partly cold cache depending on its
        # place in the order.
        t0 = time.monotonic()
        for f in backing_files(t):
            if not read_through(os.path.join(self.tmpdir, f), 300):
                add_note(point, f"reading {f} into the page cache failed")
        point["warm_s"] = f"{time.monotonic() - t0:.1f}"
        waited = 0
        busy = c.busy_pct(1)
        while busy > self.s["quiet_pct"] and waited < self.s["quiet_wait"]:
            busy = c.busy_pct(1)
            waited += 1
        if waited:
            add_note(point, f"waited {waited} s for a quieter machine")
        point["busy_before"] = busy
        point["load1"] = c.loadavg(1)
        point["foreign"] = c.foreign_procs(set(self.procs.procs))

    def noisy(self, point, attempt, mcores, ncores, fcores):
        """Sets the point's other_cores; True if it was noisy."""
        other = mcores - ncores - fcores
        point["other_cores"] = f"{other:.2f}"
        if other <= self.s["noisy_cores"]:
            return False
        if attempt < self.s["retry"]:
            point["status"] = "noisy"
            add_note(point, f"noisy: {other:.2f} cores used by others/kernel "
                     "during the window; not counted, run again")
        else:
            add_note(point, f"noisy: {other:.2f} cores used by others/kernel "
                     "during the window (no retry left; counted)")
        return True

    def after_point(self, t, point):
        if not self.alive(t):
            add_note(point, f"a node of {t} died during the point")
            point["status"] = "failed"
            self.failures += 1
        elif t in self.sock:
            st = self.status(t)
            if not c.peers_in_sync(st):
                add_note(point, f"after the point: {c.peers_brief(st)}")

    def check_before(self, t, point):
        if t in self.sock and not c.peers_in_sync(self.status(t)):
            add_note(point, "peers not UpToDate before the point; waited")
            if not self.wait_synced(t, 120):
                point["note"] = ("peers not UpToDate before the point "
                                 f"(waited 120 s): {c.peers_brief(self.status(t))}")

    def fio_point(self, rep, w, t, attempt):
        """One fio run; returns True when it was noisy."""
        s = self.s
        tag = f"{w}-{t}-r{rep}" + (f"-a{attempt}" if attempt else "")
        point = self.new_point(rep, w, t)
        if not self.alive(t):
            point.update(status="dead", note=f"a node of {t} is not running")
            self.failures += 1
            return self.record(point, False)
        self.check_before(t, point)
        self.before_point(t, point)

        _, job, side = WORKLOADS[w]
        jobfile = os.path.join(self.outdir, "fio", f"{tag}.fio")
        jsonf = os.path.join(self.outdir, "fio", f"{tag}.json")
        c.fio_job(jobfile, w, "nbd", job)
        kv = dict(uri=f"nbd://127.0.0.1:{self.port[t]}", size=f"{s['size_mib']}M",
                  runtime=s["runtime"], ramp=s["ramp"])
        argv = c.fio_argv(jobfile, jsonf)
        shown = c.fio_env_words(**kv) + " " + c.qcmd(argv)
        with open(os.path.join(self.outdir, "fio-commands.txt"), "a") as f:
            f.write(shown + "\n")
        if (w, t) not in self.fio_shown and not attempt:
            self.fio_shown[w, t] = shown.replace(self.outdir + "/", "")
        out = open(os.path.join(self.outdir, "fio", f"{tag}.out"), "wb")
        fio = subprocess.Popen(argv, env=c.fio_env(**kv), stdout=out,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out.close()
        self.fio = fio
        try:
            # CPU over the measured window (after the ramp).
            time.sleep(s["ramp"] + 0.3)
            fpids = [fio.pid, *c.descendants(fio.pid)]    # fio and its jobs
            ours = set(self.procs.procs) | set(fpids)
            t0 = time.monotonic()
            a_f, a_a = c.proc_ticks([self.front[t]]), c.proc_ticks(self.pids[t])
            a_p, a_m = c.proc_ticks(fpids), c.machine_ticks()
            pgin0 = c.vmstat("pgpgin")
            foreign = max(point["foreign"], c.foreign_procs(ours))
            time.sleep(s["runtime"] - 0.6 if s["runtime"] > 1 else 0.4)
            t1 = time.monotonic()
            b_f, b_a = c.proc_ticks([self.front[t]]), c.proc_ticks(self.pids[t])
            b_p, b_m = c.proc_ticks(fpids), c.machine_ticks()
            pgin1 = c.vmstat("pgpgin")
            point["foreign"] = max(foreign, c.foreign_procs(ours))
            try:
                rc = fio.wait(timeout=s["ramp"] + s["runtime"] + 60)
            except subprocess.TimeoutExpired:
                fio.kill()
                rc = fio.wait()
        finally:
            if fio.poll() is None:
                fio.kill()
                fio.wait()
            self.fio = None
        point["diskread_mib"] = (pgin1 - pgin0) // 1024
        if rc != 0:
            point["status"] = "failed"
            add_note(point, "fio failed: " + tail(os.path.join(
                self.outdir, "fio", f"{tag}.out"), 3))
        res = None
        if point["status"] == "ok":
            res = c.read_json(jsonf)
            if not res or res["jobs"][0].get("error") != 0:
                point["status"] = "failed"
                add_note(point, "fio reported an error: " + (
                    json.dumps([j.get("error") for j in res["jobs"]]) if res
                    else tail(jsonf, 3)))
        noisy = False
        if point["status"] == "ok":
            d = res["jobs"][0][side]
            iops = d["iops"]
            win = max(t1 - t0, 1e-9)
            front = c.ticks_delta(a_f, b_f) / c.CLK_TCK / win
            allc = c.ticks_delta(a_a, b_a) / c.CLK_TCK / win
            fioc = c.ticks_delta(a_p, b_p) / c.CLK_TCK / win
            mach = (b_m[0] - a_m[0]) / c.CLK_TCK / win
            tot = b_m[2] - a_m[2]
            steal = 100 * (b_m[1] - a_m[1]) / tot if tot > 0 else 0
            point.update(
                iops=iops, p50_us=c.clat_us(d, "50.000000"),
                p99_us=c.clat_us(d, "99.000000"), mibs=d["bw_bytes"] / 1048576,
                front_us_io=f"{1e6 * front / iops if iops > 0 else 0:.1f}",
                all_us_io=f"{1e6 * allc / iops if iops > 0 else 0:.1f}",
                nbdkit_cores=f"{allc:.2f}", fio_cores=f"{fioc:.2f}",
                machine_cores=f"{mach:.2f}", steal_pct=f"{steal:.1f}")
            # CPU used during the window by anything but this target's
            # nbdkit processes and fio: kernel threads (writeback,
            # softirq) and other people's work.  A single CPU-bound
            # stranger shows up as only ~0.35 core here, because fio and
            # nbdkit have more threads.
            noisy = self.noisy(point, attempt, mach, allc, fioc)
        else:
            self.failures += 1
        self.after_point(t, point)
        # Write back our dirty pages now, not during the next point.
        self.sync_files(backing_files(t), point)
        return self.record(point, noisy)

    def record(self, point, noisy):
        s, p = self.s, self.points
        p.append(point)
        pt = point
        if pt["status"] in ("ok", "noisy") and pt["workload"] != "resync":
            msg = (f"{pt['iops']:8.0f} IOPS  p50 {pt['p50_us']:7.1f} us  "
                   f"p99 {pt['p99_us']:7.1f} us  {pt['mibs']:7.1f} MiB/s  "
                   f"cpu {float(pt['all_us_io']):5.1f} us/io  "
                   f"(busy before {pt['busy_before']}%)")
        elif pt["status"] in ("ok", "noisy"):
            msg = (f"{pt['mibs']:7.1f} MiB/s  nbdkit {pt['nbdkit_cores']} cores  "
                   f"(busy before {pt['busy_before']}%)")
        else:
            msg = pt["status"]
        if pt["note"]:
            msg += f" [{pt['note']}]"
        say(f"[{pt['rep']}/{s['repeat']}] {title(s, pt['workload']):<18} "
            f"{pt['target']:<8} {msg}")
        return noisy

    # ---- the resync workload ---------------------------------------------
    def resync_point(self, rep, w, t, attempt):
        """On repl-2 only: fill the volume with random data, invalidate
        the secondary and time the full resync that follows (see the
        module's description).  Returns True when it was noisy."""
        s = self.s
        if t != "repl-2":
            say(f"[{rep}/{s['repeat']}] {title(s, w):<18} {t:<8} "
                "n/a (measured on repl-2 only)")
            return False
        tag = f"{w}-{t}-r{rep}" + (f"-a{attempt}" if attempt else "")
        point = self.new_point(rep, w, t)
        prim, sec, peer = self.sock[t], f"{self.tmpdir}/{t}-node1.sock", "node1"
        uri = f"nbd://127.0.0.1:{self.port[t]}"
        rdir = os.path.join(self.outdir, "resync")
        os.makedirs(rdir, exist_ok=True)
        plog = os.path.join(self.tmpdir, f"{t}-node0.log")

        def fail(msg, status="failed"):
            point["status"] = status
            add_note(point, msg)
            self.failures += 1
            return self.record(point, False)

        if not self.alive(t):
            return fail(f"a node of {t} is not running", "dead")
        if self.resync_cmds is None:
            self.resync_cmds = "\n".join([
                c.qcmd(["nbdcopy", "--flush", self.random_data, uri]) + "  # bounded by 600 s",
                c.qcmd([self.replctl, "-s", sec, "invalidate"]),
                c.qcmd([self.replctl, "-s", prim, "status", "--json"])
                + f"  # every {RESYNC_POLL} s, bounded by {s['resync_timeout']} s"])

        # Non-zero data on the whole volume, written back to disk now (not
        # during the measurement), and the secondary in sync with it.
        t0 = time.monotonic()
        with open(os.path.join(rdir, f"{tag}.nbdcopy.out"), "wb") as out:
            r = c.run(["nbdcopy", "--flush", self.random_data, uri], 600,
                      stdout=out, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            return fail("filling the volume with nbdcopy failed: "
                        + tail(os.path.join(rdir, f"{tag}.nbdcopy.out"), 3))
        fill_s = time.monotonic() - t0
        self.sync_files(backing_files(t), point)
        if not self.wait_synced(t, 120):
            return fail("peers not UpToDate within 120 s after the fill: "
                        + c.peers_brief(self.status(t)))
        self.before_point(t, point)
        loglines = count_lines(plog)

        # The measurement: invalidate, then poll the primary until the
        # peer is in sync again on a connection made after the invalidate
        # (its connected_ms is no older than the invalidate).
        trace = open(os.path.join(rdir, f"{tag}.poll.tsv"), "w")
        trace.write("elapsed_us\tconnection\tdisk\treplication\tout_of_sync_bytes"
                    "\tresync_total_bytes\tresync_done_bytes\tconnected_ms\n")
        ours = set(self.procs.procs)
        me = os.getpid()
        a_a, a_m = c.proc_ticks(self.pids[t]), c.machine_ticks()
        a_s = c.proc_ticks([me], children=True)
        pgin0 = c.vmstat("pgpgin")
        f0 = c.foreign_procs(ours)
        start = time.monotonic()
        deadline = start + s["resync_timeout"]
        r = c.run([self.replctl, "-s", sec, "invalidate"], 10,
                  capture_output=True, text=True)
        if r.returncode != 0:
            trace.close()
            return fail(f"replctl invalidate failed: {(r.stdout or '') + (r.stderr or '')}".strip())
        done = lo = moved = None
        prev_tb, last, final, polls = None, "", None, 0
        while True:
            tb = time.monotonic()
            st = c.status_json(self.replctl, prim)
            ta = time.monotonic()
            el = ta - start
            polls += 1
            pe = next((p for p in (st or {}).get("peers", [])
                       if p.get("name") == peer), None)
            if pe is not None:
                v = [pe.get(k) for k in ("connection", "disk", "replication",
                     "out_of_sync_bytes", "resync_total_bytes",
                     "resync_done_bytes", "connected_ms")]
                trace.write(f"{int(el * 1e6)}\t" + "\t".join(map(str, v)) + "\n")
                conn, disk, repl, oos, total, rdone, cms = v
                last = (f"{conn} {disk} {repl} out_of_sync_bytes={oos} "
                        f"resync_total_bytes={total} resync_done_bytes={rdone} "
                        f"connected_ms={cms}")
                if conn == "Connected" and cms * 1000 <= el * 1e6 and total > 0:
                    if moved is None and rdone >= total:
                        moved = el
                    if disk == "UpToDate" and repl == "Established" and oos == 0:
                        done, final = el, st
                        lo = (prev_tb if prev_tb is not None else start) - start
                        break
            else:
                trace.write(f"{int(el * 1e6)}\tno answer or no peer {peer}\n")
            if not self.alive(t) or ta >= deadline:
                break
            prev_tb = tb
            time.sleep(RESYNC_POLL)
        trace.close()
        b_a, b_m = c.proc_ticks(self.pids[t]), c.machine_ticks()
        b_s = c.proc_ticks([me], children=True)
        pgin1 = c.vmstat("pgpgin")
        point["foreign"] = max(point["foreign"], f0, c.foreign_procs(ours))
        point["diskread_mib"] = (pgin1 - pgin0) // 1024
        if done is None:
            if not self.alive(t):
                return fail(f"a node of {t} died during the resync (last seen: {last or 'nothing'})")
            return fail(f"resync not finished within {s['resync_timeout']} s "
                        f"(last seen: {last or 'nothing'})")
        with open(os.path.join(rdir, f"{tag}.final.json"), "w") as f:
            json.dump(final, f)
            f.write("\n")

        pe = next(p for p in final["peers"] if p.get("name") == peer)
        total = pe["resync_total_bytes"]
        decision = pe.get("sync_decision") or "?"
        if not c.peers_in_sync(final):
            add_note(point, "the final answer is not in sync for every peer")
        mibs = total / 1048576 / done
        win = done if done > 0 else 1
        tot = b_m[2] - a_m[2]
        ncores = c.ticks_delta(a_a, b_a) / c.CLK_TCK / win
        fcores = c.ticks_delta(a_s, b_s) / c.CLK_TCK / win
        mcores = (b_m[0] - a_m[0]) / c.CLK_TCK / win
        point.update(mibs=round(mibs, 1), nbdkit_cores=f"{ncores:.2f}",
                     fio_cores=f"{fcores:.2f}", machine_cores=f"{mcores:.2f}",
                     steal_pct=f"{100 * (b_m[1] - a_m[1]) / tot if tot > 0 else 0:.1f}")
        logline = ""
        with open(plog, errors="replace") as f:
            for i, line in enumerate(f):
                if i >= loglines:
                    m = re.search(r"resync finished, .* in [0-9.]* s", line)
                    if m:
                        logline = m[0]
        moved_s = ("? s" if moved is None else
                   f"{moved:.3f} s, i.e. {total / 1048576 / moved:.0f} MiB/s until then")
        add_note(point, f"resync_total_bytes {total} in {done:.3f} s (in sync seen "
                 f"between +{lo:.3f} and +{done:.3f} s, {polls} polls; all bytes "
                 f"acknowledged seen at +{moved_s}; sync_decision {decision}; "
                 f"primary log: {logline or 'no ' + chr(39) + 'resync finished' + chr(39) + ' line'}; "
                 f"fill {fill_s:.1f} s)")
        if total != s["size_mib"] * 1048576:
            add_note(point, "resync_total_bytes is not the volume size "
                     f"({s['size_mib'] * 1048576})")
        # The resync must have delivered the data.
        rc = c.run(["cmp", "-s", self.random_data,
                    os.path.join(self.tmpdir, f"{t}-node1.img")], 300).returncode
        if rc == 0:
            point["note"] += "; secondary's disk identical to the data"
        elif rc == 1:
            point["status"] = "failed"
            point["note"] += "; the secondary's disk DIFFERS from the data after the resync"
        else:
            point["note"] += f"; comparing the secondary's disk with the data failed (cmp exit {rc})"
        noisy = False
        if point["status"] == "ok":
            noisy = self.noisy(point, attempt, mcores, ncores, fcores)
        else:
            self.failures += 1
        self.after_point(t, point)
        self.sync_files(backing_files(t), point)
        return self.record(point, noisy)

    # ---- the run ---------------------------------------------------------
    def measure(self):
        s = self.s
        say(f"runtime {s['runtime']} s + ramp {s['ramp']} s per point, "
            f"{len(s['workloads'])} workloads x {len(s['targets'])} targets x {s['repeat']}")
        self.fio = None
        t0 = time.monotonic()
        for rep in range(1, s["repeat"] + 1):
            # Repetition r starts each workload with target r (rotating),
            # so that no target always holds the same place in the
            # sequence.
            order = list(s["targets"])
            if s["rotate"]:
                k = (rep - 1) % len(order)
                order = order[k:] + order[:k]
            for w in s["workloads"]:
                runner = self.resync_point if w == "resync" else self.fio_point
                for t in order:
                    noisy = runner(rep, w, t, 0)
                    a = 1
                    while a <= s["retry"] and noisy:
                        noisy = runner(rep, w, t, a)
                        a += 1
        self.bench_secs = int(time.monotonic() - t0)
        self.load_end = c.loadavg()
        self.loglines = {f: count_lines(os.path.join(self.tmpdir, f))
                         for f in os.listdir(self.tmpdir) if f.endswith(".log")}
        say("stopping the targets")
        self.procs.stop_all()
        self.copy_logs()
        self.logs_copied = True
        c.write_points(self.outdir, COLS, self.points)

    # ---- the report ------------------------------------------------------
    def medians(self):
        m = {}
        for w in self.s["workloads"]:
            for t in self.s["targets"]:
                for col in ("iops", "p50_us", "p99_us", "mibs", "front_us_io",
                            "all_us_io"):
                    m[w, t, col] = median(
                        float(p[col]) for p in self.points
                        if p["workload"] == w and p["target"] == t
                        and p["status"] == "ok" and p[col] != "")
        return m

    def report(self):
        s, M = self.s, self.medians()
        o = []
        add = o.append

        def cell(w, t, col, d):
            v, f = M[w, t, col], M[w, "file", col] if "file" in s["targets"] else None
            if v is None:
                return "n/a"
            if t == "file" or f is None:
                return fmt(v, d)
            return f"{fmt(v, d)} ({fratio(v, f)}×)"

        def check(name, v, op, lim, detail=""):
            v = None if v is None else round(v, 2)     # as printed
            if v is None:
                verdict = "n/a"
            elif (v >= lim) if op == ">=" else (v <= lim):
                verdict = "MET"
            else:
                verdict = "MISSED"
            vs = f"{v:.2f}×" if v is not None else "not measured"
            return (f"- **{verdict}** — {name}: {vs} (target {op} {lim}×)"
                    + (f" — {detail}" if detail else ""))

        envs = "".join(f"{v}={c.shlex.quote(os.environ[v])} " for v in ENV_SHOWN
                       if os.environ.get(v))
        cmdline = "scripts/bench" + (" --quick" if self.quick else "")
        tg = " ".join(s["targets"])
        rot = ("; repetition r starts from the r-th target, rotating"
               if s["rotate"] and s["repeat"] > 1 else "")
        add(f"# nbdrepl benchmark, {self.stamp}\n")
        add(f"Command: `{envs}{cmdline}` — {s['runtime']} s measured + {s['ramp']} s "
            f"ramp per point, {s['repeat']} repetition(s) (median reported), backing "
            f"files of {s['size']} each, targets interleaved per workload (for each "
            f"workload: {tg}{rot}). Before each point the harness waits up to "
            f"{s['quiet_wait']} s while more than {s['quiet_pct']}% of the CPUs are busy "
            f"with something else, and a point during which more than "
            f"{s['noisy_cores']:g} cores went to anything but the target's nbdkit "
            f"processes and fio is run again (up to {s['retry']} time(s); only the "
            f"last attempt counts). Wall time of the measurements: {self.bench_secs} s; "
            f"initial syncs took {self.sync_secs} s.\n")
        add("## Machine\n")
        add(f"- CPUs: {c.NPROC} ({c.cpu_model()}), memory {c.mem_gib()}")
        add(f"- kernel: {c.kernel()}")
        add(f"- {self.nbdkit_version}, {self.fio_version}")
        add(f"- backing files: {s['tmpbase']}, {self.fstype}, {s['size']} each, "
            "written with dd from /dev/zero (fully allocated) and in the page cache")
        add(f"- nbdrepl: git {self.git_head} ({self.git_dirty} tracked files modified "
            f"in the tree), plugin sha256 {self.plugin_sha}…, CFLAGS {self.cflags or 'unknown'}")
        add(f"- load at start: loadavg {self.load_start}, {self.busy_start}% CPU busy "
            f"over 3 s, {self.foreign_start} nbdkit/fio processes of others; loadavg "
            f"at end: {self.load_end}")
        if self.busy_warn:
            add(f"\n**{self.busy_warn}**")
        if self.top_start:
            add("\nProcesses using CPU at start (ps %cpu > 1, lifetime average):\n")
            add("```\n" + self.top_start + "\n```")
        add("\n## Results\n")
        add(f"Median of {s['repeat']} run(s). In parentheses: ratio to `file` in the "
            "same run (for IOPS and MiB/s higher is better; for latencies lower is "
            "better). Latencies are fio completion latencies (clat) in µs.\n")
        add("| workload | metric |" + "".join(f" {t} |" for t in s["targets"]))
        add("|---|---|" + "---:|" * len(s["targets"]))
        metrics = {"randwrite-qd1": [("iops", "IOPS", 0), ("p50_us", "p50 µs", 1),
                                     ("p99_us", "p99 µs", 1)],
                   "randread-qd16": [("iops", "IOPS", 0)],
                   "seqwrite-1m": [("mibs", "MiB/s", 0)],
                   "resync": [("mibs", "MiB/s", 0)]}
        metrics["randwrite-qd16"] = metrics["randwrite-qd1"]
        for w in s["workloads"]:
            for i, (col, label, d) in enumerate(metrics[w]):
                row = f"| {title(s, w)} | {label} |" if i == 0 else f"| | {label} |"
                add(row + "".join(f" {cell(w, t, col, d)} |" for t in s["targets"]))
        if "resync" in s["workloads"]:
            add("")
            add(f"{title(s, 'resync')}: repl-2 only (n/a elsewhere). The primary's volume "
                "is filled with random data (nbdcopy), then `replctl invalidate` on the "
                "secondary; the time runs from the invalidate until the primary's "
                f"`replctl status --json`, polled every {RESYNC_POLL * 1000:g} ms, shows "
                "the peer Connected, UpToDate, Established, out_of_sync_bytes 0 on a "
                "connection made after the invalidate (so it includes the reconnect and "
                "the end of the resync; the poll can add up to one interval). MiB/s = "
                "resync_total_bytes / that time. No resync rate is configured "
                "(unthrottled). Per point: the bytes, the poll bracket and the primary "
                "log's own figure are in the notes below.")
        fio_wls = [w for w in s["workloads"] if w != "resync"]
        if fio_wls:
            add("\nServer CPU per I/O (µs of CPU time per request, from /proc/PID/stat "
                "over the measured window; `front` = the process fio talks to, `all` = "
                "every nbdkit process of the target, secondaries included). Tick "
                "resolution is 10 ms, so small values are approximate.\n")
            add("| workload |" + "".join(f" {t} front / all |" for t in s["targets"]))
            add("|---|" + "---:|" * len(s["targets"]))
            for w in fio_wls:
                add(f"| {title(s, w)} |" + "".join(
                    f" {fmt(M[w, t, 'front_us_io'], 1)} / {fmt(M[w, t, 'all_us_io'], 1)} |"
                    for t in s["targets"]))
        add("\n## Targets\n")
        nnoisy = sum(1 for p in self.points
                     if p["status"] == "ok" and "no retry left" in p["note"])
        if nnoisy:
            add(f"Caution: {nnoisy} of the counted points were still noisy after the "
                "retry (see the notes below); a verdict that rests on one of them says "
                "more about the machine than about nbdrepl.\n")
        g = lambda w, t, col: M.get((w, t, col))
        add(check("2-node 4k randwrite QD16 IOPS vs file",
                  ratio(g("randwrite-qd16", "repl-2", "iops"), g("randwrite-qd16", "file", "iops")), ">=", 0.5))
        add(check("2-node 1M seq write MiB/s vs file",
                  ratio(g("seqwrite-1m", "repl-2", "mibs"), g("seqwrite-1m", "file", "mibs")), ">=", 0.7))
        add(check("2-node 4k randwrite QD1 p50 latency vs file",
                  ratio(g("randwrite-qd1", "repl-2", "p50_us"), g("randwrite-qd1", "file", "p50_us")), "<=", 2))
        rs, sw = g("resync", "repl-2", "mibs"), g("seqwrite-1m", "repl-2", "mibs")
        if rs is not None and sw is not None:
            d = f"resync {fmt(rs, 0)} MiB/s, repl-2 1M seq write {fmt(sw, 0)} MiB/s"
        elif rs is not None:
            d = (f"resync {fmt(rs, 0)} MiB/s; the 1M seq write reference on repl-2 "
                 "was not measured in this run")
        elif sw is not None:
            d = (f"the resync was not measured in this run (repl-2 1M seq write "
                 f"{fmt(sw, 0)} MiB/s)")
        else:
            d = ("neither the resync nor the 1M seq write reference on repl-2 was "
                 "measured in this run")
        add(check("2-node resync MiB/s vs repl-2 1M seq write MiB/s", ratio(rs, sw),
                  ">=", 0.8, d))
        r1 = []
        for w in fio_wls:
            col = "mibs" if w == "seqwrite-1m" else "iops"
            r1.append("  " + check(f"repl-1 {title(s, w)} {'MiB/s' if col == 'mibs' else col} vs file",
                                   ratio(g(w, "repl-1", col), g(w, "file", col)), ">=", 0.9))
            if w == "randwrite-qd1":
                r1.append("  " + check(f"repl-1 {title(s, w)} p50 latency vs file",
                                       ratio(g(w, "repl-1", "p50_us"), g(w, "file", "p50_us")),
                                       "<=", 1.1))
        j = "\n".join(r1)
        r1_all = ("MISSED" if "**MISSED**" in j else "n/a" if "**MET**" not in j
                  else "MET where measured" if "**n/a**" in j else "MET")
        add(f"- **{r1_all}** — repl-1 within 10% of file on every workload "
            "(throughput ≥ 0.9×, QD1 p50 ≤ 1.1×; faster than file counts as met):")
        o.extend(r1)
        # Each variant of repl-2 in the run, against repl-2.
        for v, head in (("repl-2-tls", "The cost of TLS (repl-2-tls against repl-2, same run)"),
                        ("repl-2-nocork", "What cork does (repl-2-nocork, net: cork: false, "
                         "against repl-2, same run)")):
            if v not in s["targets"]:
                continue
            add(f"\n### {head}\n")
            add(f"| workload | repl-2 | {v} | ratio |")
            add("|---|---|---|---|")
            for w in fio_wls:
                col, u = ("mibs", "MiB/s") if w == "seqwrite-1m" else ("iops", "IOPS")
                add(f"| {title(s, w)} {u} | {fmt(g(w, 'repl-2', col), 0)} | "
                    f"{fmt(g(w, v, col), 0)} | {fratio(g(w, v, col), g(w, 'repl-2', col))}× |")
                if w in ("randwrite-qd1", "randwrite-qd16"):
                    add(f"| {title(s, w)} p50 µs | {fmt(g(w, 'repl-2', 'p50_us'), 1)} | "
                        f"{fmt(g(w, v, 'p50_us'), 1)} | "
                        f"{fratio(g(w, v, 'p50_us'), g(w, 'repl-2', 'p50_us'))}× |")
        add("\n## Every point (noise)\n")
        add("status: ok (counted in the medians), noisy (not counted: run again), failed, "
            "dead. busy before = % of all CPUs busy in the 1 s before the point (nothing "
            "of ours runs then); machine = CPUs busy during the measured window (all "
            "processes, incl. irq/softirq, not steal), nbdkit/fio = cores used by the "
            "target's nbdkit processes / by fio (for the resync: by the harness's status "
            "poll), other = machine − nbdkit − fio (kernel threads, softirq, other "
            "people's work); steal = % of CPU time the hypervisor gave to other guests; "
            "disk read = what the whole machine read from disk during the window "
            "(pgpgin; ~0 when the page cache is warm); warm-up = seconds to read the "
            "target's backing files into the page cache before the point; others = most "
            "nbdkit/fio processes not ours seen before or during the point.\n")
        add("| rep | workload | target | status | IOPS | p50 µs | p99 µs | MiB/s | nbdkit "
            "cores | fio cores | machine cores | other cores | steal % | disk read MiB | "
            "warm-up s | busy before % | others | load1 | notes |")
        add("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            "---:|---:|---:|---|")
        nf = lambda x, d: "" if x == "" else f"{float(x):.{d}f}"
        for p in self.points:
            add("| " + " | ".join(str(x) for x in (
                p["rep"], p["workload"], p["target"], p["status"], nf(p["iops"], 0),
                nf(p["p50_us"], 1), nf(p["p99_us"], 1), nf(p["mibs"], 1),
                p["nbdkit_cores"], p["fio_cores"], p["machine_cores"],
                p["other_cores"], p["steal_pct"], p["diskread_mib"], p["warm_s"],
                p["busy_before"], p["foreign"], p["load1"], p["note"])) + " |")
        add("\n## Errors in the node logs\n")
        errs = []
        for f in sorted(self.loglines):
            n = self.loglines[f]
            with open(os.path.join(self.tmpdir, f), errors="replace") as fh:
                for i, line in enumerate(fh):
                    if "error" in line.lower():
                        errs.append(f"{f[:-4]} ({'run' if i < n else 'shutdown'}): "
                                    + line.rstrip("\n"))
        if self.resync_cmds:
            add("The resync workload's `replctl invalidate` drops the repl-2 connection on "
                "purpose: each resync point leaves a 'connection closed by peer' error on "
                "repl-2-node0 and an 'invalidated; reconnecting for a full sync' one on "
                "repl-2-node1.\n")
        if not errs:
            add(f"No line containing 'error' in any nbdkit log (logs: {self.out}/logs/).")
        else:
            add(f"{len(errs)} line(s) containing 'error' (first 40 shown, verbatim; logs: "
                f"{self.out}/logs/):\n")
            add("```\n" + "\n".join(errs[:40]) + "\n```")
        add("\n## Commands\n")
        add("Servers (ports picked free at start, all bound to 127.0.0.1):\n")
        add("```")
        for t in s["targets"]:
            names = (["file"] if t == "file" else ["forward-back", "forward"] if t == "forward"
                     else [f"{t}-node{i}" for i in reversed(range(nodes_of(t)))])
            for nm in names:
                add(self.cmds[nm].replace(self.tmpdir + "/", "$TMP/"))
        add("```")
        for t in s["targets"]:
            if nodes_of(t):
                add(f"\n{t} configuration ($TMP/{t}.yaml):\n")
                with open(os.path.join(self.tmpdir, f"{t}.yaml")) as f:
                    add("```yaml\n" + f.read() + "```")
        if fio_wls:
            add(f"\nfio (one line per workload and target; every repetition is the same "
                f"line but for its file names; all in {self.out}/fio-commands.txt; "
                "each job file, kept in fio/, is `[global]`, `include bench/fio/nbd.fio`, "
                "`include bench/fio/WORKLOAD.fio`, `[WORKLOAD]`):\n")
            add("```")
            for w in fio_wls:
                for t in s["targets"]:
                    if (w, t) in self.fio_shown:
                        add(self.fio_shown[w, t])
            add("```")
        if self.resync_cmds:
            add("\nresync (repl-2; $TMP/random.data written once with dd from /dev/urandom):\n")
            add("```\n" + self.resync_cmds.replace(self.tmpdir + "/", "$TMP/") + "\n```")
        add(f"\nRaw data: {self.out}/ (points.tsv, points.json, fio/*.fio, "
            "fio/*.json, logs/" + (", resync/: nbdcopy output, every status poll, the "
                                   "final status" if self.resync_cmds else "") + ").")
        return "\n".join(o) + "\n"


# ---- helpers -------------------------------------------------------------

def add_note(point, msg):
    point["note"] = f"{point['note']}; {msg}" if point["note"] else msg


def tail(path, n):
    try:
        with open(path, errors="replace") as f:
            return " ".join(l.replace("\t", " ") for l in f.read().splitlines()[-n:])
    except OSError:
        return ""


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def read_through(path, secs):
    """Read path (into the page cache), bounded by secs."""
    deadline = time.monotonic() + secs
    try:
        with open(path, "rb", buffering=0) as f:
            while f.read(1 << 20):
                if time.monotonic() > deadline:
                    return False
    except OSError:
        return False
    return True


def main(args, build):
    quick = False
    for a in args:
        if a == "--quick":
            quick = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print(f"bench: unknown argument '{a}' (try --help)", file=sys.stderr)
            return 2
    c.NAME = "bench"
    s = settings(quick)
    build()
    r = Run(s, quick)
    try:
        r.setup()
        r.machine()
        r.backing()
        r.start_targets()
        r.measure()
        text = r.report()
    finally:
        if getattr(r, "fio", None) is not None and r.fio.poll() is None:
            r.fio.kill()
            r.fio.wait()
        r.cleanup()
    with open(r.report_path, "w") as f:
        f.write(text)
    print(text, end="")
    say(f"report: {r.report_path}")
    if r.failures:
        say(f"{r.failures} point(s) failed (see the notes column and the logs)")
        return 1
    return 0
