"""NCCL Flight Recorder dumps: which ranks never arrived at the collective the others wait in.

torch's Flight Recorder (`TORCH_NCCL_TRACE_BUFFER_SIZE` / `TORCH_FR_BUFFER_SIZE`) keeps each rank's
recent collectives in a ring buffer and, on a watchdog timeout (`TORCH_NCCL_DUMP_ON_TIMEOUT=1`) or on
demand, writes one file per rank: `<prefix><rank>` (prefix `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, default
`/tmp/nccl_trace_rank_`). The file is a pickle (protocol 2) of plain types, or JSON from
`_dump_fr_trace_json`: `{"version", "pg_config": {name: {name, desc, ranks}}, "pg_status": {pg_id:
{last_enqueued_collective, last_started_collective, last_completed_collective}}, "entries": [{record_id,
pg_id, process_group: (name, desc), collective_seq_id, p2p_seq_id, op_id, profiling_name ("nccl:all_reduce"),
input_sizes, output_sizes, input_dtypes, output_dtypes, state (scheduled|started|completed),
time_created_ns, frames, is_p2p, ...}]}`.

Pickles go through `PlainUnpickler`, which refuses every global (and persistent id): a dump that
names any class or function is refused with one line, never executed, so what loads is built-in
scalars and containers only. Dumps are read one at a time and reduced to a few numbers per
collective, so memory stays near one dump's size.

Analysis, per process group (entries grouped by `process_group` name), over the collective sequence
numbers every rank keeps:
1. a mismatch: at one sequence number ranks called different ops, or (for ops whose sizes must agree)
   different sizes / dtypes; the ranks outside the majority are the suspects;
2. a hang: some ranks entered collective #s and did not complete it while others never entered it;
   those are waited on. Waits are followed across groups (a rank waited on in the DP group may itself
   wait in its EP group): the suspects are the ranks waited on that wait for nobody; a member with
   no dump that the others wait on is a suspect too.
"""
from __future__ import annotations

import gc
import io
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.errors import InputError

MAX_DUMP_BYTES = 512 << 20        # larger files are refused (a dump of 20000 entries is far smaller)
MAX_SEQS = 4096                   # collectives kept per rank and process group (the newest)
SNIFF = 4096
LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".json.gz", ".expected.json")
_TRAILING_RANK = re.compile(r"(\d{1,6})(?:\.(?:json|pkl|pickle|bin))?$")
_INT = re.compile(r"-?\d+")
# ops whose input (i) and/or output (o) sizes must agree on every rank of the group (torch's Op.match)
SAME_SIZES = {
    "broadcast": "io", "_broadcast_oop": "io", "reduce": "i", "_reduce_oop": "i", "all_reduce": "io",
    "allreduce": "io", "allreduce_coalesced": "io", "all_gather": "io", "all_gather_single": "io",
    "_all_gather_base": "io", "_allgather_base": "io", "all_gather_into_tensor_coalesced": "io",
    "reduce_scatter": "io", "reduce_scatter_single": "io", "_reduce_scatter_base": "io",
    "reduce_scatter_tensor_coalesced": "io", "gather": "i", "scatter": "o", "barrier": "io",
    "all_reduce_barrier": "io",
}


class DumpRefused(InputError):
    """A Flight Recorder dump that holds something other than plain data (never executed)."""


class PlainUnpickler(pickle.Unpickler):
    """Unpickles plain types only: every global (class, function) and persistent id is refused, so
    nothing in the file is ever called."""

    def find_class(self, module: str, name: str) -> Any:
        raise DumpRefused(f"refers to {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise DumpRefused("holds a persistent id")


def load_dump(path: Path) -> dict[str, Any]:
    """One dump (pickle or JSON) as a dict of plain types; DumpRefused / InputError otherwise."""
    size = path.stat().st_size
    if size > MAX_DUMP_BYTES:
        raise InputError(f"{path}: Flight Recorder dump of {size >> 20} MB is larger than {MAX_DUMP_BYTES >> 20} MB; not read")
    with open(path, "rb") as fh:
        head = fh.read(1)
        fh.seek(0)
        try:
            if head == b"\x80":
                obj = PlainUnpickler(fh).load()
            else:
                obj = json.load(io.TextIOWrapper(fh, encoding="utf-8", errors="replace"))
        except DumpRefused as e:
            raise DumpRefused(f"{path}: refused: the Flight Recorder dump {e}; only plain data is read "
                              "(nothing in it was run)") from None
        except (pickle.UnpicklingError, ValueError, EOFError, TypeError, AttributeError, IndexError,
                KeyError, RecursionError, MemoryError, UnicodeDecodeError) as e:
            raise InputError(f"{path}: not a readable Flight Recorder dump ({type(e).__name__})") from None
    # with every global and persistent id refused, a pickle can only build built-in scalars and
    # containers (dict, list, tuple, str, bytes, numbers, None; set/bytearray from protocol 4+ opcodes)
    if not isinstance(obj, dict) or not isinstance(obj.get("entries", []), list):
        raise InputError(f"{path}: not a Flight Recorder dump (no entries)")
    return obj


def sniff(path: Path) -> bool:
    """Does this file look like a Flight Recorder dump (pickle or JSON with its keys)?"""
    if path.name.lower().endswith(LOG_SUFFIXES):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF)
    except OSError:
        return False
    if head[:1] == b"\x80":
        return b"entries" in head or b"pg_config" in head or b"version" in head[:64]
    h = head.lstrip()
    return h[:1] == b"{" and (b'"entries"' in h or b'"pg_config"' in h)


def rank_of(path: Path) -> Optional[int]:
    m = _TRAILING_RANK.search(path.name)
    return int(m.group(1)) if m else None


def find_dumps(paths: Iterable[str]) -> list[Path]:
    """Flight Recorder dumps among these files and in these directories (and their direct subfolders)."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            if sniff(path) and rank_of(path) is not None:
                out.append(path)
            continue
        if not path.is_dir():
            continue
        for sub in [path] + sorted(d for d in path.iterdir() if d.is_dir() and not d.name.startswith("."))[:64]:
            for f in sorted(sub.iterdir()):
                if f.is_file() and rank_of(f) is not None and sniff(f):
                    out.append(f)
    seen: set[str] = set()
    return [p for p in out if not (os.path.realpath(p) in seen or seen.add(os.path.realpath(p)))]  # type: ignore[func-returns-value]


# ------------------------------------------------------------------------------ reduction

@dataclass(slots=True)
class Call:
    """One collective (coalesced entries merged) on one rank."""
    op: str
    sig: tuple
    state: str
    sizes: Any
    t: int
    frame: str


@dataclass
class RankGroup:
    calls: dict[int, Call] = field(default_factory=dict)     # collective_seq_id -> call
    completed: int = -1
    p2p_pending: Optional[tuple[str, int, int]] = None        # (op, peer index in group, seq)


def _op(name: Any) -> tuple[str, str]:
    """('all_reduce', '') from 'nccl:all_reduce'; ('send', '1->2') from 'nccl:send 1->2'."""
    s = str(name or "")
    s = s.split(":", 1)[1] if ":" in s else s
    op, _, meta = s.partition(" ")
    return op, meta


def _shape(x: Any, cache: dict) -> Any:
    """[[4, 8], [16]] -> ((4, 8), (16,)), one shared object per distinct value."""
    try:
        t = tuple(tuple(v) for v in x) if x else ()
    except TypeError:
        t = tuple(x) if isinstance(x, (list, tuple)) else ()
    return cache.setdefault(t, t)


def _lists(x: Any) -> Any:
    return [_lists(v) for v in x] if isinstance(x, (list, tuple)) else x


def _user_frame(frames: Any) -> str:
    if not isinstance(frames, list):
        return ""
    for fr in frames:
        if isinstance(fr, dict):
            fn = str(fr.get("filename", ""))
            if "/torch/" not in fn and "\\torch\\" not in fn and not fn.startswith("<"):
                return f"{fr.get('name', '?')} at {fn}:{fr.get('line', '?')}"
    return ""


def _int(x: Any, default: int = -1) -> int:
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    m = _INT.search(str(x)) if x is not None else None
    return int(m.group(0)) if m else default


def reduce_dump(obj: dict[str, Any]) -> tuple[dict[str, RankGroup], dict[str, tuple[str, list[int]]], str]:
    """Per process group name: this rank's collectives; the pg_config members; the dump version."""
    groups: dict[str, RankGroup] = {}
    pg_ids: dict[str, str] = {}
    descs: dict[str, str] = {}
    cache: dict[Any, Any] = {}
    for e in obj.get("entries") or []:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group") or ("?", "")
        name = str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(pg)
        descs[name] = str(pg[1]) if isinstance(pg, (list, tuple)) and len(pg) > 1 else ""
        pg_ids[str(e.get("pg_id"))] = name
        g = groups.setdefault(name, RankGroup())
        op, meta = _op(e.get("profiling_name"))
        state = str(e.get("state") or "")
        if e.get("is_p2p") or op in ("send", "recv"):
            if state != "completed":
                peer = meta.split("->")[1] if "->" in meta else (meta.split("<-")[1] if "<-" in meta else "")
                g.p2p_pending = (op, _int(peer), _int(e.get("p2p_seq_id"), 0))
            else:
                g.p2p_pending = None
            continue
        seq = _int(e.get("collective_seq_id"), 0)
        ins, outs = _shape(e.get("input_sizes"), cache), _shape(e.get("output_sizes"), cache)
        side = SAME_SIZES.get(op, "")
        dt = e.get("input_dtypes") if side else ()
        dt = tuple(dt) if isinstance(dt, (list, tuple)) else ()
        part = (op, ins if "i" in side else None, outs if "o" in side else None, dt)
        part = cache.setdefault(part, part)
        if state == "completed":
            g.completed = max(g.completed, seq)
        prev = g.calls.get(seq)
        if prev is not None:             # a coalesced group: its entries share one sequence number
            prev.sig = cache.setdefault(prev.sig + (part,), prev.sig + (part,))
            prev.op, prev.state = op if op.endswith("coalesced") else prev.op, state
            continue
        frame = _user_frame(e.get("frames"))
        g.calls[seq] = Call(op=op, sig=cache.setdefault((part,), (part,)), state=state, sizes=(ins, outs) if ins or outs else (),
                            t=_int(e.get("time_created_ns"), 0), frame=cache.setdefault(frame, frame))
    for g in groups.values():
        if len(g.calls) > MAX_SEQS:
            g.calls = {q: g.calls[q] for q in sorted(g.calls)[-MAX_SEQS:]}
    for pid, st in (obj.get("pg_status") or {}).items():
        name = pg_ids.get(str(pid))
        if name is not None and isinstance(st, dict):
            g = groups[name]
            g.completed = max(g.completed, _int(st.get("last_completed_collective")))
    members: dict[str, tuple[str, list[int]]] = {}
    for key, cfg in (obj.get("pg_config") or {}).items():
        if isinstance(cfg, dict):
            ranks = [int(x) for x in _INT.findall(str(cfg.get("ranks", "")))]
            name = str(cfg.get("name", key))
            if ranks and name:
                members[name] = (str(cfg.get("desc", "")), ranks)
    for name, d in descs.items():
        if name in members and not members[name][0]:
            members[name] = (d, members[name][1])
    return groups, {**{n: (d, []) for n, d in descs.items()}, **members}, str(obj.get("version", ""))


# ------------------------------------------------------------------------------ analysis

@dataclass
class FRResult:
    dumps: int
    kind: str = "none"                  # missing | mismatch | nodump | cycle | none
    suspects: list[int] = field(default_factory=list)
    group: str = ""
    desc: str = ""
    seq: Optional[int] = None
    op: str = ""
    sizes: Any = None
    frame: str = ""
    waiting: list[int] = field(default_factory=list)
    waiting_state: str = ""
    suspect_call: Optional[dict[str, Any]] = None
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    missing_dumps: list[int] = field(default_factory=list)
    version: str = ""
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        coll = None
        if self.seq is not None:
            coll = {"process_group": self.group, "desc": self.desc, "op": self.op, "seq_id": self.seq,
                    "sizes": _lists(self.sizes[0]) if self.sizes else [],
                    "output_sizes": _lists(self.sizes[1]) if self.sizes else [],
                    "state": self.waiting_state or None, "frame": self.frame or None}
        return {"dumps": self.dumps, "kind": self.kind, "suspect_ranks": list(self.suspects), "collective": coll,
                "waiting_ranks": list(self.waiting), "suspect_call": self.suspect_call,
                "missing_dumps": list(self.missing_dumps), "version": self.version or None,
                "skipped": list(self.errors),
                "ranks": {str(r): v for r, v in sorted(self.ranks.items())}}


def analyze_dumps(paths: list[Path]) -> FRResult:
    """Read every dump (one at a time) and find where the ranks diverge."""
    per: dict[int, dict[str, RankGroup]] = {}
    members: dict[str, tuple[str, list[int]]] = {}
    version = ""
    errors: list[str] = []
    for p in paths:
        rank = rank_of(p)
        if rank is None:
            continue
        gc.disable()        # many small containers: the cyclic collector only slows loading (torch's loader does the same)
        try:
            obj = load_dump(p)
            groups, mem, version = reduce_dump(obj)
            del obj
        except DumpRefused:
            raise
        except InputError as e:
            with open(p, "rb") as fh:
                if fh.read(1) == b"\x80":
                    raise
            errors.append(str(e))      # a JSON file that only looked like a dump: skipped, said in the result
            continue
        finally:
            gc.enable()
        per[rank] = groups
        for name, (desc, ranks) in mem.items():
            old = members.get(name)
            if old is None or (ranks and not old[1]):
                members[name] = (desc or (old[0] if old else ""), ranks)
    res = FRResult(dumps=len(per), version=version, errors=errors)
    if not per:
        return res
    # members: pg_config where it names them, else every rank whose dump holds the group
    configured = {n for n, (_, ranks) in members.items() if ranks}
    for name in list(members):
        desc, ranks = members[name]
        have = sorted(r for r in per if name in per[r])
        members[name] = (desc, sorted(set(ranks) | set(have)) if ranks else have)
    world = set(per)
    for _, ranks in members.values():
        world |= set(ranks)
    world |= set(range(max(world) + 1))
    res.missing_dumps = sorted(world - set(per))
    if res.missing_dumps:
        _guess_members(members, configured, res.missing_dumps)
    _find(res, per, members)
    _rank_table(res, per, world)
    return res


def _guess_members(members: dict[str, tuple[str, list[int]]], configured: set[str], missing: list[int]) -> None:
    """Groups known only from the dumps (gloo leaves pg_config empty) miss the ranks that left no dump:
    a group smaller than the largest of its family (ep_group_0, ep_group_1, ...: the description without
    its number) may hold them, so they join it as members without a dump."""
    family: dict[str, int] = {}
    for name, (desc, ranks) in members.items():
        key = re.sub(r"\d+$", "", desc or name)
        family[key] = max(family.get(key, 0), len(ranks))
    for name, (desc, ranks) in list(members.items()):
        if name not in configured and len(ranks) < family[re.sub(r"\d+$", "", desc or name)]:
            members[name] = (desc, sorted(set(ranks) | set(missing)))


def _majority(sigs: dict[int, tuple]) -> Optional[tuple]:
    counts: dict[tuple, int] = {}
    for s in sigs.values():
        counts[s] = counts.get(s, 0) + 1
    best = sorted(counts.items(), key=lambda kv: -kv[1])
    if len(best) > 1 and best[0][1] > best[1][1]:
        return best[0][0]
    return None


def _mismatch(per: dict[int, dict[str, RankGroup]], members: dict[str, tuple[str, list[int]]]) -> Optional[tuple]:
    found = None
    for name, (desc, ranks) in members.items():
        have = {r: per[r][name] for r in ranks if r in per and name in per[r]}
        if len(have) < 2:
            continue
        seqs = sorted(set().union(*(g.calls for g in have.values())))
        for s in seqs:
            sigs = {r: g.calls[s].sig for r, g in have.items() if s in g.calls}
            if len(sigs) < 2 or len(set(sigs.values())) == 1:
                continue
            maj = _majority(sigs)
            if maj is None:   # a tie: the ranks whose call was never seen earlier in this group are suspect
                seen = {c.sig for g in have.values() for q, c in g.calls.items() if q < s}
                novel = {v for v in sigs.values() if v not in seen}
                if len(novel) == 1 and len(set(sigs.values()) - novel) == 1:
                    maj = next(iter(set(sigs.values()) - novel))
            sus = sorted(r for r, v in sigs.items() if v != maj) if maj is not None else sorted(sigs)
            ref = next((have[r].calls[s] for r in sorted(sigs) if sigs[r] == maj), None) if maj is not None else None
            t = min(have[r].calls[s].t for r in sigs)
            if found is None or t < found[0]:
                found = (t, name, desc, s, sus, ref, have)
            break
    return found


def _find(res: FRResult, per: dict[int, dict[str, RankGroup]], members: dict[str, tuple[str, list[int]]]) -> None:
    mm = _mismatch(per, members)
    waits: dict[int, set[int]] = {}
    hangs: list[tuple] = []      # (t, name, desc, seq, laggards, dead, waiters, call)
    notstarted: set[int] = set()
    for name, (desc, ranks) in members.items():
        have = {r: per[r][name] for r in ranks if r in per and name in per[r]}
        if not have:
            continue
        for r, g in have.items():
            if g.p2p_pending is not None and 0 <= g.p2p_pending[1] < len(ranks):
                waits.setdefault(r, set()).add(sorted(ranks)[g.p2p_pending[1]])
        entered = {r: (max(g.calls) if g.calls else -1) for r, g in have.items()}
        entered.update({r: -1 for r in ranks if r in per and r not in have})
        dead = sorted(r for r in ranks if r not in per)
        lo, hi = min(entered.values()), max(entered.values())
        if hi > lo:
            # collective #lo+1: some ranks entered it, the others never did
            s = lo + 1
            ahead = sorted(r for r in have if entered[r] >= s)
            calls = [have[r].calls[s] for r in ahead if s in have[r].calls]
            if not calls or any(c.state == "completed" for c in calls):
                continue
            lag = sorted(r for r in entered if entered[r] < s)
        elif dead and hi >= 0 and not any(g.calls[hi].state == "completed" for g in have.values() if hi in g.calls):
            s, ahead, lag = hi, sorted(have), []
            calls = [have[r].calls[hi] for r in ahead if hi in have[r].calls]
            if not calls:
                continue
        elif hi >= 0 and len(have) > 1 and all(hi in g.calls for g in have.values()):
            # every rank entered #hi; NCCL marks it started where the kernel ran: the ranks where it
            # stayed scheduled never got there (their GPU stream was stuck before it)
            states = {r: g.calls[hi].state for r, g in have.items()}
            if "completed" in states.values() or not {"started", "scheduled"} <= set(states.values()):
                continue
            s = hi
            ahead = sorted(r for r, v in states.items() if v == "started")
            lag = sorted(r for r, v in states.items() if v == "scheduled")
            calls = [have[r].calls[hi] for r in ahead]
            notstarted.update(lag)
        else:
            continue
        for w in ahead:
            waits.setdefault(w, set()).update(lag or dead)
        hangs.append((min(c.t for c in calls), name, desc, s, lag, dead, ahead, calls[0]))
    if mm is not None and (not hangs or mm[0] <= min(h[0] for h in hangs) or not mm[0]):
        t, name, desc, s, sus, ref, have = mm
        res.kind, res.group, res.desc, res.seq, res.suspects = "mismatch", name, desc, s, sus
        call = ref or have[sus[0]].calls[s]
        res.op, res.sizes, res.frame = call.op, call.sizes, call.frame
        res.waiting = sorted(r for r in have if r not in sus and s in have[r].calls)
        res.waiting_state = call.state
        sc = have[sus[0]].calls.get(s)
        if sc is not None:
            res.suspect_call = {"rank": sus[0], "op": sc.op, "sizes": _lists(sc.sizes[0]) if sc.sizes else [],
                                "output_sizes": _lists(sc.sizes[1]) if sc.sizes else [], "frame": sc.frame or None}
        return
    if not hangs:
        return
    # follow the waits: the suspects are ranks waited on that wait for nobody (or left no dump)
    waited = set().union(*waits.values()) if waits else set()
    sinks = sorted(r for r in waited if not waits.get(r))
    kind = "missing"
    if not sinks:                      # everyone waited on waits too: a cycle (ranks called in different orders)
        sinks, kind = sorted(waited), "cycle"
    pick = None
    for h in sorted(hangs, key=lambda h: (not (set(h[4]) | set(h[5])) & set(sinks), h[0])):
        pick = h
        break
    _, name, desc, s, lag, dead, waiters, call = pick  # type: ignore[misc]
    if kind == "missing" and not (set(lag) & set(sinks)) and set(dead) & set(sinks):
        kind = "nodump"
    elif kind == "missing" and set(lag) & set(sinks) and set(lag) <= notstarted:
        kind = "notstarted"
    res.kind, res.group, res.desc, res.seq = kind, name, desc, s
    res.suspects = sinks
    res.op, res.sizes, res.frame = call.op, call.sizes, call.frame
    res.waiting, res.waiting_state = waiters, call.state


def _rank_table(res: FRResult, per: dict[int, dict[str, RankGroup]], world: set[int]) -> None:
    for r in sorted(world):
        g = per.get(r, {}).get(res.group) if res.group else None
        if r not in per:
            res.ranks[r] = {"last_completed_seq": None, "state": "no dump", "last_seq": None, "last_op": None}
            continue
        if g is None:
            res.ranks[r] = {"last_completed_seq": None, "state": None, "last_seq": None, "last_op": None}
            continue
        last = max(g.calls) if g.calls else None
        c = g.calls.get(last) if last is not None else None
        res.ranks[r] = {"last_completed_seq": g.completed if g.completed >= 0 else None,
                        "state": c.state if c else None, "last_seq": last, "last_op": c.op if c else None}


__all__ = ["PlainUnpickler", "DumpRefused", "FRResult", "load_dump", "sniff", "find_dumps", "analyze_dumps",
           "reduce_dump", "rank_of"]
