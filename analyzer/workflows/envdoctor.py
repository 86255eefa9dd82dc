"""`llmtriage env`: the environment self-check that debugging an LLM job starts with.

Collects Python, torch (its CUDA build, `cuda.is_available()`, devices with memory and compute
capability), the NVIDIA driver, versions of the usual training libraries (from package metadata,
without importing them), `pip check`, the hub variables, the /dev/shm size and the free disk for
the Hugging Face cache. torch is imported in a child process (a broken CUDA install can hang or
crash an import), so this works, and says so, without torch.

Problems become findings of the matching rules (title, explanation and fixes come from the rule);
text that torch, nvidia-smi or pip print is also run through the normal engine. Checks without a
rule in the knowledge base (low disk space) are reported as synthetic `env-*` findings of the
matching taxonomy category.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

from llmtriage.engine.matcher import scan_bytes
from llmtriage.findings import Finding, Report
from llmtriage.engine.redact import redact
from llmtriage.report.style import SEV, Style, text_width, wrap

PACKAGES = ("torch", "transformers", "accelerate", "deepspeed", "peft", "flash-attn", "bitsandbytes",
            "datasets", "tokenizers", "safetensors", "trl", "vllm", "numpy", "huggingface-hub")
HUB_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT", "HF_HOME",
            "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_TOKEN", "CUDA_VISIBLE_DEVICES", "CUDA_HOME")
SHM_MIN = 1 << 30             # below 1 GiB DataLoader workers run out of shared memory
DISK_MIN = 20 << 30           # free space for the HF cache below which downloads are at risk
PROBE_TIMEOUT = 120

_PROBE = r"""
import json, sys
out = {}
try:
    import torch
except BaseException as e:
    out["error"] = type(e).__name__ + ": " + str(e)
    print("\n@@LLMTRIAGE@@" + json.dumps(out)); sys.exit(0)
out["version"] = torch.__version__
out["cuda_build"] = torch.version.cuda
out["hip_build"] = getattr(torch.version, "hip", None)
try:
    out["cudnn"] = torch.backends.cudnn.version()
except Exception:
    out["cudnn"] = None
try:
    out["is_available"] = bool(torch.cuda.is_available())
except Exception as e:
    out["is_available"] = False
    out["cuda_error"] = type(e).__name__ + ": " + str(e)
out["devices"] = []
if out["is_available"]:
    try:
        out["arch_list"] = torch.cuda.get_arch_list()
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out["devices"].append({"index": i, "name": p.name, "memory_bytes": int(p.total_memory),
                                   "capability": "%d.%d" % (p.major, p.minor)})
    except Exception as e:
        out["cuda_error"] = type(e).__name__ + ": " + str(e)
try:
    out["mps"] = bool(torch.backends.mps.is_available())
except Exception:
    out["mps"] = False
print("\n@@LLMTRIAGE@@" + json.dumps(out))
"""


def _run(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, text=True, errors="replace")
        return p.returncode, p.stdout, p.stderr
    except FileNotFoundError:
        return 127, "", f"{cmd[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{' '.join(cmd)}: timed out after {timeout:.0f} s"


def probe_torch(python: str = sys.executable) -> tuple[dict[str, Any], str]:
    rc, out, err = _run([python, "-c", _PROBE], PROBE_TIMEOUT)
    marker = out.rfind("@@LLMTRIAGE@@")
    if marker < 0:
        return {"error": f"the torch probe failed (exit {rc}): {(err.strip().splitlines() or ['no output'])[-1]}"}, err
    return json.loads(out[marker + len("@@LLMTRIAGE@@"):]), err


def _version(dist: str) -> Optional[str]:
    for name in (dist, dist.replace("-", "_")):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def probe_driver() -> dict[str, Any]:
    d: dict[str, Any] = {"nvidia_smi": shutil.which("nvidia-smi")}
    if d["nvidia_smi"]:
        rc, out, err = _run(["nvidia-smi"], 30)
        d["smi_rc"] = rc
        d["smi_text"] = (out + err)[-4000:]
        m = re.search(r"Driver Version:\s*([\d.]+)", out)
        if m:
            d["driver"] = m.group(1)
        m = re.search(r"CUDA Version:\s*([\d.]+)", out)
        if m:
            d["driver_cuda"] = m.group(1)
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        m = re.search(r"Kernel Module\s+([\d.]+)", text)
        if m:
            d.setdefault("driver", m.group(1))
    except OSError:
        pass
    d["gpu_present"] = bool(d.get("driver")) or any(Path("/dev").glob("nvidia[0-9]*"))
    return d


def _vt(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


def _fs(path: str) -> Optional[dict[str, int]]:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except (OSError, AttributeError):
        return None
    return {"total_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def hf_cache_dir() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.expanduser("~/.cache"), "huggingface")
    return os.path.join(home, "hub")


def collect(*, pip_check: bool = True, torch_probe: bool = True) -> tuple[dict[str, Any], str]:
    """(environment facts, text printed by the probes for the engine to scan)."""
    texts = []
    env: dict[str, Any] = {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "packages": {p: _version(p) for p in PACKAGES},
    }
    if torch_probe:
        env["torch"], err = probe_torch()
        texts.append(err)
    else:
        env["torch"] = {"error": "not probed (--no-torch)"}
    env["driver"] = probe_driver()
    texts.append(env["driver"].pop("smi_text", ""))
    if pip_check:
        rc, out, err = _run([sys.executable, "-m", "pip", "check"], 120)
        lines = [ln for ln in (out + err).splitlines() if ln.strip()]
        env["pip_check"] = {"ok": rc == 0, "problems": lines if rc != 0 else []}
        if rc != 0:
            texts.append(out + err)
    env["hub"] = {v: ("***" if v == "HF_TOKEN" and os.environ.get(v) else os.environ.get(v)) for v in HUB_VARS}
    cache = hf_cache_dir()
    env["hub"]["cache_dir"] = cache
    env["hub"]["cache_disk"] = _fs(cache)
    env["shm"] = _fs("/dev/shm") if os.path.isdir("/dev/shm") else None
    return env, "\n".join(t for t in texts if t)


FIX_KEYS = ("title", "detail", "snippet", "when", "verified_by")   # a rule fix as a finding carries it


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def make_finding(engine: Any, rule_id: str, severity: Optional[str], message: str, evidence: str,
             category: str = "", title: str = "") -> Finding:
    rule = engine.ruleset.by_id.get(rule_id) if engine is not None else None
    if rule is None:   # no such rule (yet): a synthetic finding of the category
        return Finding(rule_id=rule_id, category=category or "unknown", severity=severity or "warning",
                       title=title or message[:90], message=message, line=0, evidence=evidence, role="cause",
                       confidence="medium")
    text = engine.ruleset.text(rule, engine.lang)
    return Finding(rule_id=rule_id, category=rule["category"], severity=severity or rule["severity"],
                   title=text["title"], message=message, line=0, evidence=evidence, cause=text["explain"]["why"],
                   explanation=text["explain"]["what"], fixes=[{k: f[k] for k in FIX_KEYS if f.get(k)} for f in text["fixes"]], role="cause",
                   confidence=rule["confidence"], priority=rule["priority"], references=list(rule["references"]))


def diagnose(env: dict[str, Any], probe_text: str, engine: Any) -> list[Finding]:
    out: list[Finding] = []
    t = env["torch"]
    drv = env["driver"]
    pk = env["packages"]
    gpu = drv.get("gpu_present")
    if "error" in t:
        err = t["error"]
        if "not probed" not in err:
            rid = "system-library-missing" if "cannot open shared object" in err else "python-module-not-found"
            out.append(make_finding(engine, rid, "warning", f"torch cannot be imported: {err}", err))
    else:
        cuda = t.get("cuda_build")
        if not cuda and not t.get("hip_build"):
            out.append(make_finding(engine, "torch-not-compiled-with-cuda", "error" if gpu else "info",
                                f"torch {t['version']} is a CPU-only build" +
                                (f" but an NVIDIA GPU/driver {drv.get('driver', '')} is present" if gpu
                                 else " and no NVIDIA GPU is visible (fine for CPU work)"),
                                f"torch.version.cuda = None (torch {t['version']})"))
        elif not t.get("is_available"):
            why = t.get("cuda_error") or "torch.cuda.is_available() returned False"
            out.append(make_finding(engine, "no-cuda-gpu-detected", "error" if gpu else "info",
                                f"torch {t['version']} (CUDA {cuda or t.get('hip_build')}) sees no usable GPU"
                                + ("" if gpu else " and no NVIDIA driver is installed"), why))
        if cuda and drv.get("driver_cuda") and _vt(drv["driver_cuda"]) < _vt(cuda):
            out.append(make_finding(engine, "nvidia-driver-too-old", None,
                                f"driver {drv.get('driver')} supports CUDA up to {drv['driver_cuda']}, "
                                f"torch was built for CUDA {cuda}", f"CUDA Version: {drv['driver_cuda']}"))
        arch = t.get("arch_list") or []
        for dev in t.get("devices", []):
            maj, mnr = (int(x) for x in dev["capability"].split("."))
            ok = any(a == f"sm_{maj}{mnr}" or (a.startswith(f"sm_{maj}") and a[3 + len(str(maj)):].isdigit()
                                                and int(a[3 + len(str(maj)):]) <= mnr)
                     or (a.startswith("compute_") and a[8:].isdigit() and int(a[8:]) <= maj * 10 + mnr)
                     for a in arch)
            if arch and not ok:
                out.append(make_finding(engine, "no-kernel-image-for-gpu", None,
                                    f"GPU {dev['index']} {dev['name']} (compute capability {dev['capability']}) is "
                                    f"not in this torch build's architectures ({' '.join(arch)})",
                                    f"capability {dev['capability']}"))
        if not cuda and (pk.get("flash-attn") or pk.get("bitsandbytes")) and gpu is False:
            libs = [p for p in ("flash-attn", "bitsandbytes") if pk.get(p)]
            out.append(make_finding(engine, "gpu-required-by-library", "warning",
                                f"{', '.join(libs)} installed but torch has no CUDA build: they will fail to load",
                                ", ".join(f"{p}=={pk[p]}" for p in libs)))
    pc = env.get("pip_check")
    if pc and not pc["ok"]:
        out.append(make_finding(engine, "pip-dependency-conflict", None,
                            f"pip check reports {len(pc['problems'])} broken requirement(s): "
                            + "; ".join(pc["problems"][:3]), (pc["problems"] or [""])[0]))
    shm = env.get("shm")
    if shm and shm["total_bytes"] < SHM_MIN:
        out.append(make_finding(engine, "torch-shm-file-failed", "warning",
                            f"/dev/shm is only {_gib(shm['total_bytes'])}: DataLoader workers (num_workers>0) and "
                            "NCCL need more (docker: --shm-size=16g or --ipc=host)",
                            f"/dev/shm size {shm['total_bytes']} bytes"))
    hub = env["hub"]
    disk = hub.get("cache_disk")
    if disk and disk["free_bytes"] < DISK_MIN:
        out.append(make_finding(engine, "env-low-disk-space", "warning",
                            f"only {_gib(disk['free_bytes'])} free for the Hugging Face cache ({hub['cache_dir']}); "
                            "a 7B checkpoint needs ~15 GiB", f"{hub['cache_dir']}: {disk['free_bytes']} bytes free",
                            category="disk-full", title="Little free disk space for the model cache"))
    offline = any(str(hub.get(v) or "").lower() in ("1", "true", "yes", "on")
                  for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if offline and not (os.path.isdir(hub["cache_dir"]) and any(os.scandir(hub["cache_dir"]))):
        out.append(make_finding(engine, "hf-offline-cache-miss", "warning",
                            f"offline mode is on but the hub cache {hub['cache_dir']} is empty: every from_pretrained "
                            "of a repo id will fail", "HF_HUB_OFFLINE=1"))
    endpoint = hub.get("HF_ENDPOINT")
    if endpoint and not re.match(r"https?://", endpoint):
        out.append(make_finding(engine, "hub-connection-error", "warning",
                            f"HF_ENDPOINT={endpoint} is not an http(s) URL", f"HF_ENDPOINT={endpoint}"))
    # what torch / nvidia-smi / pip printed, through the normal rules
    if probe_text.strip() and engine is not None:
        seen = {f.rule_id for f in out}
        for f in scan_bytes(engine, probe_text.encode("utf-8", "replace"), "environment").findings:
            if f.rule_id not in seen and f.rule_id != "unknown":
                f.line = 0
                f.last_line = 0
                out.append(f)
    out.sort(key=Finding.sort_key)
    return out


def env_report(engine: Any, *, pip_check: bool = True, torch_probe: bool = True) -> Report:
    env, text = collect(pip_check=pip_check, torch_probe=torch_probe)
    rep = Report(source="environment", findings=diagnose(env, text, engine))
    rep.extra["environment"] = env
    return rep


def render_env_human(rep: Report, out: Any, *, color: bool = False, lang: Optional[str] = None,
                     width: Optional[int] = None) -> None:
    env = rep.extra["environment"]
    t, d = env["torch"], env["driver"]
    w = out.write
    py = env["python"]
    w(f"Python      {py['version']} ({py['executable']}) on {py['platform']}\n")
    if "error" in t:
        w(f"torch       not available: {t['error']}\n")
    else:
        build = f"CUDA {t['cuda_build']}" if t.get("cuda_build") else (f"ROCm {t['hip_build']}" if t.get("hip_build")
                                                                         else "CPU-only")
        w(f"torch       {t['version']} ({build} build"
          + (f", cuDNN {t['cudnn']}" if t.get("cudnn") else "") + f"), cuda.is_available() = {t.get('is_available')}\n")
        for dev in t.get("devices", []):
            w(f"  GPU {dev['index']}     {dev['name']}, {_gib(dev['memory_bytes'])}, compute capability "
              f"{dev['capability']}\n")
        if t.get("cuda_error"):
            w(f"  CUDA error: {t['cuda_error']}\n")
    w("driver      " + (f"NVIDIA {d['driver']}" + (f" (supports CUDA {d['driver_cuda']})" if d.get("driver_cuda") else "")
                        if d.get("driver") else "no NVIDIA driver found (nvidia-smi " +
                        ("present" if d.get("nvidia_smi") else "not found") + ")") + "\n")
    pk = env["packages"]
    w("packages    " + ", ".join(f"{p} {pk[p] or '-'}" for p in PACKAGES if p != "torch") + "\n")
    pc = env.get("pip_check")
    if pc is not None:
        w("pip check   " + ("no broken requirements" if pc["ok"] else f"{len(pc['problems'])} problem(s)") + "\n")
        for ln in pc["problems"][:10]:
            w(f"  {ln}\n")
    hub = env["hub"]
    vars_ = " ".join(f"{v}={hub[v]}" for v in HUB_VARS if hub.get(v) is not None) or "no HF_* variables set"
    w(f"hub         {vars_}\n")
    disk = hub.get("cache_disk")
    w(f"cache       {hub['cache_dir']}" + (f" ({_gib(disk['free_bytes'])} free)" if disk else "") + "\n")
    shm = env.get("shm")
    w("/dev/shm    " + (f"{_gib(shm['total_bytes'])} ({_gib(shm['free_bytes'])} free)" if shm else "not present") + "\n")
    w("\n")
    if not rep.findings:
        w("✔ no environment problems found\n")
        return
    st = Style(color)
    w(st("Findings", "bold") + "\n")
    for f in rep.findings:
        icon, colr = SEV.get(f.severity, ("•", "blue"))
        w(f"  {st(icon + ' ' + f.severity, colr, 'bold')}  {st(f.title, 'bold')}  {st('[' + f.category + ' / ' + f.rule_id + ']', 'dim')}\n")
        w(f"    {wrap(redact(f.message), width)}\n")
        for n, fx in enumerate(f.fixes[:3], 1):
            w(f"    {n}. {fx['title']}: {wrap(fx['detail'], width, 7, 6 + text_width(fx['title']) + len(str(n)))}\n")
