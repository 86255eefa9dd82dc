"""Every shipped rule: invariants, its examples through the full engine, translations, coverage."""
from pathlib import Path

import pytest
import yaml

import llmtriage
from llmtriage.ruleset.files import builtin_rules_dir
from llmtriage.workflows.testing import iter_examples, run_example, schema_text

ROOT = Path(__file__).resolve().parents[1]
SHARED_TAXONOMY = ROOT.parent / "shared" / "taxonomy.yaml"
_RS = llmtriage.load_rules()      # only to list the examples at collection: the tests use the validated `ruleset`
EXAMPLES = list(iter_examples(_RS.rules))


@pytest.mark.parametrize("rule,kind,index", EXAMPLES,
                         ids=[f"{r['id']}::{k}[{i}]" for r, k, i in EXAMPLES])
def test_rule_example(engine, rule, kind, index):
    res = run_example(engine, rule, kind, index)
    assert res.ok, str(res)


def test_schema_json_is_current():
    assert (builtin_rules_dir() / "schema.json").read_text(encoding="utf-8") == schema_text(), \
        "run `llmtriage rules schema --write`"


@pytest.mark.skipif(not SHARED_TAXONOMY.exists(), reason="../shared is not beside the repo")
def test_taxonomy_copy_matches_shared():
    ours = yaml.safe_load((builtin_rules_dir() / "taxonomy.yaml").read_text(encoding="utf-8"))
    theirs = yaml.safe_load(SHARED_TAXONOMY.read_text(encoding="utf-8"))
    assert ours == theirs


def test_every_category_has_a_rule(ruleset):
    covered = {r["category"] for r in ruleset.rules}
    missing = set(ruleset.taxonomy) - covered - {"unknown"}
    assert not missing, f"categories without rules: {sorted(missing)}"


def test_every_rule_has_a_chinese_translation(ruleset):
    zh = ruleset.locales.get("zh", {})
    missing = [r["id"] for r in ruleset.rules if r["id"] not in zh]
    assert not missing, f"rules without rules/locales/zh/<id>.yaml: {missing}"


def test_every_fix_condition_is_translated(ruleset):
    """A fix's `when` is shown with the fix: Chinese output must not fall back to the English condition."""
    zh = ruleset.locales.get("zh", {})
    untranslated = [(r["id"], i) for r in ruleset.rules if r["id"] in zh
                    for i, (en, z) in enumerate(zip(r["fixes"], zh[r["id"]]["fixes"]))
                    if en.get("when") and not (z.get("when") or "").strip()]
    assert not untranslated, f"fixes whose `when` has no zh translation: {untranslated[:20]} ({len(untranslated)})"


def test_every_rule_has_a_near_miss_with_reason(ruleset):
    for r in ruleset.rules:
        assert r["examples"]["no_match"] and all(x["why"].strip() for x in r["examples"]["no_match"]), r["id"]


@pytest.mark.slow   # the CLI runs every example again (test_rules checks them in-process in the fast tier)
def test_rules_command_passes(cli):
    r = cli("rules", "test", timeout=600)
    assert r.returncode == 0, r.stdout.decode()[-3000:]
