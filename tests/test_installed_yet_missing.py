"""A package an error calls missing that the log shows installed (analyzer/detect/installed_yet_missing.py,
rules/verdict.yaml `installed_yet_missing`): transformers' check_imports reports a failing import as "not
found", and "No module named 'X.sub'" with X shown installed is a submodule the installed release lacks."""
from llmtriage import analyze
from llmtriage.detect.installed_yet_missing import norm

CHECK = ("ImportError: This modeling file requires the following packages that were not found in your environment: "
         "{pkg}. Run `pip install {pkg}`\n")
SATISFIED = "Requirement already satisfied: flash_attn in /opt/conda/lib/python3.10/site-packages (2.5.7)\n"


def _top(text):
    rep = analyze(text)
    return next(f for f in rep.findings if f.severity == "error"), rep


def test_names_fold_case_and_separators():
    assert norm("Flash-Attn") == norm("flash_attn") == "flash_attn"


def test_already_satisfied_before_or_after_the_error_is_a_failing_import():
    for text in (SATISFIED + CHECK.format(pkg="flash_attn"), CHECK.format(pkg="flash_attn") + SATISFIED):
        top, rep = _top(text)
        assert top.rule_id == "library-requires-backend" and top.category == "dependency-mismatch"
        assert top.judgement["context"] == "installed-yet-missing" and top.judgement["category_was"] == "missing-dependency"
        assert "flash_attn" in top.judgement["reason"] and rep.extra["action"] == "fix"


def test_an_install_that_succeeds_only_after_the_error_means_it_was_missing():
    top, _ = _top(CHECK.format(pkg="flash_attn") + "Successfully installed einops-0.8.0 flash-attn-2.5.7\n")
    assert top.category == "missing-dependency" and top.judgement is None
    top, _ = _top("Successfully installed einops-0.8.0 flash-attn-2.5.7\n" + CHECK.format(pkg="flash_attn"))
    assert top.category == "dependency-mismatch"


def test_a_one_line_import_that_printed_a_version_and_a_version_line_count():
    cmd = 'python -c "import flash_attn; print(flash_attn.__version__)"\n'
    assert _top(cmd + "2.5.9.post1\n" + CHECK.format(pkg="flash_attn"))[0].category == "dependency-mismatch"
    # the command failed instead of printing a version: no evidence
    failed = cmd + "ModuleNotFoundError: No module named 'flash_attn'\n"
    assert _top(failed + CHECK.format(pkg="flash_attn"))[0].category == "missing-dependency"
    assert _top("[pip3] flash-attn==2.5.8\n" + CHECK.format(pkg="flash_attn"))[0].category == "dependency-mismatch"


def test_every_listed_package_must_be_shown_installed():
    top, _ = _top(SATISFIED + CHECK.format(pkg="flash_attn, einops"))
    assert top.category == "missing-dependency"


def test_a_missing_submodule_of_an_installed_package_but_not_the_package_itself():
    shown = "MindSpore version:  2.3.0\n"
    sub = "ModuleNotFoundError: No module named 'mindspore.communication.comm_func'\n"
    top, _ = _top(shown + sub)
    assert top.rule_id == "python-module-not-found" and top.category == "dependency-mismatch"
    # the package itself missing, though some environment shows it: another interpreter's, still missing here
    top, _ = _top(shown + "ModuleNotFoundError: No module named 'mindspore'\n")
    assert top.category == "missing-dependency"
    # no sign it is installed: unchanged
    assert _top(sub)[0].category == "missing-dependency"
    # a traceback frame inside the package is a sign
    frame = '  File "/usr/local/lib/python3.9/site-packages/mindspore/communication/__init__.py", line 3, in <module>\n'
    assert _top("Traceback (most recent call last):\n" + frame + sub)[0].category == "dependency-mismatch"


def test_a_metadata_lookup_by_the_old_name_while_a_renamed_variant_is_installed():
    err = "importlib.metadata.PackageNotFoundError: flashinfer\n"
    top, rep = _top("Successfully installed flashinfer-python-0.2.0.post2+cu124torch2.5\n" + err)
    assert top.rule_id == "package-metadata-not-found" and top.category == "dependency-mismatch"
    assert "flashinfer_python" in top.judgement["reason"] and rep.extra["action"] == "fix"
    # another package that merely starts with the name is no variant; nothing installed stays missing
    assert _top("Successfully installed flashinfer-bench-0.1.0\n" + err)[0].category == "missing-dependency"
    assert _top(err)[0].category == "missing-dependency"


FLOOR = ("ImportError: Using the `Trainer` with `PyTorch` requires `accelerate>=0.20.1`: Please run "
         "`pip install transformers[torch]` or `pip install accelerate -U`\n")


def test_a_version_floor_of_a_package_a_pip_list_row_or_a_pin_shows_installed():
    for shown in ("accelerate                0.15.0\n",                     # pip list
                  "accelerate                0.15.0             pypi_0    pypi\n",   # conda list
                  "versions: transformers==4.36.2 accelerate==0.15.0\n"):      # a banner / pip freeze pin
        top, _ = _top(shown + FLOOR)
        assert top.rule_id == "library-requires-backend" and top.category == "dependency-mismatch", shown
        assert "older than that floor" in top.judgement["reason"] and "accelerate>=0.20.1" in top.judgement["reason"]
    # nothing shows it installed: the requirement reads as a missing package
    assert _top(FLOOR)[0].category == "missing-dependency"


def test_a_pin_on_a_line_that_names_what_is_wanted_is_no_sign():
    for wanted in ("$ pip install accelerate==0.15.0\n", "Collecting accelerate==0.15.0\n",
                   "ERROR: No matching distribution found for accelerate==0.15.0\n"):
        assert _top(wanted + FLOOR)[0].category == "missing-dependency", wanted
