"""chorus_wheel — builds the chorus_torch wheel from the Meson project (a PEP 517 backend).

Used two ways, both offline:
  * ``pip install --no-build-isolation .`` at the repository root (pyproject.toml names this
    module as its in-tree backend): builds against the torch of the environment pip runs in;
  * ``tools/build-wheel`` (``python chorus_wheel.py build OUTDIR``, then ``check WHEEL``).

Why not meson-python: it is not in Debian 12 at a usable version and would have to come from
PyPI into every build environment; the Meson project already knows how to compile the 2.x
extension against a given torch (python/torch2/meson.build), so this backend only runs that
build and packs two files. What it packs (chorus_torch/):
  * chorus_torch.<EXT_SUFFIX>  the extension, RUNPATH $ORIGIN only (patchelf);
  * libchorus.so.0             the library, found by the extension through that RUNPATH;
  * __init__.py, _build_info.py (version, torch version built for, build options), bench.py;
and the top-level module _chorus_torch_autoload (the torch.backends entry point).
torch's own libraries are never packed: the package imports torch first, and the extension's
NEEDED libtorch*.so / libc10.so resolve by SONAME to the copies torch loaded. The library is
built without hwloc and ibverbs (and CUDA: the backend serves CPU tensors), so nothing outside
torch and the C/C++ runtime is needed; check() verifies exactly that, as auditwheel show would.
"""
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DIST = "chorus_torch"
# Meson options of the wheel's build tree: only the library and the 2.x extension.
MESON_OPTIONS = ["-Dtests=disabled", "-Dtorch=disabled", "-Dtrainer=disabled",
                 "-Dgloo=disabled", "-Dmpi=disabled", "-Dcuda=disabled", "-Dhwloc=disabled",
                 "-Dibverbs=disabled", "-Dtorch2=enabled"]
# Libraries a wheel may need from the system: the manylinux policy's C/C++ runtime.
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0",
               "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}
# Libraries the installed torch brings (torch/lib), loaded before the extension.
TORCH_LIBS = {"libtorch.so", "libtorch_cpu.so", "libc10.so", "libtorch_python.so"}


def _run(cmd, **kw):
    print("chorus_wheel: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, **kw)


def _torch_version():
    try:
        import torch
    except ImportError as err:
        sys.exit("chorus_wheel: this Python (%s) cannot import torch (%s): build in the "
                 "environment that has torch, with pip install --no-build-isolation"
                 % (sys.executable, err))
    return torch.__version__


def _project_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        head = f.read(2000)
    start = head.index("version:") + len("version:")
    return head[start:].split("'")[1]


def _build_tree(builddir):
    """Configures (once) and builds the library and the extension; returns their paths."""
    if not os.path.isdir(os.path.join(builddir, "meson-private")):
        _run(["meson", "setup", builddir, "-Dtorch2_python=" + sys.executable] + MESON_OPTIONS,
             cwd=ROOT)
    else:  # the same tree for another Python: point it there (meson reconfigures)
        _run(["meson", "configure", builddir, "-Dtorch2_python=" + sys.executable], cwd=ROOT)
    ext = "python/torch2/chorus_torch" + sysconfig.get_config_var("EXT_SUFFIX")
    lib = "src/libchorus.so." + _project_version()
    _run(["ninja", "-C", builddir, lib, ext])
    return os.path.join(builddir, lib), os.path.join(builddir, ext)


def _build_options(builddir):
    options = {}
    with open(os.path.join(builddir, "config.h")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("HAVE_"):
                options[parts[1][5:].lower()] = parts[2] == "1"
    return options


def _stage(stage, lib, ext, builddir, torch_version, version):
    pkg = os.path.join(stage, DIST)
    os.makedirs(pkg)
    shutil.copyfile(lib, os.path.join(pkg, "libchorus.so.0"))
    ext_name = os.path.basename(ext)
    shutil.copyfile(ext, os.path.join(pkg, ext_name))
    # Symbols a user never links against go, as dh_strip does for the Debian packages.
    _run(["strip", "--strip-unneeded", os.path.join(pkg, "libchorus.so.0"),
          os.path.join(pkg, ext_name)])
    # The build tree's RUNPATH (build dirs, torch's lib dir) must not ship.
    _run(["patchelf", "--remove-rpath", os.path.join(pkg, "libchorus.so.0")])
    _run(["patchelf", "--set-rpath", "$ORIGIN", os.path.join(pkg, ext_name)])
    shutil.copyfile(os.path.join(HERE, DIST, "__init__.py"), os.path.join(pkg, "__init__.py"))
    # python -m chorus_torch.bench: the repository's all-reduce benchmark, chorus vs gloo.
    shutil.copyfile(os.path.join(ROOT, "python", "bench", "allreduce_bench.py"),
                    os.path.join(pkg, "bench.py"))
    with open(os.path.join(pkg, "_build_info.py"), "w") as f:
        f.write("# Written by python/packaging/chorus_wheel.py when the wheel was built.\n")
        f.write("VERSION = %r\nTORCH_VERSION = %r\nOPTIONS = %r\n"
                % (version, torch_version, _build_options(builddir)))
    shutil.copyfile(os.path.join(HERE, "_chorus_torch_autoload.py"),
                    os.path.join(stage, "_chorus_torch_autoload.py"))


def _dist_info(stage, version, torch_version, tag):
    info = os.path.join(stage, "%s-%s.dist-info" % (DIST, version))
    os.makedirs(info)
    release = torch_version.split("+")[0]
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: chorus-torch\nVersion: %s\n"
                    "Summary: Chorus collective communication library as a torch.distributed "
                    "backend\nLicense: Apache-2.0\nRequires-Python: ==%d.%d.*\n"
                    "Requires-Dist: torch==%s\n"
                    % (version, sys.version_info[0], sys.version_info[1], release),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: chorus_wheel\nRoot-Is-Purelib: false\n"
                 "Tag: %s\n" % tag,
        # PyTorch >= 2.5 calls every torch.backends entry point at the end of import torch.
        "entry_points.txt": "[torch.backends]\nchorus = _chorus_torch_autoload:register\n",
        "top_level.txt": "%s\n_chorus_torch_autoload\n" % DIST,
    }
    for name, text in files.items():
        with open(os.path.join(info, name), "w") as f:
            f.write(text)
    return os.path.relpath(info, stage)


def _zip(stage, info, path):
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for dirpath, dirnames, filenames in os.walk(stage):
            dirnames.sort()
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, stage)
                with open(full, "rb") as f:
                    data = f.read()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                records.append("%s,sha256=%s,%d" % (rel, digest.decode(), len(data)))
                zf.writestr(zipfile.ZipInfo.from_file(full, rel), data, zipfile.ZIP_DEFLATED)
        records.append("%s/RECORD,," % info)
        zf.writestr("%s/RECORD" % info, "\n".join(records) + "\n")


def _tag():
    py = "cp%d%d" % sys.version_info[:2]
    return "%s-%s-%s" % (py, py, sysconfig.get_platform().replace("-", "_").replace(".", "_"))


def build(outdir, builddir=None):
    """Builds the wheel into outdir; returns its file name."""
    torch_version = _torch_version()
    builddir = os.path.abspath(builddir or os.path.join(ROOT, "build-wheel"))
    version = _project_version()
    lib, ext = _build_tree(builddir)
    tag = _tag()
    name = "%s-%s-%s.whl" % (DIST, version, tag)
    os.makedirs(outdir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chorus-wheel-") as stage:
        _stage(stage, lib, ext, builddir, torch_version, version)
        info = _dist_info(stage, version, torch_version, tag)
        _zip(stage, info, os.path.join(outdir, name))
    print("chorus_wheel: built %s for torch %s" % (os.path.join(outdir, name), torch_version),
          file=sys.stderr)
    return name


def _dynamic(path):
    """NEEDED and RUNPATH/RPATH entries of an ELF file (readelf -d)."""
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True,
                         text=True).stdout
    needed, runpath = [], []
    for line in out.splitlines():
        if "(NEEDED)" in line:
            needed.append(line.split("[")[1].split("]")[0])
        elif "(RUNPATH)" in line or "(RPATH)" in line:
            runpath += line.split("[")[1].split("]")[0].split(":")
    return needed, runpath


def check(wheel):
    """auditwheel show's question, answered strictly: every NEEDED library of every ELF file
    in the wheel is in the wheel, one of torch's, or the C/C++ runtime; RUNPATH is $ORIGIN
    only; no torch library is bundled. Returns a list of problems (empty: fine)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="chorus-wheel-check-") as tmp:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
            names = zf.namelist()
        inside = {os.path.basename(n) for n in names}
        for lib in TORCH_LIBS & inside:
            problems.append("bundles torch's %s" % lib)
        for rel in names:
            full = os.path.join(tmp, rel)
            if not os.path.isfile(full):
                continue
            with open(full, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            needed, runpath = _dynamic(full)
            for entry in runpath:
                if entry != "$ORIGIN":
                    problems.append("%s: RUNPATH entry %s" % (rel, entry))
            for lib in needed:
                where = ("wheel" if lib in inside else "torch" if lib in TORCH_LIBS
                         else "system" if lib in SYSTEM_LIBS else None)
                print("  %-55s %-22s %s" % (rel, lib, where or "EXTERNAL"))
                if where is None:
                    problems.append("%s needs %s, which is neither in the wheel, torch's nor "
                                    "the C/C++ runtime" % (rel, lib))
    return problems


# PEP 517 hooks.
def get_requires_for_build_wheel(config_settings=None):
    return []  # meson, ninja, patchelf, a compiler and torch come from the environment


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    builddir = (config_settings or {}).get("builddir") or os.environ.get("CHORUS_WHEEL_BUILDDIR")
    name = build(wheel_directory, builddir)
    problems = check(os.path.join(wheel_directory, name))
    if problems:
        raise RuntimeError("chorus_wheel: " + "; ".join(problems))
    return name


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "build":
        print(build(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        found = check(sys.argv[2])
        for p in found:
            print("chorus_wheel: " + p, file=sys.stderr)
        print("chorus_wheel: %s: %s" % (sys.argv[2], "FAILED" if found else
                                        "only the wheel's own, torch's and C/C++ runtime libraries"))
        sys.exit(1 if found else 0)
    else:
        sys.exit("usage: chorus_wheel.py build OUTDIR [BUILDDIR] | check WHEEL")
