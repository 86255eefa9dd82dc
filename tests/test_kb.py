"""Knowledge base: search ranking (English/Chinese/pasted errors), rule pages, verified fixes, static site."""
import copy
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from llmtriage.kb.page_text import render_rule_text
from llmtriage.kb.pages import category_page, rule_page
from llmtriage.kb.search import SearchIndex
from llmtriage.kb.site import REQUIRED_RULE_SECTIONS, build_site
from llmtriage.kb.site_check import check_site
from llmtriage.kb.tokens import tokens
from llmtriage.ruleset.verified import fix_table, read_record, verification

ROOT = Path(__file__).resolve().parents[1]

# query -> expected top category (rule ids are still moving; categories are stable).
QUERIES = [
    ("显存溢出", "cuda-oom"),
    ("显存不够了", "cuda-oom"),
    ("CUDA out of memory", "cuda-oom"),
    ("loss nan", "nan-loss"),
    ("loss 变成 nan", "nan-loss"),
    ("梯度爆炸", "nan-loss"),
    ("checksum", "checkpoint-corrupt"),
    ("权重文件损坏", "checkpoint-corrupt"),
    ("多卡卡住", "nccl-timeout"),
    ("training hangs on multiple GPUs", "nccl-timeout"),
    ("pad token", "pad-token-missing"),
    ("分词器没有 pad token", "pad-token-missing"),
    ("序列太长", "seq-too-long"),
    ("size mismatch", "weights-shape-mismatch"),
    ("端口被占用", "port-in-use"),
    ("磁盘满了", "disk-full"),
    ("共享内存不足", "shm-exhausted"),
    ("backward twice", "autograd-misuse"),
    ("设备不一致", "device-mismatch"),
    ("trust_remote_code", "remote-code"),
    ("401 gated repo", "hub-auth"),
    ("no kernel image", "cuda-version-mismatch"),
    # pasted error fragments: the engine's own verdict on the text dominates
    ("RuntimeError: CUDA error: device-side assert triggered", "index-out-of-range"),
    ("ModuleNotFoundError: No module named 'flash_attn'", "missing-dependency"),
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     "device-mismatch"),
    ("OSError: [Errno 28] No space left on device", "disk-full"),
]
# "模型加载失败" is ambiguous between a missing file and a damaged one: either is right
AMBIGUOUS = [("模型加载失败", {"weights-not-found", "checkpoint-corrupt"})]


@pytest.fixture(scope="module")
def index(ruleset):
    return SearchIndex(ruleset)


def _present(ruleset, cat):
    if not any(r["category"] == cat for r in ruleset.rules):
        pytest.skip(f"no rule in category {cat} yet")


@pytest.mark.parametrize("query,category", QUERIES)
def test_query_top_category(index, ruleset, query, category):
    _present(ruleset, category)
    res = index.search(query, limit=5)
    assert res, query
    assert res[0]["category"] == category, (query, [(r["rule_id"], r["score"]) for r in res])


@pytest.mark.parametrize("query,categories", AMBIGUOUS)
def test_ambiguous_query(index, query, categories):
    res = index.search(query, limit=5)
    assert res[0]["category"] in categories, [(r["rule_id"], r["category"]) for r in res]


def test_specific_rules_rank_first(index, ruleset):
    for query, rid in [("显存溢出", "torch-cuda-oom"), ("CUDA out of memory", "torch-cuda-oom"),
                       ("RuntimeError: CUDA error: device-side assert triggered", "cuda-device-side-assert-index")]:
        if rid in ruleset.by_id:
            assert index.search(query)[0]["rule_id"] == rid, query


@pytest.mark.slow   # a kb search for every rule example
def test_every_rules_example_log_pasted_finds_that_rule(index, ruleset):
    misses = []
    for r in ruleset.rules:
        ex = r["examples"]["match"][0]["log"]
        res = index.search(ex, limit=1)
        if not res or res[0]["rule_id"] != r["id"]:
            misses.append((r["id"], res[0]["rule_id"] if res else None))
    assert not misses


def test_rule_id_and_category_queries(index, ruleset):
    rid = ruleset.rules[0]["id"]
    assert index.search(rid)[0]["rule_id"] == rid
    assert index.search("nccl-timeout")[0]["category"] == "nccl-timeout"


def test_results_sorted_and_limited(index):
    res = index.search("out of memory", limit=3)
    assert len(res) == 3
    assert [r["score"] for r in res] == sorted((r["score"] for r in res), reverse=True)
    assert index.search("   ") == []
    assert index.search("zzqxv wobblefrotz") == []


def test_tokens_english_stemming_and_chinese_bigrams():
    assert tokens("Loading corrupted checkpoints") == ["load", "corrupt", "checkpoint"]
    assert tokens("显存溢出") == ["显存", "存溢", "溢出"]
    assert tokens("loss变成nan") == ["loss", "变成", "nan"]


# ------------------------------------------------------------------ CLI: search

def test_cli_search_json_contract(cli):
    r = cli("kb", "search", "--format", "json", "checksum")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc) == ["results"]
    res = doc["results"]
    assert res and res[0]["category"] == "checkpoint-corrupt"
    for item in res:
        assert {"rule_id", "category", "title", "score"} <= set(item)
        assert isinstance(item["score"], (int, float))
    assert [x["score"] for x in res] == sorted((x["score"] for x in res), reverse=True)


def test_cli_search_human_table_and_languages(cli):
    r = cli("kb", "search", "--limit", "3", "--no-color", "CUDA out of memory", env={"LANG": "en_US.UTF-8"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0].split()[:3] == ["#", "score", "rule"]
    assert "cuda-oom" in lines[1] and "The GPU" in r.stdout.decode()
    assert len([x for x in lines if x[:2].strip().isdigit()]) == 3
    zh = cli("kb", "search", "--lang", "zh", "--format", "json", "CUDA out of memory")
    title = json.loads(zh.stdout)["results"][0]["title"]
    assert any("\u4e00" <= c <= "\u9fff" for c in title)
    env_zh = cli("kb", "search", "--format", "json", "CUDA out of memory", env={"LANG": "zh_CN.UTF-8"})
    assert json.loads(env_zh.stdout)["results"][0]["title"] == title


def test_cli_search_reads_a_pasted_traceback_from_stdin(cli):
    tb = (b"Traceback (most recent call last):\n  File \"/work/sft/train.py\", line 9, in <module>\n"
          b"RuntimeError: CUDA error: device-side assert triggered\n")
    r = cli("kb", "search", "--format", "json", "-", input=tb)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"][0]["category"] == "index-out-of-range"


def test_search_path_imports_no_yaml_or_pydantic(tmp_path):
    env = dict(os.environ, LLMTRIAGE_CACHE_DIR=str(tmp_path))
    env.pop("LLMTRIAGE_NO_CACHE", None)
    code = ("import sys\nfrom llmtriage.cli.app import main\nmain(['kb', 'search', '--format', 'json', 'loss nan'])\n"
            "sys.stderr.write('HEAVY=' + ','.join(m for m in ('yaml', 'pydantic', 'torch', 'transformers') "
            "if m in sys.modules))\n")
    subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120)   # warm the cache
    for _ in range(3):      # a rule file edited between the runs invalidates the cache: try again
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=120)
        if r.stderr.decode().rstrip().endswith("HEAVY="):
            break
    assert r.stderr.decode().rstrip().endswith("HEAVY="), r.stderr.decode()[-500:]
    assert json.loads(r.stdout)["results"]


# ------------------------------------------------------------------ pages

def test_rule_page_sections_both_languages(ruleset):
    rule = ruleset.by_id["torch-cuda-oom"]
    en = render_rule_text(rule_page(ruleset, rule, verified={}))
    for head in ("What happened", "Why", "Signatures", "Example log", "What llmtriage prints for it", "Fixes",
                 "Not to be confused with", "References", "Source: rules/cuda-oom/torch-cuda-oom.yaml"):
        assert head in en, head
    assert "[cuda-oom / torch-cuda-oom]" in en and "severity: error" in en
    assert "✖ error" in en                      # the engine's own rendering of the example
    assert "cuda-oom-absurd-allocation" in en   # a no_match example's expect_rule
    zh = render_rule_text(rule_page(ruleset, rule, lang="zh", verified={}))
    for head in ("含义", "原因", "示例日志", "llmtriage 对它的输出", "修复方法", "不要混淆", "参考资料"):
        assert head in zh, head
    assert ruleset.text(rule, "zh")["title"] in zh


def test_cli_show_explain_and_lang(cli):
    r = cli("kb", "show", "torch-cuda-oom", "--no-color", env={"LANG": "C.UTF-8"})
    assert r.returncode == 0, r.stderr
    assert "Not to be confused with" in r.stdout.decode()
    z = cli("explain", "torch-cuda-oom", env={"LANG": "zh_CN.UTF-8"})
    assert z.returncode == 0 and "修复方法" in z.stdout.decode()
    z2 = cli("explain", "--lang", "zh", "torch-cuda-oom", env={"LANG": "C.UTF-8"})
    assert z2.stdout == z.stdout
    c = cli("explain", "nccl-timeout", env={"LANG": "C.UTF-8"})
    assert c.returncode == 0 and "Collective timed out" in c.stdout.decode()
    bad = cli("kb", "show", "no-such-rule")
    assert bad.returncode == 2 and bad.stdout == b""
    err = bad.stderr.decode().strip()
    assert "\n" not in err and "no-such-rule" in err and "Traceback" not in err


def test_category_page_lists_its_rules(ruleset):
    page = category_page(ruleset, "cuda-oom")
    assert {r["id"] for r in page["rules"]} == {r["id"] for r in ruleset.rules if r["category"] == "cuda-oom"}
    assert page["description"] == ruleset.taxonomy["cuda-oom"]


# ------------------------------------------------------------------ verified fixes

RECORD = {"fixes": {
    "oom:grad-accum": {"devices": {
        "cpu": {"verified": True, "torch": "2.13.0", "transformers": "4.60.0", "date": "2025-06-01T00:00:00+00:00"},
        "cuda": {"verified": True, "torch": "2.13.0", "transformers": "4.60.0", "date": "2025-06-02T00:00:00+00:00"}},
        "verified": True},
    "oom:checkpointing": {"verified": False, "device": "cpu", "torch": "2.13.0", "transformers": "4.60.0",
                          "date": "2025-06-01"},
    "oom:flat": {"verified": True, "device": "cpu", "torch": "2.13.0", "transformers": "4.60.0", "date": "2025-06-03"},
}}


FIXES = RECORD["fixes"]


def test_verification_reader_is_tolerant():
    v = verification("oom:grad-accum", FIXES)
    assert v["verified"] and v["device"] == "cuda" and v["torch"] == "2.13.0"
    assert verification("oom:flat", FIXES)["device"] == "cpu"
    assert verification("oom:checkpointing", FIXES)["verified"] is False
    assert verification("oom:missing", FIXES) is None
    assert verification(None, FIXES) is None
    assert verification("oom:flat", fix_table({"fixes": []})) is None
    assert verification("x:y", {"x:y": {"verified": "yes"}})["verified"] is False   # only a real True


def test_verified_record_missing_or_broken(tmp_path):
    assert read_record(tmp_path / "nope.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert read_record(tmp_path / "bad.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_record(tmp_path / "list.json") == {} and fix_table([1, 2]) == {}


def test_page_marks_verified_fixes(ruleset):
    rule = copy.deepcopy(ruleset.by_id["torch-cuda-oom"])
    rule["fixes"][0]["verified_by"] = "oom:grad-accum"
    rule["fixes"][1]["verified_by"] = "oom:checkpointing"
    rule["fixes"][2]["verified_by"] = "oom:never-run"
    text = render_rule_text(rule_page(ruleset, rule, verified=FIXES))
    lines = text.splitlines()
    first = next(x for x in lines if x.strip().startswith("1. "))
    assert "✔ verified on cuda" in first and "torch 2.13.0" in first and "transformers 4.60.0" in first
    second = next(x for x in lines if x.strip().startswith("2. "))
    assert "verification failed on cpu" in second and "✔" not in second
    third = next(x for x in lines if x.strip().startswith("3. "))
    assert "not recorded" in third and "✔" not in third
    fourth = next(x for x in lines if x.strip().startswith("4. "))
    assert "verif" not in fourth
    zh = render_rule_text(rule_page(ruleset, rule, lang="zh", verified=FIXES))
    assert "✔ 已验证 于 cuda" in zh


def test_cli_show_reads_verified_file(cli, tmp_path):
    src = (ROOT / "tests/data/user_rules/cuda-oom/test-cuda-oom.yaml").read_text(encoding="utf-8")
    src = src.replace("id: test-cuda-oom", "id: kb-verified-oom").replace(
        'snippet: "--per_device_train_batch_size 4 --gradient_accumulation_steps 8"',
        'snippet: "--per_device_train_batch_size 4 --gradient_accumulation_steps 8"\n    verified_by: "oom:grad-accum"')
    d = tmp_path / "rules" / "cuda-oom"
    d.mkdir(parents=True)
    (d / "kb-verified-oom.yaml").write_text(src, encoding="utf-8")
    rec = tmp_path / "verified.json"
    rec.write_text(json.dumps(RECORD), encoding="utf-8")
    r = cli("kb", "show", "kb-verified-oom", "--rules", str(tmp_path / "rules"), "--verified", str(rec), "--no-color",
            env={"LANG": "C.UTF-8", "LLMTRIAGE_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert "✔ verified on cuda (torch 2.13.0" in r.stdout.decode()


# ------------------------------------------------------------------ static site

class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections, self.links, self.text = set(), [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and a.get("id"):
            self.sections.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("link", "script", "img") and (a.get("src") or a.get("href")):
            self.links.append(a.get("src") or a.get("href"))

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def site(ruleset, tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    build_site(ruleset, out, verified={})
    return out


def _parse(path):
    p = _Collect()
    p.feed(path.read_text(encoding="utf-8"))
    return p


@pytest.mark.slow   # builds the whole HTML site
def test_site_pages_sections_and_links(site, ruleset):
    for lang_root in (site, site / "zh"):
        assert (lang_root / "index.html").exists()
        for rule in ruleset.rules:
            page = lang_root / "rules" / f"{rule['id']}.html"
            parsed = _parse(page)
            assert set(REQUIRED_RULE_SECTIONS) <= parsed.sections, (page, parsed.sections)
        for cat in {r["category"] for r in ruleset.rules}:
            assert (lang_root / "category" / f"{cat}.html").exists()
    for page in site.rglob("*.html"):
        for href in _parse(page).links:
            if href.startswith(("http://", "https://")):
                assert page.parent.name == "rules", (page, href)     # only references point outside
                continue
            assert ":" not in href.split("/")[0], href
            target = (page.parent / href.split("#")[0]).resolve()
            assert target.exists(), (page, href)
    index = _parse(site / "index.html")
    assert sum(1 for h in index.links if h.startswith("rules/")) == len(ruleset.rules)
    assert check_site(site) == []


@pytest.mark.slow   # builds the whole HTML site
def test_site_rule_page_content(site, ruleset):
    parsed = _parse(site / "rules" / "torch-cuda-oom.html")
    text = "".join(parsed.text)
    assert "Tried to allocate 2.50 GiB" in text and "✖ error" in text
    assert "cuda-oom-absurd-allocation.html" in parsed.links
    assert "../category/cuda-oom.html" in parsed.links and "../zh/rules/torch-cuda-oom.html" in parsed.links
    zh = _parse(site / "zh" / "rules" / "torch-cuda-oom.html")
    assert ruleset.text(ruleset.by_id["torch-cuda-oom"], "zh")["title"] in "".join(zh.text)
    assert "../../rules/torch-cuda-oom.html" in zh.links


@pytest.mark.slow   # builds the whole HTML site
def test_site_escapes_html(ruleset, tmp_path):
    rs = copy.copy(ruleset)
    rule = copy.deepcopy(ruleset.by_id["torch-cuda-oom"])
    rule["title"] = 'Bad <script>alert("x")</script> & title'
    rule["examples"]["no_match"][0]["why"] = "<img src=x onerror=alert(1)>"
    rs.rules = [rule if r["id"] == rule["id"] else r for r in ruleset.rules]
    rs.by_id = {r["id"]: r for r in rs.rules}
    build_site(rs, tmp_path, langs=("en",), verified={})
    raw = (tmp_path / "rules" / "torch-cuda-oom.html").read_text(encoding="utf-8")
    assert "<script>alert" not in raw and "&lt;script&gt;alert(&quot;x&quot;)" in raw
    assert "<img src=x" not in raw
    assert 'Bad <script>alert("x")</script> & title' in "".join(_parse(tmp_path / "rules" / "torch-cuda-oom.html").text)


@pytest.mark.slow   # builds the whole HTML site
def test_check_site_reports_missing_section_and_broken_link(ruleset, tmp_path):
    build_site(ruleset, tmp_path, langs=("en",), verified={})
    page = tmp_path / "rules" / "torch-cuda-oom.html"
    raw = page.read_text(encoding="utf-8")
    start = raw.index('<section id="fixes">')
    end = raw.index("</section>", start) + len("</section>")
    page.write_text((raw[:start] + raw[end:]).replace("../category/cuda-oom.html", "../category/nope.html", 1),
                    encoding="utf-8")
    problems = check_site(tmp_path)
    assert any("missing section 'fixes'" in p for p in problems)
    assert any("broken link '../category/nope.html'" in p for p in problems)


@pytest.mark.slow   # builds the whole site in both languages in a child process
def test_cli_build_check(cli, tmp_path):
    out = tmp_path / "site"
    r = cli("kb", "build", "--out", str(out), "--check")
    assert r.returncode == 0, r.stderr
    assert (out / "index.html").exists() and (out / "zh" / "index.html").exists()
    (out / "rules" / "torch-cuda-oom.html").write_text("<html><body><p>stub</p></body></html>", encoding="utf-8")
    assert any("missing section" in p for p in check_site(out))
