"""Build the native cores: the I/O hot loop and the memory sweep kernels.

The C sources live in src/xferscope/_native. A machine without a C compiler
or without the Python headers gets one line that says what to install.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = os.path.join("src", "xferscope", "_native")
HINT = ("xferscope needs a C compiler and the Python headers to build its native core: "
        "install them (Debian/Ubuntu: apt-get install gcc python3-dev; "
        "Fedora/RHEL: dnf install gcc python3-devel) and run the install again")


def _compiler_works() -> bool:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    exe = cc.split()[0]
    if shutil.which(exe) is None:
        return False
    include = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as fh:
            fh.write("#include <Python.h>\nint main(void){return 0;}\n")
        probe = subprocess.run(cc.split() + ["-I", include, "-c", src, "-o", os.path.join(tmp, "probe.o")],
                               capture_output=True)
        return probe.returncode == 0


class CheckedBuildExt(build_ext):
    def run(self):
        if not _compiler_works():
            sys.stderr.write("error: " + HINT + "\n")
            raise SystemExit(1)
        super().run()


CFLAGS = ["-O2", "-std=gnu11", "-Wall", "-Wno-unused-function", "-fno-strict-aliasing"]

setup(
    ext_modules=[
        Extension(
            "xferscope._iocore",
            sources=[os.path.join(NATIVE, "iocore.c")],
            depends=[os.path.join(NATIVE, "histogram.h"), os.path.join(NATIVE, "uring.h")],
            extra_compile_args=CFLAGS,
            libraries=["dl", "pthread"],
        ),
        Extension(  # host stand-ins for the CUDA calls of _iocore: the GPU modes' test seam
            "xferscope._gpusim",
            sources=[os.path.join(NATIVE, "gpusim.c")],
            extra_compile_args=CFLAGS,
            libraries=["pthread"],
        ),
        Extension(
            "xferscope._memcore",
            sources=[os.path.join(NATIVE, "memcore.c")],
            extra_compile_args=CFLAGS + ["-march=x86-64-v2"] if os.uname().machine == "x86_64" else CFLAGS,
            libraries=["pthread"],
        ),
    ],
    cmdclass={"build_ext": CheckedBuildExt},
)
