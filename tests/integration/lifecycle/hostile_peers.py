#!/usr/bin/env python3
"""Strangers on every listener of a running job: the job completes, each stranger is logged.

Usage: hostile_peers.py --worker PATH [--np 4] [--iters 6]

Starts N ranks of kill_worker itself (CHORUS_INIT=tcp://127.0.0.1:PORT, CHORUS_SHM_DISABLE=1
so every pair uses the tcp transport and its listeners), rank 0 first. Then it attacks:
  * the bootstrap root (rank 0 serves it at PORT) before the other ranks exist, i.e. during
    init;
  * every listening socket the rank processes own (found through /proc/<pid>/fd and
    /proc/net/tcp: the ranks' bootstrap listeners and the tcp transport listeners), as soon
    as it appears (during init) and again once every rank has completed an all-reduce
    (after init).
Each attack opens one connection of each kind:
  garbage    64 random bytes, then close
  secret     a well-formed bootstrap hello behind a wrong 16-byte secret, and a tcp hello
             with the right magic but a wrong token
  huge       every length/count field at its maximum (nranks, rank, address length,
             message size, socket index, stripe length) behind a wrong secret / token
  insider    the right secret (the test sets CHORUS_SECRET), then such a hello and a
             message header of 2^64-1 bytes
  stall      3 bytes, then silence, held open until the job ends
  reset      connect, then an immediate RST
The job (a few checked all-reduces of mixed sizes with pauses, then destroy) must complete
on every rank with correct results, and every stranger whose bytes a rank read must be
named (by its address) in a WARN line. Connections that no rank ever read (a listener
that is no longer served once init is over keeps them in its backlog until the process
exits) are counted and reported, not required to be logged.
"""
import argparse
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from ports import free_port  # noqa: E402  (a port no other socket is handed meanwhile)


def log(msg):
    print("hostile_peers: " + msg, flush=True)


def listening_ports(pids):
    """(address, port) of TCP sockets in LISTEN state owned by any of pids (a wildcard
    address is reached through loopback)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                except OSError:
                    continue
                m = re.match(r"socket:\[(\d+)\]", t)
                if m:
                    inodes.add(m.group(1))
        except OSError:
            continue
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and parts[9] in inodes:
                        a, p = parts[1].split(":")
                        if len(a) == 8:
                            host = socket.inet_ntop(socket.AF_INET, bytes.fromhex(a)[::-1])
                            host = "127.0.0.1" if host == "0.0.0.0" else host
                        else:
                            raw = bytes.fromhex(a)
                            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                            host = socket.inet_ntop(socket.AF_INET6, raw)
                            host = "::1" if host == "::" else host
                        ports.add((host, int(p, 16)))
        except OSError:
            pass
    return ports


def boot_hello(magic=0x4F4C4843, version=1, kind=1, rank=0, nranks=4, addrlen=16):
    # struct Hello {u32 magic; u16 version; u16 kind; i32 rank; i32 nranks; WireAddr{u32 len; u8[28]}}
    return struct.pack("<IHHii I28s", magic, version, kind, rank, nranks, addrlen, b"\0" * 28)


TCP_HELLO_MAGIC = 0x43484F5248454C4F
SECRET = os.urandom(16)


class Attacker:
    def __init__(self):
        self.strangers = []  # (label, local port)
        self.held = []
        self.refused = 0
        self.lock = threading.Lock()

    def _conn(self, target):
        host, port = target
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.settimeout(2)
        try:
            s.connect((host, port))
        except OSError:
            with self.lock:
                self.refused += 1
            s.close()
            return None
        return s

    def attack(self, port, when):
        kinds = {
            "garbage": lambda: os.urandom(64),
            "secret": lambda: os.urandom(16) + boot_hello() +
            struct.pack("<QQii", TCP_HELLO_MAGIC, random.getrandbits(64), 1, 0),
            "huge": lambda: b"\xff" * 16 +
            boot_hello(kind=3, rank=0x7FFFFFFF, nranks=0x7FFFFFFF, addrlen=0xFFFFFFFF) +
            struct.pack("<IiQ", 0x47534D43, 0, (1 << 64) - 1) +
            struct.pack("<QQii", TCP_HELLO_MAGIC, 0, 0x7FFFFFFF, 0x7FFFFFFF) +
            struct.pack("<QIIIHBB", 0, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0xFFFF, 0, 0xC7),
            # A garbled insider: the right secret (CHORUS_SECRET), then a hello whose every
            # field is out of range, then a message header of 2^64-1 bytes.
            "insider": lambda: SECRET +
            boot_hello(kind=1 if when == "init-root" else 3, rank=0x7FFFFFFF,
                       nranks=0x7FFFFFFF, addrlen=0xFFFFFFFF) +
            struct.pack("<IiQ", 0x47534D43, 0, (1 << 64) - 1),
        }
        for kind, payload in kinds.items():
            s = self._conn(port)
            if s is None:
                continue
            lp = s.getsockname()[:2]
            try:
                s.sendall(payload())
            except OSError:
                pass
            with self.lock:
                self.strangers.append(("%s/%s->%s:%d" % (when, kind, port[0], port[1]), lp))
            time.sleep(0.05)
            s.close()
        s = self._conn(port)
        if s is not None:
            try:
                s.sendall(b"\x01\x02\x03")
            except OSError:
                pass
            with self.lock:
                self.strangers.append(("%s/stall->%s:%d" % (when, port[0], port[1]),
                                       s.getsockname()[:2]))
                self.held.append(s)
        s = self._conn(port)
        if s is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # RST; nothing to log necessarily


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--iters", type=int, default=6)
    a = ap.parse_args()
    port = free_port()
    env = dict(os.environ, CHORUS_INIT="tcp://127.0.0.1:%d" % port, CHORUS_WORLD_SIZE=str(a.np),
               CHORUS_TIMEOUT_S="60", CHORUS_SHM_DISABLE="1", CHORUS_DEBUG="INFO", CHORUS_SECRET=SECRET.hex(),
               CHORUS_DEBUG_SUBSYS="NET,BOOTSTRAP")
    env.pop("CHORUS_INIT_SERVED", None)
    att = Attacker()
    procs = []
    outs = {}

    # The tcp transport's listeners are open only while connections are made (a few ms).
    # The INFO line announcing one is the earliest sign: the reader thread that sees it
    # stops every rank at once (SIGSTOP), so that the listeners stay open while the main
    # loop connects (the kernel completes connections to a stopped process), then resumes.
    freeze = {"lock": threading.Lock(), "frozen": False, "ports": set()}

    def on_line(line):
        m = re.search(r"TCP listening on \[?([0-9a-f.:]+)\]?:(\d+) ", line)
        if not m:
            return
        with freeze["lock"]:
            freeze["ports"].add((m.group(1), int(m.group(2))))
            if not freeze["frozen"]:
                freeze["frozen"] = True
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGSTOP)

    def reader(stream, into, watch):
        for x in stream:
            into.append(x)
            if watch:
                on_line(x)

    def start(r):
        e = dict(env, CHORUS_RANK=str(r))
        p = subprocess.Popen([a.worker, "--bytes", str(4 << 20 if r >= 0 else 0), "--iters",
                              str(a.iters), "--sleep-ms", "400"], env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        outs[r] = {"out": [], "err": []}
        procs.append(p)
        for name, stream in (("out", p.stdout), ("err", p.stderr)):
            threading.Thread(target=reader, args=(stream, outs[r][name], name == "err"),
                             daemon=True).start()

    ok = False
    try:
        start(0)
        # During init: the root (rank 0 serves it) before anyone else has checked in.
        t0 = time.time()
        root = ("127.0.0.1", port)
        while root not in listening_ports([procs[0].pid]) and time.time() - t0 < 20:
            time.sleep(0.02)
        att.attack(root, "init-root")
        # During init: all but the last rank are up and wait in the bootstrap for it.
        for r in range(1, a.np - 1):
            start(r)
        attacked = {root}
        t0 = time.time()
        while len(listening_ports([p.pid for p in procs])) < a.np and time.time() - t0 < 20:
            time.sleep(0.02)
        for pt in sorted(listening_ports([p.pid for p in procs]) - attacked):
            attacked.add(pt)
            att.attack(pt, "init")
        start(a.np - 1)
        after_done = False
        t0 = time.time()
        while any(p.poll() is None for p in procs):
            if time.time() - t0 > 240:
                raise SystemExit("hostile_peers: FAIL: the job did not finish in 240 s")
            ports = listening_ports([p.pid for p in procs if p.poll() is None])
            with freeze["lock"]:
                if freeze["frozen"]:
                    ports |= freeze["ports"] | listening_ports([p.pid for p in procs])
                    for pt in sorted(ports - attacked):
                        attacked.add(pt)
                        att.attack(pt, "init")
                    freeze["frozen"] = False
                    for p in procs:
                        if p.poll() is None:
                            p.send_signal(signal.SIGCONT)
                    continue
            for pt in sorted(ports - attacked):
                attacked.add(pt)
                att.attack(pt, "init")
            iters_seen = all(any(" iter 0 ok" in l for l in outs[r]["out"]) for r in outs)
            if iters_seen and not after_done:
                after_done = True
                for pt in sorted(ports):
                    att.attack(pt, "after")
            time.sleep(0.002)
        rcs = [p.returncode for p in procs]
        for r in range(a.np):
            done = any("DONE" in l for l in outs[r]["out"])
            iters = sum(1 for l in outs[r]["out"] if " ok" in l)
            if rcs[r] != 0 or not done or iters != a.iters:
                log("rank %d: exit %d, %d of %d iterations, done=%s\n%s%s" % (
                    r, rcs[r], iters, a.iters, done, "".join(outs[r]["out"][-5:]),
                    "".join(outs[r]["err"][-20:])))
                raise SystemExit(1)
        log("the job completed on all %d ranks: %d checked all-reduces each" % (a.np, a.iters))
        err = "".join("".join(outs[r]["err"]) for r in outs)
        warns = [l for l in err.splitlines() if " WARN " in l]
        logged, unread = [], []
        for label, lp in att.strangers:
            src = ("[%s]:%d" if ":" in lp[0] else "%s:%d") % lp
            hit = [w for w in warns if re.search(re.escape(src) + r"\b", w)]
            (logged if hit else unread).append((label, lp, hit[:1]))
        for label, lp, hit in logged[:int(os.environ.get("HOSTILE_SHOW", "8"))]:
            log("  %s (from %s:%d): %s" % (label, lp[0], lp[1], hit[0].split(": ", 1)[-1][:150]))
        log("%d strangers connected (%d more refused: listener already closed); %d named in "
            "WARN lines, %d never read by a rank" % (len(att.strangers), att.refused,
                                                     len(logged), len(unread)))
        for label, lp, _ in unread:
            log("  never read: %s (from %s:%d)" % (label, lp[0], lp[1]))
        # Every stranger that reached a served listener during init must be logged.
        must = [u for u in unread if u[0].startswith("init")]
        if must:
            log("FAIL: strangers during init not logged: %s" % [u[0] for u in must])
            raise SystemExit(1)
        if not any(l.startswith("init-root") for l, _, _ in logged):
            log("FAIL: no root stranger logged")
            raise SystemExit(1)
        ok = True
        log("PASS")
    finally:
        for s in att.held:
            s.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
