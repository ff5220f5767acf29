"""PyTorch 2.x's own DistributedTest suite (torch.testing._internal.distributed.distributed_test,
as test/distributed/test_distributed_spawn.py runs it for gloo) with BACKEND=chorus.

    WORLD_SIZE=2 PYTHONPATH=build/python/torch2 .venv-torch2/bin/python \
        python/tests/torch2/distributed_suite.py [-k PATTERN] [-v]

(meson test --setup slow --suite torch2-dist runs it at 2 and 4 ranks.) The suite keys
many tests on the backend's name: chorus joins the feature lists it has ("ddp",
"subgroup"); tests for GPUs, NCCL or gloo internals skip themselves, and the ones that
cannot apply to a CPU-only backend outside gloo/nccl are listed in docs/TORCH.md.
"""
import os
import sys
import tempfile

os.environ.setdefault("BACKEND", "chorus")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="chorus-dist-"))

import chorus_torch  # noqa: E402,F401  (registers backend "chorus"; spawned ranks re-import this file)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

for feature in ("ddp", "subgroup"):
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
