"""Bad rule files give one precise, pinned line each: file:line:col [id] key.path: problem.

Regenerate an expectation after an intended wording change with
`python -m pytest tests/test_rule_file_errors.py --update-golden`.
"""
from pathlib import Path

import pytest

from llmtriage.ruleset.validate import builtin_rules_dir, load_taxonomy, validate_rule_file

BAD = Path(__file__).parent / "data" / "bad_rules"
CASES = sorted(BAD.glob("*.yaml"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bad_rule_file_message(path, golden):
    tax = load_taxonomy(builtin_rules_dir() / "taxonomy.yaml")
    rule, problems = validate_rule_file(path, BAD, tax)
    assert rule is None and problems
    text = "\n".join(problems).replace(str(BAD) + "/", "") + "\n"
    golden(path.with_suffix(".err"), text)
    for line in problems:
        assert line.startswith(str(path) + ":")


def test_all_problems_reported_at_once(tmp_path):
    import shutil

    from llmtriage.errors import RuleLoadError
    from llmtriage.ruleset.validate import validate_dirs

    for p in CASES[:3]:
        shutil.copy(p, tmp_path / p.name)
    with pytest.raises(RuleLoadError) as exc:
        validate_dirs([builtin_rules_dir(), tmp_path])
    assert len(exc.value.problems) >= 3
