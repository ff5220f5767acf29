#!/usr/bin/env python3
"""Shows tools/check-layers failing where it must: a small tree of its own (written to a
temporary folder, never into the project) with a forbidden include, a cycle between two
rooms, an include not written from the root, a transport reading a parameter itself and a
program reaching past the public API.
Each must be named with file and line; removing them must make the same tree pass.
Usage: test_check_layers.py PATH/TO/check-layers"""
import os
import subprocess
import sys
import tempfile

GOOD = {
    'include/chorus.h': '#pragma once\n',
    'src/core/clock.h': '#pragma once\n#include "chorus.h"\n',
    'src/comm/comm.h': '#pragma once\n#include "src/core/clock.h"\n',
    'transports/tcp/socket.h': '#pragma once\n',
    'transports/tcp/socket.cc': '#include "transports/tcp/socket.h"\n#include "src/core/clock.h"\n',
    'perf/launch_init.h': '#pragma once\n#include "chorus.h"\n',
    'src/core/params.h': '#pragma once\n',
    'src/comm/init.cc': '#include "src/comm/comm.h"\n#include "src/core/params.h"\n',
    'trainer/main.cc': '#include "chorus.h"\n',
    'transports/shm/peer.cc': 'int f() { return process_vm_readv(0, 0, 0, 0, 0, 0); }\n',
    'src/comm/peer_mem.h': '#pragma once\n',
    'src/algorithms/copy.cc': '#include "src/comm/comm.h"\n// process_vm_readv in a comment\n',
}
BAD = {
    # a lower layer reaching up, which also closes a cycle src/core <-> src/comm
    'src/core/bad.h': '#pragma once\n#include "chorus.h"\n#include "src/comm/comm.h"\n',
    # a bare name that only resolves next to the includer
    'transports/tcp/socket.cc': '#include "socket.h"\n#include "src/core/clock.h"\n',
    # a transport reading a parameter itself instead of taking it from the context
    'transports/tcp/options.cc': '#include "src/core/clock.h"\n#include "src/core/params.h"\n',
    # a program using another program's internals instead of the public API
    'trainer/main.cc': '#include "chorus.h"\n#include "perf/launch_init.h"\n',
    # a data path outside its transport, and a transport told apart by its name
    'src/algorithms/copy.cc': '#include "src/comm/peer_mem.h"\n'
                              'int g() { return process_vm_writev(0, 0, 0, 0, 0, 0); }\n'
                              'bool h(T* t) { return strcmp(t->name(), "shm") == 0; }\n',
}
EXPECTED = [
    'src/core/bad.h:3: src/core may not include src/comm ("src/comm/comm.h")',
    'cycle between src/comm, src/core: src/comm -> src/core (src/comm/comm.h:2); '
    'src/core -> src/comm (src/core/bad.h:3)',
    'transports/tcp/socket.cc:1: "socket.h" is not a path from the include root',
    'trainer/main.cc:2: trainer may not include perf ("perf/launch_init.h")',
    'transports/tcp/options.cc:2: transports/tcp may not include "src/core/params.h"',
    'src/algorithms/copy.cc:1: src/algorithms may not include "src/comm/peer_mem.h"',
    "src/algorithms/copy.cc:2: CMA copies are the shm transport's PeerAccess capability",
    'src/algorithms/copy.cc:3: transports are told apart by capability',
]


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as f:
            f.write(text)


def run(checker, root):
    p = subprocess.run([sys.executable, checker, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    checker = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, {**GOOD, **BAD})
        code, out = run(checker, root)
        print(out)
        if code != 1:
            failures.append(f'bad tree: exit status {code}, expected 1')
        for want in EXPECTED:
            if not any(line.startswith(want) for line in out.splitlines()):
                failures.append(f'bad tree: no line starting with: {want}')
        if len(out.splitlines()) != len(EXPECTED):
            failures.append(f'bad tree: {len(out.splitlines())} problems, expected {len(EXPECTED)}')
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, GOOD)
        code, out = run(checker, root)
        if code != 0 or out:
            failures.append(f'good tree: exit status {code}, output {out!r}; expected 0 and none')
    for f in failures:
        print('FAIL:', f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
