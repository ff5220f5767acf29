"""chorus_torch — Chorus as a torch.distributed backend (the pip-installed package).

With PyTorch >= 2.5 the backend registers itself when torch is imported (the entry point
in group torch.backends, _chorus_torch_autoload), so ``init_process_group(backend="chorus")``
needs no import; ``import chorus_torch`` does the same explicitly (the only way when
TORCH_DEVICE_BACKEND_AUTOLOAD=0).

The extension is compiled against one torch version (a c10d Backend subclass is tied to
torch's C++ ABI), recorded at build time in _build_info; importing it under another torch
would fail with an undefined symbol or, worse, crash, so the versions are compared first.
"""
import torch

from . import _build_info

__version__ = _build_info.VERSION
#: Options the bundled libchorus was built with (cuda, hwloc, ibverbs: True or False).
build_options = dict(_build_info.OPTIONS)
#: The torch version the extension was compiled against.
built_for_torch = _build_info.TORCH_VERSION


def _release(version):
    """'2.8.0+cu128' -> '2.8.0': the local part names the wheel's CUDA flavour, not the ABI."""
    return version.split("+")[0]


if _release(torch.__version__) != _release(built_for_torch):
    raise ImportError(
        "chorus_torch %s was built for torch %s, but torch %s is installed: reinstall a "
        "chorus_torch wheel built for torch %s (tools/build-wheel in that environment)"
        % (__version__, built_for_torch, torch.__version__, _release(torch.__version__)))

# torch is fully imported here, so its libraries (libtorch, libc10, ...) are loaded; the
# extension finds them by SONAME, and libchorus.so.0 beside itself through RUNPATH $ORIGIN.
from . import chorus_torch as _ext  # noqa: E402

ProcessGroupChorus = _ext.ProcessGroupChorus
create_process_group = _ext.create_process_group
#: chorusGetVersion() of the loaded libchorus (major*10000 + minor*100 + patch).
chorus_version = _ext.chorus_version
