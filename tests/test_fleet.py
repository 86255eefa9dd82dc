"""`llmtriage fleet`: rows per log/job, summary, repeat offenders, unknown clusters, Parquet, Ray."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import llmtriage
from llmtriage.cli.app import main
from llmtriage.fleet.run import FIELDS, expand_sources, rows, run, texts, triage_item, write_parquet
from llmtriage.fleet.summary import summarize, template_regex
from llmtriage.job.analysis import analyze_job
from llmtriage.job.diff import template_of

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
HAS_RAY = importlib.util.find_spec("ray") is not None
HAS_ARROW = importlib.util.find_spec("pyarrow") is not None
HAS_FSSPEC = importlib.util.find_spec("fsspec") is not None

OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.2 GiB is free.\n")


def _fleet_dir(tmp_path: Path) -> Path:
    """Fixture logs of several categories and a healthy one, a binary and an empty file, a job directory."""
    d = tmp_path / "fleet"
    d.mkdir()
    for src in ["cuda-oom/torchrun-4gpu-sft-backward.log", "nccl-timeout/" + _first("nccl-timeout"),
                "healthy/" + _first("healthy"), "gpu-hardware-fault/illegal-memory-access.log"]:
        shutil.copy(FIX / src, d / Path(src).name)
    (d / "core.log").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\x00" + bytes(range(256)) * 8)
    (d / "empty.log").write_bytes(b"")
    shutil.copytree(FIX / "jobs" / "2rank-perfile-ts", d / "job-77")
    return d


def _first(cat: str) -> str:
    return sorted(p.name for p in (FIX / cat).glob("*.log"))[0]


def test_fleet_texts_are_complete():
    en, zh = texts("en"), texts("zh")
    names = re.compile(r"\{(\w+)\}")

    def walk(a, b, where):
        assert set(a) == set(b), where
        for k in a:
            if isinstance(a[k], dict):
                walk(a[k], b[k], f"{where}.{k}")
            else:
                assert set(names.findall(a[k])) == set(names.findall(b[k])), f"{where}.{k}"
                assert re.search(r"[\u4e00-\u9fff]", b[k]) or not re.search(r"[a-z]{4}", names.sub("", b[k])), k
    walk(en, zh, "fleet")


def test_rows_equal_triage_and_job_per_input(tmp_path):
    d = _fleet_dir(tmp_path)
    items = expand_sources([str(d)])
    kinds = {Path(i["source"]).name: i["kind"] for i in items}
    assert kinds["job-77"] == "job" and kinds["core.log"] == "log" and len(kinds) == 7
    out = rows([str(d)])
    assert [r["source"] for r in out] == sorted(r["source"] for r in out)
    for r in out:
        assert set(r) == {name for name, _ in FIELDS}
        assert r["llmtriage_version"] == llmtriage.__version__ and len(r["ruleset_hash"]) == 16
        name = Path(r["source"]).name
        if name in ("core.log", "empty.log"):
            assert r["error"] and r["category"] is None and r["status"] == "unreadable", r
            continue
        assert r["error"] is None
        if r["kind"] == "job":
            res = analyze_job([r["source"]])
            assert (r["category"], r["rule_id"], r["line"], r["rank"]) == (
                res.root.category, res.root.rule_id, res.root.line, res.first.rank)
            assert r["step"] == res.step and r["phase"] == res.phase
            continue
        rep = llmtriage.analyze(Path(r["source"]))
        top = rep.findings[0] if rep.findings else None
        assert r["category"] == (top.category if top else None), name
        assert r["rule_id"] == (top.rule_id if top else None) and r["line"] == (top.line if top else None)
        assert r["status"] == rep.extra["status"] and r["action"] == rep.extra["action"]
    assert "binary" in next(r["error"] for r in out if r["source"].endswith("core.log"))


def test_summary_counts_add_up(tmp_path):
    out = rows([str(_fleet_dir(tmp_path))], jobs=2)
    s = summarize(out)
    assert s["logs"] + s["failed_to_read"] == len(out) == 7
    assert sum(s["by_category"].values()) == s["logs"] == 5
    assert s["failed_to_read"] == 2 and s["by_category"]["none"] == 1
    assert s["by_category"]["cuda-oom"] == 2          # the single log and the job's root cause
    assert s["failed"] == s["logs"] - s["by_category"]["none"]


def _job_log(path: Path, prefix: str, body: str, header: str = "") -> None:
    noise = "".join(f"{prefix}{{'loss': {2.0 - i / 100:.3f}, 'epoch': {i / 100:.2f}}}\n" for i in range(20))
    path.write_text(header + noise + "".join(prefix + ln + "\n" for ln in body.splitlines()))


def test_repeat_offenders_across_jobs_from_host_prefixes(tmp_path):
    d = tmp_path / "jobs"
    d.mkdir()
    xid = "[Mon Dec  1 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
    _job_log(d / "job-1.log", "gpu-node-07: ", OOM)                       # pdsh host prefix
    _job_log(d / "job-2.log", "", "gpu-node-07:2231:2290 [3] NCCL INFO Bootstrap : Using eth0\n" + OOM)
    (d / "job-3.log").write_text("srun: job 9912 queued\n" + "gpu-node-07: " + xid)   # kernel log, host prefix
    _job_log(d / "job-4.log", "gpu-node-02: ", OOM)                       # another node, one job only
    _job_log(d / "job-5.log", "gpu-node-02: ", "{'loss': 0.9, 'epoch': 1.0}")   # healthy on gpu-node-02
    out = rows([str(d)])
    nodes = {Path(r["source"]).name: r["node"] for r in out}
    assert nodes["job-1.log"] == nodes["job-2.log"] == nodes["job-3.log"] == "gpu-node-07", nodes
    s = summarize(out)
    assert [o["node"] for o in s["repeat_offenders"]] == ["gpu-node-07"]
    off = s["repeat_offenders"][0]
    assert off["jobs"] == 3 and off["categories"]["cuda-oom"] == 2 and off["categories"]["gpu-hardware-fault"] == 1
    assert off["gpus"] == ["0", "0000:3b:00"]          # "GPU 0" of the OOM message, the Xid PCI address


def test_slurm_header_names_the_node_and_job(tmp_path):
    p = tmp_path / "slurm-5001.out"
    # as Slurm writes it: the job's own error first, the banner when the step is torn down
    p.write_text(OOM + "slurmstepd: error: *** JOB 5001 ON gpu-node-11 CANCELLED AT 2026-12-01T10:00:00 ***\n")
    r = triage_item({"source": str(p), "kind": "log"})
    assert r["node"] == "gpu-node-11" and r["job_id"] == "5001" and r["category"] == "cuda-oom"


def test_unknown_clusters_and_their_draft_rule(tmp_path):
    d = tmp_path / "unk"
    d.mkdir()
    for i, (n, h) in enumerate([(12, "0xdeadbeef"), (7, "0x1f00"), (130, "0xabc")]):
        _job_log(d / f"run-{i}.log", f"[rank{i}]: ",
                 f"Traceback (most recent call last):\n  File \"sched.py\", line 3, in <module>\n"
                 f"QuuxSchedulerError: shard {n} lost its lease at {h}")
    _job_log(d / "other.log", "", "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
             "FrobnicateError: cannot frobnicate")
    s = summarize(rows([str(d)]))
    assert s["by_category"] == {"unknown": 4}
    big, small = s["unknown_clusters"]
    assert big["count"] == 3 and big["template"] == "QuuxSchedulerError: shard <num> lost its lease at <hex>"
    assert big["example_source"].endswith(".log") and small["count"] == 1
    draft = big["draft_rule"]
    assert "CHOOSE-A-CATEGORY" in draft and draft.startswith("# ")
    rule = yaml.safe_load(draft)
    # the shape `llmtriage rules validate` accepts once a real category is chosen
    rule["category"] = "data-corrupt"
    rdir = tmp_path / "myrules" / "data-corrupt"
    rdir.mkdir(parents=True)
    (rdir / f"{rule['id']}.yaml").write_text(yaml.safe_dump(rule, sort_keys=False, allow_unicode=True))
    assert main(["rules", "validate", str(tmp_path / "myrules")]) == 0
    rep = llmtriage.analyze(d / "run-1.log", rules=[str(tmp_path / "myrules")])
    assert rep.findings[0].rule_id == rule["id"]
    assert llmtriage.analyze(d / "other.log", rules=[str(tmp_path / "myrules")]).findings[0].rule_id == "unknown"


def test_template_regex_matches_what_it_was_masked_from():
    for line in ["ValueError: bad value 3.5e-4 in /data/shard-00012/part.bin at 2026-01-02 03:04:05",
                 "X: (a+b) [c] {d} ^$ | ? * \\ end 0xff12", "RuntimeError: 断言失败 42"]:
        assert re.search(template_regex(template_of(line)), line), line


def test_cli_json_summary(tmp_path, capsys):
    d = _fleet_dir(tmp_path)
    assert main(["fleet", "--engine", "local", "-j", "1", "--format", "json", str(d)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 1 and doc["fleet"]["logs"] == 5 and doc["fleet"]["failed_to_read"] == 2
    assert main(["fleet", "--engine", "local", "--lang", "zh", str(d)]) == 0
    assert "个日志" in capsys.readouterr().out
    assert main(["fleet", "--engine", "local", str(tmp_path / "nothing-here")]) == 2
    assert "no log file" in capsys.readouterr().err
    assert main(["fleet", "--engine", "local", "--since", "2999-01-01", "--format", "json", str(d)]) == 0
    assert json.loads(capsys.readouterr().out)["fleet"]["logs"] == 0


def test_core_install_never_imports_the_fleet_extra(tmp_path):
    p = tmp_path / "x.log"
    p.write_text(OOM)
    code = ("import sys\nfrom llmtriage.cli.app import main\nimport llmtriage.fleet.run, llmtriage.fleet.summary\n"
            f"main(['--format', 'json', {str(p)!r}])\n"
            "sys.stderr.write('HEAVY=' + ','.join(m for m in ('ray', 'pyarrow', 'fsspec') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert r.stderr.decode().rstrip().endswith("HEAVY="), r.stderr.decode()[-500:]


def test_ray_absent_is_a_one_line_error_naming_the_extra(tmp_path):
    p = tmp_path / "x.log"
    p.write_text(OOM)
    code = ("import sys\nsys.modules['ray'] = None\nfrom llmtriage.cli.app import main\n"
            f"sys.exit(main(['fleet', '--engine', 'ray', {str(p)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    err = r.stderr.decode().strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and "llmtriage[fleet]" in err, err


@pytest.mark.skipif(not HAS_ARROW, reason="pyarrow (the fleet extra) is not installed")
def test_parquet_written_and_read_back(tmp_path):
    import pyarrow.parquet as pq

    out = rows([str(_fleet_dir(tmp_path))])
    f = tmp_path / "rows.parquet"
    assert main(["fleet", "--engine", "local", "-j", "1", "--out", str(f), str(tmp_path / "fleet")]) == 0
    table = pq.read_table(f)
    assert table.column_names == [name for name, _ in FIELDS]
    back = table.to_pylist()
    strip = [{k: v for k, v in r.items()} for r in out]
    assert back == strip
    write_parquet([], str(tmp_path / "empty.parquet"))
    assert pq.read_table(tmp_path / "empty.parquet").num_rows == 0


@pytest.mark.skipif(not HAS_FSSPEC, reason="fsspec (the fleet extra) is not installed")
def test_fsspec_memory_filesystem_as_a_source():
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/fleettest/a/crash.log", OOM.encode())
    fs.pipe("/fleettest/a/bin.log", b"\x00\x01\x02\x03" * 100)
    fs.pipe("/fleettest/job-5/rank0.log", OOM.encode())
    fs.pipe("/fleettest/job-5/rank1.log", b"{'loss': 1.0}\n")
    try:
        out = rows(["memory://fleettest/"])
    finally:
        fs.rm("/fleettest", recursive=True)
    by = {r["source"].rsplit("/", 1)[-1]: r for r in out}
    assert set(by) == {"crash.log", "bin.log", "job-5"}
    assert by["crash.log"]["category"] == "cuda-oom" and by["crash.log"]["source"].startswith("memory://")
    assert by["bin.log"]["error"] and by["bin.log"]["category"] is None
    assert by["job-5"]["kind"] == "job" and by["job-5"]["category"] == "cuda-oom" and by["job-5"]["rank"] == 0


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RAY, reason="ray (the fleet extra) is not installed")
def test_ray_engine_gives_the_local_rows(tmp_path):
    import ray

    from llmtriage.fleet.run import triage_dataset

    d = _fleet_dir(tmp_path)
    items = expand_sources([str(d)])
    local = run(items, engine="local", jobs=1)
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        on_ray = run(items, engine="ray")
        assert on_ray == local
        if HAS_ARROW:       # the same Parquet content from either engine
            import pyarrow.parquet as pq

            write_parquet(on_ray, str(tmp_path / "ray.parquet"))
            write_parquet(local, str(tmp_path / "local.parquet"))
            assert pq.read_table(tmp_path / "ray.parquet").equals(pq.read_table(tmp_path / "local.parquet"))
        # a Dataset of bytes (read_binary_files): same category as the path rows
        ds = ray.data.read_binary_files(str(d / "torchrun-4gpu-sft-backward.log"), include_paths=True)
        (r,) = triage_dataset(ds).take_all()
        want = next(x for x in local if x["source"].endswith("torchrun-4gpu-sft-backward.log"))
        assert (r["category"], r["rule_id"], r["line"]) == (want["category"], want["rule_id"], want["line"])
    finally:
        ray.shutdown()


def test_package_level_api_is_the_documented_one(tmp_path):
    """The issue's API names: `llmtriage.fleet.rows(paths)` and `llmtriage.fleet.triage_dataset(ds)`;
    importing the package pulls in none of the fleet extra."""
    import llmtriage.fleet as fleet

    assert fleet.rows is rows and fleet.summarize is summarize and fleet.triage_item is triage_item
    assert callable(fleet.triage_dataset)
    p = tmp_path / "x.log"
    p.write_text(OOM)
    (row,) = fleet.rows([str(p)])
    assert (row["category"], row["source"]) == ("cuda-oom", str(p))
    code = "import sys, llmtriage.fleet\nprint(','.join(m for m in ('ray', 'pyarrow', 'fsspec') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert r.stdout.decode().strip() == "", r.stdout.decode()


def test_a_cluster_in_a_failure_family_gets_a_draft_in_that_category(tmp_path):
    d = tmp_path / "fam"
    d.mkdir()
    for i, n in enumerate((3, 5)):
        _job_log(d / f"run-{i}.log", f"[rank{i}]: ",
                 f"Traceback (most recent call last):\n  File \"sched.py\", line 3, in <module>\n"
                 f"QuuxAllocError: device memory exhausted on accelerator {n}: out of memory")
    s = summarize(rows([str(d)]))
    assert s["by_category"] == {"cuda-oom": 2}              # the verdict read the family from the wording
    (cluster,) = s["unknown_clusters"]                       # still unrecognised: it needs a rule
    assert cluster["count"] == 2
    draft = yaml.safe_load(cluster["draft_rule"])
    assert draft["category"] == "cuda-oom" and "CHOOSE-A-CATEGORY" not in cluster["draft_rule"]
    assert "rules/families.yaml" in cluster["draft_rule"].splitlines()[0]
