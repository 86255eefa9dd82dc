"""Fleet triage: one row per failed-job log (or per-rank job directory), on any engine.

`rows(paths)` expands sources (files, directories, globs, fsspec URLs) and triages each item with
`triage_item`, a plain-Python function that streams one log (or one job directory through
`jobs.analyze_job`) and returns a flat row dict: Spark `mapInPandas`, Dask or a shell loop can call it.
`triage_dataset(ds)` maps a Ray Dataset of paths (streamed by the worker that reads them) or bytes.
`run(items, engine="local"|"ray")` runs a list of items on local processes or Ray.

Memory: a worker holds one log's scan state at a time (the engine streams 64 KiB blocks); a row is a
few hundred bytes, so the driver holds rows, never log text. Ray, pyarrow and fsspec are optional
(the `fleet` extra) and imported only where used.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import re
import shutil
import tempfile
from collections import Counter
from datetime import datetime
from functools import partial
from hashlib import blake2b
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

from llmtriage.version import __version__
from llmtriage import get_engine, load_rules, scan_source
from llmtriage.errors import InputError
from llmtriage.findings import Finding, Report
from llmtriage.engine.logwindow import lines_around
from llmtriage.job.analysis import analyze_job

if TYPE_CHECKING:
    from llmtriage.engine.matcher import Engine
from llmtriage.job.diff import template_of
from llmtriage.job.inputs import LOG_SUFFIXES
from llmtriage.engine.logparse import split_prefix
from llmtriage.report.render import redact
from llmtriage.ruleset.loader import builtin_rules_dir

FIELDS: list[tuple[str, str]] = [       # (name, arrow type) in Parquet column order
    ("source", "string"), ("kind", "string"), ("size", "int64"), ("mtime", "float64"), ("status", "string"),
    ("category", "string"), ("rule_id", "string"), ("action", "string"), ("severity", "string"),
    ("line", "int64"), ("rank", "int64"), ("node", "string"), ("gpu", "string"), ("job_id", "string"),
    ("step", "int64"), ("phase", "string"), ("message", "string"), ("evidence", "string"),
    ("unknown_template", "string"), ("error", "string"), ("llmtriage_version", "string"),
    ("ruleset_hash", "string"),
]
HOSTS_KEY = "fleet_hosts"
MAX_HOSTS = 256
MAX_DEPTH = 8
_RANK_NAMED = re.compile(r"(?i)(?:rank|proc|process|worker|task)[-_.]?\d{1,5}")
_SLURM = re.compile(rb"slurmstepd(?:\[\d+\])?: error: \*\*\* (?:JOB|STEP) (\d+)(?:\.\w+)? ON ([A-Za-z0-9][\w.-]{0,62})")
_NCCL_LINE = re.compile(rb"(?m)^(?:[^\s:]{1,24}:? )?([A-Za-z][\w.-]{0,62}):\d{1,9}:\d{1,9} \[\d{1,3}\] NCCL ")
_HOST_LINE = re.compile(rb"(?m)^[ \t]*([A-Za-z][A-Za-z0-9_.]*-[A-Za-z0-9_.-]*\d|[a-z][a-z_]*\d+): (?=\S)")
_NCCL_TEXT = re.compile(r"(?:^|\s)([A-Za-z][\w.-]{0,62}):\d{1,9}:\d{1,9} \[\d{1,3}\] NCCL ")
_NOT_HOST = re.compile(rb"(?i)^(?:rank|default|step|epoch|iter|layer|cuda|gpu|device|worker|proc|process|thread|task)\d")
_NAME_HOST = re.compile(r"(?i)(?<![a-z0-9])((?:[a-z0-9]+-)*(?:node|host|compute|gpu-node)[-_]?\d+)")


# ------------------------------------------------------------------------------ texts

_TEXTS: dict[str, Any] = {}


def texts(lang: Optional[str] = None) -> dict[str, Any]:
    """User-facing text of the fleet command (rules/fleet.yaml) in `lang` (en or zh)."""
    if not _TEXTS:
        import yaml   # deferred: yaml only for the rule data a fleet run needs

        _TEXTS.update(yaml.safe_load((builtin_rules_dir() / "fleet.yaml").read_text(encoding="utf-8")))
    return _TEXTS["zh" if lang == "zh" else "en"]


def require(module: str, lang: Optional[str] = None) -> Any:
    """Import an optional dependency of the fleet extra, or raise a one-line InputError naming the extra."""
    try:
        return import_module(module)
    except ImportError:
        raise InputError(texts(lang)["need_extra"].format(what=module.split(".")[0])) from None


# ------------------------------------------------------------------------------ sources

def _is_url(src: str) -> bool:
    return "://" in src and not src.startswith("file://")


def _fs(src: str, lang: Optional[str] = None) -> tuple[Any, str]:
    """(fsspec filesystem or None for local paths, path within it)."""
    if src.startswith("file://"):
        return None, src[len("file://"):]
    if not _is_url(src):
        return None, src
    fsspec = require("fsspec", lang)
    try:
        return fsspec.core.url_to_fs(src)
    except ImportError as exc:
        pkg = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs"}.get(src.split("://")[0], exc.name)
        raise InputError(texts(lang)["need_remote"].format(url=src, package=pkg)) from None


def _url(fs: Any, path: str) -> str:
    return path if fs is None else fs.unstrip_protocol(path)


def _is_log(name: str) -> bool:
    low = name.lower()
    return low.endswith(LOG_SUFFIXES) and not low.endswith(".expected.json")


def _entries(fs: Any, d: str) -> tuple[list[tuple[str, int, float]], list[str]]:
    """(files as (path, size, mtime), subdirectories) of directory `d`, sorted."""
    files, dirs = [], []
    if fs is None:
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir():
                    dirs.append(e.path)
                elif e.is_file():
                    st = e.stat()
                    files.append((e.path, st.st_size, st.st_mtime))
    else:
        for info in fs.ls(d, detail=True):
            if info.get("type") == "directory":
                dirs.append(info["name"])
            else:
                files.append((info["name"], int(info.get("size") or 0), _mtime(info)))
    return sorted(files), sorted(dirs)


def _mtime(info: dict[str, Any]) -> float:
    for k in ("mtime", "LastModified", "updated", "created"):
        v = info.get(k)
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, datetime):
            return v.timestamp()
        if isinstance(v, str):
            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


def _walk(fs: Any, d: str, depth: int = 0) -> list[dict[str, Any]]:
    """Items under directory `d`: a directory whose (2+) log files are all named per rank is one job;
    otherwise each log file is one item and subdirectories are walked."""
    files, dirs = _entries(fs, d)
    logs = [f for f in files if _is_log(os.path.basename(f[0]))]
    if len(logs) >= 2 and all(_RANK_NAMED.search(os.path.basename(p)) for p, _, _ in logs):
        return [{"source": _url(fs, d), "kind": "job", "size": sum(s for _, s, _ in logs),
                 "mtime": max(m for _, _, m in logs)}]
    out = [{"source": _url(fs, p), "kind": "log", "size": s, "mtime": m} for p, s, m in logs]
    if depth < MAX_DEPTH:
        for sub in dirs:
            out += _walk(fs, sub, depth + 1)
    return out


def expand_sources(sources: Iterable[str], *, since: Optional[float] = None,
                   lang: Optional[str] = None) -> list[dict[str, Any]]:
    """Work items {source, kind (log | job), size, mtime} for files, directories, globs and URLs."""
    items: list[dict[str, Any]] = []
    for src in sources:
        fs, path = _fs(src, lang)
        if any(c in path for c in "*?["):
            hits = sorted(glob.glob(path)) if fs is None else sorted(fs.glob(path))
        else:
            hits = [path]
        found: list[dict[str, Any]] = []
        for h in hits:
            isdir = os.path.isdir(h) if fs is None else fs.isdir(h)
            if isdir:
                found += _walk(fs, h)
            elif os.path.isfile(h) if fs is None else fs.isfile(h):
                if fs is None:
                    st = os.stat(h)
                    size, mtime = st.st_size, st.st_mtime
                else:
                    info = fs.info(h)
                    size, mtime = int(info.get("size") or 0), _mtime(info)
                found.append({"source": _url(fs, h), "kind": "log", "size": size, "mtime": mtime})
        if not found:
            raise InputError(texts(lang)["no_source"].format(source=src))
        items += found
    seen: set[str] = set()
    out = []
    for it in items:
        if it["source"] not in seen and (since is None or it["mtime"] >= since):
            seen.add(it["source"])
            out.append(it)
    return out


# ------------------------------------------------------------------------------ host hints

class HostScan:
    """Block observer: the Slurm header's job id and node (every block), and node names from NCCL
    `host:pid:tid` and pdsh/deepspeed `node-3: ` line prefixes (counts, at most MAX_HOSTS names; the
    first 4 blocks and every 16th after, so a multi-GB log pays a few regex passes, not one per block)."""

    def __init__(self, engine: Any = None):
        self.slurm: Optional[tuple[str, str]] = None
        self.hosts: Counter[str] = Counter()
        self.blocks = 0

    def feed(self, lines: bytes, view: bytes = b"", line_base: int = 0) -> None:
        if self.slurm is None and b"slurmstepd" in lines:
            m = _SLURM.search(lines)
            if m:
                self.slurm = (m.group(1).decode(), m.group(2).decode())
        self.blocks += 1
        if self.blocks > 4 and self.blocks % 16:       # node names: the first blocks, then every 16th
            return
        found: list[bytes] = []
        if b" NCCL " in lines:
            found += _NCCL_LINE.findall(lines)
        if b": " in lines:
            found += [h for h in _HOST_LINE.findall(lines) if not _NOT_HOST.match(h)]
        for h in found:
            name = h.decode("ascii", "replace")
            if name in self.hosts or len(self.hosts) < MAX_HOSTS:
                self.hosts[name] += 1

    def result(self) -> dict[str, Any]:
        return {"slurm": list(self.slurm) if self.slurm else None, "hosts": dict(self.hosts.most_common(16))}

    def finish(self, report: Report, findings: list[Finding]) -> None:
        report.extra[HOSTS_KEY] = self.result()


def scan_hosts(path: str) -> dict[str, Any]:
    """HostScan over one local file, streamed in 1 MiB pieces (a job's first failing rank)."""
    hs = HostScan()
    tail = b""
    with open(path, "rb") as fh:
        while True:
            piece = fh.read(1 << 20)
            if not piece:
                break
            data = tail + piece
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) < (4 << 20):
                tail = data
                continue
            cut = cut or len(data)
            hs.feed(data[:cut])
            tail = data[cut:]
    if tail:
        hs.feed(tail)
    return hs.result()


def node_of(top: Optional[Finding], hosts: Optional[dict[str, Any]], local_path: Optional[str], source: str,
            total_lines: Optional[int] = None) -> Optional[str]:
    """The node a finding happened on: a `host` capture, the prefix of its own line, the Slurm header,
    the only node named in the log, else a node name in the file or directory name."""
    if top is not None:
        cap = top.captures.get("host") or top.captures.get("node")
        if cap:
            return cap
        if local_path is not None and top.line > 0:
            for _, text in lines_around(Path(local_path), top.line, 0, 0, total_lines=total_lines):
                host = split_prefix(text).host
                m = _NCCL_TEXT.search(text)
                if host or m:
                    return host or m.group(1)
    hosts = hosts or {}
    if hosts.get("slurm"):
        return hosts["slurm"][1]
    named = hosts.get("hosts") or {}
    if len(named) == 1:
        return next(iter(named))
    for part in reversed(source.replace("\\", "/").split("/")[-3:]):
        m = _NAME_HOST.search(part)
        if m:
            return m.group(1)
    return None


# ------------------------------------------------------------------------------ one item

_ENGINES: dict[tuple, tuple["Engine", str]] = {}


def engine_for(rules_dirs: tuple[str, ...] = (), lang: Optional[str] = None) -> tuple[Engine, str]:
    """A compiled engine with the host observer (one per worker process) and the rule set's hash."""
    key = (tuple(rules_dirs), lang)
    if key not in _ENGINES:
        rs = load_rules(list(rules_dirs))
        h = blake2b(json.dumps(rs.rules, sort_keys=True, default=str).encode(), digest_size=8).hexdigest()
        _ENGINES[key] = (get_engine(rs, lang=lang, observers=[HostScan]), h)
    return _ENGINES[key]


def _get(obj: Any, name: str) -> Any:
    """A field another llmtriage version may not have yet (report status, finding action)."""
    if obj is None:
        return None
    val = getattr(obj, name, None)
    if val is None and isinstance(getattr(obj, "extra", None), dict):
        val = obj.extra.get(name)
    return val or None


def empty_row(item: dict[str, Any], ruleset_hash: Optional[str] = None) -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name, _ in FIELDS}
    row.update(source=item.get("source"), kind=item.get("kind", "log"), size=item.get("size"), mtime=item.get("mtime"),
               llmtriage_version=__version__, ruleset_hash=ruleset_hash)
    return row


def _fill(row: dict[str, Any], rep: Report, top: Optional[Finding], failed: bool) -> None:
    row["status"] = _get(rep, "status") or ("failed" if failed else "ok")
    row["action"] = _get(rep, "action") or _get(top, "action")
    if top is not None:
        row.update(category=top.category, rule_id=top.rule_id, severity=top.severity, line=top.line,
                   message=redact(top.message)[:2000], evidence=redact(top.evidence)[:1000])
        row["gpu"] = top.captures.get("pci") or top.captures.get("gpu")
        if top.rule_id == "unknown":
            row["unknown_template"] = template_of(redact(top.evidence or top.message))


def triage_item(item: dict[str, Any], *, data: Optional[bytes] = None, rules_dirs: tuple[str, ...] = (),
                lang: Optional[str] = None) -> dict[str, Any]:
    """One row for one work item {source, kind}: a log streamed from a path or URL (or `data` bytes),
    or a job directory of per-rank logs. An unreadable, empty or binary input gives a row with
    `error` set and no category; this function does not raise for a bad input."""
    engine, h = engine_for(rules_dirs, lang)
    row = empty_row(item, h)
    src = str(item.get("source") or "-")
    try:
        if item.get("kind") == "job":
            _fill_job(row, src, rules_dirs, lang)
        else:
            _fill_log(row, engine, src, data, lang)
    except InputError as exc:
        row["error"] = str(exc)
    except OSError as exc:
        row["error"] = f"{src}: {exc.strerror or exc}"
    except Exception as exc:  # noqa: BLE001 - one bad input never stops a fleet run
        row["error"] = redact(f"{src}: {type(exc).__name__}: {exc}")[:500]
    if row["error"]:
        row["status"] = "unreadable"
    return row


def _fill_log(row: dict[str, Any], engine: Engine, src: str, data: Optional[bytes], lang: Optional[str]) -> None:
    fs, path = (None, src) if data is not None else _fs(src, lang)
    if data is not None:
        rep = scan_source(engine, bytes(data), name=src)
        row["size"] = row["size"] or len(data)
    elif fs is None:
        rep = scan_source(engine, Path(path), name=src)
    else:
        with fs.open(path, "rb") as fh:
            rep = scan_source(engine, fh, name=src)
    hosts = rep.extra.pop(HOSTS_KEY, None)
    row["size"] = row["size"] or rep.bytes
    top = rep.findings[0] if rep.findings else None
    _fill(row, rep, top, bool(rep.errors))
    row.update(rank=top.rank if top else None, phase=rep.extra.get("phase"), step=rep.extra.get("step"))
    local = path if fs is None and data is None else None
    row["node"] = node_of(top, hosts, local, src, rep.lines)
    if hosts and hosts.get("slurm"):
        row["job_id"] = hosts["slurm"][0]


def _fill_job(row: dict[str, Any], src: str, rules_dirs: tuple[str, ...], lang: Optional[str]) -> None:
    fs, path = _fs(src, lang)
    tmp = None
    try:
        local = path
        if fs is not None:          # per-rank files of a remote job: streamed to a temporary folder
            tmp = tempfile.mkdtemp(prefix="llmtriage-job-")
            for info in fs.ls(path, detail=True):
                name = os.path.basename(info["name"].rstrip("/"))
                if info.get("type") != "directory" and _is_log(name):
                    with fs.open(info["name"], "rb") as a, open(os.path.join(tmp, name), "wb") as b:
                        shutil.copyfileobj(a, b, 1 << 20)
            local = tmp
        res = analyze_job([local], lang=lang, rules_dirs=tuple(rules_dirs))
        first = res.first
        rep = res.reports[first.report_index or 0] if first is not None else res.reports[0]
        _fill(row, rep, res.root, res.failed)
        row.update(rank=first.rank if first else None, phase=res.phase, step=res.step)
        hosts = scan_hosts(first.source) if first is not None else None
        name = (src.rstrip("/") + "/" + os.path.basename(first.source)) if first is not None else src
        row["node"] = node_of(res.root, hosts, first.source if first else None, name, rep.lines)
        if hosts and hosts.get("slurm"):
            row["job_id"] = hosts["slurm"][0]
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------ engines

def rows(paths: Iterable[str], *, jobs: int = 1, rules_dirs: Iterable[str] = (), lang: Optional[str] = None,
         since: Optional[float] = None) -> list[dict[str, Any]]:
    """Rows for every log and job under `paths`, on local processes (`jobs`; 0 = one per CPU)."""
    items = expand_sources(list(paths), since=since, lang=lang)
    return run(items, engine="local", jobs=jobs, rules_dirs=tuple(rules_dirs), lang=lang)


def run(items: list[dict[str, Any]], *, engine: str = "local", jobs: int = 1, address: Optional[str] = None,
        rules_dirs: tuple[str, ...] = (), lang: Optional[str] = None) -> list[dict[str, Any]]:
    """Triage `items` on local processes or on Ray; rows sorted by source."""
    if engine == "ray":
        out = _run_ray(items, jobs=jobs, address=address, rules_dirs=rules_dirs, lang=lang)
    else:
        fn = partial(triage_item, rules_dirs=rules_dirs, lang=lang)
        n = min(jobs or os.cpu_count() or 1, len(items))
        if n > 1:
            import multiprocessing as mp   # deferred: only for the local process pool

            engine_for(rules_dirs, lang)       # compiled once here, shared copy-on-write by forked workers

            ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
            with ctx.Pool(n) as pool:
                out = list(pool.imap_unordered(fn, items, chunksize=1))
        else:
            out = [fn(it) for it in items]
    return sorted(out, key=lambda r: str(r["source"]))


def _ray_row(rec: dict[str, Any], *, rules_dirs: tuple[str, ...], lang: Optional[str]) -> dict[str, Any]:
    data = rec.get("bytes")
    src = rec.get("source") or rec.get("path") or rec.get("item") or "-"
    item = {"source": str(src), "kind": rec.get("kind") or "log", "size": rec.get("size"), "mtime": rec.get("mtime")}
    return triage_item(item, data=data, rules_dirs=rules_dirs, lang=lang)


def triage_dataset(ds: Any, *, rules_dirs: Iterable[str] = (), lang: Optional[str] = None) -> Any:
    """Map a Ray Dataset to fleet rows. Each record holds `path` (or `source`/`item`: a local path or
    fsspec URL that the worker streams, the way to keep log text out of the object store) and
    optionally `kind` ("job" for a per-rank directory), or `bytes` (e.g. `ray.data.read_binary_files(...,
    include_paths=True)`)."""
    return ds.map(partial(_ray_row, rules_dirs=tuple(rules_dirs), lang=lang))


def _run_ray(items: list[dict[str, Any]], *, jobs: int, address: Optional[str], rules_dirs: tuple[str, ...],
             lang: Optional[str]) -> list[dict[str, Any]]:
    ray = require("ray", lang)
    require("ray.data", lang)
    if not items:
        return []
    if not ray.is_initialized():
        kw: dict[str, Any] = {"address": address} if address else {}
        if not address and not os.environ.get("RAY_ADDRESS"):
            kw["num_cpus"] = jobs or os.cpu_count() or 1
            kw["include_dashboard"] = False
        try:
            ray.init(logging_level="ERROR", log_to_driver=False, **kw)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            at = address or os.environ.get("RAY_ADDRESS") or "local"
            raise InputError(texts(lang)["ray_failed"].format(address=at, error=str(exc).splitlines()[0][:300])) from None
    logging.getLogger("ray.data").setLevel(logging.ERROR)     # stdout/stderr carry our summary, not Ray's plan
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ds = ray.data.from_items(items, override_num_blocks=max(1, min(len(items), 200)))
    return [_plain(r) for r in triage_dataset(ds, rules_dirs=rules_dirs, lang=lang).take_all()]


def _plain(rec: Any) -> dict[str, Any]:
    """A Ray row as a dict of Python values (numpy scalars to int/float, NaN to None)."""
    out = {}
    for name, kind in FIELDS:
        v = rec.get(name)
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and v != v:
            v = None
        if v is not None and kind == "int64":
            v = int(v)
        out[name] = v
    return out


def write_parquet(rows_: list[dict[str, Any]], path: str, lang: Optional[str] = None) -> None:
    """The rows as one Parquet file with a fixed schema (every column typed, even when all null)."""
    pa = require("pyarrow", lang)
    pq = require("pyarrow.parquet", lang)
    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in FIELDS])
    table = pa.Table.from_pylist([{k: r.get(k) for k, _ in FIELDS} for r in rows_], schema=schema)
    pq.write_table(table, path)
