#!/usr/bin/python3
"""Checks the output of one of the perf binaries other than all_reduce_perf.

Usage: check_coll_output.py CHORUSRUN BINARY [--np N ...]

The collective is read from the binary's name (all_gather_perf, ..., barrier_perf; the
Gloo twins <coll>_gloo_perf too, whose -d all has no bfloat16). Runs
it under chorusrun on a small sweep with data checking on, for each np, with -r np-1 for
the rooted collectives, and asserts the nccl-tests conventions: the header columns, 13
fields per row, the size column (per-rank bytes: count * sizeof(type), times nranks for
all_gather / reduce_scatter / alltoall / scatter / gather, 0 for barrier), the redop
column ("none" unless the collective reduces), the root column (-r value or -1),
busbw = algbw * the collective's factor, #wrong 0 (in-place sendrecv: N/A, as in
nccl-tests), the footer. Then, with CHORUS_PERF_INJECT_ERROR=1, that a flipped bit is
reported. Shares the table checks' helpers with check_perf_output.py.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_perf_output import (FLOAT_RE, HEADER, OPS, TYPE_SIZES, Failure, expect, run,  # noqa: E402
                               sizes)

# name: (busbw factor as a function of np, reduces, rooted, size = count * np?)
COLLS = {
    "all_gather": (lambda n: (n - 1) / n, False, False, True),
    "reduce_scatter": (lambda n: (n - 1) / n, True, False, True),
    "broadcast": (lambda n: 1.0, False, True, False),
    "reduce": (lambda n: 1.0, True, True, False),
    "alltoall": (lambda n: (n - 1) / n, False, False, True),
    "scatter": (lambda n: (n - 1) / n, False, True, True),
    "gather": (lambda n: (n - 1) / n, False, True, True),
    "sendrecv": (lambda n: 1.0, False, False, False),
    "barrier": (lambda n: 0.0, False, False, False),
}


def data_rows(out):
    lines = [l.rstrip() for l in out.splitlines()]
    for h in HEADER:
        expect(lines.count(h) == 1, "header line missing or repeated: %r" % h)
    first = lines.index(HEADER[2]) + 1
    return [l for l in lines[first:] if l.strip() and not l.startswith("#")], lines


def check_output(coll, out, np, root, want_sizes, types=("float",)):
    factor, reduces, rooted, times_np = COLLS[coll]
    factor = factor(np)
    rows, lines = data_rows(out)
    expect(sum(1 for l in lines if l.startswith("#  Rank ")) == np, "want %d rank lines" % np)
    got_sizes, busbws = [], []
    for l in rows:
        f = l.split()
        expect(len(f) == 13, "row has %d fields, want 13: %r" % (len(f), l))
        size, count, typ = int(f[0]), int(f[1]), f[2]
        expect(typ in TYPE_SIZES, "unknown type %r" % typ)
        expect(f[3] in OPS if reduces else f[3] == "none", "redop column %r: %r" % (f[3], l))
        expect(f[4] == (str(root) if rooted else "-1"), "root column %r: %r" % (f[4], l))
        mult = np if times_np else 1
        expect(size == count * mult * TYPE_SIZES[typ], "size != count*%d*sizeof: %r" % (mult, l))
        got_sizes.append(size)
        for base, placement in ((5, "out-of-place"), (9, "in-place")):
            t, alg, bus, wrong = f[base:base + 4]
            for v in (t, alg, bus):
                expect(FLOAT_RE.match(v), "non-numeric value %r in %r" % (v, l))
            expect(float(t) > 0 or count == 0, "time must be positive: %r" % l)
            a, b = float(alg), float(bus)
            expect(abs(b - factor * a) <= 0.005 * (1 + factor) + 1e-9,
                   "busbw %s != algbw %s * %.4f: %r" % (bus, alg, factor, l))
            if coll == "sendrecv" and placement == "in-place":
                expect(wrong == "N/A", "in-place sendrecv is not checked (N/A): %r" % l)
            else:
                expect(wrong == "0", "%s: #wrong %s: %r" % (placement, wrong, l))
            busbws.append(b)
    if coll == "barrier":
        expect(got_sizes == [0], "barrier: want one row of size 0, got %r" % got_sizes)
    else:
        # The driver's order: types, then ops (-o all on reducing collectives), then sizes.
        want = []
        for typ in types:
            per = (np if times_np else 1) * TYPE_SIZES[typ]
            for _ in (OPS if reduces and len(types) > 1 else [None]):
                want += [s // per * per for s in want_sizes]
        expect(got_sizes == want, "sizes %r, want %r" % (got_sizes, want))
    expect("# Out of bounds values : 0 OK" in lines, "'# Out of bounds values : 0 OK' missing")
    avg = [l for l in lines if l.startswith("# Avg bus bandwidth    : ")]
    expect(len(avg) == 1, "'# Avg bus bandwidth' line missing")
    expect(abs(float(avg[0].split(":", 1)[1]) - sum(busbws) / len(busbws)) <= 0.006,
           "avg bus bandwidth does not match the rows")
    expect(lines[-1] == "#", "output must end with a '#' line")
    return len(rows)


def check_detects_errors(chorusrun, perf, coll, np):
    """One bit flipped before the check: each checked measurement reports exactly 1."""
    env = dict(os.environ, CHORUS_PERF_INJECT_ERROR="1")
    args = ["-b", "64", "-e", "4K", "-f", "4", "-n", "1", "-w", "0", "-c", "1"]
    out = run(chorusrun, perf, np, args, env=env, want_status=1)
    rows, _ = data_rows(out)
    expect(len(rows) == 4, "want 4 rows, got %d" % len(rows))
    in_place = "N/A" if coll == "sendrecv" else "1"
    for l in rows:
        f = l.split()
        expect(f[8] == "1" and f[12] == in_place, "want #wrong 1 / %s: %r" % (in_place, l))


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    chorusrun, perf = sys.argv[1], sys.argv[2]
    coll = os.path.basename(perf)[:-len("_perf")]
    # Gloo twins (<coll>_gloo_perf) print the same table; Gloo has no bfloat16.
    all_types = tuple(TYPE_SIZES)
    gloo = coll.endswith("_gloo")
    if gloo:
        coll = coll[:-len("_gloo")]
        all_types = tuple(t for t in TYPE_SIZES if t != "bfloat16")
    expect(coll in COLLS, "unknown collective binary %r" % perf)
    nps = [2, 3]
    if "--np" in sys.argv:
        nps = [int(a) for a in sys.argv[sys.argv.index("--np") + 1:]]
    rooted = COLLS[coll][2]
    failed = 0
    for np in nps:
        root = np - 1 if rooted else -1
        args = ["-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1", "-c", "1"]
        if rooted:
            args += ["-r", str(root)]
        every = ["-b", "8", "-e", "4K", "-f", "8", "-n", "1", "-w", "1", "-c", "1", "-d", "all"]
        if COLLS[coll][1]:
            every += ["-o", "all"]
        cases = [(args, sizes(8, 1 << 20, 32), ("float",))]
        # Gloo's twins take 20 ms per (type, op, size) row in Gloo itself (4-6 s a run):
        # their every-type sweep runs at the first rank count only.
        if coll != "barrier" and not (gloo and np != nps[0]):
            cases.append((every + args[12:], sizes(8, 4096, 8), all_types))
        if not os.path.basename(perf).endswith("_gloo_perf"):
            # -R 1: chorusMemAlloc buffers registered on the communicator (single copy).
            cases.append((args + ["-R", "1"], sizes(8, 1 << 20, 32), ("float",)))
        for case_args, want_sizes, types in cases:
            label = "np %d, %s %s" % (np, coll, " ".join(case_args))
            try:
                rows = check_output(coll, run(chorusrun, perf, np, case_args), np, root,
                                    want_sizes, types)
                print("ok   %s (%d rows)" % (label, rows))
            except Failure as e:
                failed += 1
                print("FAIL %s: %s" % (label, e))
            sys.stdout.flush()
    if coll != "barrier":
        label = "np %d, an injected error is detected" % nps[0]
        try:
            check_detects_errors(chorusrun, perf, coll, nps[0])
            print("ok   %s" % label)
        except Failure as e:
            failed += 1
            print("FAIL %s: %s" % (label, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
