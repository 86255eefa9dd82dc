"""The real CLI in a child process: stdin, exit codes, formats and hostile input."""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest


OOM = (b"Traceback (most recent call last):\n  File \"train.py\", line 5, in <module>\n    loss.backward()\n"
       b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of "
       b"79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use.\n")


@pytest.fixture
def oom_log(tmp_path):
    p = tmp_path / "crash.log"
    p.write_bytes(b"loading model\n" + OOM)
    return p


def test_file_argument_human_output_and_exit_1(cli, oom_log):
    r = cli(str(oom_log), "--no-color")
    assert r.returncode == 1, r.stderr
    out = r.stdout.decode()
    assert "torch-cuda-oom" in out and "tried to allocate 2.50 GiB" in out and "line 5" in out
    assert "\x1b[" not in out


def test_stdin_pipe_and_dash(cli):
    for args in ((), ("-",), ("triage", "-")):
        r = cli(*args, "--format", "json", input=OOM)
        assert r.returncode == 1, r.stderr
        doc = json.loads(r.stdout)
        assert doc["version"] == 1 and doc["reports"][0]["source"] == "-"
        f = doc["reports"][0]["findings"][0]
        assert f["category"] == "cuda-oom" and f["line"] == 4


def test_json_contract_fields(cli, oom_log):
    doc = json.loads(cli("triage", "--format", "json", str(oom_log)).stdout)
    f = doc["reports"][0]["findings"][0]
    for key in ("rule_id", "category", "severity", "title", "message", "line", "evidence", "rank", "count",
                "captures", "cause", "fixes"):
        assert key in f
    assert f["captures"]["requested"] == "2.50 GiB"
    assert all(set(x) >= {"title", "detail"} for x in f["fixes"])


def test_several_files_one_report_each(cli, oom_log, tmp_path):
    ok = tmp_path / "ok.log"
    ok.write_text("{'loss': 1.0, 'epoch': 1.0}\ntraining finished\n")
    r = cli("--format", "json", str(ok), str(oom_log))
    doc = json.loads(r.stdout)
    assert [len(x["findings"]) > 0 for x in doc["reports"]] == [False, True] and r.returncode == 1
    r = cli(str(ok))
    assert r.returncode == 0 and "no known failure" in r.stdout.decode()


def test_exit_zero_and_min_severity(cli, oom_log):
    assert cli("--exit-zero", str(oom_log)).returncode == 0


def test_chinese_output(cli, oom_log):
    r = cli("--lang", "zh", "--no-color", str(oom_log))
    assert r.returncode == 1
    assert "修复" in r.stdout.decode()
    r = cli("--no-color", str(oom_log), env={"LANG": "zh_CN.UTF-8"})
    assert "修复" in r.stdout.decode()


def test_colour_only_when_asked(cli, oom_log):
    assert b"\x1b[" in cli(str(oom_log), env={"FORCE_COLOR": "1"}).stdout
    assert b"\x1b[" not in cli(str(oom_log), env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout


def _one_line_error(r, code=2):
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    assert "Traceback" not in err
    return err


def test_empty_input_is_a_usage_error(cli, tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    assert "empty input" in _one_line_error(cli(str(p)))
    assert "empty input" in _one_line_error(cli("-", input=b""))


def test_missing_file_and_directory(cli, tmp_path):
    assert "cannot open" in _one_line_error(cli(str(tmp_path / "nope.log")))


def test_random_bytes_are_refused_cleanly(cli, tmp_path):
    p = tmp_path / "random.bin"
    p.write_bytes(random.Random(0).randbytes(1 << 20))
    assert "binary" in _one_line_error(cli(str(p)))


def test_gbk_log(cli, tmp_path):
    p = tmp_path / "gbk.log"
    p.write_bytes("训练开始，批大小 8\n".encode("gbk") + OOM + "训练失败\n".encode("gbk"))
    r = cli("--format", "json", str(p))
    doc = json.loads(r.stdout)
    assert doc["reports"][0]["findings"][0]["category"] == "cuda-oom"
    assert doc["reports"][0]["encoding"] == "gb18030"


def test_invalid_utf8_is_decoded_not_fatal(cli, tmp_path):
    p = tmp_path / "bad.log"
    p.write_bytes(b"step 1 \xff\xfe loss\n" + OOM)
    assert cli(str(p)).returncode == 1


@pytest.mark.slow   # streams a 200 MB line through the CLI
def test_200mb_line_without_newline_bounded_memory(tmp_path):
    p = tmp_path / "long.log"
    with open(p, "wb") as fh:
        block = b"x" * (1 << 20)
        for _ in range(200):
            fh.write(block)
        fh.write(b" torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
                 b"capacity of 8.00 GiB of which 0 bytes is free.")
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child forked from a big pytest
    # process (torch imported by other test modules) would report the parent's size.
    code = ("import re, sys\nfrom llmtriage.cli.app import main\nrc = main(['--format', 'json', sys.argv[1]])\n"
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
            "sys.stderr.write('MAXRSS=%s\\n' % hwm)\nsys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, timeout=300)
    doc = json.loads(r.stdout)
    rep = doc["reports"][0]
    assert rep["findings"][0]["category"] == "cuda-oom" and rep["long_lines"] >= 100
    rss_kb = int(r.stderr.decode().split("MAXRSS=")[1].split()[0])
    assert rss_kb < 100 * 1024, rss_kb


def test_malformed_user_rule_is_reported_with_position(cli, tmp_path):
    d = tmp_path / "myrules" / "cuda-oom"
    d.mkdir(parents=True)
    (d / "broken.yaml").write_text("id: broken\ncategory: cuda-oom\ntitle: [unclosed\n")
    err = _one_line_error(cli("--rules", str(tmp_path / "myrules"), "-", input=OOM))
    assert "broken.yaml:4:1: invalid YAML" in err


def test_catastrophic_regex_in_user_rule_is_rejected(cli, tmp_path):
    d = tmp_path / "myrules" / "cuda-oom"
    d.mkdir(parents=True)
    src = (Path(__file__).parent / "data" / "user_rules" / "cuda-oom" / "test-cuda-oom.yaml").read_text()
    src = src.replace("id: test-cuda-oom", "id: evil").replace("- name: torch-2x\n      regex: '",
                                                                  "- name: torch-2x\n      regex: '(a+)+$|")
    (d / "evil.yaml").write_text(src)
    err = _one_line_error(cli("--rules", str(tmp_path / "myrules"), "-", input=OOM))
    assert "evil.yaml:" in err and "[evil] match.any[0].regex: nested unbounded quantifiers" in err


def test_unknown_category_in_user_rule(cli, tmp_path):
    d = tmp_path / "myrules" / "nccl"
    d.mkdir(parents=True)
    src = (Path(__file__).parent / "data" / "user_rules" / "nccl-timeout" / "test-watchdog.yaml").read_text()
    (d / "test-watchdog2.yaml").write_text(src.replace("id: test-watchdog", "id: test-watchdog2")
                                           .replace("category: nccl-timeout", "category: nccl"))
    err = _one_line_error(cli("--rules", str(tmp_path / "myrules"), "-", input=OOM))
    assert "test-watchdog2.yaml:2:11: [test-watchdog2] category: 'nccl' is not in rules/taxonomy.yaml; did you mean" in err


def test_user_rule_folder_adds_rules(cli, tmp_path):
    import shutil

    shutil.copytree(Path(__file__).parent / "data" / "user_rules" / "nccl-timeout", tmp_path / "r" / "nccl-timeout")
    log = (b"[rank2]:[E ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: "
           b"WorkNCCL(SeqNum=880, OpType=BROADCAST, NumelIn=1) ran for 1800000 milliseconds before timing out.\n")
    doc = json.loads(cli("--rules", str(tmp_path / "r"), "--format", "json", "-", input=log).stdout)
    ids = [f["rule_id"] for f in doc["reports"][0]["findings"]]
    assert "test-watchdog" in ids


def test_usage_error_exit_2(cli):
    assert cli("triage", "--format", "nope", "-", input=OOM).returncode == 2


def test_version(cli):
    r = cli("--version")
    assert r.returncode == 0 and b"llmtriage" in r.stdout


def test_sigpipe_closed_output_is_quiet(tmp_path):
    p = tmp_path / "big.log"
    p.write_bytes(OOM * 2000)
    proc = subprocess.run(f"{sys.executable} -m llmtriage --format json {p} | head -c 10", shell=True,
                          capture_output=True, timeout=60)
    assert b"Traceback" not in proc.stderr and b"BrokenPipe" not in proc.stderr


def test_rules_subcommands(cli):
    r = cli("rules", "list")
    assert r.returncode == 0 and b"torch-cuda-oom" in r.stdout
    assert cli("rules", "show", "torch-cuda-oom").returncode == 0
    assert cli("rules", "show", "no-such-rule").returncode == 2
    assert cli("rules", "validate").returncode == 0
    assert cli("rules", "schema", "--check").returncode == 0


def test_allow_empty_treats_empty_logs_as_healthy(cli, tmp_path, oom_log):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    r = cli("--allow-empty", "--format", "json", str(empty), str(oom_log))
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["reports"][0]["findings"] == [] and doc["reports"][1]["findings"]
    r = cli("--allow-empty", "--jobs", "2", str(empty), str(empty))
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------ --engine

@pytest.mark.parametrize("engine", ["re2", "python", "hyperscan"])
def test_every_engine_gives_the_same_json(cli, oom_log, tmp_path, engine):
    if engine == "hyperscan":
        pytest.importorskip("hyperscan")
    if engine == "re2":
        pytest.importorskip("re2")
    other = tmp_path / "other.log"
    other.write_bytes(b"[rank1]: RuntimeError: CUDA error: device-side assert triggered\n" * 3 + OOM)
    base = cli("--format", "json", str(oom_log), str(other))
    for extra in ((), ("--jobs", "2")):
        r = cli("--format", "json", "--engine", engine, *extra, str(oom_log), str(other))
        assert r.returncode == base.returncode == 1, r.stderr
        assert json.loads(r.stdout) == json.loads(base.stdout)


def test_engine_errors_are_one_line_usage_errors(oom_log, tmp_path):
    # an engine whose optional package is missing: the import is made to fail in the child
    code = ("import sys; sys.modules['hyperscan'] = None; from llmtriage.cli.app import main; "
            f"sys.argv = ['llmtriage', 'triage', '--engine', 'hyperscan', {str(oom_log)!r}]; sys.exit(main())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert r.returncode == 2 and b"Traceback" not in r.stderr
    assert b"pip install 'llmtriage[hyperscan]'" in r.stderr
    import os

    env = {**os.environ, "LLMTRIAGE_ENGINE": "pcre"}
    r = subprocess.run([sys.executable, "-m", "llmtriage", "triage", str(oom_log)], capture_output=True, env=env,
                       timeout=120)
    assert r.returncode == 2 and b"unknown engine 'pcre'" in r.stderr and b"Traceback" not in r.stderr
