"""The emulated accelerator's computation per batch: a kernel that keeps the GPU busy for that time, or DLIO's
host sleep.

The kernel (``spin``) is compiled at run time with NVRTC (``cuda.bindings.nvrtc``) for the GPU's own
architecture and launched with one block of 32 threads per SM, each reading the GPU's global timer until
the time has passed: every SM is busy for the batch's computation, so the copies of the next batches
contend with a busy GPU, as in training (the kernel does not load the GPU's memory). Where NVRTC cannot be
loaded, the same kernel comes from its PTX text, which the driver compiles, and the label says so.

A computation's time is measured on the host from the launch to seeing it done (sleeping until just before
it is due, then asking its event), as DLIO measures its sleep.
"""

from __future__ import annotations

import ctypes
import time

from xferscope.engines import gpu_setup
from xferscope.engines.gpu_setup import check

KERNEL_SOURCE = r"""
extern "C" __global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while (t1 - t0 < ns);
}
"""

KERNEL_PTX = r"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 ns)
{
    .reg .pred p;
    .reg .b64 t0, t1, d, n;
    ld.param.u64 n, [ns];
    mov.u64 t0, %globaltimer;
LOOP:
    mov.u64 t1, %globaltimer;
    sub.u64 d, t1, t0;
    setp.lt.u64 p, d, n;
    @p bra LOOP;
    ret;
}
"""
#: wake this long before a computation is due, then ask its event
WAKE_EARLY_S = 0.0005
POLL_S = 20e-6


class SleepCompute:
    label = "computation emulated by a host sleep (as DLIO)"

    def run(self, seconds: float) -> float:
        t0 = time.perf_counter()
        if seconds > 0:
            time.sleep(seconds)
        return time.perf_counter() - t0


def compile_spin(cu, device) -> tuple[bytes, str]:
    """(PTX, how it was made) for ``device``: NVRTC for its architecture, else the PTX text."""
    try:
        from cuda.bindings import nvrtc

        major = _attribute(cu, device, cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = _attribute(cu, device, cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        err, prog = nvrtc.nvrtcCreateProgram(KERNEL_SOURCE.encode(), b"spin.cu", 0, [], [])
        _nvrtc_ok(nvrtc, err, "nvrtcCreateProgram")
        try:
            opts = [f"--gpu-architecture=compute_{major}{minor}".encode()]
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            _nvrtc_ok(nvrtc, err, "nvrtcCompileProgram")
            err, size = nvrtc.nvrtcGetPTXSize(prog)
            _nvrtc_ok(nvrtc, err, "nvrtcGetPTXSize")
            ptx = b" " * size
            (err,) = nvrtc.nvrtcGetPTX(prog, ptx)
            _nvrtc_ok(nvrtc, err, "nvrtcGetPTX")
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        return ptx, f"kernel compiled by NVRTC for compute_{major}{minor}"
    except Exception as exc:  # no libnvrtc here: the driver compiles the PTX text
        why = " ".join(str(exc).split())[:120]
        return KERNEL_PTX.encode() + b"\0", f"kernel from PTX (NVRTC unavailable: {why})"


def _attribute(cu, device, attr) -> int:

    return int(check(cu.cuDeviceGetAttribute(attr, device), "cuDeviceGetAttribute"))


def _nvrtc_ok(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"{what}: {err}")


class GpuCompute:
    """The spin kernel on one GPU, launched on the accelerator's own stream."""

    def __init__(self, gpu: int, resources, module_cache: dict):

        cu = self.cu = gpu_setup.driver()
        self.check = gpu_setup.check
        resources.context(gpu)
        if gpu not in module_cache:
            dev = gpu_setup.device(gpu)
            ptx, how = compile_spin(cu, dev)
            module = self.check(cu.cuModuleLoadData(ptx), "cuModuleLoadData")
            resources.on_release(gpu, "cuModuleUnload", lambda: cu.cuModuleUnload(module))
            function = self.check(cu.cuModuleGetFunction(module, b"spin"), "cuModuleGetFunction")
            sms = _attribute(cu, dev, cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            module_cache[gpu] = (function, sms, how)
        self.function, self.sms, how = module_cache[gpu]
        self.label = f"computation on the GPU: a {how}, {self.sms} blocks of 32 threads"
        self.stream = resources.stream(gpu)
        self.event = resources.event(gpu)

    def run(self, seconds: float) -> float:
        cu = self.cu
        t0 = time.perf_counter()
        if seconds <= 0:
            return 0.0
        args = ((int(seconds * 1e9),), (ctypes.c_ulonglong,))
        self.check(
            cu.cuLaunchKernel(self.function, self.sms, 1, 1, 32, 1, 1, 0, self.stream, args, 0), "cuLaunchKernel"
        )
        self.check(cu.cuEventRecord(self.event, self.stream), "cuEventRecord")
        nap = seconds - WAKE_EARLY_S
        if nap > 0:
            time.sleep(nap)
        while True:
            rc = cu.cuEventQuery(self.event)[0]
            if rc == cu.CUresult.CUDA_SUCCESS:
                break
            if rc != cu.CUresult.CUDA_ERROR_NOT_READY:
                self.check((rc,), "cuEventQuery")
            time.sleep(POLL_S)
        return time.perf_counter() - t0
