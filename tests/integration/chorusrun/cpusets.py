"""The CPU sets the binding tests expect, worked out apart from chorusrun: this process's
cores from its affinity and /sys's topology, and the kernel's Cpus_allowed_list syntax.
Used by test_binding.py (one host) and tests/multinode/binding_hosts.py (every host)."""
import os


def cores():
    """The cores this process may use, each as its set of CPUs, in (package, core) order."""
    out = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        d = "/sys/devices/system/cpu/cpu%d/topology/" % cpu
        try:
            key = (int(open(d + "physical_package_id").read()), int(open(d + "core_id").read()))
        except (OSError, ValueError):
            key = (-2, cpu)
        out.setdefault(key, set()).add(cpu)
    return [out[k] for k in sorted(out)]


def parse_list(text):
    """A Cpus_allowed_list ("0-2,5") as a set of CPU numbers."""
    cpus = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus
