#!/bin/sh
# tests/packaging/wheel_check.sh SRC BUILD PYTHON — the chorus_torch wheel as a user gets it.
#
# Builds the wheel with tools/build-wheel (tree BUILD/wheel-tree, against PYTHON's torch),
# installs it with pip --no-index into a fresh virtual environment, then, from there:
#   1. torchrun 2 and 4 ranks of wheel_worker.py, which never imports chorus_torch
#      (torch's backend autoload): all-reduce, all-gather, broadcast, DDP 5 steps, checked;
#   2. chorus_torch.__version__, build_options and chorus_version agree with the project;
#      importing chorus_torch before torch registers the backend without a warning;
#   3. TORCH_DEVICE_BACKEND_AUTOLOAD=0: backend "chorus" is unknown until `import chorus_torch`;
#   4. a copy of the package whose _build_info says torch 2.7.1 (a fake mismatch): import
#      fails with an ImportError naming 2.7.1 and the installed torch; under autoload,
#      `import torch` itself still works and only warns;
#   5. python -m chorus_torch.bench runs the chorus-vs-gloo all-reduce table on 2 ranks;
#   6. `pip install --no-build-isolation SRC` (pyproject.toml, the same backend) reinstalls it.
# The fresh environment gets torch by a .pth file naming PYTHON's site-packages instead of
# reinstalling it from the wheelhouse (3.5 GB of wheels, about 90 s to unpack here): what is
# under test is the wheel and its install, not pip's copy of torch; pip still resolves the
# wheel's Requires-Dist torch==X against it, offline (--no-index --find-links WHEELHOUSE).
# CHORUS_WHEEL_TEST_FULL_VENV=1 installs torch from the wheelhouse instead (minutes, 6.5 GB).
set -eu
src=$1
build=$2
py=$3
if [ -z "$py" ]; then
  echo "wheel_check: SKIP: no PyTorch 2.x environment (tools/deps makes .venv-torch2)"
  exit 77
fi
tmp=$(mktemp -d /tmp/chorus-wheel-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
wheels=${CHORUS_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/chorus/wheels-torch2}

wheel=$(PYTHON=$py CHORUS_WHEEL_BUILDDIR=$build/wheel-tree "$src/tools/build-wheel" "$tmp/dist" | tail -1)
base=$("$py" -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$tmp/venv"
vpy=$tmp/venv/bin/python
if [ "${CHORUS_WHEEL_TEST_FULL_VENV:-0}" = 1 ]; then
  # The literal way: torch and its dependencies unpacked from the wheelhouse (6.5 GB).
  torch_site="the wheelhouse $wheels"
  "$vpy" -m pip install -q --no-index --find-links "$wheels" "$wheel"
else
  torch_site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  venv_site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$torch_site" > "$venv_site/torch_from_cached_env.pth"
  "$vpy" -m pip install -q --no-index --find-links "$wheels" "$wheel"
fi
echo "wheel_check: installed $(basename "$wheel") in $tmp/venv (torch from $torch_site)"

cd "$tmp"  # nothing of the source tree on sys.path
export OMP_NUM_THREADS=1
for np in 2 4; do
  out=$("$vpy" -m torch.distributed.run --standalone --nproc-per-node "$np" "$src/tests/packaging/wheel_worker.py" 2>&1) || {
    echo "$out"; echo "wheel_check: torchrun $np ranks FAILED"; exit 1; }
  matched=$(echo "$out" | grep -o "rank [0-9]*/$np: all_reduce, all_gather, broadcast, DDP 5 steps match" | sort)
  echo "$matched"
  [ "$(echo "$matched" | wc -l)" -eq "$np" ] || { echo "$out"; echo "wheel_check: $np ranks: not every rank matched"; exit 1; }
done

version=$(sed -n "s/^  version: '\(.*\)',$/\1/p" "$src/meson.build")
"$vpy" - "$version" <<'PY'
import sys
import chorus_torch
v = sys.argv[1]
major, minor, patch = (int(x) for x in v.split("."))
assert chorus_torch.__version__ == v, (chorus_torch.__version__, v)
assert chorus_torch.chorus_version == major * 10000 + minor * 100 + patch, chorus_torch.chorus_version
assert set(chorus_torch.build_options) >= {"cuda", "hwloc", "ibverbs"}, chorus_torch.build_options
print("wheel_check: chorus_torch %s, libchorus %d, built for torch %s, options %s"
      % (chorus_torch.__version__, chorus_torch.chorus_version, chorus_torch.built_for_torch,
         chorus_torch.build_options))
PY

# chorus_torch imported before torch: torch's autoload finds it half-imported and must
# neither fail nor warn; the backend is registered once, by chorus_torch itself.
"$vpy" -W error::RuntimeWarning -c '
import chorus_torch
import torch.distributed as dist
assert "chorus" in dist.Backend.backend_list, dist.Backend.backend_list
print("wheel_check: import chorus_torch before torch: backend registered, no warning")'

TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$vpy" - "$tmp/store0" <<'PY'
import sys
import torch.distributed as dist
assert "chorus_torch" not in sys.modules
try:
    dist.init_process_group("chorus", init_method="file://" + sys.argv[1], rank=0, world_size=1)
except (ValueError, RuntimeError, AssertionError) as err:
    assert "chorus" in str(err).lower(), err
else:
    raise SystemExit("backend chorus known without autoload and without import")
PY
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$vpy" - "$tmp/store1" <<'PY'
import sys
import torch, torch.distributed as dist
import chorus_torch  # noqa: F401
dist.init_process_group("chorus", init_method="file://" + sys.argv[1], rank=0, world_size=1)
t = torch.full((3,), 2.0)
dist.all_reduce(t)
assert torch.equal(t, torch.full((3,), 2.0)), t
dist.destroy_process_group()
print("wheel_check: TORCH_DEVICE_BACKEND_AUTOLOAD=0: backend unknown until import chorus_torch")
PY

pkg=$("$vpy" -c 'import importlib.util as u; print(u.find_spec("chorus_torch").submodule_search_locations[0])')
mkdir "$tmp/fake"
cp -r "$pkg" "$tmp/fake/chorus_torch"
sed -i "s/^TORCH_VERSION = .*/TORCH_VERSION = '2.7.1'/" "$tmp/fake/chorus_torch/_build_info.py"
PYTHONPATH=$tmp/fake TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$vpy" - <<'PY'
import torch
try:
    import chorus_torch  # noqa: F401
    raise SystemExit("a wheel built for torch 2.7.1 imported under torch " + torch.__version__)
except ImportError as err:
    msg = str(err)
    assert "2.7.1" in msg and torch.__version__ in msg, msg
    print("wheel_check: fake mismatch: " + msg)
PY
PYTHONPATH=$tmp/fake "$vpy" -W always - <<'PY'
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch  # the entry point fails inside: it must warn, not raise
assert any("2.7.1" in str(w.message) for w in caught), [str(w.message) for w in caught]
print("wheel_check: under autoload the mismatch is a warning; import torch still works")
PY

"$vpy" -m chorus_torch.bench --np 2 --max-bytes 64K --rounds 1 > "$tmp/bench.txt" 2>&1 || {
  cat "$tmp/bench.txt"; echo "wheel_check: python -m chorus_torch.bench FAILED"; exit 1; }
cat "$tmp/bench.txt"
grep -q "65536\|64 KiB" "$tmp/bench.txt"
# The same backend through pip, from the source tree (pyproject.toml), into the same venv.
CHORUS_WHEEL_BUILDDIR=$build/wheel-tree "$vpy" -m pip install -q --no-index --no-build-isolation \
  --force-reinstall --no-deps "$src" > "$tmp/pip.txt" 2>&1 || {
  cat "$tmp/pip.txt"; echo "wheel_check: pip install --no-build-isolation SRC FAILED"; exit 1; }
"$vpy" -c 'import torch, sys; assert "chorus_torch" in sys.modules; import chorus_torch; print("wheel_check: pip install --no-build-isolation . gives chorus_torch", chorus_torch.__version__)'
echo "wheel_check: all passed"
