"""NCCL Flight Recorder dumps in `llmtriage job`: suspects, the divergent collective, plain-data loading.

fixtures/jobs/fr: 8rank-hang*, 16rank-moe-* are real torch 2.13 Flight Recorder dumps from gloo runs
(generate_fr.py); 16rank-nccl-xid is written in the documented NCCL format (generate_nccl.py)."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmtriage.errors import InputError
from llmtriage.detect.flight_recorder import DumpRefused, analyze_dumps, find_dumps, load_dump
from llmtriage.job.analysis import analyze_job

FR = Path(__file__).resolve().parents[1] / "fixtures" / "jobs" / "fr"


def run_cli(*args: str):
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], capture_output=True, env=env, timeout=300)


def fr_of(job: str):
    return analyze_dumps(find_dumps([str(FR / job)]))


@pytest.mark.parametrize("job", ["8rank-hang", "8rank-hang-json"])
def test_rank_that_never_entered_the_collective(job):
    r = fr_of(job)
    assert r.dumps == 8 and r.kind == "missing" and r.suspects == [5]
    assert r.desc == "default_pg" and r.op == "all_reduce" and r.seq == 7
    assert r.waiting == [0, 1, 2, 3, 4, 6, 7]
    d = r.to_dict()
    assert d["collective"]["sizes"] == [[64, 32]] and d["collective"]["seq_id"] == 7
    assert d["ranks"]["5"]["last_seq"] == 6 and d["ranks"]["0"]["last_seq"] == 7
    if job == "8rank-hang":      # _dump_fr_trace_json() writes no stack frames
        assert "generate_fr.py" in d["collective"]["frame"]


def test_json_and_pickle_dumps_agree():
    a, b = fr_of("8rank-hang").to_dict(), fr_of("8rank-hang-json").to_dict()
    for k in ("kind", "suspect_ranks", "waiting_ranks"):
        assert a[k] == b[k]
    assert {k: a["collective"][k] for k in ("op", "seq_id", "sizes")} == {k: b["collective"][k] for k in ("op", "seq_id", "sizes")}


def test_size_mismatch_names_the_odd_rank_not_the_uneven_all_to_all():
    r = fr_of("16rank-moe-mismatch")
    assert r.kind == "mismatch" and r.suspects == [9]
    assert r.desc == "dp_group_1" and r.op == "all_reduce"
    d = r.to_dict()
    assert d["suspect_call"]["sizes"] == [[64, 48]] and d["collective"]["sizes"] == [[64, 32]]


def test_crashed_rank_without_a_dump_is_the_suspect_and_its_segfault_the_root_cause():
    r = fr_of("16rank-moe-segfault")
    assert r.suspects == [13] and r.kind == "nodump" and r.missing_dumps == [13]
    res = analyze_job([str(FR / "16rank-moe-segfault")])
    assert res.first.rank == 13 and res.root.category == "native-crash"
    assert res.flight_recorder["suspect_ranks"] == [13]
    assert "Rank 13, named by the Flight Recorder" in res.cascade


def test_nccl_states_rank_that_never_started_and_its_xid():
    r = fr_of("16rank-nccl-xid")
    assert r.kind == "notstarted" and r.suspects == [6]
    assert r.desc == "ep_group_0" and r.op == "all_to_all" and r.seq == 8013
    res = analyze_job([str(FR / "16rank-nccl-xid")])
    assert res.first.rank == 6 and res.root.category == "gpu-hardware-fault"
    job = res.to_dict()["job"]
    assert job["flight_recorder"]["suspect_ranks"] == [6] and job["flight_recorder"]["dumps"] == 16
    assert job["flight_recorder"]["collective"]["process_group"] == "1"


def _dump(entries, pg_config=None):
    return {"version": "2.10", "pg_config": pg_config or {}, "pg_status": {}, "entries": entries}


def _e(seq, state="completed", op="all_reduce", sizes=((4, 4),), pg=("0", "default_pg")):
    return {"record_id": seq, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": 0,
            "op_id": seq, "profiling_name": f"nccl:{op}", "input_sizes": [list(s) for s in sizes],
            "output_sizes": [list(s) for s in sizes], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
            "state": state, "time_created_ns": 1000 + seq, "is_p2p": False}


def test_healthy_dumps_name_nobody(tmp_path):
    for r in range(4):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(_dump([_e(s) for s in range(1, 6)]), protocol=2))
    res = analyze_dumps(find_dumps([str(tmp_path)]))
    assert res.kind == "none" and res.suspects == [] and res.dumps == 4


def test_extra_collective_on_one_rank_is_a_mismatch_not_a_hang(tmp_path):
    # the torch tutorial's crash.py: rank 0 issues one more all_reduce (another shape) than the others
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}
    for r in range(4):
        ents = [_e(1), _e(2)]
        if r == 0:
            ents += [_e(3, sizes=((4, 5),)), _e(4), _e(5, "started")]
        else:
            ents += [_e(3), _e(4, "started")]
        (tmp_path / f"trace_{r}").write_bytes(pickle.dumps(_dump(ents, cfg), protocol=2))
    res = analyze_dumps(find_dumps([str(tmp_path)]))
    assert res.kind == "mismatch" and res.suspects == [0] and res.seq == 3


class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('FR_MARKER', '/tmp/fr-marker')}",))


def test_pickle_with_a_global_is_refused_and_never_run(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv("FR_MARKER", str(marker))
    evil = {"version": "2.10", "pg_config": {}, "entries": [_Boom()]}
    d = tmp_path / "dumps"
    d.mkdir()
    (d / "nccl_trace_rank_0").write_bytes(pickle.dumps(evil, protocol=2))
    with pytest.raises(DumpRefused) as ei:
        load_dump(d / "nccl_trace_rank_0")
    assert "posix.system" in str(ei.value) or "os.system" in str(ei.value)
    assert not marker.exists()
    p = run_cli("job", "--flight-recorder", str(d), str(FR / "8rank-hang" / "rank0.log"), str(FR / "8rank-hang" / "rank1.log"))
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    assert len(p.stderr.decode().strip().splitlines()) == 1 and b"refused" in p.stderr
    assert not marker.exists()


@pytest.mark.parametrize("obj", [{1, 2}, {"entries": [], "x": bytearray(b"a")}, {"entries": [complex(1, 2)]}])
def test_non_plain_types_are_refused(tmp_path, obj):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps(obj, protocol=2))
    with pytest.raises(InputError):
        load_dump(p)


def test_cli_dumps_only_folder_and_flight_recorder_option(tmp_path):
    d = tmp_path / "dumps"
    d.mkdir()
    for f in (FR / "8rank-hang").glob("nccl_trace_rank_*"):
        shutil.copy(f, d / f.name)
    p = run_cli("job", "--format", "json", str(d))
    assert p.returncode == 1, p.stderr
    job = json.loads(p.stdout)["job"]
    assert job["mode"] == "flight-recorder" and job["flight_recorder"]["suspect_ranks"] == [5]
    p = run_cli("job", "--no-color", "--flight-recorder", str(d), str(FR / "16rank-nccl-xid" / "rank0.log"),
                str(FR / "16rank-nccl-xid" / "rank6.log"))
    assert b"Flight Recorder (8 dumps): rank 5 never entered all_reduce #7" in p.stdout
    p = run_cli("job", "--no-color", "--lang", "zh", str(d))
    assert "从未进入" in p.stdout.decode()


def test_sniffing_ignores_logs_and_other_files(tmp_path):
    (tmp_path / "rank0.log").write_text("[rank0] hello\n")
    (tmp_path / "notes_1").write_text("entries version pg_config\n")
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(_dump([_e(1)]), protocol=2))
    (tmp_path / "fr_2.json").write_text(json.dumps(_dump([_e(1)])))
    assert sorted(p.name for p in find_dumps([str(tmp_path)])) == ["fr_2.json", "nccl_trace_rank_1"]


def test_json_that_only_looks_like_a_dump_is_skipped_not_fatal(tmp_path):
    (tmp_path / "stats_1.json").write_text('{"entries": [1, 2')          # truncated, not a dump
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps(_dump([_e(1)]), protocol=2))
    res = analyze_dumps(find_dumps([str(tmp_path)]))
    assert res.dumps == 1 and len(res.errors) == 1 and "stats_1.json" in res.errors[0]
