"""One reader of verified-fix records (ruleset/verified.py) shared by triage output, the knowledge
base and `verify`; the words of the report renderers and kb pages come from YAML, en and zh alike."""
import io
import json
import types
from pathlib import Path

import yaml

import llmtriage
from llmtriage.kb.pages import rule_page, verification_text
from llmtriage.kb.words import load_kb_words
from llmtriage.report.render import render_human, render_quiet
from llmtriage.report.render_ci import render_github
from llmtriage.report.texts import REPORT_FILE
from llmtriage.ruleset import files, loader
from llmtriage.ruleset.verified import (best_run, fix_table, merge_runs, read_record, transformers_text,
                                        verification, write_record)
from llmtriage.workflows import verify as V

OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.02 GiB is free. Of the allocated memory 75.3 GiB is allocated by PyTorch\n")


def _outcome(name, device, fixes, ok=True):
    return types.SimpleNamespace(
        name=name, category="host-oom", device=device, skipped=False, reproduced=True, detected=True,
        detected_as={"rule_id": "cpu-allocator-oom", "category": "host-oom"}, ok=ok,
        run=types.SimpleNamespace(variant="fail"),
        fixes=[types.SimpleNamespace(name=n, verified=v) for n, v in fixes])


def test_best_run_prefers_a_verified_gpu_run():
    entry = {"devices": {"cpu": {"verified": True, "torch": "2.1"}, "cuda": {"verified": True, "torch": "2.2"},
                         "rocm": {"verified": False, "torch": "2.3"}}}
    assert best_run(entry) == {"verified": True, "device": "cuda", "torch": "2.2", "transformers": None, "date": None,
                               "transformers_versions": []}
    entry["devices"]["cuda"]["verified"] = False
    assert best_run(entry)["device"] == "cpu"            # a verified CPU run beats failed GPU runs
    assert best_run({"devices": {}}) is None and best_run("x") is None
    assert best_run({"verified": "true"})["verified"] is False   # only a recorded JSON true counts


def test_merge_and_write_keep_other_devices(tmp_path):
    path = tmp_path / "verified.json"
    write_record(path, merge_runs({}, [_outcome("host-oom", "cpu", [("grad-accum", True)])], {"torch": "2.x"},
                                  "2026-01-01T00:00:00+00:00"))
    rec = merge_runs(read_record(path), [_outcome("host-oom", "cuda", [("grad-accum", True)], ok=False)],
                     {"torch": "2.y"}, "2026-01-02T00:00:00+00:00")
    write_record(path, rec)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert list(doc)[:2] == ["about", "updated"] and doc["updated"] == "2026-01-02T00:00:00+00:00"
    runs = doc["fixes"]["host-oom:grad-accum"]["devices"]
    assert runs["cpu"]["verified"] is True and runs["cpu"]["torch"] == "2.x"
    assert runs["cuda"]["verified"] is False         # the scenario failed on cuda: its fix is not verified there
    assert verification("host-oom:grad-accum", fix_table(doc))["device"] == "cpu"
    assert not list(tmp_path.glob("*.tmp"))


def test_runs_are_kept_per_device_and_transformers_major(tmp_path):
    """A 4.x run never overwrites the 5.x one: runs["<device>/transformers-<major>"] holds each,
    devices["<device>"] (the older shape) the best of them, and the reader lists both majors."""
    # the shape written before runs existed: one run per device, here a transformers 5 run
    old = {"fixes": {"host-oom:grad-accum": {"scenario": "host-oom", "fix": "grad-accum", "verified": True,
                                             "devices": {"cpu": {"torch": "2.13.0", "transformers": "5.24.0",
                                                                 "date": "2026-01-01", "verified": True}}}}}
    rec = merge_runs(old, [_outcome("host-oom", "cpu", [("grad-accum", True)])],
                     {"torch": "2.13.0", "transformers": "4.57.6"}, "2026-01-02T00:00:00+00:00")
    entry = rec["fixes"]["host-oom:grad-accum"]
    assert sorted(entry["runs"]) == ["cpu/transformers-4", "cpu/transformers-5"]
    assert entry["runs"]["cpu/transformers-5"]["date"] == "2026-01-01"        # the 5.x run survived
    assert entry["runs"]["cpu/transformers-4"]["transformers"] == "4.57.6"
    assert entry["devices"]["cpu"]["transformers"] == "5.24.0"                 # old readers: the newest major
    shown = best_run(entry)
    assert shown["transformers"] == "5.24.0" and shown["transformers_versions"] == ["4.57.6", "5.24.0"]
    assert transformers_text(shown) == "transformers 4.57.6 and 5.24.0"
    assert transformers_text(shown, "和") == "transformers 4.57.6 和 5.24.0"
    assert entry["runs"]["cpu/transformers-4"]["rule_id"] == "cpu-allocator-oom"
    # the same major again replaces only its own run; a failed 4.x run leaves the 5.x one shown alone
    rec = merge_runs(rec, [_outcome("host-oom", "cpu", [("grad-accum", False)], ok=False)],
                     {"torch": "2.13.0", "transformers": "4.57.7"}, "2026-01-03T00:00:00+00:00")
    entry = rec["fixes"]["host-oom:grad-accum"]
    assert len(entry["runs"]) == 2 and entry["runs"]["cpu/transformers-4"]["verified"] is False
    assert best_run(entry)["transformers_versions"] == ["5.24.0"] and entry["verified"] is True
    assert entry["devices"]["cpu"]["verified"] is True
    sc = rec["scenarios"]["host-oom"]
    assert sorted(sc["runs"]) == ["cpu/transformers-4"] and sc["devices"]["cpu"]["transformers"] == "4.57.7"
    # what old readers look at still works: devices[...] with the run keys
    write_record(tmp_path / "verified.json", rec)
    doc = read_record(tmp_path / "verified.json")
    assert {"verified", "torch", "transformers", "date"} <= set(doc["fixes"]["host-oom:grad-accum"]["devices"]["cpu"])


def test_triage_and_kb_name_both_majors():
    import dataclasses

    rs = llmtriage.load_rules()
    key = next(f["verified_by"] for r in rs.rules for f in r["fixes"] if f.get("verified_by"))
    rule = next(r for r in rs.rules for f in r["fixes"] if f.get("verified_by") == key)
    run = {"torch": "2.13.0", "date": "2026-01-01", "verified": True, "device": "cpu"}
    table = {key: {"runs": {"cpu/transformers-4": dict(run, transformers="4.57.6"),
                            "cpu/transformers-5": dict(run, transformers="5.24.0")}}}
    rs2 = dataclasses.replace(rs, verified=table)
    rep = llmtriage.scan_source(llmtriage.get_engine(rs2), (rule["examples"]["match"][0]["log"] + "\n").encode())
    fx = next(f for f in rep.findings[0].fixes if f.get("verified_by") == key)
    assert fx["verification"]["transformers_versions"] == ["4.57.6", "5.24.0"]
    out = io.StringIO()
    render_human([rep], out)
    assert "✔ verified (cpu, torch 2.13.0, transformers 4.57.6 and 5.24.0)" in out.getvalue()
    page = rule_page(rs2, rule)
    f = next(f for f in page["fixes"] if f["verified_by"] == key)
    L = load_kb_words().label_set("en")
    assert "(torch 2.13.0, transformers 4.57.6 and 5.24.0, 2026-01-01)" in verification_text(f["verification"], key, L)


def test_triage_kb_and_verify_read_the_same_record():
    rs = llmtriage.load_rules()
    assert rs.verified == fix_table(read_record(files.verified_path()))
    assert V.verified_path() == files.verified_path()
    keys = [f["verified_by"] for r in rs.rules for f in r["fixes"] if f.get("verified_by") in rs.verified]
    assert keys, "rules/verified.json records none of the rules' verified_by keys"
    key = keys[0]
    # the key on a fix of a rule whose example we scan: triage, the kb page and verify agree
    rule = next(r for r in rs.rules for f in r["fixes"] if f.get("verified_by") == key)
    page = rule_page(rs, rule)
    from_kb = next(f["verification"] for f in page["fixes"] if f["verified_by"] == key)
    assert from_kb == V.verification_for(key) == best_run(rs.verified[key])
    rep = llmtriage.analyze(rule["examples"]["match"][0]["log"] + "\n")
    fx = next(f for f in rep.findings[0].fixes if f.get("verified_by") == key)
    assert fx["verified"] is from_kb["verified"]
    assert fx["verification"] == {k: from_kb[k] for k in ("device", "torch", "transformers", "date", "transformers_versions")}


def test_report_words_exist_in_both_languages():
    doc = yaml.safe_load((loader.builtin_rules_dir() / REPORT_FILE).read_text(encoding="utf-8"))
    for section in ("labels", "ci"):
        assert set(doc[section]) == {"en", "zh"}
        assert set(doc[section]["en"]) == set(doc[section]["zh"]), section
        assert all(isinstance(v, str) and v.strip() for m in doc[section].values() for v in m.values())
    words = load_kb_words()
    assert set(words.labels["en"]) == set(words.labels["zh"])


def test_renderers_speak_the_yaml_words():
    doc = yaml.safe_load((loader.builtin_rules_dir() / REPORT_FILE).read_text(encoding="utf-8"))
    for lang in ("en", "zh"):
        L = doc["labels"][lang]
        rep = llmtriage.analyze(OOM, lang=lang if lang == "zh" else None)
        out = io.StringIO()
        render_human([rep], out, lang=lang)
        text = out.getvalue()
        assert f"  {L['what']}: " in text and f"  {L['fixes']}:\n" in text and f"{L['line']} 3" in text
        ok = llmtriage.analyze("step 1 loss 2.0\n")
        out = io.StringIO()
        render_quiet([ok], out, lang=lang)
        assert out.getvalue().endswith(f": {L['ok']}\n")
        out = io.StringIO()
        render_github([rep, ok], out, lang=lang)      # CI words stay English (render_ci.CI_LANG)
        C = doc["ci"]["en"]
        assert C["fix"].format(title=rep.findings[0].fixes[0]["title"]) in out.getvalue()
        n = len(rep.findings)
        assert C["findings_one" if n == 1 else "findings_many"].format(source=rep.source, n=n) in out.getvalue()


def _imports(path):
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmtriage"):
            yield node.module, [a.name for a in node.names]


def test_kb_and_report_layers_and_sizes():
    """kb and report: modules of at most 500 lines, no private name of another module, no import of
    a layer above (report never imports kb/job/fleet/workflows/cli; kb never imports job/fleet/workflows/cli)."""
    root = Path(llmtriage.__file__).parent
    above = {"report": ("kb", "job", "fleet", "workflows", "cli"), "kb": ("job", "fleet", "workflows", "cli")}
    for pkg, banned in above.items():
        for path in sorted((root / pkg).glob("*.py")):
            assert len(path.read_text(encoding="utf-8").splitlines()) <= 500, path
            for module, names in _imports(path):
                assert not module.removeprefix("llmtriage.").startswith(banned), (path.name, module)
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                assert not private, (path.name, module, private)
