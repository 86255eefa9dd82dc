"""Hostile inputs (issue 13): one case per item, property tests where a class of inputs applies."""
from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmtriage.ruleset import files, loader
from llmtriage.ruleset.regexcheck import check_regex
from llmtriage.findings import ExceptionInfo, Finding, Frame, Report
from llmtriage.engine.redact import clip, neutralise, redact
from llmtriage.report.render import get_renderer



def run_cli(*args: str, env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], capture_output=True, env=e,
                          timeout=timeout, **kw)


# --------------------------------------------------------------------------- 1. rule cache


def _warm(tmp_path: Path, env_cache: Path):
    log = tmp_path / "oom.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    return run_cli("--format", "json", str(log), env={"LLMTRIAGE_CACHE_DIR": str(env_cache)})


def test_cache_is_json_private_and_never_pickle(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    old = os.umask(0)
    try:
        r = _warm(tmp_path, cache)
    finally:
        os.umask(old)
    assert r.returncode == 1 and b'"cuda-oom"' in r.stdout
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700          # whatever the umask
    files = list(cache.glob("rules-*.json"))
    assert files and not list(cache.glob("*.pickle"))
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    head, _, body = files[0].read_bytes().partition(b"\n")
    assert head.startswith(b"llmtriage-cache")
    core, _, details = body.partition(b"\n")                    # two JSON documents: core, then details
    assert json.loads(core)["data"]["rules"]                    # plain JSON data
    assert "examples" not in json.loads(core)["data"]["rules"][0]
    assert json.loads(details)["examples"]["torch-cuda-oom"]["match"]


def test_rule_details_are_parsed_only_when_asked_for(tmp_path: Path, monkeypatch) -> None:
    """A cached rule set holds its examples and translations back until something reads them; a
    details document that is not this cache's (here: another key) is replaced by validating again."""
    import llmtriage

    cache = tmp_path / "c"
    monkeypatch.setenv("LLMTRIAGE_CACHE_DIR", str(cache))
    llmtriage.load_rules(use_cache=True)                        # writes the cache
    rs = llmtriage.load_rules(details=False)                    # read back from it
    assert rs.details is not None and "examples" not in rs.rules[0]
    assert "torch-cuda-oom" in rs.locales["zh"]                 # first use of locales parses them
    assert rs.details is None and rs.by_id["torch-cuda-oom"]["examples"]["match"]
    full = llmtriage.load_rules()                               # the public default: everything
    assert full.by_id["torch-cuda-oom"]["examples"] == rs.by_id["torch-cuda-oom"]["examples"]

    path = next(cache.glob("rules-*.json"))
    head, _, body = path.read_bytes().partition(b"\n")
    core, _, details = body.partition(b"\n")
    doc = json.loads(details)
    doc["key"] = "someone-elses"
    doc["examples"] = {}
    from llmtriage.ruleset.cachefile import MAGIC, digest

    payload = core + b"\n" + json.dumps(doc).encode()
    path.write_bytes(MAGIC + digest(payload).encode() + b"\n" + payload)
    again = llmtriage.load_rules()
    assert again.by_id["torch-cuda-oom"]["examples"]["match"]   # from validating the rules, not the forged doc


@pytest.mark.slow   # rebuilds the rule cache several times: ~30 s
def test_planted_or_tampered_cache_is_refused_and_rebuilt(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    assert _warm(tmp_path, cache).returncode == 1
    path = next(cache.glob("rules-*.json"))
    good = path.read_bytes()
    head, _, body = good.partition(b"\n")
    core, _, details = body.partition(b"\n")
    data = json.loads(core)
    data["data"]["rules"] = []                                  # "a well-formed cache with no rules"
    forged = json.dumps(data).encode() + b"\n" + details
    from llmtriage.ruleset.cachefile import MAGIC, digest

    for blob in (MAGIC + digest(forged).encode() + b"\n" + forged,     # right digest, no rules
                 head + b"\n" + body.replace(b"cuda-oom", b"cuda-xxx"),  # wrong digest
                 b"\x80\x04\x95garbage pickle"):
        path.write_bytes(blob)
        r = _warm(tmp_path, cache)
        assert r.returncode == 1 and b'"cuda-oom"' in r.stdout, blob[:40]
    # writable by others: refused, and rebuilt as a private file
    path.chmod(0o666)
    r = _warm(tmp_path, cache)
    assert b'"cuda-oom"' in r.stdout
    assert stat.S_IMODE(next(cache.glob("rules-*.json")).stat().st_mode) == 0o600
    if os.getuid() == 0:                                       # owned by someone else: never read
        path = next(cache.glob("rules-*.json"))
        path.write_bytes(MAGIC + digest(forged).encode() + b"\n" + forged)
        os.chown(path, 12345, 12345)
        r = _warm(tmp_path, cache)
        assert b'"cuda-oom"' in r.stdout


def test_no_pickle_in_cache_code() -> None:
    """Only the Flight Recorder reader (its unpickler refuses every global) may touch pickle."""
    src = Path(loader.__file__).resolve().parents[1]
    checked = 0
    for path in src.rglob("*.py"):
        if path.name == "flight_recorder.py":
            continue
        text = path.read_text().replace("never pickle", "").replace("not pickle", "")
        assert "import pickle" not in text and "pickle." not in text, path
        checked += 1
    assert checked > 40


# --------------------------------------------------------------------------- 2. credentials

SECRETS = {
    "aws-env": ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMIK7MDENG"),
    "aws-yaml": ("aws_secret_access_key: wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "bPxRfiCYEXAMPLE"),
    "auth-dict": ("{'Authorization': 'Bearer abcDEF123456ghiJKL789'}", "abcDEF123456"),
    "url-user-token": ("https://ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789@github.com/o/r.git", "AbCdEfGhIjKlMnOp"),
    "postgres-url": ("postgresql://admin:S3cr3tPassw0rd@db.internal:5432/runs", "S3cr3tPassw0rd"),
    "redis-url": ("redis://:r3disPassw0rdXyz@cache:6379/0", "r3disPassw0rd"),
    "json-password": ('{"user": "a", "password": "hunter2hunter2"}', "hunter2hunter2"),
    "json-token": ('{"token": "tok_abcdefghijklmnop"}', "tok_abcdefghij"),
    "wandb": ("WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123"),
    "hf": ("token hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345 rejected", "AbCdEfGhIjKlMnOpQrSt"),
    "openai": ("Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrSt"),
}
FORMATS = ("human", "json", "sarif", "github")


def _report_with(secret: str) -> Report:
    frame = Frame(file=f"/home/u/{secret}/train.py", line=3, function="main", code=f"login({secret})")
    exc = ExceptionInfo(type="RuntimeError", message=f"failed: {secret}", line=9, frames=[frame],
                        user_frame=frame, chain=[f"ValueError: {secret}"], cpp_frames=[secret])
    pad = "x" * 290                                              # the secret straddles every cut
    f = Finding(rule_id="r", category="unknown", severity="error", title="t", message=f"{pad}{secret}",
                line=9, evidence=f"{pad} {secret} " + "y" * 3000, captures={"url": secret}, location=frame)
    return Report(source="job.log", findings=[f], exception=exc, extra={"note": secret})


@pytest.mark.parametrize("form", sorted(SECRETS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_credentials_never_reach_output(form: str, fmt: str) -> None:
    text, core = SECRETS[form]
    buf = io.StringIO()
    get_renderer(fmt)([_report_with(text)], buf, color=False, lang=None, verbose=True, top=None)
    out = buf.getvalue()
    assert core not in out and core[:10] not in out, (form, fmt)


def test_credentials_masked_end_to_end_in_every_format(tmp_path: Path, warm_cache: Path) -> None:
    line = " ".join(t for t, _ in SECRETS.values())
    log = tmp_path / "leak.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   f"    main({SECRETS['json-token'][0]})\nRuntimeError: {line}\n")
    for fmt in FORMATS:
        r = run_cli("--format", fmt, "-v", str(log), env={"LLMTRIAGE_CACHE_DIR": str(warm_cache)})
        assert r.returncode == 1, r.stderr
        out = r.stdout.decode()
        for form, (_, core) in SECRETS.items():
            assert core[:10] not in out, (fmt, form)


_TOKEN = st.sampled_from(["hf_", "ghp_", "sk-proj-", "glpat-"]).flatmap(
    lambda p: st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", min_size=36, max_size=40)
    .map(lambda body: p + body))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.text(" abc=:/", max_size=400), token=_TOKEN, after=st.text(" xyz", max_size=50),
       cut=st.integers(0, 500))
def test_mask_before_truncation_never_leaves_half_a_secret(before: str, token: str, after: str, cut: int) -> None:
    out = clip(before + " " + token + after, cut)
    body = token.split("_", 1)[-1].split("-")[-1]
    for i in range(0, len(body) - 6):
        assert body[i:i + 6] not in out


def test_secret_cut_upstream_is_masked() -> None:
    cut = "upload to https://ghp_AbCdEfGhIjKl"
    assert "AbCdEf" not in redact(cut, cut=True)
    assert "AbCdEf" not in redact("HF token hf_AbCdEfGhIj", cut=True)
    # ordinary words that look like prefixes stay readable when nothing was cut
    assert redact("from huggingface_hub import hf_hub_download") == "from huggingface_hub import hf_hub_download"
    assert redact("max_new_tokens=512 pad_token_id=0") == "max_new_tokens=512 pad_token_id=0"


# --------------------------------------------------------------------------- 3. time bounds


def test_exponential_pattern_rejected_by_validate() -> None:
    for pat in ("(x|xx)+y", "(a+)+b", "(?:ab|a)+c"):
        assert check_regex(pat), pat
    assert check_regex(r"(?i)error: (?:cuda|nccl) failed") is None


@pytest.mark.parametrize("mode", ["python", "re2", "reference"])
def test_backtracking_not_pattern_is_time_bounded(ruleset, mode: str) -> None:
    from llmtriage import get_engine

    rule = dict(ruleset.by_id["torch-cuda-oom"])
    rule["match"] = dict(rule["match"], **{"not": [{"name": "evil", "regex": "(x|xx)+y"}]})
    rs = loader.RuleSet(rules=[rule], taxonomy=ruleset.taxonomy, secrets=ruleset.secrets)
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB " + "x" * 40 + "\n"
    eng = get_engine(rs, mode=mode)
    t = time.perf_counter()
    rep = eng.scan(io.BytesIO(line.encode()))
    assert time.perf_counter() - t < 5                           # unbounded: ~26 s, growing 1.6x per x
    assert [f.rule_id for f in rep.findings] == ["torch-cuda-oom"]


# --------------------------------------------------------------------------- 4. terminal safety

CONTROLS = "\x1bc \x1b(0 \x1b)B \u009b31m \x07 \x08\x08 \x1b]0;pwned\x07 \x0e \x0f \x00 \x7f \u009d8;;x\u009c"


@pytest.mark.parametrize("fmt", ["human", "github"])
def test_control_sequences_neutralised(fmt: str) -> None:
    rep = _report_with("plain")
    rep.findings[0].evidence = "boom " + CONTROLS
    rep.findings[0].message = CONTROLS
    rep.exception.message = CONTROLS
    rep.source = "job\x1b[2J.log"
    buf = io.StringIO()
    get_renderer(fmt)([rep], buf, color=False, lang=None, verbose=True, top=None)
    bad = [c for c in buf.getvalue() if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
    assert not bad, [hex(ord(c)) for c in bad]


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(max_codepoint=0x2FF)))
def test_neutralise_leaves_no_control_character(text: str) -> None:
    out = neutralise(text)
    assert not [c for c in out if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


# --------------------------------------------------------------------------- 8. rule files


def _evil_rule(tmp_path: Path, kind: str) -> Path:
    d = tmp_path / "rules" / "cuda-oom"
    d.mkdir(parents=True)
    p = d / "evil.yaml"
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "devzero":
        p.symlink_to("/dev/zero")
    else:
        p.write_text("id: evil\n" + "# pad\n" * 300_000)
    return p


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("kind", ["fifo", "devzero", "huge"])
def test_hostile_rule_files_refused_without_reading(tmp_path: Path, kind: str) -> None:
    p = _evil_rule(tmp_path, kind)
    t = time.perf_counter()
    with pytest.raises(OSError) as err:
        files.read_rule_text(p)
    assert time.perf_counter() - t < 1                           # no hang on a FIFO, no 23 GB read
    assert ("regular file" if kind != "huge" else "too large") in str(err.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_hostile_rule_file_cli_exit_2_one_line(tmp_path: Path) -> None:
    _evil_rule(tmp_path, "fifo")
    log = tmp_path / "x.log"
    log.write_text("hello\n")
    r = run_cli("--rules", str(tmp_path / "rules"), str(log), env={"LLMTRIAGE_CACHE_DIR": str(tmp_path / "c")},
                timeout=300)
    assert r.returncode == 2
    err = r.stderr.decode().strip()
    first = err.splitlines()[0]                 # the problem, then the usual "1 rule file problem found"
    assert "evil.yaml" in first and "regular file" in first and len(err.splitlines()) <= 2, err


# --------------------------------------------------------------------------- 9. wide encodings, NUL start

OOM_TEXT = "[rank0]: step 3\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB 显存不足\n"


@pytest.mark.parametrize("enc", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("bom", [True, False])
def test_wide_encodings_are_decoded(enc: str, bom: bool) -> None:
    import llmtriage

    data = OOM_TEXT.encode(enc)
    if bom:
        data = "\ufeff".encode(enc) + data
    rep = llmtriage.analyze(data)
    assert rep.findings and rep.findings[0].rule_id == "torch-cuda-oom"
    assert rep.encoding == enc and rep.lines == 2


@settings(max_examples=60, deadline=None)
@given(text=st.text(st.one_of(st.characters(min_codepoint=32, max_codepoint=126),
                              st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)), min_size=20, max_size=200)
       .filter(lambda t: sum(c < "\x80" for c in t) >= len(t) / 3),
       enc=st.sampled_from(["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]))
def test_wide_encoding_transcodes_any_text(text: str, enc: str) -> None:
    from llmtriage import checked_stream

    body = ("line one\n" + text + "\n").encode(enc)
    stream = checked_stream(io.BytesIO("\ufeff".encode(enc) + body), "x")
    assert stream.read().decode("utf-8") == "line one\n" + text + "\n"


def test_log_starting_with_nul_bytes_is_read() -> None:
    import llmtriage

    rep = llmtriage.analyze(b"\x00" * 100_000 + OOM_TEXT.encode())
    assert rep.findings[0].rule_id == "torch-cuda-oom"
    with pytest.raises(llmtriage.InputError):
        llmtriage.analyze(b"\x00" * 1000)


# --------------------------------------------------------------------------- 10-11. names and std streams


@pytest.mark.slow   # one CLI run per format on a non-UTF-8 path
def test_non_utf8_file_name(tmp_path: Path) -> None:
    d = Path(os.fsdecode(bytes(tmp_path) + b"/j\xff"))
    d.mkdir()
    name = Path(os.fsdecode(bytes(d) + b"/caf\xe9.log"))
    name.write_text(OOM_TEXT)
    (d / "rank1.log").write_text(OOM_TEXT)
    env = {"LLMTRIAGE_CACHE_DIR": str(tmp_path / "c")}
    for args in (("--format", "json", str(name)), ("job", "--format", "json", str(d)), (str(name),),
                 ("job", str(d)), ("watch", "--max-seconds", "1", str(name)),
                 ("watch", "--format", "json", "--max-seconds", "1", str(name))):
        r = run_cli(*args, env=env)
        assert r.returncode == 1, (args, r.stderr)
        assert b"internal error" not in r.stderr
        if "json" in args:
            for doc in ([r.stdout] if "watch" not in args else r.stdout.splitlines()):
                json.loads(doc)                                  # complete, valid JSON


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file descriptors")
@pytest.mark.parametrize("case", ["closed-stdout", "dev-full", "closed-stdin"])
def test_std_stream_problems_give_one_line(tmp_path: Path, case: str, warm_cache: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(OOM_TEXT)
    env = {**os.environ, "LLMTRIAGE_CACHE_DIR": str(warm_cache)}
    cmd = [sys.executable, "-m", "llmtriage"]
    if case == "closed-stdout":
        r = subprocess.run(cmd + [str(log)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                           preexec_fn=lambda: os.close(1))
    elif case == "dev-full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full")
        with open("/dev/full", "w") as full:
            r = subprocess.run(cmd + ["--format", "json", str(log)], stdout=full, stderr=subprocess.PIPE, env=env)
    else:
        r = subprocess.run(cmd + ["-"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, preexec_fn=lambda: os.close(0))
    err = r.stderr.decode().strip()
    assert r.returncode == 2, err
    assert len(err.splitlines()) == 1 and "internal error" not in err and "Traceback" not in err, err


# --------------------------------------------------------------------------- 5-6. frames and chains


def _feed(lines: list[str]):
    from llmtriage.engine.logparse import TracebackParser

    p = TracebackParser()
    for i, line in enumerate(lines, 1):
        p.feed(i, line)
    return p


def test_frames_kept_per_report_not_per_exception() -> None:
    from llmtriage.engine.logparse import FRAMES_KEEP

    lines: list[str] = []
    for i in range(600):
        lines.append("Traceback (most recent call last):")
        for j in range(50):
            lines += [f'  File "/x/lib{j}.py", line {j}, in f{j}', f"    call_{j}(a, b)"]
        lines += [f"ValueError: bad {i}", ""]
    p = _feed(lines)
    kept = sum(len(e.frames) for e in p.exceptions)
    assert kept <= FRAMES_KEEP * 50
    assert len(p.exceptions[-1].frames) == 50 and p.exceptions[0].user_frame is not None


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 400))
def test_chain_bounded_first_and_last_with_count(n: int) -> None:
    from llmtriage.engine.logparse import CHAIN_KEEP

    lines: list[str] = []
    for i in range(n):
        lines += ["Traceback (most recent call last):", '  File "t.py", line 1, in f', f"ValueError: v{i}", "",
                  "During handling of the above exception, another exception occurred:", ""]
    lines += ["Traceback (most recent call last):", '  File "t.py", line 1, in g', "RuntimeError: last"]
    exc = _feed(lines).headline()
    heads = [f"ValueError: v{i}" for i in range(n)]
    want = heads if n <= 2 * CHAIN_KEEP else heads[:CHAIN_KEEP] + heads[-CHAIN_KEEP:]
    assert exc.type == "RuntimeError" and exc.chain == want
    assert exc.chain_omitted == max(0, n - 2 * CHAIN_KEEP)
    assert exc.to_dict()["chain_omitted"] == exc.chain_omitted


@pytest.mark.slow   # parses 10^5 chained exceptions
def test_long_chain_parses_in_linear_time() -> None:
    def run(n: int) -> float:
        lines: list[str] = []
        for i in range(n):
            lines += ["Traceback (most recent call last):", '  File "t.py", line 1, in f', f"ValueError: v{i}", "",
                      "During handling of the above exception, another exception occurred:", ""]
        t = time.perf_counter()
        _feed(lines)
        return time.perf_counter() - t

    small, big = min(run(5000) for _ in range(2)), min(run(40000) for _ in range(2))
    assert big < small * 8 * 3          # 8x the input: linear is ~8x, the old quadratic chain ~64x


# --------------------------------------------------------------------------- 7. diff tables


@pytest.mark.slow   # diffs two large generated runs
def test_diff_flag_tables_bounded_and_say_so(tmp_path: Path) -> None:
    from llmtriage.job import diff as jobs

    bad = tmp_path / "bad.log"
    with bad.open("w") as fh:
        for i in range(jobs.MAX_ARGS // 4 + 50):
            fh.write("python train.py " + " ".join(f"--f{i}x{j}={'v' * 500}" for j in range(8)) + "\n")
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    good = tmp_path / "good.log"
    good.write_text("python train.py --lr=1e-4\nstep 1 loss 2.0\n")
    prof = jobs.profile_run(bad)
    assert len(prof.args) == jobs.MAX_ARGS and prof.dropped["args"] > 0
    assert max(len(v) for v in prof.args.values()) <= jobs.MAX_ARG_LEN
    res = jobs.diff_runs(str(good), str(bad))
    assert res.to_dict()["diff"]["truncated"]["bad"]["args"] == prof.dropped["args"]
    r = run_cli("diff", str(good), str(bad), env={"LLMTRIAGE_CACHE_DIR": str(tmp_path / "c")})
    assert b"not every entry kept" in r.stdout


# --------------------------------------------------------------------------- 12. copytruncate


def test_watch_sees_copytruncate_that_regrew_past_the_offset(tmp_path: Path, engine) -> None:
    from llmtriage.workflows.watch import Follower

    log = tmp_path / "train.log"
    # a healthy, slowly falling loss (metric_formats reads these bare `step N loss X lr Y` lines: a flat 2.0 would be no-grad)
    log.write_text("".join(f"step {i} loss {2.0 - i * 0.004:.3f} lr 1e-4\n" for i in range(200)))
    fol = Follower(str(log), engine)
    assert not [e for e in fol.poll() if e.kind == "finding"]
    ino = log.stat().st_ino
    with log.open("r+") as fh:                         # copytruncate: same inode, emptied, then regrown
        fh.truncate(0)
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                 + "".join(f"restart step {i} ok\n" for i in range(400)))
    assert log.stat().st_ino == ino and log.stat().st_size > fol.pos
    events = fol.poll()
    kinds = [e.kind for e in events]
    assert "truncated" in kinds
    found = [e.finding for e in events if e.kind == "finding"]
    assert found and found[0].rule_id == "torch-cuda-oom" and found[0].line == 1
    fol.close()


def test_watch_append_is_not_a_truncation(tmp_path: Path, engine) -> None:
    from llmtriage.workflows.watch import Follower

    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    fol = Follower(str(log), engine)
    fol.poll()
    for i in range(5):
        with log.open("a") as fh:
            fh.write(f"step {i + 2} loss 2.0\n")
        assert "truncated" not in [e.kind for e in fol.poll()]
    fol.close()


# --------------------------------------------------------------------------- 13. run wrapper

OOM_SH = "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes and signals")
def test_run_survives_closed_stdout_and_still_diagnoses(tmp_path: Path, warm_cache: Path) -> None:
    env = {**os.environ, "LLMTRIAGE_CACHE_DIR": str(warm_cache)}
    script = f"for i in $(seq 1 20000); do echo line $i; done; {OOM_SH}"
    p = subprocess.Popen([sys.executable, "-m", "llmtriage", "run", "--", "sh", "-c", script],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdout.readline().startswith(b"line 1")
    p.stdout.close()                                       # `| head -1`
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1, err                    # the job's status, not SIGPIPE's
    assert "torch-cuda-oom" in err and "Traceback" not in err


@pytest.mark.slow   # a child that outlives the wrapper: waits for it
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")
def test_run_grandchild_writing_after_exit_prints_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "LLMTRIAGE_CACHE_DIR": str(tmp_path / "c")}
    script = "(for i in $(seq 1 70); do echo late $i; sleep 0.1; done) & echo 'RuntimeError: boom'; exit 1"
    r = subprocess.run([sys.executable, "-m", "llmtriage", "run", "--", "sh", "-c", script], capture_output=True,
                       env=env, timeout=120)
    assert r.returncode == 1
    assert b"Traceback" not in r.stderr and b"closed file" not in r.stderr


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_run_child_dies_with_a_killed_wrapper(tmp_path: Path, warm_cache: Path) -> None:
    import signal

    env = {**os.environ, "LLMTRIAGE_CACHE_DIR": str(warm_cache)}
    pidfile = tmp_path / "pid"
    w = subprocess.Popen([sys.executable, "-m", "llmtriage", "run", "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 300"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 60
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.time() < deadline:
        time.sleep(0.1)
    child = int(pidfile.read_text())
    assert _state(child) not in ("gone", "Z")
    w.send_signal(signal.SIGKILL)
    w.wait()
    deadline = time.time() + 10
    while _state(child) not in ("gone", "Z") and time.time() < deadline:
        time.sleep(0.1)
    assert _state(child) in ("gone", "Z")


# --------------------------------------------------------------------------- 1. start-up: set_form


def _set_form_reference(pattern: str) -> tuple[str, bool]:
    """The character-by-character set_form this module's faster one replaced (the oracle)."""
    from llmtriage.engine.re2set import relax_bounds

    out: list[str] = []
    exact = pattern.isascii()
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "s":
                out.append("\\s\\x0b" if in_class else "[\\s\\x0b]")
            elif e == "S" and not in_class:
                out.append("[^\\s\\x0b]")
            else:
                exact = exact and e != "S"
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if not in_class and c == "[":
            j = i + 1
            j += pattern.startswith("^", j)
            j += pattern.startswith("]", j)
            out.append(pattern[i:j])
            in_class, i = True, j
            continue
        if in_class and c == "]":
            in_class = False
        out.append(c)
        i += 1
    form = "".join(out)
    relaxed = relax_bounds(form)
    return relaxed, exact and relaxed == form


def test_set_form_same_as_reference_on_every_rule(ruleset) -> None:
    from llmtriage.engine.re2set import set_form

    pats = {p["regex"] for r in ruleset.rules for k in ("any", "not", "requires", "unless") for p in r["match"][k]}
    assert all(set_form(p) == _set_form_reference(p) for p in pats)


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from(list("[]^\\sSdw{}0,9ab.é-")), max_size=40))
def test_set_form_same_as_reference_on_any_text(pattern: str) -> None:
    from llmtriage.engine.re2set import set_form

    assert set_form(pattern) == _set_form_reference(pattern)
