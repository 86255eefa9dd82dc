"""Installed versions the log prints that make a failure a version mismatch (analyzer/detect/version_gate.py,
rules/versions.yaml): a recognised failure only an outdated release raises, and an unexplained error in the
code of two packages shown at releases that do not work together."""
from llmtriage import analyze
from llmtriage.detect.version_gate import in_range, parse_version

MERGE = ("Traceback (most recent call last):\n"
         '  File "/content/merge.py", line 14, in <module>\n'
         "    model = model.merge_and_unload()\n"
         '  File "/usr/local/lib/python3.10/dist-packages/peft/tuners/lora.py", line 352, in merge_and_unload\n'
         '    raise ValueError("Cannot merge LORA layers when the model is loaded in 8-bit mode")\n'
         "ValueError: Cannot merge LORA layers when the model is loaded in 8-bit mode\n")

DEVICE = ("Traceback (most recent call last):\n"
          '  File "/home/u/qlora/qlora.py", line 807, in <module>\n'
          "    train()\n"
          '  File "/home/u/venv/lib/python3.10/site-packages/accelerate/accelerator.py", line 1254, in prepare_model\n'
          "    raise ValueError(\n"
          "ValueError: You can't train a model that has been loaded in 8-bit precision on a different device than the one "
          "you're training on. Make sure you loaded the model on the correct device using for example "
          "`device_map={'':torch.cuda.current_device()}`\n")

RESUME = ("Traceback (most recent call last):\n"
          '  File "/home/u/cls/train.py", line 171, in <module>\n'
          "    trainer.train(resume_from_checkpoint=args.resume)\n"
          '  File "/home/u/.local/lib/python3.10/site-packages/transformers/trainer.py", line 1859, in train\n'
          "    self._load_from_checkpoint(resume_from_checkpoint)\n"
          '  File "/home/u/.local/lib/python3.10/site-packages/transformers/trainer.py", line 2533, in _load_from_checkpoint\n'
          "    if len(active_adapters) > 1:\n"
          "TypeError: object of type 'method' has no len()\n")


def _top(text):
    rep = analyze(text)
    return next(f for f in rep.findings if f.severity == "error")


def test_versions_compare_as_releases():
    assert parse_version("0.4.0.dev0") < parse_version("0.4.0") < parse_version("0.4.0.post1") < parse_version("0.5.0")
    assert parse_version("2.4.1+cu121") == parse_version("2.4.1") and parse_version("1.10") > parse_version("1.9")
    assert parse_version("5.0.0rc0") < parse_version("5.0.0") and parse_version("unknown") is None
    assert in_range("0.20.0.dev0", {"below": "0.20.0"}) and not in_range("0.20.0", {"below": "0.20.0"})
    assert in_range("4.41.2", {"from": "4.34.0"}) and not in_range("4.33.3", {"from": "4.34.0"})


def test_merge_refusal_of_an_old_peft_is_a_version_mismatch():
    for shown in ("Successfully installed bitsandbytes-0.39.0 peft-0.4.0.dev0 transformers-4.30.0.dev0\n",
                  "# env: peft 0.4.0.dev0 (git main), transformers 4.30.0.dev0, bitsandbytes 0.39.0\n",
                  "Name: peft\nVersion: 0.3.0\n"):
        top = _top(shown + MERGE)
        assert top.rule_id == "adapter-merge-into-quantized-model" and top.category == "dependency-mismatch"
        assert top.judgement["context"] == "version-gate" and top.judgement["category_was"] == "dtype-mismatch"
        assert "peft 0." in top.judgement["reason"]


def test_merge_refusal_of_a_current_peft_or_without_a_version_stays():
    for shown in ("", "peft==0.13.2\n", "$ pip install peft==0.4.0\n", "this script requires peft 0.4.0 or later\n"):
        top = _top(shown + MERGE)
        assert top.rule_id == "adapter-merge-into-quantized-model" and top.category == "dtype-mismatch", shown


def test_quantized_model_over_gpus_on_an_old_accelerate():
    top = _top("torch 2.0.1+cu117 | transformers 4.30.1 | peft 0.3.0 | accelerate 0.19.0 | bitsandbytes 0.39.0\n" + DEVICE)
    assert top.rule_id == "quantized-model-wrong-device" and top.category == "dependency-mismatch"
    # a current accelerate still refuses a model placed on another rank's GPU: that is the device placement
    top = _top("accelerate               0.30.1\n" + DEVICE)
    assert top.category == "device-mismatch" and top.judgement is None


def test_unexplained_error_in_a_pair_known_not_to_work_together():
    top = _top("transformers==4.41.2 peft==0.4.0 accelerate==0.30.1 torch==2.3.0+cu121\n" + RESUME)
    assert top.rule_id == "unknown" and top.category == "dependency-mismatch"
    assert "transformers 4.41.2" in top.judgement["reason"] and "peft 0.4.0" in top.judgement["reason"]


def _gated(top):
    return bool(top.judgement) and top.judgement.get("context") == "version-gate"


def test_pair_needs_both_versions_in_range_and_the_error_in_their_code():
    # (the words alone may place the error in dependency-mismatch, detect/family.py: the gate must not add its reason)
    assert not _gated(_top("transformers==4.41.2 peft==0.10.0\n" + RESUME))
    assert not _gated(_top("transformers==4.33.2 peft==0.4.0\n" + RESUME))
    own = ("transformers==4.41.2 peft==0.4.0\nTraceback (most recent call last):\n"
           '  File "/home/u/cls/train.py", line 88, in <module>\n    n = len(batch.keys)\n'
           "TypeError: object of type 'method' has no len()\n")
    assert _top(own).category != "dependency-mismatch" and not _gated(_top(own))
