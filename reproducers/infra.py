"""Infrastructure failures shown on a CPU: a segfault in native code called through ctypes, a
Dynamo graph break under torch.compile(fullgraph=True), a checkpoint save into a directory the
job may not write, and torchrun (gloo) stopped by SIGTERM the way a scheduler preempts a job.

Each variant that cannot show its failure on this machine (no Dynamo, no way to drop root
privileges...) calls ``kit.skip(reason)`` and `verify` lists the scenario as skipped.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="native-crash-segfault",
        module=__name__,
        category="native-crash",
        rules=("segmentation-fault",),
        devices=("cpu",),
        description="a tokenizer-style native call given a NULL pointer through ctypes (faulthandler on)",
        fail=Variant("null-pointer", "libc strlen() called through ctypes without argtypes, on None",
                     env=(("PYTHONFAULTHANDLER", "1"),)),
        fixes=(Variant("declared-argtypes", "argtypes declared (c_char_p) and a bytes buffer passed",
                       env=(("PYTHONFAULTHANDLER", "1"),)),),
        checks=(checks.completed,),
    ),
    Scenario(
        name="compile-error-fullgraph",
        module=__name__,
        category="compile-error",
        rules=("dynamo-backend-compiler-failed",),
        devices=("cpu",),
        description="torch.compile(fullgraph=True) over a branch on a tensor's value (Dynamo Unsupported)",
        fail=Variant("data-dependent-branch", "if x.sum() > 0: ... inside a fullgraph-compiled function"),
        fixes=(Variant("allow-graph-break", "the same function compiled without fullgraph=True"),
               Variant("torch-where", "the branch rewritten as torch.where, still fullgraph=True")),
        checks=(checks.completed,),
    ),
    Scenario(
        name="filesystem-error-readonly-checkpoint",
        module=__name__,
        category="filesystem-error",
        rules=("permission-denied",),
        devices=("cpu",),
        description="save_pretrained of a checkpoint into an output directory the job's user may not write",
        fail=Variant("readonly-output-dir", "output_dir is mode 0555 and owned by someone else", timeout=240),
        fixes=(Variant("writable-output-dir", "output_dir owned by the job's user", timeout=240),),
        checks=(checks.completed,),
    ),
    Scenario(
        name="scheduler-kill-torchrun-sigterm",
        module=__name__,
        category="scheduler-kill",
        rules=("torchelastic-sigterm",),
        devices=("cpu",),
        description="torchrun (2 gloo workers) sent SIGTERM mid-training, as a scheduler preempting the job",
        fail=Variant("preempted", "SIGTERM to the torchrun agent after step 3", timeout=300),
        fixes=(Variant("checkpoint-and-resume",
                       "workers save a checkpoint on SIGTERM; the resubmitted job resumes and finishes",
                       timeout=420),),
        checks=(checks.completed,),
    ),
    Scenario(
        name="nccl-duplicate-gpu",
        module=__name__,
        category="nccl-error",
        rules=("nccl-duplicate-gpu",),
        devices=("cuda",),
        description="torchrun starts 2 NCCL ranks whose script hard-codes cuda:0, so both sit on one GPU",
        fail=Variant("hardcoded-cuda0", "2 processes, device = 'cuda:0' in every rank", timeout=120),
        fixes=(Variant("one-rank-per-gpu",
                       "--nproc-per-node = visible GPUs, torch.cuda.set_device(LOCAL_RANK) before init",
                       timeout=120),),
        checks=(checks.completed,),
    ),
]


# ------------------------------------------------------------------ native crash
def _libc():
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def null_pointer(kit):
    import ctypes

    libc = _libc()
    print("tokenizing 3 documents with the native length helper")
    for doc in (b"the model", b"tiny data", None):   # the third record is missing
        # no argtypes: None goes down as a NULL pointer and strlen reads address 0
        n = libc.strlen(ctypes.c_char_p(doc))
        print("length", n)


def declared_argtypes(kit):
    import ctypes

    libc = _libc()
    libc.strlen.argtypes = [ctypes.c_char_p]
    libc.strlen.restype = ctypes.c_size_t
    print("tokenizing 3 documents with the native length helper")
    for doc in (b"the model", b"tiny data", None):
        n = libc.strlen(doc if doc is not None else b"")   # missing record -> empty buffer
        print("length", n)


# ------------------------------------------------------------------ torch.compile
def _dynamo_or_skip(kit):
    import torch

    if not hasattr(torch, "compile"):
        kit.skip("this torch has no torch.compile")
    try:
        import torch._dynamo  # noqa: F401
    except Exception as exc:  # e.g. a Python version Dynamo does not support
        kit.skip(f"torch._dynamo unavailable: {type(exc).__name__}: {exc}")
    return torch


def _scaled(x):
    import torch

    if x.sum() > 0:          # branch on a tensor's value: a graph break
        return torch.relu(x) * 2
    return x - 1


def _scaled_where(x):
    import torch

    return torch.where(x.sum() > 0, torch.relu(x) * 2, x - 1)


def _run_compiled(kit, fn, fullgraph):
    torch = _dynamo_or_skip(kit)
    # backend="eager": Dynamo traces exactly as with Inductor but needs no C++/Triton toolchain
    compiled = torch.compile(fn, fullgraph=fullgraph, backend="eager")
    x = torch.randn(4, 8)
    out = compiled(x)
    ref = fn(x)
    print("compiled output matches eager:", bool(torch.allclose(out, ref)))
    kit.result(matches=bool(torch.allclose(out, ref)))


def data_dependent_branch(kit):
    _run_compiled(kit, _scaled, fullgraph=True)


def allow_graph_break(kit):
    _run_compiled(kit, _scaled, fullgraph=False)


def torch_where(kit):
    _run_compiled(kit, _scaled_where, fullgraph=True)


# ------------------------------------------------------------------ read-only checkpoint dir
_SAVE = """
import os, sys
sys.path.insert(0, {here!r})
from _child import Kit
from pathlib import Path
kit = Kit("cpu", Path.cwd())
model = kit.llama()
out = {out!r}
print(f"Saving model checkpoint to {{out}}/checkpoint-2")
model.save_pretrained(os.path.join(out, "checkpoint-2"))
print("saved:", sorted(os.listdir(os.path.join(out, "checkpoint-2"))))
"""


_DAC_CAPS = (1, 2, 3)   # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
_PR_CAPBSET_DROP = 24


def _drop_dac_caps():
    """preexec_fn: leave the capabilities that let root ignore file permissions out of the
    bounding set, so the exec'd interpreter is root bound by file modes like any user."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _DAC_CAPS:
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _save_checkpoint(kit, readonly):
    """Save a checkpoint into output/checkpoint-2. Root ignores directory modes, so as root the
    save runs in a child without the DAC capabilities (skipped where they cannot be dropped)."""
    base = Path(tempfile.mkdtemp(prefix="llmtriage-ckpt-"))
    out = base / "output"
    out.mkdir()
    os.chmod(out, 0o555 if readonly else 0o755)
    env = dict(os.environ, HOME=str(base), HF_HOME=str(base / "hf"))
    preexec = _drop_dac_caps if os.geteuid() == 0 else None
    try:
        probe = subprocess.run([sys.executable, "-c", f"import os; print(os.access({str(out)!r}, os.W_OK))"],
                               cwd=base, env=env, preexec_fn=preexec, capture_output=True, text=True)
        if probe.returncode != 0:
            kit.skip("cannot run without the permission-override capabilities here: "
                     + " ".join(probe.stderr.strip().splitlines()[-1:]))
        if readonly and probe.stdout.strip() != "False":
            kit.skip("directory permissions are not enforced here (the read-only dir is writable)")
        here = str(Path(__file__).resolve().parent)
        sys.stdout.flush()
        proc = subprocess.run([sys.executable, "-u", "-c", _SAVE.format(here=here, out=str(out))],
                              cwd=base, env=env, preexec_fn=preexec)
    finally:
        os.chmod(out, 0o755)
        shutil.rmtree(base, ignore_errors=True)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    kit.result(saved=True)


def readonly_output_dir(kit):
    _save_checkpoint(kit, readonly=True)


def writable_output_dir(kit):
    _save_checkpoint(kit, readonly=False)


# ------------------------------------------------------------------ torchrun + SIGTERM
_TRAIN = """
import os, signal, sys, time, json
import torch, torch.distributed as dist
torch.set_num_threads(1)
STEPS = 8
ckpt = os.environ.get("CKPT")
dist.init_process_group("gloo")
rank = dist.get_rank()
start, stop = 0, [False]
w = torch.zeros(4)
if ckpt and os.path.exists(ckpt):
    state = json.load(open(ckpt))
    start, w = state["step"], torch.tensor(state["w"])
    print(f"[rank{rank}] resuming from checkpoint at step {start}", flush=True)
if ckpt:
    signal.signal(signal.SIGTERM, lambda *a: stop.__setitem__(0, True))
for step in range(start + 1, STEPS + 1):
    g = torch.ones(4) * (rank + 1)
    dist.all_reduce(g)
    w -= 0.01 * g
    print(f"[rank{rank}] step {step}/{STEPS} loss {float(w.sum()):.4f}", flush=True)
    time.sleep(1.0)
    flag = torch.tensor([1.0 if stop[0] else 0.0])
    dist.all_reduce(flag)            # every rank stops at the same step
    if flag.item() > 0:
        if rank == 0:
            json.dump({"step": step, "w": w.tolist()}, open(ckpt, "w"))
            print(f"[rank0] SIGTERM: checkpoint saved at step {step}, exiting", flush=True)
        sys.exit(0)
if rank == 0 and ckpt:
    json.dump({"step": STEPS, "w": w.tolist(), "done": True}, open(ckpt, "w"))
print(f"[rank{rank}] training finished", flush=True)
dist.destroy_process_group()
"""


_STEP_RE = re.compile(r"\[rank(\d+)\] step (\d+)/")


def _launch(script, env, echo, kill_after_step=None, nproc=2):
    """Run torchrun; with kill_after_step, send SIGTERM to the agent once every rank logged it."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", str(nproc), str(script)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, bufsize=1)
    seen, sent, lines = set(), False, []
    for line in proc.stdout:
        lines.append(line)
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()
        if kill_after_step and not sent:
            # two ranks share one pipe, so their lines can arrive glued together on one line:
            # read every "[rankN] step K/" on it, and never wait past the step after the mark
            steps = [(r, int(k)) for r, k in _STEP_RE.findall(line)]
            seen.update(r for r, k in steps if k >= kill_after_step)
            if len(seen) >= 2 or any(k > kill_after_step for _, k in steps):
                proc.send_signal(signal.SIGTERM)   # what Slurm / Kubernetes send on preemption
                sent = True
    return proc.wait(), lines


def _torchrun_env(base):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("PYTHONFAULTHANDLER", None)
    return env


def preempted(kit):
    base = Path.cwd()
    script = base / "train_ddp.py"
    script.write_text(textwrap.dedent(_TRAIN))
    rc, _ = _launch(script, _torchrun_env(base), echo=True, kill_after_step=3)
    sys.exit(rc if rc else 1)


def checkpoint_and_resume(kit):
    base = Path.cwd()
    script = base / "train_ddp.py"
    script.write_text(textwrap.dedent(_TRAIN))
    env = dict(_torchrun_env(base), CKPT=str(base / "ckpt.json"))
    # first submission: preempted; its output stays in its own log file, as a scheduler keeps it
    rc1, first = _launch(script, env, echo=False, kill_after_step=3)
    (base / "attempt-1.log").write_text("".join(first))
    import json

    saved = json.loads((base / "ckpt.json").read_text())["step"] if (base / "ckpt.json").exists() else 0
    print(f"attempt 1 ended (exit {rc1}); resuming the resubmitted job from step {saved}")
    rc2, _ = _launch(script, env, echo=True)
    final = json.loads((base / "ckpt.json").read_text())
    kit.result(resumed_from=saved, finished=bool(final.get("done")))
    if rc2 != 0 or not final.get("done") or saved < 3:
        sys.exit(rc2 or 1)


# ------------------------------------------------------------------ NCCL: two ranks on one GPU
_NCCL = """
import os, torch, torch.distributed as dist
local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device(os.environ.get("DEVICE") or f"cuda:{local_rank}")
if not os.environ.get("DEVICE"):
    torch.cuda.set_device(device)
dist.init_process_group("nccl")
rank = dist.get_rank()
w = torch.zeros(1024, device=device)
for step in range(1, 4):
    g = torch.ones(1024, device=device) * (rank + 1)
    dist.all_reduce(g)
    w -= 0.01 * g
    print(f"[rank{rank}] step {step}/3 on {device} loss {float(w.sum()):.4f}", flush=True)
print(f"[rank{rank}] training finished", flush=True)
dist.destroy_process_group()
"""


def _nccl_job(kit, nproc, device):
    import torch

    script = Path.cwd() / "train_nccl.py"
    script.write_text(textwrap.dedent(_NCCL))
    env = dict(_torchrun_env(Path.cwd()), DEVICE=device)
    print(f"visible GPUs: {torch.cuda.device_count()}, starting {nproc} ranks")
    rc, lines = _launch(script, env, echo=True, nproc=nproc)
    kit.result(finished=sum("training finished" in x for x in lines))
    if rc != 0:
        sys.exit(rc)


def hardcoded_cuda0(kit):
    _nccl_job(kit, 2, "cuda:0")


def one_rank_per_gpu(kit):
    import torch

    _nccl_job(kit, torch.cuda.device_count(), "")


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
