"""Engine behaviour on small, hand-made rule sets (independent of the shipped rules)."""
from pathlib import Path

import pytest

from llmtriage import scan_source
from llmtriage.ruleset.validate import validate_dirs
from llmtriage import get_engine
from llmtriage.templates import render_template

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def small():
    # the built-in cuda-oom rule plus test rules exercising requires/unless/symptom ranking
    rs = validate_dirs([DATA / "user_rules"])
    return rs


def scan(rs, text, mode="auto"):
    return scan_source(get_engine(rs, mode=mode), text.encode() if isinstance(text, str) else text)


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total capacity of "
       "79.15 GiB of which 1.06 GiB is free.")
TIMEOUT = ("[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1) ran for 1800000 milliseconds before timing out.")


def test_cause_beats_earlier_symptoms_and_repeats_are_merged(small):
    lines = [f"[rank{r}]: " + TIMEOUT.format(r=r) for r in range(8) if r != 5]
    lines.insert(3, "[rank5]: " + OOM)
    lines += ["[rank5]: " + OOM] * 3
    rep = scan(small, "\n".join(lines) + "\n")
    top = rep.findings[0]
    assert top.rule_id == "test-cuda-oom" and top.line == 4 and top.rank == 5 and top.count == 4
    assert top.message == "CUDA out of memory on GPU 5: tried to allocate 2.00 GiB with 1.06 GiB free of 79.15 GiB"
    sym = rep.findings[1]
    assert sym.rule_id == "test-watchdog" and sym.count == 7 and sym.ranks == [0, 1, 2, 3, 4, 6, 7]
    assert sym.captures == {"seq": "12", "op": "ALLREDUCE"}


def test_requires_and_unless(small):
    warn = ("Token indices sequence length is longer than the specified maximum sequence length for this model "
            "(72 > 32). Running this sequence through the model will result in indexing errors\n")
    err = "Traceback (most recent call last):\n  File \"gen.py\", line 3, in <module>\nIndexError: index out of range in self\n"
    top = scan(small, warn + err).findings[0]
    assert top.rule_id == "test-seq-index"
    assert top.message == "input of 72 tokens is longer than the model limit of 32"   # captured on the required line
    rep = scan(small, err)
    assert [f.rule_id for f in rep.findings] == ["unknown"]
    assert rep.findings[0].message.startswith("IndexError: index out of range in self")
    assert rep.findings[0].location.file == "gen.py"
    assert scan(small, warn + err + "TEST-UNLESS-MARKER\n").findings[0].rule_id == "unknown"


def test_not_vetoes_on_the_same_line(small):
    assert scan(small, "step 3: caught CUDA out of memory, retrying with smaller batch\n").findings == []


def test_ansi_progress_bars_and_line_numbers(small):
    text = ("epoch 1\n"
            " 10%|#  | 1/10\r 20%|## | 2/10\r\x1b[31mtorch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "1.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 0 bytes is free.\x1b[0m\n"
            "done\n")
    f = scan(small, text).findings[0]
    assert f.line == 2 and f.evidence.startswith("torch.OutOfMemoryError") and "\x1b" not in f.evidence
    assert f.captures["free"] == "0 bytes"


def test_crlf_and_gbk(small):
    text = ("训练开始\r\n" + OOM + "\r\n").encode("gbk")
    rep = scan(small, text)
    assert rep.findings[0].line == 2 and rep.encoding == "gb18030"


def test_chinese_wordings_match_in_gbk_logs_as_in_utf8_logs(engine):
    """Rule patterns are UTF-8; a GBK line (Chinese Windows, zh_CN.GBK locales) is re-encoded before
    matching, so `设备上没有空间` or `已杀死` are found in either encoding, on the same lines."""
    from llmtriage import get_engine
    from llmtriage.engine.matcher import scan_bytes

    text = ("训练开始 step 1\n"
            "OSError: [Errno 28] 设备上没有空间: '/data/ckpt/global_step100/mp_rank_00_model_states.pt'\n"
            "finetune.sh: 行 37: 1847261 已杀死     python finetune.py\n")
    key = lambda r: [(f.rule_id, f.line, f.count) for f in r.findings]  # noqa: E731
    utf, gbk = scan_bytes(engine, text.encode()), scan_bytes(engine, text.encode("gbk"))
    assert key(utf) and key(gbk) == key(utf)
    assert gbk.encoding == "gb18030" and utf.encoding == "utf-8"
    assert "设备上没有空间" in [f for f in gbk.findings if f.line == 2][0].evidence
    assert key(scan_bytes(engine.__class__(engine.ruleset, mode="reference"), text.encode("gbk"))) == key(gbk)


def test_an_unclosed_quoted_path_does_not_reach_the_next_hit(engine):
    """A path capture whose closing quote is missing (a cut line) stops at the line's end in every engine: the
    default engine matches line by line (RE2 never_nl), so the stdlib path must not run on into the next hit
    (found by the differential fuzz run; the rule's class now stops at the newline, and the stdlib path resumes
    at the next line after a match, whatever a rule's classes allow)."""
    from llmtriage.engine.matcher import scan_bytes

    line = "[rank0]: OSError: [Errno 122] 超出磁盘限额: '/share/home/u1/ckpt/model-0000{}\n"
    text = line.format(1) + "[rank0]:     model.save_pretrained(out_dir)\n" + line.format(2)
    key = lambda r: [(f.rule_id, f.line, f.count, f.last_line) for f in r.findings]  # noqa: E731
    want = key(scan_bytes(engine, text.encode()))
    assert ("no-space-left-on-device", 1, 2, 3) in want
    for mode in ("reference", "python"):
        assert key(scan_bytes(engine.__class__(engine.ruleset, mode=mode), text.encode())) == want, mode


def test_unknown_names_the_headline_exception(small):
    log = ("Traceback (most recent call last):\n  File \"/home/u/train.py\", line 9, in main\n    x()\n"
           "  File \"/usr/lib/python3/site-packages/lib.py\", line 3, in x\n    raise KeyError('foo')\nKeyError: 'foo'\n")
    f = scan(small, log).findings[0]
    assert (f.rule_id, f.category, f.severity) == ("unknown", "unknown", "error")
    assert f.location.file == "/home/u/train.py" and f.line == 6


def test_keyboard_interrupt_alone_is_only_a_warning(small):
    log = "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nKeyboardInterrupt\n"
    assert scan(small, log).findings[0].severity == "warning"


def test_healthy_log_has_no_findings(small):
    log = "".join(f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 1.2, 'learning_rate': 2e-05, 'epoch': 0.{i}}}\n"
                  for i in range(50))
    assert scan(small, log).findings == []


def test_every_line_a_hit_keeps_counters_only(small):
    n = 20000
    rep = scan(small, (OOM + "\n") * n)
    f = rep.findings[0]
    assert f.count == n and f.line == 1 and f.last_line == n


@pytest.mark.parametrize("mode", ["python", "reference"])
def test_fallback_paths_agree_with_re2(small, mode):
    text = "\n".join(["noise line"] * 100 + ["[rank5]: " + OOM] + [TIMEOUT.format(r=1)] * 3) + "\n"
    a = [(f.rule_id, f.line, f.count, f.last_line, f.captures) for f in scan(small, text).findings]
    b = [(f.rule_id, f.line, f.count, f.last_line, f.captures) for f in scan(small, text, mode=mode).findings]
    assert a == b


def test_render_template_drops_segments_without_values():
    t = "{backend} OOM[ on GPU {gpu}][: {requested} requested]"
    assert render_template(t, {"backend": "CUDA", "gpu": "1"}) == "CUDA OOM on GPU 1"
    assert render_template(t, {}) == "? OOM"


def test_captures_missing_on_the_first_hit_come_from_later_hits(small):
    log = ("RuntimeError: CUDA out of memory.\n" + OOM + "\n")
    f = scan(small, log).findings[0]
    assert f.line == 1 and f.count == 2 and f.captures["gpu"] == "5" and "GPU 5" in f.message


def test_fixes_are_marked_verified_only_from_recorded_runs(small):
    import copy

    from llmtriage.ruleset.rules import RuleSet

    rules = copy.deepcopy(small.rules)
    rule = next(r for r in rules if r["id"] == "test-cuda-oom")
    rule["fixes"][0]["verified_by"] = "oom:accum"
    rule["fixes"][1]["verified_by"] = "oom:gc"
    verified = {"oom:accum": {"devices": {"cpu": {"verified": True, "torch": "2.13.0"},
                                          "cuda": {"verified": False, "torch": "2.13.0"}}},
                "oom:gc": {"devices": {"cpu": {"verified": False}}}}
    rs = RuleSet(rules=rules, taxonomy=small.taxonomy, verified=verified)
    fixes = scan(rs, OOM + "\n").findings[0].fixes
    assert fixes[0]["verified"] is True and fixes[0]["verification"]["device"] == "cpu"
    assert fixes[1]["verified"] is False
    assert "verified" not in fixes[2]


def test_a_small_log_is_answered_without_compiling_the_set(small, tmp_path, monkeypatch):
    """Counted, not timed: the first GATED_BYTES of a scan are answered by the gated set (literal
    gate + one RE2 program per candidate), so a small log never compiles the pattern Set; past that
    the literal Set picks the candidates (GatedSet.use_literals), and the pattern Set is compiled only
    when blocks keep having more than LITERAL_GATED_MAX_CANDIDATES of them."""
    from llmtriage.engine import re2set
    from llmtriage.engine.scan import GATED_BYTES

    if not re2set.HAVE_RE2:
        pytest.skip("google-re2 not installed")
    monkeypatch.setenv("LLMTRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    eng = get_engine(small)
    rep = scan_source(eng, (OOM + "\n").encode())
    assert rep.findings[0].rule_id == "test-cuda-oom"
    assert not eng.set.compiled
    big = b"".join(b"step %d loss 1.25\n" % i for i in range(GATED_BYTES // 16)) + (OOM + "\n").encode()
    rep = scan_source(eng, big)
    assert not eng.set.compiled and eng._gated.literal and rep.findings[0].rule_id == "test-cuda-oom"
    assert rep.findings[0].line == big.count(b"\n")
    from llmtriage.engine import scan as scan_mod

    monkeypatch.setattr(scan_mod, "LITERAL_GATED_MAX_CANDIDATES", 0)
    again = scan_source(eng, big)          # a block with too many candidates: the Set, compiled once
    assert eng.set.compiled and [(f.rule_id, f.line) for f in again.findings] == [(f.rule_id, f.line) for f in rep.findings]
    scan_source(eng, (OOM + "\n").encode())
    assert eng.set.compiled


def test_the_literal_index_is_cached_as_checked_json(small, tmp_path, monkeypatch):
    """The gate's index (required literals of every pattern) is worked out once per pattern list and
    kept in the private cache folder; a tampered file is refused and rebuilt, never trusted."""
    from llmtriage.engine.matcher import Engine

    cache = tmp_path / "cache"
    monkeypatch.setenv("LLMTRIAGE_CACHE_DIR", str(cache))
    first = Engine(small).literal_index()
    files = list(cache.glob("gate-*.json"))
    assert len(files) == 1
    assert Engine(small).literal_index() == first
    blob = files[0].read_bytes()
    bad = blob.replace(b'"rest":[', b'"rest":[99999,')
    assert bad != blob
    files[0].write_bytes(bad)                                               # digest no longer matches
    assert Engine(small).literal_index() == first
    assert files[0].read_bytes() == blob                                    # rewritten from the patterns


def test_a_hit_dense_first_block_goes_to_the_set_at_once(small, tmp_path, monkeypatch):
    """Counted, not timed: a block gating more than GATED_MAX_CANDIDATES candidates would cost one
    RE2 program each; the scan moves to the Set (dropping the programs) and finds the same hits."""
    from llmtriage.engine import re2set, scan as scan_mod

    if not re2set.HAVE_RE2:
        pytest.skip("google-re2 not installed")
    monkeypatch.setenv("LLMTRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    text = (OOM + "\n").encode()
    want = [(f.rule_id, f.line) for f in scan_source(get_engine(small), text).findings]
    monkeypatch.setattr(scan_mod, "GATED_MAX_CANDIDATES", 0)
    eng = get_engine(small, thrash_hits=10**9)       # a distinct engine: its Set is not compiled yet
    assert not eng.set.compiled
    rep = scan_source(eng, text)
    assert eng.set.compiled and eng._gated is None
    assert [(f.rule_id, f.line) for f in rep.findings] == want


def test_set_forms_are_cached_and_a_tampered_forms_file_is_recomputed(tmp_path, monkeypatch):
    """The RE2 Set form of every pattern is kept as checked JSON beside the rule cache (engine/litcache.py);
    a forms file that is not ours (bad digest) is removed and the forms are computed again."""
    import llmtriage
    from llmtriage.engine.matcher import Engine
    from llmtriage.engine.re2set import set_form

    monkeypatch.setenv("LLMTRIAGE_CACHE_DIR", str(tmp_path))
    rs = llmtriage.load_rules()
    first = Engine(rs, mode="re2")
    [path] = list(tmp_path.glob("forms-*.json"))
    assert first._forms == [set_form(p)[0] for p in first.patterns]
    assert Engine(rs, mode="re2")._forms == first._forms         # read back from the file
    path.write_bytes(path.read_bytes().replace(b"(?m)", b"(?s)") + b" ")
    again = Engine(rs, mode="re2")
    assert again._forms == first._forms and again.inexact == first.inexact
