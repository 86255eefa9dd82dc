"""A log holding two runs of one command (layer 3, data in rules/verdict.yaml `rerun`).

Users paste a terminal session: the command, its traceback, a fix at the shell prompt (`pip install
transformers==4.37.0`), then the same command again and its new error. Each `rerun` marker is a shell
prompt with the command typed after it; a command typed again after a death of its earlier run starts a
new run, and when that run dies too, the earlier death is history: the error the user faces now is the
last run's. The verdict then leaves the earlier deaths out of the status and turns the earlier run's
error findings into warnings (context `earlier-run`).

Two traces of one launcher that name different node ranks (`torchrun --node_rank 1 ...` then `--node_rank 0`,
accelerate's `--machine_rank`, `NODE_RANK=`) are not a rerun: they are the nodes of one multi-node job, whose
outputs were pasted one after the other (`tail` of each node's file); they ran at the same time.
"""
from __future__ import annotations

from typing import Optional

from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled, tr, verdict_spec


def _key(command: str) -> Optional[str]:
    """The program and what it runs (`python infer.py`, `python -m pkg.cli`, `llamafactory-cli train`), after
    any leading `VAR=value` assignments."""
    parts = [p for p in command.split()]
    while parts and "=" in parts[0] and not parts[0].startswith("-"):
        parts.pop(0)
    if not parts:
        return None
    if len(parts) > 2 and parts[1].startswith("-"):      # `python -m pkg`, `python -u train.py`
        return " ".join(parts[:3])
    return " ".join(parts[:2])


def _node(node_arg, command: str) -> Optional[str]:
    """The node rank a launch command names (None: it names none)."""
    if node_arg is None:
        return None
    hit = node_arg.search(command)
    return hit.group("node") if hit else None


def last_rerun(scanner: Scanner, deaths: list[tuple[int, str, str]]) -> int:
    """The line of the last command typed again after a death of its earlier run (or, both typed at a full
    shell prompt, after that run ended), with a death after it (0: none). `deaths`: (line, name, text) of the
    deaths the status weighs."""
    spec = verdict_spec().get("rerun")
    if not spec or not deaths:
        return 0
    skip = compiled(spec["not_programs"])
    node_arg = compiled(spec["node_identity"]) if spec.get("node_identity") else None
    first_seen: dict[str, int] = {}
    first_node: dict[str, Optional[str]] = {}
    best = 0
    first_typed: dict[str, bool] = {}
    for line, name, text in sorted(scanner.hits.get("rerun", ())):
        hit = compiled(spec["command"]).search(text)
        cmd = (hit.group("cmd") if hit else "").strip()
        key = _key(cmd)
        if key is None or skip.search(key):
            continue
        node = _node(node_arg, cmd)
        earlier = first_seen.setdefault(key, line)
        first_node.setdefault(key, node)
        typed = first_typed.setdefault(key, name == "shell-command") and name == "shell-command"
        if node is not None and first_node[key] is not None and node != first_node[key]:
            continue                                    # another node of the same job, not a rerun
        # the earlier run ended: a death of it, or (both typed at a full shell prompt) the prompt that came back
        # for the second command (its error, an `[E]` line with no traceback, is history too)
        ended = typed or any(earlier < d[0] < line for d in deaths)
        if earlier < line and ended and any(d[0] > line for d in deaths):
            best = line
    return best


def earlier_run(findings: list[Finding], rerun: int, death_line: int, lang: Optional[str],
                death_text: str = "") -> None:
    """Error findings of the runs before `rerun` (the last run died at `death_line`) become warnings, except
    one whose line is the very error the last run died of (`death_text`): the rerun met the same failure,
    so it is still the one to fix (a repeat merged into the first run's finding keeps that finding's line). So is
    an earlier error of the category the last run died of (a one-line reproduction after torchrun's SIGSEGV record
    that segfaults too): the rerun confirms the earlier failure, it does not replace it."""
    if not rerun or death_line <= rerun:
        return
    reason = verdict_spec()["rerun"]["reason"]
    same = " ".join(death_text.split())
    confirmed = {f.category for f in findings if f.severity == "error" and f.role == "cause" and f.rule_id != "unknown"
                 and (f.last_line or f.line) > rerun}
    for f in findings:
        if same and " ".join((f.evidence or "").split()) == same:
            continue
        if f.category in confirmed and f.role == "cause":
            continue
        if f.severity == "error" and (f.last_line or f.line) < rerun and not f.rule_id.startswith("metric-"):
            f.severity = "warning"
            f.judgement = {"context": "earlier-run", "severity_was": "error",
                           "reason": tr(reason, lang, line=rerun, death=death_line)}


def typed_between(scanner: Scanner, start: int, end: int) -> list[int]:
    """Lines of the commands typed at a full shell prompt strictly between `start` and `end`."""
    return [h[0] for h in scanner.hits.get("rerun", ()) if start < h[0] < end and h[1] == "shell-command"]


def typed_after_finish(scanner: Scanner, finish_line: int, line: int) -> bool:
    """A command typed at a full shell prompt between the finish at `finish_line` and `line`, with no finish
    after that command: the finish ended the earlier command, and what `line` says belongs to the next one
    (`swift export` finished, then `ollama create` typed at the prompt failed)."""
    typed = typed_between(scanner, finish_line, line)
    return bool(typed) and not any(typed[-1] < h[0] for h in scanner.finishes())
