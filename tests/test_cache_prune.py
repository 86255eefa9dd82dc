"""The cache folder stays bounded: each kind keeps its most recently used files (ruleset/cachefile.py)."""
import os
import time

from llmtriage.ruleset import cachefile


def _age(path, seconds_ago):
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def test_write_keeps_the_most_recent_files_of_its_kind(tmp_path):
    keep = cachefile.KEEP_PER_KIND
    for i in range(keep + 5):
        assert cachefile.write(tmp_path / f"rules-{i:03d}.json", b"{}")
        _age(tmp_path / f"rules-{i:03d}.json", 1000 - i)      # later files are newer
    assert cachefile.write(tmp_path / "gate-a.json", b"{}")
    names = sorted(p.name for p in tmp_path.iterdir())
    rules = [n for n in names if n.startswith("rules-")]
    assert len(rules) == keep
    assert "rules-000.json" not in rules and f"rules-{keep + 4:03d}.json" in rules
    assert "gate-a.json" in names                               # another kind is not counted against it


def test_a_read_marks_a_file_used_so_it_survives(tmp_path):
    keep = cachefile.KEEP_PER_KIND
    old = tmp_path / "forms-old.json"
    assert cachefile.write(old, b"payload")
    _age(old, 5000)
    assert cachefile.read(old) == b"payload"                    # used now: the newest
    for i in range(keep + 2):
        assert cachefile.write(tmp_path / f"forms-{i}.json", b"{}")
        _age(tmp_path / f"forms-{i}.json", 100 + i)
    assert old.exists()
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("forms-")]) == keep


def test_links_and_other_files_are_never_removed(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "near-link.json"
    link.symlink_to(target)
    _age(target, 9000)
    for i in range(cachefile.KEEP_PER_KIND + 3):
        assert cachefile.write(tmp_path / f"near-{i}.json", b"{}")
    assert link.is_symlink() and target.read_text() == "keep me"
