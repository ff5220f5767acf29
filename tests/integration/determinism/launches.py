#!/usr/bin/env python3
"""Default mode gives the same bits in every launch (issue 36, acceptance 2).

Usage: launches.py CHORUSRUN SAME_BITS NP [SAME_BITS ARGS...]

Launches `chorusrun -np NP same_bits` four times with the default settings except:
  1     nothing (every timed chooser at `auto`: CHORUS_SLOT_STORES, CHORUS_CMA_MAX);
  2     CHORUS_CMA_MAX=timed (the copy path timed from each size's first calls even where
        the init probe found the kernel's copy slow and `auto` starts on the FIFO);
  3     CHORUS_SLOT_STORES=temporal, 4  CHORUS_SLOT_STORES=streaming (the two ways the slot
        stores' chooser times: they write the slots differently, they add alike).
Each launch must pass (its repetitions gave the bits of its first calls: no chooser changed
them within the job) and all four must print the same digest (so none changed them from
one launch to the next, whatever it picked). CHORUS_CMA_MAX=auto no longer times the
all-reduce from 3 ranks (its two ways add in different orders: docs/ARCHITECTURE.md
"Reductions").
"""
import os
import re
import subprocess
import sys

VARIANTS = [{}, {"CHORUS_CMA_MAX": "timed"}, {"CHORUS_SLOT_STORES": "temporal"}, {"CHORUS_SLOT_STORES": "streaming"}]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    chorusrun, same_bits, np_ = sys.argv[1], sys.argv[2], sys.argv[3]
    digests = []
    for v in VARIANTS:
        env = dict(os.environ, CHORUS_TIMEOUT_S="60", **v)
        for k in ("CHORUS_SLOT_STORES", "CHORUS_CMA_MAX", "CHORUS_REPRODUCIBLE"):
            if k not in v:
                env.pop(k, None)
        p = subprocess.run([chorusrun, "-np", np_, same_bits] + sys.argv[4:], env=env,
                           capture_output=True, text=True, timeout=240)
        m = re.findall(r"^digest ([0-9a-f]{16})$", p.stdout, re.M)
        what = " ".join("%s=%s" % kv for kv in v.items()) or "defaults"
        if p.returncode != 0 or len(m) != 1:
            sys.exit("np %s, %s: exit %d\n%s\n%s" % (np_, what, p.returncode, p.stdout[-3000:],
                                                    p.stderr[-3000:]))
        print("np %s, %s: digest %s" % (np_, what, m[0]), flush=True)
        digests.append(m[0])
    if len(set(digests)) != 1:
        sys.exit("np %s: the launches' digests differ: %s" % (np_, digests))
    print("np %s: %d launches, one digest" % (np_, len(digests)))


if __name__ == "__main__":
    main()
