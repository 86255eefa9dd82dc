"""The nearest known failure (detect/nearest.py): the last lead for an unexplained death that no
failure family places. It keeps rule id `unknown` and low confidence, takes the category of the
rule it reads most like, names that rule, and abstains on a bare identifier or a type name."""
from __future__ import annotations

import llmtriage
from llmtriage.detect.nearest import Index, index_for, tokens
from llmtriage.ruleset import cachefile

TB = 'Traceback (most recent call last):\n  File "/app/train.py", line 12, in <module>\n    main()\n'


def _top(headline: str, disabled=(), lang=None):
    engine = llmtriage.get_engine(disabled=list(disabled), lang=lang)
    rep = llmtriage.scan_source(engine, (TB + headline + "\n").encode())
    errs = [f for f in rep.findings if f.severity == "error"]
    return errs[0]


def test_a_new_wording_takes_the_category_of_the_rule_it_reads_like():
    # the rule for this exact message is disabled (a library's new wording); a neighbour in the same
    # category (an unrecognised processing class in a checkpoint folder) is the closest rule left
    top = _top("ValueError: Processor was not found, please check and update your model file.",
               disabled=["mm-processor-not-found"])
    # the lead is named (title, cause, fixes, captures); the category stays unknown: held out, such leads
    # named the labelled category 5 times in 19 (rules/verdict.yaml unknown.nearest.as_category)
    assert (top.rule_id, top.category, top.confidence) == ("unknown", "unknown", "low")
    assert top.captures["nearest_category"] == "weights-not-found" and "weights-not-found" in top.title
    near = top.captures["nearest_rule"]
    assert near != "mm-processor-not-found" and near in llmtriage.get_engine().ruleset.by_id
    assert float(top.captures["nearest_score"]) >= 0.15
    assert f"kb show {near}" in top.fixes[0]["detail"]
    assert "closest rule is " + near in top.cause


def test_with_the_rule_enabled_the_rule_itself_answers():
    top = _top("ValueError: Processor was not found, please check and update your model file.")
    assert top.rule_id == "mm-processor-not-found" and "nearest_rule" not in top.captures


def test_a_bare_identifier_or_a_type_name_is_no_evidence():
    for headline in ("KeyError: 'input_ids'", "RuntimeError: cancelled", "ValueError: 42", "AssertionError"):
        top = _top(headline)
        assert (top.rule_id, top.category) == ("unknown", "unknown"), headline
        assert "nearest_rule" not in top.captures


def test_the_lead_speaks_the_report_language():
    top = _top("ValueError: Processor was not found, please check and update your model file.",
               disabled=["mm-processor-not-found"], lang="zh")
    assert top.captures["nearest_category"] == "weights-not-found" and "最接近" in top.title and "线索" in top.cause


def test_a_disabled_rule_is_not_in_the_index():
    engine = llmtriage.get_engine(disabled=["mm-processor-not-found"])
    idx = index_for(engine)
    assert "mm-processor-not-found" not in idx.rules and "hf-unrecognized-processing-class" in idx.rules
    assert index_for(engine) is idx                       # built once per engine
    full = index_for(llmtriage.get_engine())
    assert "mm-processor-not-found" in full.rules


def test_words_split_camel_and_snake_case_and_chinese_pairs():
    assert {"outofmemoryerror", "out", "memory"} <= set(tokens("OutOfMemoryError"))
    assert {"input_ids", "input", "ids"} <= set(tokens("input_ids"))
    assert {"显存", "存不", "不足"} <= set(tokens("显存不足"))
    assert "the" not in tokens("the model")


def test_the_word_bags_are_cached_as_checked_json_and_a_planted_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMTRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    rules = [r for r in llmtriage.get_engine().rules if r["category"] in ("disk-full", "port-in-use")]
    first = Index(rules)
    files = list((tmp_path / "cache").glob("near-*.json"))
    assert len(files) == 1
    again = Index(rules)                                  # read back: same vectors
    assert again.rules == first.rules
    files[0].write_bytes(b'{"x": ["disk-full", {"pwned": 1}]}')   # no digest: not ours
    assert cachefile.read(files[0]) is None
    rebuilt = Index(rules)
    assert rebuilt.rules == first.rules and "x" not in rebuilt.rules


def test_no_index_is_built_when_a_rule_explains_the_death(monkeypatch):
    import llmtriage.detect.nearest as nearest
    engine = llmtriage.get_engine(disabled=["__none__"])
    nearest._INDEXES.pop(engine, None)
    rep = llmtriage.scan_source(engine, (TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n").encode())
    assert rep.findings[0].category == "cuda-oom"
    assert engine not in nearest._INDEXES
