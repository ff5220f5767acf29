"""PyTorch 2.x's own DistributedTest suite (torch.testing._internal.distributed.distributed_test,
as test/distributed/test_distributed_spawn.py runs it for gloo) with BACKEND=chorus.

    WORLD_SIZE=2 PYTHONPATH=build/python/torch2 .venv-torch2/bin/python \
        python/tests/torch2/distributed_suite.py [-k PATTERN] [-v]

(meson test --setup slow --suite torch2-dist runs it at 2 and 4 ranks.) The suite keys
many tests on the backend's name. chorus joins the feature lists whose tests it can run:
"ddp", "subgroup", "plugin" (a registered third-party backend: it makes
require_backend_is_available pass), and "gpu", which despite its name gates the DDP and
object-collective tests that gloo runs on CPU tensors (every test that needs a GPU also
checks for one). Tests gated on a backend's name in the test itself ("Only MPI supports
all_to_all", "Only gloo backend supports timeouts", ...) stay skipped; results and the
list of what cannot apply are in docs/TORCH2-DIST.md.
"""
import atexit
import os
import shutil
import sys
import tempfile

# CHORUS_DIST_AS=gloo: run the suite as if the backend were gloo (its name gates open)
# while every group is really chorus; for the tests the suite runs for gloo only.
AS = os.environ.get("CHORUS_DIST_AS")
if AS:
    os.environ["BACKEND"] = AS
os.environ.setdefault("BACKEND", "chorus")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    # Made once, by the process that runs the suite (spawned ranks re-import this file and
    # inherit the variable), and removed when it exits: nothing is left in /tmp.
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="chorus-dist-")
    atexit.register(shutil.rmtree, os.environ["TEMP_DIR"], ignore_errors=True)

import chorus_torch  # noqa: E402,F401  (registers backend "chorus"; spawned ranks re-import this file)
import torch.distributed as dist  # noqa: E402

if AS:
    def _as_chorus(fn):
        def wrapper(*args, **kwargs):
            if kwargs.get("backend") == AS:
                kwargs["backend"] = "chorus"
            return fn(*args, **kwargs)
        return wrapper
    dist.init_process_group = _as_chorus(dist.init_process_group)
    dist.new_group = _as_chorus(dist.new_group)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

for feature in ("ddp", "subgroup", "plugin", "gpu"):
    DistTestCases.backend_feature[feature].add("chorus")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
