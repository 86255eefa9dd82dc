"""GPU-only kernel failures: a hand-written Triton matmul whose tiles need more shared memory
than an SM has (Triton's OutOfResources at launch), fixed by smaller tiles and fewer stages; and a
Triton kernel whose int32 offsets overflow on a tensor of more than 2**31 elements (an illegal
memory access, a software bug on healthy hardware), fixed by 64-bit offsets; and a torch CUDA
extension built only for another architecture (no kernel image for this GPU), fixed by rebuilding
it for this GPU's compute capability."""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="triton-shared-memory-oor",
        module=__name__,
        category="compile-error",
        rules=("triton-out-of-resources",),
        devices=("cuda",),
        description="A Triton matmul launched with 256x256x128 fp32 tiles and 4 pipeline stages (about 1 MiB of shared memory)",
        fail=Variant("big-tiles", "BLOCK_M=BLOCK_N=256, BLOCK_K=128, num_stages=4", timeout=240),
        fixes=(Variant("smaller-tiles", "BLOCK_M=BLOCK_N=64, BLOCK_K=32, num_stages=2 (same kernel)", timeout=240),),
        checks=(checks.completed,),
    ),
    Scenario(
        name="kernel-int32-offset-overflow",
        module=__name__,
        category="gpu-hardware-fault",
        rules=("cuda-illegal-memory-access",),
        devices=("cuda",),
        description="A Triton elementwise kernel computes pid * BLOCK in int32 over a tensor of 2**31 + 2**20 elements",
        fail=Variant("int32-offsets", "offs = pid * BLOCK + arange(BLOCK), pid an int32 program id", timeout=240),
        fixes=(Variant("int64-offsets", "pid.to(tl.int64) * BLOCK (same kernel, same tensor)", timeout=240),),
        checks=(checks.completed,),
    ),
    Scenario(
        name="extension-built-for-other-arch",
        module=__name__,
        category="cuda-version-mismatch",
        rules=("no-kernel-image-for-gpu",),
        devices=("cuda",),
        description="A torch CUDA extension (load_inline) compiled with TORCH_CUDA_ARCH_LIST for another GPU generation, no PTX",
        fail=Variant("other-arch-only", "TORCH_CUDA_ARCH_LIST = an architecture of another major generation, no +PTX",
                     timeout=420),
        fixes=(Variant("this-gpu-arch", "TORCH_CUDA_ARCH_LIST = this GPU's compute capability (same source)",
                       timeout=420),),
        checks=(checks.completed,),
    ),
]

# the kernel lives in its own file: Triton reads a kernel's source from disk
_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
'''


def _matmul(kit, bm, bn, bk, stages):
    import torch

    Path("mm_kernel.py").write_text(textwrap.dedent(_KERNEL))
    sys.path.insert(0, str(Path.cwd()))
    kernel = importlib.import_module("mm_kernel").matmul_kernel
    import triton

    M = N = K = 512
    a = torch.randn(M, K, device=kit.device)
    b = torch.randn(K, N, device=kit.device)
    c = torch.empty(M, N, device=kit.device)
    print(f"triton {triton.__version__}, {torch.cuda.get_device_name()}: "
          f"BLOCK_M={bm} BLOCK_N={bn} BLOCK_K={bk} num_stages={stages}")
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    kernel[grid](a, b, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=stages)
    torch.cuda.synchronize()
    err = float((c - a @ b).abs().max() / (a @ b).abs().max())
    print(f"max relative error vs torch.matmul: {err:.2e}")
    kit.result(rel_err=err)
    if err > 1e-2:
        raise SystemExit(f"wrong result: relative error {err}")


_SCALE = '''
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, factor, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    pid = tl.program_id(0)
    if WIDE:
        pid = pid.to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * factor, mask=mask)
'''


def _scale(kit, wide):
    import torch

    Path("scale_kernel.py").write_text(textwrap.dedent(_SCALE))
    sys.path.insert(0, str(Path.cwd()))
    kernel = importlib.import_module("scale_kernel").scale_kernel
    import triton

    n = 2**31 + 2**20  # more elements than an int32 offset can address
    x = torch.ones(n, dtype=torch.bfloat16, device=kit.device)
    block = 1024
    print(f"triton {triton.__version__}: scaling {n} bf16 elements, BLOCK={block}, "
          f"{'int64' if wide else 'int32'} offsets")
    kernel[(triton.cdiv(n, block),)](x, n, 2.0, BLOCK=block, WIDE=wide)
    torch.cuda.synchronize()
    ok = bool((x[-4:] == 2).all()) and bool((x[:4] == 2).all())
    print(f"first/last elements scaled: {ok}")
    kit.result(scaled=ok)
    if not ok:
        raise SystemExit("kernel left elements unscaled")


def int32_offsets(kit):
    _scale(kit, False)


def int64_offsets(kit):
    _scale(kit, True)


_EXT_CUDA = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>

__global__ void add_one_kernel(float* x, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

void add_one(torch::Tensor x) {
  int64_t n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
'''


def _extension(kit, same_arch):
    import os

    import torch
    from torch.utils.cpp_extension import load_inline

    major, minor = torch.cuda.get_device_capability()
    other = "8.0" if major >= 9 else "9.0"  # SASS runs only on its own major generation
    arch = f"{major}.{minor}" if same_arch else other
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    os.environ["TORCH_EXTENSIONS_DIR"] = str(Path.cwd() / "torch_extensions")
    print(f"{torch.cuda.get_device_name()} (sm_{major}{minor}); building add_one with TORCH_CUDA_ARCH_LIST={arch}")
    ext = load_inline(name=f"add_one_sm{arch.replace('.', '')}", cpp_sources="void add_one(torch::Tensor x);",
                      cuda_sources=_EXT_CUDA, functions=["add_one"], verbose=False)
    x = torch.zeros(1024, device=kit.device)
    ext.add_one(x)
    torch.cuda.synchronize()
    print(f"add_one ran: sum = {float(x.sum()):.0f}")
    kit.result(ran=float(x.sum()) == 1024.0)


def other_arch_only(kit):
    _extension(kit, False)


def this_gpu_arch(kit):
    _extension(kit, True)


def big_tiles(kit):
    _matmul(kit, 256, 256, 128, 4)


def smaller_tiles(kit):
    _matmul(kit, 64, 64, 32, 2)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
