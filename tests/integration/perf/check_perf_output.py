#!/usr/bin/python3
"""Checks the output format and the results of all_reduce_perf (perf/all_reduce_perf.cc).

Usage: check_perf_output.py CHORUSRUN ALL_REDUCE_PERF [--np N ...]

Runs the binary under chorusrun on small sweeps with data checking on, parses the
nccl-tests-style table and asserts: the header columns are nccl-tests' exactly, one
"Rank" line per rank, every row has 13 numeric fields, size = count * sizeof(type),
#wrong is 0 everywhere, busbw = algbw * 2(n-1)/n within the rounding of the printed
values, the footer lines are present and the average matches the rows; and, with
CHORUS_PERF_INJECT_ERROR=1 (one bit flipped before the check), that the check reports it
and the run fails. Standard library only; exits non-zero if any case failed.
"""

import os
import re
import subprocess
import sys

TYPE_SIZES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
              "half": 2, "float": 4, "double": 8, "bfloat16": 2}
OPS = ["sum", "prod", "max", "min", "avg"]

HEADER = [
    "#                                                              out-of-place"
    "                       in-place",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)",
]

FLOAT_RE = re.compile(r"^-?\d+(\.\d+)?$")


class Failure(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise Failure(msg)


def sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def run(chorusrun, perf, np, args, timeout=90, env=None, want_status=0):
    cmd = [chorusrun, "-np", str(np), perf] + args
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, universal_newlines=True, env=env)
    except subprocess.TimeoutExpired as e:
        raise Failure("timed out after %ds: %s\n%s" % (timeout, " ".join(cmd),
                                                      (e.stdout or "")[-2000:]))
    if p.returncode != want_status:
        raise Failure("exit status %d: %s\n--- stdout\n%s\n--- stderr\n%s" % (
            p.returncode, " ".join(cmd), p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def check_output(out, np, checked, want_combos, want_sizes):
    """Parses one run's stdout; returns the number of data rows."""
    lines = out.splitlines()
    stripped = [l.rstrip() for l in lines]
    # Header: exactly once (only rank 0 prints), columns exactly as nccl-tests.
    for h in HEADER:
        expect(stripped.count(h) == 1, "header line missing or repeated: %r" % h)
    expect(sum(1 for l in lines if l.startswith("# nThread 1 nGpus 1 minBytes ")) == 1,
           "'# nThread 1 nGpus 1 minBytes' line missing or repeated")
    ranks = [int(m.group(1)) for m in (re.match(r"^#  Rank +(\d+) Group +0 Pid +\d+ on ", l)
                                       for l in lines) if m]
    expect(sorted(ranks) == list(range(np)), "rank lines %r, want 0..%d" % (ranks, np - 1))
    first_row = stripped.index(HEADER[2]) + 1

    factor = 2.0 * (np - 1) / np
    busbws, seen = [], []
    for l in lines[first_row:]:
        if not l.strip() or l.startswith("#"):
            continue
        f = l.split()
        expect(len(f) == 13, "row has %d fields, want 13: %r" % (len(f), l))
        size, count, typ, op, root = f[:5]
        expect(size.isdigit() and count.isdigit(), "size/count not integers: %r" % l)
        expect(typ in TYPE_SIZES, "unknown type %r" % typ)
        expect(op in OPS, "unknown op %r" % op)
        expect(root == "-1", "all-reduce root column must be -1: %r" % l)
        expect(int(size) == int(count) * TYPE_SIZES[typ], "size != count*sizeof(type): %r" % l)
        for base in (5, 9):
            t, alg, bus, wrong = f[base:base + 4]
            for v in (t, alg, bus):
                expect(FLOAT_RE.match(v), "non-numeric value %r in %r" % (v, l))
            expect(float(t) > 0, "time must be positive: %r" % l)
            a, b = float(alg), float(bus)
            # printed with 2 decimals: each is within 0.005 of the true value
            expect(abs(b - factor * a) <= 0.005 * (1 + factor) + 1e-9,
                   "busbw %s != algbw %s * %.4f: %r" % (bus, alg, factor, l))
            if checked:
                expect(wrong.isdigit(), "#wrong not an integer: %r" % l)
                expect(int(wrong) == 0, "%s wrong elements: %r" % (wrong, l))
            else:
                expect(wrong == "N/A", "#wrong must be N/A without -c 1: %r" % l)
            busbws.append(b)
        seen.append((typ, op, int(size) // TYPE_SIZES[typ] * TYPE_SIZES[typ]))
    expect(seen, "no data rows")
    for typ, op in want_combos:
        got = [s for (t, o, s) in seen if (t, o) == (typ, op)]
        want = [s // TYPE_SIZES[typ] * TYPE_SIZES[typ] for s in want_sizes]
        expect(got == want, "%s/%s: sizes %r, want %r" % (typ, op, got, want))
    expect(len(seen) == len(want_combos) * len(want_sizes),
           "%d rows, want %d" % (len(seen), len(want_combos) * len(want_sizes)))

    expect("# Out of bounds values : 0 OK" in stripped, "'# Out of bounds values : 0 OK' missing")
    avg = [l for l in stripped if l.startswith("# Avg bus bandwidth    : ")]
    expect(len(avg) == 1, "'# Avg bus bandwidth' line missing")
    value = float(avg[0].split(":", 1)[1])
    mean = sum(busbws) / len(busbws)
    expect(abs(value - mean) <= 0.006, "avg bus bandwidth %g, rows average %g" % (value, mean))
    expect(stripped[-1] == "#", "output must end with a '#' line")
    return len(seen)


def check_detects_errors(chorusrun, perf, np):
    """With one bit flipped on one rank before the check, every measurement must report
    exactly one wrong element and the run must fail: the check is not vacuous."""
    env = dict(os.environ, CHORUS_PERF_INJECT_ERROR="1")
    args = ["-b", "64", "-e", "4K", "-f", "4", "-n", "1", "-w", "0", "-c", "1"]
    out = run(chorusrun, perf, np, args, env=env, want_status=1)
    rows = [l.split() for l in out.splitlines() if l.strip() and not l.startswith("#")]
    expect(len(rows) == 4, "want 4 rows, got %d" % len(rows))
    for f in rows:
        expect(f[8] == "1" and f[12] == "1", "want #wrong 1 in both placements: %r" % f)
    expect("# Out of bounds values : 8 FAILED" in out.splitlines(),
           "want '# Out of bounds values : 8 FAILED'")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    chorusrun, perf = sys.argv[1], sys.argv[2]
    nps = [2, 3]
    if "--np" in sys.argv:
        nps = [int(a) for a in sys.argv[sys.argv.index("--np") + 1:]]
    small = ["-b", "8", "-e", "1M", "-f", "4", "-n", "2", "-w", "1", "-c", "1"]
    every = ["-b", "8", "-e", "4K", "-f", "8", "-n", "1", "-w", "1", "-c", "1",
             "-d", "all", "-o", "all"]
    nocheck = ["-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-w", "1", "-c", "0"]
    # The Gloo twin (all_reduce_gloo_perf) prints the same table; Gloo has no bfloat16.
    gloo = os.path.basename(perf).endswith("_gloo_perf")
    all_combos = [(t, o) for t in TYPE_SIZES for o in OPS if not (gloo and t == "bfloat16")]
    cases = [
        ("float sum 8B..1M", small, True, [("float", "sum")], sizes(8, 1 << 20, 4)),
        ("all types x all ops 8B..4K", every, True, all_combos, sizes(8, 4096, 8)),
        ("no check", nocheck, False, [("float", "sum")], sizes(1024, 4096, 2)),
    ]
    failed = 0
    for np in nps:
        for name, args, checked, combos, want_sizes in cases:
            # Gloo's twin takes 20 ms per (type, op, size) row in Gloo itself (4-6 s a
            # run): its every-type sweep runs at the first rank count only.
            if gloo and args is every and np != nps[0]:
                continue
            label = "np %d, %s" % (np, name)
            try:
                out = run(chorusrun, perf, np, args)
                rows = check_output(out, np, checked, combos, want_sizes)
                print("ok   %s (%d rows)" % (label, rows))
            except Failure as e:
                failed += 1
                print("FAIL %s: %s" % (label, e))
            sys.stdout.flush()
    label = "np %d, an injected error is detected" % nps[0]
    try:
        check_detects_errors(chorusrun, perf, nps[0])
        print("ok   %s" % label)
    except Failure as e:
        failed += 1
        print("FAIL %s: %s" % (label, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
