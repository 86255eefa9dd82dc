"""The ranks missing from the HCCL root's roster after its topology exchange timed out (detect/hccl_roster.py)."""
from __future__ import annotations

import llmtriage

HEAD = ("[ERROR] HCCL(4410,python):2025-04-12-03:19:12.884.102 [topoinfo_exchange_server.cc:190] [4417][InitGroupStage]"
        "[RanktableDetect]topo exchange server get socket timeout! timeout[300 s]\n")
PFX = "[ERROR] HCCL(4410,python):2025-04-12-03:19:12.884.166 [topoinfo_exchange_server.cc:402] [4417][InitGroupStage][DisplayConnectedRank]"
TAIL = "RuntimeError: create:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:102 HCCL function error: HcclGetRootInfo(&hcclID), error code is 9\n"


def _roster(ids: list[int], need: int = 0) -> str:
    out = PFX + f"total connected num is [{len(ids)}],line num is [{(len(ids) + 7) // 8}]\n"
    if need:
        out += PFX + f"need connect rankNum is [{need}]\n"
    for k in range(0, len(ids), 8):
        out += PFX + f"connected rankinfo[LINE {k // 8}]: " + ",".join(f"[{i:016d}]" for i in ids[k:k + 8]) + ";\n"
    return out


def _top(text: str):
    return next(f for f in llmtriage.analyze(text).findings if f.severity == "error")


def test_gap_in_the_roster_names_the_missing_rank():
    top = _top(HEAD + _roster([i for i in range(16) if i != 9]) + TAIL)
    assert top.rule_id == "hccl-root-rank-never-connected" and top.action == "fix"
    assert top.captures["missing"] == "9" and "rank 9" in top.message


def test_needed_rank_count_names_a_missing_last_rank():
    top = _top(HEAD + _roster(list(range(15)), need=16) + TAIL)
    assert top.captures["missing"] == "15"


def test_no_gap_and_no_count_names_nobody():
    """The roster lists 0..7 with no count of the ranks needed: the missing ones cannot be told."""
    top = _top(HEAD + _roster(list(range(8))) + TAIL)
    assert top.rule_id == "hccl-root-rank-never-connected" and "missing" not in top.captures
