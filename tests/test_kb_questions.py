"""kb search on real users' question titles: the labelled eval in tests/data/kb_questions.tsv.

Each row is a question title (Chinese or English) from a public issue tracker, the category the
thread's answer points to, and the thread's address. Top-1 is measured per language and must stay
above a floor. Measured on the 106 rows: 0.958 zh / 0.983 en with the vocabulary in rules/kb.yaml,
0.688 / 0.793 before it. The last 16 rows were added after the tables were tuned and measured first
as a held-out set: 0.938 (0.562 before).
"""
from pathlib import Path

import pytest

from llmtriage.kb.search import SearchIndex
from llmtriage.kb.tokens import has_cjk
from llmtriage.kb.words import kb_words_path, load_kb_words, parse_kb_words

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "kb_questions.tsv"
FLOOR = {"zh": 0.90, "en": 0.90}
FLOOR_ALL = 0.92


def _rows():
    rows = []
    for n, line in enumerate(EVAL.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        assert len(parts) == 3, f"{EVAL}:{n}: expected title<TAB>category<TAB>source"
        rows.append(tuple(parts))
    return rows


@pytest.fixture(scope="module")
def index(ruleset):
    return SearchIndex(ruleset)


def test_eval_file_is_well_formed(ruleset):
    rows = _rows()
    assert len(rows) >= 80
    cats = {c for _, c, _ in rows}
    assert cats <= set(ruleset.taxonomy), cats - set(ruleset.taxonomy)
    # the five categories added with taxonomy v2 are all represented
    assert {"scheduler-kill", "native-crash", "filesystem-error", "throughput-low", "compile-error"} <= cats
    assert all(src.startswith("https://") for _, _, src in rows)
    assert len({t for t, _, _ in rows}) == len(rows), "duplicate titles"
    langs = {("zh" if has_cjk(t) else "en") for t, _, _ in rows}
    assert langs == {"zh", "en"}


def test_top1_on_real_question_titles(index):
    hits = {"zh": [0, 0], "en": [0, 0]}
    misses = []
    for title, cat, _ in _rows():
        lang = "zh" if has_cjk(title) else "en"
        res = index.search(title, limit=1)
        got = res[0]["category"] if res else None
        hits[lang][1] += 1
        if got == cat:
            hits[lang][0] += 1
        else:
            misses.append((lang, cat, got, title))
    rate = {k: a / b for k, (a, b) in hits.items()}
    total = sum(a for a, _ in hits.values()) / sum(b for _, b in hits.values())
    detail = "\n".join(f"[{lang}] want {want} got {got}: {t}" for lang, want, got, t in misses)
    for lang, floor in FLOOR.items():
        assert rate[lang] >= floor, f"{lang} top-1 {rate[lang]:.3f} < {floor}\n{detail}"
    assert total >= FLOOR_ALL, f"top-1 {total:.3f} < {FLOOR_ALL}\n{detail}"


def test_kb_words_come_from_yaml(ruleset):
    words = parse_kb_words(kb_words_path().read_text(encoding="utf-8"))
    load_kb_words()                         # fills the JSON cache when it is empty
    assert words == load_kb_words()         # the JSON cache holds exactly what the YAML says
    CATEGORY_ZH, CATEGORY_TAGS = words.category_names["zh"], words.category_tags
    # every category has a Chinese display name; tags only name real categories
    assert set(ruleset.taxonomy) <= set(CATEGORY_ZH), set(ruleset.taxonomy) - set(CATEGORY_ZH)
    assert set(CATEGORY_TAGS) <= set(ruleset.taxonomy)


@pytest.mark.parametrize("text,problem", [
    ("synonyms: [a, b]\n", "synonyms must map"),
    ("synonyms: {oom: ''}\n", "synonyms must map"),
    ("category_tags: {cuda-oom: oom}\n", "category_tags must map"),
    ("other: 1\n", "unknown keys"),
])
def test_malformed_kb_words_are_rejected(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_kb_words(text, "kb.yaml")


@pytest.mark.parametrize("query,category", [
    ("内存不足", "cuda-oom"),                 # in fine-tuning threads this means GPU memory
    ("loss 很快降到 0", "loss-suspicious"),
    ("loss 突然收敛", "loss-suspicious"),
    ("GPU 利用率很低", "throughput-low"),
    ("加载模型时被 killed", "host-oom"),
    ("job preempted by slurm", "scheduler-kill"),
    ("Permission denied when writing the cache", "filesystem-error"),
    ("段错误", "native-crash"),
    ("torch.compile 报错", "compile-error"),
])
def test_user_wordings_rank_their_category_first(index, query, category):
    res = index.search(query, limit=3)
    assert res and res[0]["category"] == category, (query, [(r["rule_id"], r["category"]) for r in res])
