"""Message catalogue: every error/warning wording the stack's Python sources can print, run through
the real llmtriage engine, so an unseen wording (or a library upgrade) shows up before users do.

    python benchmarks/catalogue.py                          # installed libraries + archives in --src
    python benchmarks/catalogue.py --libs transformers,peft --src /tmp/cat-src
    python benchmarks/catalogue.py --diff OLD.tsv NEW.tsv   # wordings NEW has and OLD lacks

Sources: the installed distribution of each library in `catalogue/libraries.yaml`, plus any wheel or
sdist in `--src` (`pip download --no-deps -d DIR transformers==4.57.1`), read straight from the
archive. Writes `catalogue/<lib>-<version>.tsv` (one row per distinct wording: first file:line and the
number of further copies, kind, exception type, relevant?, status, template) and `catalogue/SUMMARY.md`.
Status is the top finding's rule id, `allow:<id>` from `catalogue/allow.yaml`, or `-` (uncovered); SUMMARY.md
also counts the uncovered wordings whose words place them in a failure family (rules/families.yaml).
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib.metadata as md
import re
import sys
import tarfile
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

import yaml

import llmtriage
from llmtriage.detect.family import family_of
from catalogue_extract import Message, Wild, extract

HERE = Path(__file__).resolve().parent / "catalogue"
BUILTINS = {n for n in dir(__import__("builtins")) if n[:1].isupper()}
SITE = "/usr/local/lib/python3.11/site-packages/"
CAP = 200
# Filler for a run-time value, chosen by the words in its source expression (first hit wins).
FILLERS = [
    (r"^\d+$|__name__|model_class|arch", "LlamaForCausalLM"),
    (r"weights?_name|index_name|safe_weights|_file_name|filename", "model.safetensors"),
    (r"status", "404"),
    (r"url|endpoint", "https://huggingface.co/api/models/meta-llama/Llama-3.1-8B"),
    (r"repo|model_id|name_or_path|pretrained", "meta-llama/Llama-3.1-8B"),
    (r"path|dir|file|folder|cache", "/data/checkpoints/llama-3-8b"),
    (r"gib\b|_gb\b|memory|\bmem\b|bytes|utilization|fraction|ratio|percent|seconds|timeout", "16.00"),
    (r"dtype", "torch.bfloat16"),
    (r"device", "cuda:0"),
    (r"shape|\.size\(", "torch.Size([4096, 4096])"),
    (r"version", "4.46.0"),
    (r"backend", "nccl"),
    (r"package|pkg|library|module|lib\b", "bitsandbytes"),
    (r"key", "model.layers.0.self_attn.q_proj.weight"),
    (r"type\(|cls|class", "<class 'dict'>"),
    (r"\berr|exc|\be\b|error", "Connection reset by peer"),
    (r"rank|world|num|len\(|count|idx|index|step|port|size|max|min|batch|epoch|length|id\b", "8"),
    (r"token", "<|endoftext|>"),
    (r"name", "llama"),
]


def filler(src: str, fallback: str = "foo") -> str:
    # `cache_config.gpu_memory_utilization` is a utilization, not a cache path: an attribute chain is
    # judged by its last name
    low = (src.rsplit(".", 1)[-1] if re.fullmatch(r"[\w.]+", src) else src).lower()
    for pattern, value in FILLERS:
        if re.search(pattern, low):
            return value
    return fallback


def render_text(msg: Message, fallback: str = "foo") -> str:
    return "".join(p if isinstance(p, str) else filler(p.src, fallback) for p in msg.parts)


def render_log(msg: Message, headline: str, fallback: str = "foo") -> str:
    """The message as a job's log would show it: a traceback headline, a log line, a warning."""
    text = render_text(msg, fallback)
    if msg.kind in ("raise", "const"):
        return (f"Traceback (most recent call last):\n  File \"{SITE}{msg.file}\", line {msg.line}, in run\n"
                f"    raise {msg.exc or 'ValueError'}(\n{headline}: {text}\n")
    if msg.kind.startswith("log-"):
        level = "ERROR" if msg.kind == "log-error" else "WARNING"
        return f"{level}:{msg.logger}:{text}\n"
    return f"{SITE}{msg.file}:{msg.line}: {msg.exc}: {text}\n  warnings.warn(\n"


# ---------------------------------------------------------------- sources

def archive_version(name: str, dist: str) -> str | None:
    m = re.match(rf"{re.escape(dist)}-(\d[^-]*?)(?:-py|-cp|\.tar\.gz|\.zip|-\w+-\w+\.whl)", name, re.I)
    return m.group(1) if m else None


def sources(lib: dict, src_dirs: list) -> Iterator[tuple]:
    """(version, origin, iterator of (relpath, text)) for the installed dist and each archive."""
    dist = lib["dist"]
    try:
        d = md.distribution(dist)
        base = Path(d.locate_file(""))
        yield d.version, "installed", _installed(base, lib["roots"])
    except md.PackageNotFoundError:
        pass
    for folder in src_dirs:
        for path in sorted(Path(folder).glob("*")):
            version = archive_version(path.name, dist) or archive_version(path.name, dist.replace("_", "-"))
            if version:
                yield version, path.name, _archive(path, lib["roots"])


def _wanted(rel: str, roots: list) -> bool:
    return rel.endswith(".py") and any(rel.startswith(r.rstrip("/") + "/") for r in roots)


def _installed(base: Path, roots: list) -> Iterator[tuple]:
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            rel = path.relative_to(base).as_posix()
            if _wanted(rel, roots):
                yield rel, path.read_text(encoding="utf-8", errors="replace")


def _archive(path: Path, roots: list) -> Iterator[tuple]:
    if path.suffix == ".whl" or path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            for name in sorted(zf.namelist()):
                if _wanted(name, roots):
                    yield name, zf.read(name).decode("utf-8", errors="replace")
    elif path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tf:
            for member in tf:
                rel = member.name.split("/", 1)[-1]
                if member.isfile() and _wanted(rel, roots):
                    yield rel, tf.extractfile(member).read().decode("utf-8", errors="replace")


# ---------------------------------------------------------------- classification
# Relevance and allow-list work on a result row (the TSV's columns), so `--restatus` can re-apply an
# edited allow.yaml / libraries.yaml to committed results without re-reading any source.

COLUMNS = ["loc", "kind", "type", "rel", "status", "severity", "template"]
ERROR_KINDS = ("raise", "log-error", "const")


def row_file(row: dict) -> str:
    return row["loc"].rpartition(":")[0]


def row_copies(row: dict) -> int:
    tail = row["loc"].rpartition(":")[2]
    return 1 + (int(tail.split("+")[1]) if "+" in tail else 0)


class Classifier:
    def __init__(self, config: dict, lib: dict, allow: dict):
        self.internal = list(config.get("internal_common", [])) + list(lib.get("internal", []))
        self.internal_types = set(config.get("internal_types", []))
        self.limitation = re.compile(config.get("limitation", r"(?i)support"))
        self.relevant = lib.get("relevant")
        self.model_code = lib.get("model_code", [])
        self.model_ok = lib.get("model_code_relevant", [])
        self.copies = int(config.get("model_copies", 5))
        self.allow = allow["allow"]
        self.never = re.compile(allow["never"]) if allow.get("never") else None

    def is_relevant(self, row: dict) -> bool:
        file, exc = row_file(row), row["type"].split(".")[-1]
        if row["kind"] not in ERROR_KINDS or exc in self.internal_types:
            return False
        if exc == "NotImplementedError" and not self.limitation.search(row["template"]):
            return False  # an abstract method; "X is not supported with Y" is a limitation users hit
        if any(fnmatch.fnmatch(file, g) for g in self.internal):
            return False
        if self.relevant and not any(fnmatch.fnmatch(file, g) for g in self.relevant):
            return False
        if any(fnmatch.fnmatch(file, g) for g in self.model_code) \
                and not any(fnmatch.fnmatch(file, g) for g in self.model_ok):
            return row_copies(row) >= self.copies
        return True

    def allowed(self, lib: str, row: dict) -> str | None:
        """The allow entry for an unmatched row (patterns see the template column as written)."""
        template = row["template"]
        if self.never and self.never.search(template):
            return None
        for entry in self.allow:
            if "lib" in entry and not fnmatch.fnmatch(lib, entry["lib"]):
                continue
            if "file" in entry and not fnmatch.fnmatch(row_file(row), entry["file"]):
                continue
            if "type" in entry and not re.fullmatch(entry["type"], row["type"].split(".")[-1]):
                continue
            if "kind" in entry and row["kind"] != entry["kind"]:
                continue
            if "template" in entry and not re.search(entry["template"], template):
                continue
            return entry["id"]
        return None

    def apply(self, lib: str, row: dict) -> dict:
        row["rel"] = "R" if self.is_relevant(row) else "-"
        if row["status"] == "-" or row["status"].startswith("allow:"):
            allow = self.allowed(lib, row) if row["kind"] in ERROR_KINDS else None
            row["status"] = f"allow:{allow}" if allow else "-"
        return row


def load_allow(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    data = data or {}
    data.setdefault("allow", [])
    for e in data["allow"]:
        if not e.get("id") or not e.get("reason"):
            raise SystemExit(f"{path}: every allow entry needs an id and a reason: {e}")
    return data


def stats_of(rows: list) -> Counter:
    s = Counter(files=len({row_file(r) for r in rows}))
    for r in rows:
        s["messages"] += 1
        if r["kind"] not in ERROR_KINDS:
            s["warnings"] += 1
            s["warn_err"] += r["severity"] == "error"
            continue
        s["errors"] += 1
        if r["rel"] == "R":
            s["relevant"] += 1
            s["uncovered" if r["status"] == "-" else "allowed" if r["status"].startswith("allow:") else "matched"] += 1
            # an uncovered wording the verdict would still place in a failure family (rules/families.yaml)
            s["family"] += r["status"] == "-" and family_of(f"{r['type']}: {r['template']}") is not None
    return s


# ---------------------------------------------------------------- one library version

def headline_of(exc: str, classes: dict) -> str:
    """The exception type as a traceback headline prints it (module-qualified unless builtin)."""
    if not exc:
        return "ImportError"
    last = exc.split(".")[-1]
    if last in BUILTINS:
        return last
    if last in classes:
        return f"{classes[last]}.{last}"
    return exc


def clip(template: str) -> str:
    t = template.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")
    return t if len(t) <= CAP else t[: CAP - 1] + "…"


def catalogue(lib: str, files: Iterator[tuple], clf: Classifier, only: list) -> list:
    """Result rows (dicts of COLUMNS) for one library version, sorted by file and line."""
    messages: list = []
    classes: dict = {}
    for rel, text in files:
        if only and not any(fnmatch.fnmatch(rel, g) for g in only):
            continue
        found, defined = extract(rel, text)
        messages.extend(found)
        classes.update(defined)
    groups: dict = defaultdict(list)
    for m in messages:
        if m.literal_chars >= 8:  # fewer letters of literal text: an opaque `raise X(msg)`
            groups[(m.kind, m.exc.split(".")[-1], m.template)].append(m)
    rows = []
    for (kind, _, template), group in groups.items():
        first = group[0]
        top = None
        for fallback in ("foo", "8"):  # a value no filler recognised: a word, then a number
            report = llmtriage.analyze(render_log(first, headline_of(first.exc, classes), fallback))
            top = next((f for f in report.findings if f.rule_id != "unknown"), None)
            if top is not None or not any(isinstance(p, Wild) for p in first.parts):
                break
        loc = f"{first.file}:{first.line}" + (f"+{len(group) - 1}" if len(group) > 1 else "")
        row = dict(loc=loc, kind=kind, type=first.exc or "-", rel="-", status=top.rule_id if top else "-",
                   severity=top.severity if top else "-", template=clip(template))
        rows.append(clf.apply(lib, row))
    rows.sort(key=lambda r: (row_file(r), int(r["loc"].rpartition(":")[2].split("+")[0]), r["template"]))
    return rows


def write_tsv(path: Path, rows: list) -> None:
    lines = ["\t".join(COLUMNS)] + ["\t".join(r[c] for c in COLUMNS) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_tsv(path: Path) -> list:
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in fh]


def summary(results: list) -> str:
    head = ("| library | version | files with messages | wordings | warnings (hit an error rule) | errors | "
            "relevant | matched | allow-listed | uncovered | uncovered, family named | relevant covered |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for lib, version, s in results:
        rel = s["relevant"] or 1
        out.append(f"| {lib} | {version} | {s['files']} | {s['messages']} | {s['warnings']} ({s['warn_err']}) | "
                   f"{s['errors']} | {s['relevant']} | {s['matched']} ({100 * s['matched'] / rel:.0f}%) | "
                   f"{s['allowed']} | {s['uncovered']} | {s['family']} ({100 * s['family'] / (s['uncovered'] or 1):.0f}%) | "
                   f"{100 * (s['matched'] + s['allowed']) / rel:.0f}% |")
    return "\n".join(out) + "\n"


def diff(old: Path, new: Path) -> int:
    key = lambda r: (r["kind"], r["type"].split(".")[-1], r["template"])  # noqa: E731
    seen = {key(r) for r in read_tsv(old)}
    fresh = [r for r in read_tsv(new) if key(r) not in seen]
    for r in fresh:
        print("\t".join(r[c] for c in COLUMNS if c != "severity"))
    print(f"{len(fresh)} wordings in {new.name} not in {old.name}", file=sys.stderr)
    return 0


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libs", default="", help="comma-separated library names (default: all in libraries.yaml)")
    ap.add_argument("--src", action="append", default=[], help="folder of wheels/sdists (repeatable)")
    ap.add_argument("--out", default=str(HERE), help="output folder (default: benchmarks/catalogue)")
    ap.add_argument("--files", default="", help="comma-separated globs: only these package paths")
    ap.add_argument("--no-installed", action="store_true", help="archives in --src only")
    ap.add_argument("--restatus", action="store_true",
                    help="re-apply libraries.yaml and allow.yaml to the TSVs in --out (no source is read)")
    ap.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"), help="print wordings NEW has and OLD lacks")
    args = ap.parse_args(argv)
    if args.diff:
        return diff(Path(args.diff[0]), Path(args.diff[1]))
    config = yaml.safe_load((HERE / "libraries.yaml").read_text(encoding="utf-8"))
    allow = load_allow(HERE / "allow.yaml")
    wanted = [x for x in args.libs.split(",") if x] or list(config["libraries"])
    unknown = [x for x in wanted if x not in config["libraries"]]
    if unknown:
        ap.error(f"unknown library: {', '.join(unknown)}")
    only = [x for x in args.files.split(",") if x]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in wanted:
        clf = Classifier(config, config["libraries"][name], allow)
        if args.restatus:
            for path in sorted(out.glob(f"{name}-*.tsv")):
                rows = [clf.apply(name, r) for r in read_tsv(path)]
                write_tsv(path, rows)
                results.append((name, path.stem[len(name) + 1:], stats_of(rows)))
            continue
        done = set()
        for version, origin, files in sources(config["libraries"][name], args.src):
            if version in done or (args.no_installed and origin == "installed"):
                continue
            done.add(version)
            rows = catalogue(name, files, clf, only)
            write_tsv(out / f"{name}-{version}.tsv", rows)
            results.append((name, version, stats_of(rows)))
            print(f"{name} {version} ({origin}): {len(rows)} wordings", file=sys.stderr, flush=True)
        if not done:
            print(f"{name}: not installed and no archive in --src; skipped", file=sys.stderr)
    print(summary(results))
    if not only:  # SUMMARY.md covers every result file in --out, in libraries.yaml order
        every = [(name, path.stem[len(name) + 1:], stats_of(read_tsv(path)))
                 for name in config["libraries"] for path in sorted(out.glob(f"{name}-[0-9]*.tsv"))]
        (out / "SUMMARY.md").write_text(
            "# Message catalogue coverage\n\nGenerated by `python benchmarks/catalogue.py` (see benchmarks/README.md)"
            " from the result files beside this one.\n\n" + summary(every), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
