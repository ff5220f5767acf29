"""Reads and compares chorus-train --dump-params files (trainer/state_io.cc).

A dump holds counters ("counter NAME VALUE") and tensors ("param|buffer NAME COUNT" then a
line of COUNT values). Two dumps match when they hold the same tensors and, for every
tensor, max|a - b| <= rtol * max|b| (relative to the tensor's scale, so that entries that
happen to be near zero do not make the test meaningless).
"""


def read_dump(path):
    counters, tensors = {}, {}
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        words = lines[i].split()
        i += 1
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "counter":
            counters[words[1]] = int(words[2])
        elif words[0] in ("param", "buffer"):
            values = [float(v) for v in lines[i].split()]
            i += 1
            if len(values) != int(words[2]):
                raise ValueError(f"{path}: {words[1]} has {len(values)} values, not {words[2]}")
            tensors[words[1]] = values
        else:
            raise ValueError(f"{path}: unexpected line {lines[i - 1][:60]!r}")
    if not tensors:
        raise ValueError(f"{path}: no tensors")
    return counters, tensors


def worst_relative_difference(a_path, b_path, skip_buffers=False):
    """The largest per-tensor max|a-b| / max|b| over all tensors, and that tensor's name."""
    _, a = read_dump(a_path)
    _, b = read_dump(b_path)
    if set(a) != set(b):
        raise ValueError(f"{a_path} and {b_path} hold different tensors: "
                         f"{sorted(set(a) ^ set(b))}")
    worst, worst_name = 0.0, None
    for name in sorted(a):
        if skip_buffers and name.endswith("num_batches_tracked"):
            continue
        x, y = a[name], b[name]
        if len(x) != len(y):
            raise ValueError(f"{name}: {len(x)} vs {len(y)} values")
        scale = max(abs(v) for v in y) or 1.0
        diff = max(abs(p - q) for p, q in zip(x, y)) / scale
        if diff > worst or worst_name is None:
            worst, worst_name = diff, name
    return worst, worst_name
