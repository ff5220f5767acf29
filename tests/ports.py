"""A TCP port for a rendezvous that the kernel will not hand to another socket meanwhile.

Binding port 0 and closing the socket yields a port of the kernel's ephemeral range, which
the kernel gives to the next socket that binds port 0 or connects anywhere: another test's
rendezvous, Chorus's bootstrap, gloo's pairs. A rank that then meets that stranger's
listener instead of torch's TCPStore waits for a reply that never comes (torch's store
timeout is 30 minutes; seen in CI as a rank hung for the whole test timeout while the other
had exited at once, unable to bind). Ports below the ephemeral range are only ever given to
sockets that ask for them by number, so one picked there at random and checked free stays
free unless someone picks the same number.
"""
import random
import socket


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port():
    lo, hi = _ephemeral_range()
    first, last = (10000, lo - 1) if lo > 11000 else (hi + 1, 65535)
    for _ in range(500):
        port = random.randint(first, last)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError(f"no free TCP port in {first}-{last} (below the ephemeral range)")
