"""Failure families (rules/families.yaml, detect/family.py): an unexplained death whose wording
belongs to one failure class takes that category, keeps rule id `unknown` and low confidence; a
code bug, a tie between families or a survived error stays plainly unknown."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import llmtriage
from llmtriage.detect.family import family_of, scores

RULES = Path(__file__).resolve().parents[1] / "rules"


def _crash(headline: str, *chain: str) -> str:
    parts = []
    for c in chain:
        parts += ["Traceback (most recent call last):", '  File "/app/train.py", line 10, in <module>', "    step()", c, "",
                  "During handling of the above exception, another exception occurred:", ""]
    parts += ["Traceback (most recent call last):", '  File "/app/train.py", line 12, in <module>', "    main()", headline]
    return "\n".join(parts) + "\n"


def _top(text: str, lang=None):
    rep = llmtriage.analyze(text.encode(), lang=lang)
    errs = [f for f in rep.findings if f.severity == "error"]
    return rep, (errs[0] if errs else None)


def test_every_family_is_a_category_and_every_cue_is_re2_safe():
    spec = yaml.safe_load((RULES / "families.yaml").read_text(encoding="utf-8"))
    cats = set(yaml.safe_load((RULES / "taxonomy.yaml").read_text(encoding="utf-8"))["categories"]) - {"unknown"}
    assert set(spec["families"]) <= cats
    re2 = pytest.importorskip("re2")
    opts = re2.Options()
    opts.case_sensitive = False
    for fam, cues in spec["families"].items():
        for c in cues:
            assert c["weight"] in (1, 2, 3, 4, 5), (fam, c)
            re2.compile(c["cue"], opts)     # raises on a construct RE2 lacks (backreference, lookaround)


@pytest.mark.parametrize("text, family", [
    ("RuntimeError: HIP error: hipErrorOutOfMemory", "cuda-oom"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.", "nccl-timeout"),
    ("OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt/model.safetensors'", "disk-full"),
    ("zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5557')", "port-in-use"),
    ("OSError: [Errno 12] Cannot allocate memory", "host-oom"),
    ("ValueError: FlashAttention only supports Ampere GPUs or newer.", "cuda-version-mismatch"),
    ("ModuleNotFoundError: No module named 'transformers.models.qwen3_vl'", "dependency-mismatch"),
    ("ModuleNotFoundError: No module named 'liger_kernel'", "missing-dependency"),
    ("ValueError: apply_rope_fusion is not available. Please install TE >= 1.4 or Apex.", "dependency-mismatch"),
    ("socket.gaierror: [Errno -3] Temporary failure in name resolution", "hub-unreachable"),
    ("RuntimeError: 显存不足，无法分配 2.00 GiB", "cuda-oom"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'pdsh'", "missing-dependency"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'llama.cpp/llama-quantize'", "missing-dependency"),
    ("RuntimeError: Unsloth: The file ('llama.cpp/llama-quantize' or 'llama.cpp/llama-quantize.exe' if you are on "
     "Windows WSL) does not exist.", "missing-dependency"),
    ("ValueError: PEFT backend is required for this method.", "missing-dependency"),
    ("/bin/sh: 1: torchrun: not found", "missing-dependency"),
    ("WARNING: command error: '[Errno 2] No such file or directory: 'python''!", "missing-dependency"),
    ("RuntimeError: PyTorch is not linked with support for mps devices", "cuda-unavailable"),
    ("Exception: flashinfer_python with minimum required version 0.2.5 is not installed. Please uninstall the old "
     "version and reinstall the latest version by following the instructions at https://docs.flashinfer.ai/.",
     "dependency-mismatch"),
    ("Exception: sgl-kernel is installed with version 0.0.5, which is less than the minimum required version 0.0.8.",
     "dependency-mismatch"),
    ("ValueError: No file with name: model-00001-of-00004.safetensors found in /ckpt/run3.", "weights-not-found"),
    ("ValueError: model_type: 'qwen3-vl-8b' is not registered. The model_type you can choose: ['qwen2-vl-7b']",
     "remote-code"),
    # near miss: absent, with no word of an older copy
    ("Exception: decord with minimum required version 0.6.0 is not installed. Please run pip install decord.",
     "missing-dependency"),
    ('RuntimeError: Attempted to set the storage of a tensor on device "npu:4" to a storage on different device '
     '"npu:0".  This is no longer allowed; the devices must match.', "device-mismatch"),
])
def test_a_new_wording_is_placed_in_its_family(text, family):
    got = family_of(text)
    assert got is not None and got[0] == family, scores(text)[:3]


@pytest.mark.parametrize("text", [
    "KeyError: 'input_ids'",
    "AttributeError: 'NoneType' object has no attribute 'shape'",
    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
    "IndexError: pop from empty list",
    "ValueError: too many values to unpack (expected 2)",
    "RuntimeError: Boolean value of Tensor with more than one value is ambiguous",
    "SystemExit: 1",
])
def test_a_code_bug_names_no_family(text):
    assert family_of(text) is None, scores(text)[:3]


def test_a_tie_between_families_names_none():
    # as much evidence for GPU memory as for a full disk: no family leads by the margin
    assert family_of("RuntimeError: out of memory and no space left on device") is None


def test_the_verdict_names_the_family_and_keeps_the_finding_unknown():
    rep, top = _top(_crash("RuntimeError: acl backend: device memory exhausted, out of memory on npu 3"))
    assert (top.rule_id, top.category, top.confidence) == ("unknown", "cuda-oom", "low")
    assert top.captures["family"] == "cuda-oom" and "out of memory" in top.captures["family_words"]
    assert "cuda-oom" in top.title and top.fixes[0]["detail"] == "llmtriage kb show cuda-oom"
    assert rep.extra["action"] == "fix"          # the family's default action, not a guess of its own


def test_a_chained_cause_places_the_wrapper():
    # the headline says nothing; the exception it was raised from names the family
    _, top = _top(_crash("RuntimeError: worker step failed", "objstore.WriteError: bucket quota exceeded for ckpt/"))
    assert (top.rule_id, top.category) == ("unknown", "disk-full")


def test_chinese_text_for_a_family():
    _, top = _top(_crash("RuntimeError: acl backend: device memory exhausted, out of memory on npu 3"), lang="zh")
    assert top.rule_id == "unknown" and top.category == "cuda-oom"
    assert "类故障" in top.title and "故障" in top.cause


def test_a_code_bug_stays_unknown_and_a_survived_error_is_not_placed():
    _, top = _top(_crash("KeyError: 'input_ids'"))
    assert (top.rule_id, top.category) == ("unknown", "unknown")
    # an exception the job survived (training went on and finished) is a warning and keeps no family
    survived = (_crash("RuntimeError: zz router: device memory exhausted, out of memory; retrying")
                + "".join(f"{{'loss': 1.{i}, 'grad_norm': 0.9, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n" for i in range(40))
                + "{'train_runtime': 812.4, 'train_loss': 1.2}\n")
    rep = llmtriage.analyze(survived.encode())
    assert not any(f.severity == "error" for f in rep.findings)
    (u,) = [f for f in rep.findings if f.rule_id == "unknown"]
    assert u.severity == "warning" and u.category == "unknown" and "family" not in u.captures


def test_a_rule_still_wins_over_a_family():
    _, top = _top(_crash("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB"))
    assert top.rule_id != "unknown" and top.category == "cuda-oom" and top.confidence != "low"


def test_an_opaque_headline_is_read_with_the_error_lines_before_it():
    log = ("INFO 12-01 10:00:00 engine.py:88 starting engine\n"
           "ERROR 12-01 10:00:03 worker.py:412 zz backend: failed to reserve workspace: device out of memory\n"
           "INFO 12-01 10:00:03 engine.py:90 shutting down\n"
           + _crash("RuntimeError: Engine process failed to start. See stack trace for the root cause."))
    _, top = _top(log)
    assert (top.rule_id, top.category) == ("unknown", "cuda-oom")


def test_a_warning_before_an_opaque_headline_places_nothing():
    log = ("/usr/lib/python3/site-packages/zz/memory.py:12: UserWarning: device out of memory fallback disabled\n"
           + _crash("RuntimeError: Engine process failed to start. See stack trace for the root cause."))
    _, top = _top(log)
    # the warning's words place no family; only the headline's own words may name a nearest failure
    assert top.rule_id == "unknown" and top.category != "cuda-oom" and "family" not in top.captures


def test_a_cpp_terminate_yields_to_the_family_of_the_message_it_wraps():
    log = ("loading model weights ... done\n"
           "terminate called after throwing an instance of 'std::runtime_error'\n"
           "  what():  zz engine: device memory exhausted while reserving the kv cache (out of memory)\n"
           "Aborted (core dumped)\n")
    rep, top = _top(log)
    assert (top.rule_id, top.category) == ("unknown", "cuda-oom")
    wrapper = next(f for f in rep.findings if f.rule_id == "cpp-terminate-uncaught")
    assert wrapper.role == "symptom"


def test_a_cpp_terminate_with_a_plain_message_stays_a_native_crash():
    log = ("terminate called after throwing an instance of 'std::logic_error'\n"
           "  what():  basic_string::_M_construct null not valid\n"
           "Aborted (core dumped)\n")
    _, top = _top(log)
    assert top.category == "native-crash" and top.rule_id != "unknown"


def test_the_context_window_is_the_lines_before_and_after_not_the_line_itself():
    from llmtriage.detect.verdict import Scanner
    block = (b"INFO step 1\n"                                        # line 10
             b"ERROR zz: device out of memory\n"                     # line 11: just before the death
             b"FATAL the death line itself: no space left\n"         # line 12
             b"what(): follows the death\n"                          # line 13
             b"ERROR far after\n")                                   # line 14
    sc = Scanner()
    sc.feed(block, block, 10)
    assert sc.error_lines_around(12) == "ERROR zz: device out of memory"
    assert sc.error_lines_around(12, after=1).splitlines() == ["ERROR zz: device out of memory", "what(): follows the death"]


def test_every_wrapper_the_verdict_names_is_a_rule():
    spec = yaml.safe_load((RULES / "verdict.yaml").read_text(encoding="utf-8"))["unknown"]["family"]
    ids = {r["id"] for r in llmtriage.load_rules().rules}
    assert spec["wrappers"] and set(spec["wrappers"]) <= ids


def test_a_multi_line_message_is_read_with_the_lines_that_follow_its_headline():
    """pydantic prints "1 validation error for ParallelConfig" on the exception line and the error
    itself on the next lines: those (error lines, up to `exception_after`) place the family."""
    text = ("Traceback (most recent call last):\n"
            '  File "/usr/local/bin/vllm", line 10, in <module>\n'
            "    sys.exit(main())\n"
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
            "  Value error, the number of visible GPUs (2) is less than pipeline_parallel_size x tensor_parallel_size (4). "
            "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"
            "    For further information visit https://errors.pydantic.dev/2.11/v/value_error\n")
    top = llmtriage.analyze(text).findings[0]
    assert top.rule_id == "unknown" and top.category == "cuda-unavailable"
    head_only = llmtriage.analyze("\n".join(text.splitlines()[:4]) + "\n").findings[0]
    # without the lines below it no family is named (at most a nearest-failure lead from the headline)
    assert head_only.category != "cuda-unavailable" and "family" not in head_only.captures


# --- shapes: the exception's type, message and where it was raised (families.yaml `shapes`) ---

def _raised_in(headline: str, *files: str) -> str:
    frames = "".join(f'  File "{f}", line {10 + i}, in fn{i}\n    call{i}()\n' for i, f in enumerate(("/app/train.py", *files)))
    return "Traceback (most recent call last):\n" + frames + headline + "\n"


@pytest.mark.parametrize("exc_type, message, files, family", [
    ("TypeError", "PPOConfig.__init__() got an unexpected keyword argument 'kl_penalty'", [], "dependency-mismatch"),
    ("TypeError", "Trainer.training_step() takes 3 positional arguments but 4 were given", [], "dependency-mismatch"),
    ("TypeError", "RMSNorm.__init__() missing 1 required positional argument: 'normalized_shape'", [], "dependency-mismatch"),
    ("AttributeError", "'AdamW' object has no attribute 'train'", [], "dependency-mismatch"),
    ("NameError", "name 'Replicate' is not defined", [], "dependency-mismatch"),
    ("AssertionError", "", ["/py/site-packages/deepspeed/runtime/zero/stage3.py"], "deepspeed-config"),
    ("builtins.ValueError", "Hostfile contains a bad entry: node01 slot=8",
     ["/py/site-packages/deepspeed/launcher/runner.py"], "deepspeed-config"),
    ("AssertionError", "Number of layers should be divisible by the pipeline-model-parallel size",
     ["/ws/Megatron-LM/megatron/training/arguments.py"], "deepspeed-config"),
    # an offload swapper the configuration never built
    ("AttributeError", "'NoneType' object has no attribute 'available_swap_in_buffers'",
     ["/py/site-packages/deepspeed/runtime/zero/stage3.py",
      "/py/site-packages/deepspeed/runtime/swap_tensor/partitioned_optimizer_swapper.py"], "deepspeed-config"),
    # a checkpoint written by another tool lacks a key Megatron's loader reads
    ("KeyError", "'iteration'", ["/ws/Megatron-LM-23.06/megatron/checkpointing.py"], "state-dict-keys"),
    # Unsloth's rewritten attention read a head_dim of 0 from a config of another transformers release
    ("RuntimeError", "shape '[1, 1410, 28, 0]' is invalid for input of size 5053440",
     ["/py/site-packages/unsloth/models/_utils.py", "/py/site-packages/unsloth/models/llama.py"], "dependency-mismatch"),
    # XTuner's dispatched RoPE call into a hub modeling file that expects another signature
    ("RuntimeError", "Boolean value of Tensor with more than one value is ambiguous",
     ["/ws/xtuner/xtuner/model/modules/dispatch/internlm2.py",
      "/root/.cache/huggingface/modules/transformers_modules/internlm2-chat-7b/modeling_internlm2.py"], "dependency-mismatch"),
    # a dtype table of the kernel path picked for an Ada GPU has no entry for DeepSeek-V4's E8M0 scales
    ("KeyError", "'float8_e8m0fnu'", ["/py/site-packages/vllm/model_executor/layers/deepseek_v4_attention.py"],
     "cuda-version-mismatch"),
    ("KeyError", "'fp8e4nv'", ["/py/site-packages/sglang/srt/layers/quantization/fp8_kernel.py"], "cuda-version-mismatch"),
    # ms-swift's Qwen3-VL forward unpacks 2 values from a vision tower that returns 3 under transformers 5
    ("ValueError", "too many values to unpack (expected 2)",
     ["/py/site-packages/transformers/trainer.py", "/py/site-packages/swift/llm/model/model/qwen.py"], "dependency-mismatch"),
    ("ValueError", "not enough values to unpack (expected 3, got 2)",
     ["/usr/local/lib/python3.10/dist-packages/peft/tuners/lora/model.py"], "dependency-mismatch"),
    # a ShareGPT row whose role tag the configured format does not know, read by the framework's converter
    ("KeyError", "'user'", ["/ws/LLaMA-Factory/src/llamafactory/data/aligner.py"], "data-corrupt"),
    # a hub model's remote modeling code unpacking a transformers helper whose return changed between releases
    ("ValueError", "too many values to unpack (expected 2)",
     ["/py/site-packages/transformers/generation/utils.py",
      "/root/.cache/huggingface/modules/transformers_modules/glm-4-9b-chat/modeling_chatglm.py"], "dependency-mismatch"),
    # a library dataclass's __post_init__ reading a field HfArgumentParser left None (transformers 4.49's collator)
    ("AttributeError", "'NoneType' object has no attribute 'mask_token'",
     ["/py/site-packages/transformers/hf_argparser.py", "<string>",
      "/py/site-packages/transformers/data/data_collator.py"], "dependency-mismatch"),
    # ... or re-raised from a datasets.map worker process (num_proc > 1)
    ("KeyError", "'user'", ["/ws/LLaMA-Factory/src/llamafactory/data/aligner.py", "/py/site-packages/datasets/arrow_dataset.py",
                            "/py/site-packages/datasets/utils/py_utils.py", "/py/site-packages/multiprocess/pool.py"], "data-corrupt"),
    # the pip-installed framework does not know a stage that only the project's fork / a newer release has
    ("ValueError", "Unknown task: sft-classifier.", ["/py/site-packages/llamafactory/train/tuner.py"], "dependency-mismatch"),
    # a checkpoint directory that is not where the config points (torchtune's load_checkpoint -> torch.load)
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/tmp/llama2_7b'",
     ["/ws/torchtune/torchtune/utils/checkpoint.py", "/py/site-packages/torch/serialization.py",
      "/py/site-packages/torch/serialization.py", "/py/site-packages/torch/serialization.py"], "weights-not-found"),
    # a framework CLI (no user file on the stack) handing transformers a model whose _tp_plan is None
    ("TypeError", "'NoneType' object is not iterable",
     ["/py/site-packages/swift/cli/sft.py", "/py/site-packages/swift/llm/model/register.py",
      "/py/site-packages/transformers/modeling_utils.py"], "dependency-mismatch"),
    # an eval library's adapter for vLLM reading an output field this vLLM release leaves None (V1 prompt_logprobs)
    ("TypeError", "'NoneType' object is not subscriptable",
     ["/py/site-packages/lighteval/pipeline.py", "/py/site-packages/lighteval/models/vllm/vllm_model.py"],
     "dependency-mismatch"),
    # Unsloth's GGUF export refusing a model type its installed release cannot convert yet
    ("NotImplementedError", "Unsloth: llama.cpp GGUF conversion does not yet support converting model types of `X`.",
     ["/py/site-packages/unsloth/save.py", "/py/site-packages/unsloth_zoo/llama_cpp.py"], "dependency-mismatch"),
])
def test_an_exception_shape_names_its_family(exc_type, message, files, family):
    from llmtriage.detect.family import shape_cues
    shapes = shape_cues(exc_type, message, files)
    assert [s[0] for s in shapes] == [family]
    got = family_of(f"{exc_type}: {message}", shapes=shapes)
    assert got is not None and got[0] == family and shapes[0][2] in got[1]


@pytest.mark.parametrize("exc_type, message, files", [
    ("AttributeError", "'NoneType' object has no attribute 'shape'", []),      # a value that is missing, not an API
    ("TypeError", "unsupported operand type(s) for +: 'int' and 'str'", []),   # a type bug, not a signature
    ("AssertionError", "", ["/app/data/loader.py"]),                           # the user's own assertion
    ("AssertionError", "", ["/py/site-packages/deepspeed/runtime/engine.py", "/app/a.py", "/app/b.py", "/app/c.py"]),  # DeepSpeed not innermost
    ("AttributeError", "'Linear' object has no attribute 'ds_grads_remaining'",
     ["/py/site-packages/deepspeed/runtime/zero/stage3.py"]),                  # not a type the DeepSpeed shape takes
    ("RuntimeError", "shape '[4, 512]' is invalid for input of size 2000",
     ["/app/unsloth_compiled_cache/UnslothSFTTrainer.py"]),                    # Unsloth's generated trainer, not its model patches
    ("RuntimeError", "Boolean value of Tensor with more than one value is ambiguous",
     ["/ws/xtuner/xtuner/dataset/huggingface.py"]),                            # XTuner's dataset code, not a dispatched forward
    ("ValueError", "too many values to unpack (expected 2)",
     ["/py/site-packages/transformers/trainer.py", "/app/train.py"]),          # raised in the user's own code
    ("ValueError", "too many values to unpack (expected 2)",
     ["/py/site-packages/torch/utils/data/dataloader.py", "/app/collate.py"]),  # the user's collate, called by a library
    ("ValueError", "not enough values to unpack (expected 2, got 1)", ["/app/data/prepare.py"]),   # the user's own data code
    ("AttributeError", "'NoneType' object has no attribute 'mask_token'",
     ["/py/site-packages/transformers/hf_argparser.py", "<string>", "/app/my_args.py"]),   # the user's own __post_init__
    ("ValueError", "Unknown task: summarise", ["/app/run_eval.py"]),            # the user's own script refusing its argument
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/ws/cache/train_dataset.pt'",
     ["/py/site-packages/torch/serialization.py"]),                            # a dataset cache loaded with torch.load
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/ws/ckpt/step_100'", ["/app/train.py"]),  # not in a loader
    ("TypeError", "'NoneType' object is not iterable",
     ["/app/train.py", "/py/site-packages/transformers/modeling_utils.py"]),   # the user's script on the stack
    ("TypeError", "'NoneType' object is not subscriptable",
     ["/py/site-packages/swift/cli/sft.py", "/py/site-packages/swift/llm/template/base.py"]),   # one package alone
    ("TypeError", "'NoneType' object is not subscriptable",
     ["/app/eval.py", "/app/models/vllm/runner.py"]),                          # the user's own vLLM wrapper, not a library's
    ("TypeError", "'NoneType' object is not subscriptable",
     ["/py/site-packages/vllm/model_executor/models/llama.py"]),               # inside the engine itself
])
def test_shapes_that_do_not_fit(exc_type, message, files):
    from llmtriage.detect.family import shape_cues
    fams = [s[0] for s in shape_cues(exc_type, message, files)]
    assert "weights-not-found" not in fams
    assert "deepspeed-config" not in fams
    if exc_type != "AttributeError" or "NoneType" in message:
        assert "dependency-mismatch" not in fams


def test_the_verdict_places_an_unrecognised_signature_mismatch_by_its_shape():
    # no rule knows this class, and "takes N positional arguments" has no family words of its own
    _, top = _top(_raised_in("TypeError: ZzRolloutWorker.generate_sequences() takes 2 positional arguments but 3 were given",
                             "/py/site-packages/zzrl/trainer/ppo.py"))
    assert (top.rule_id, top.category) == ("unknown", "dependency-mismatch")
    assert top.captures["family"] == "dependency-mismatch"
    assert "TypeError: call signature mismatch" in top.captures["family_words"]


def test_the_verdict_places_an_unpacking_error_by_where_it_was_raised():
    # a library's own code unpacking what another library returns: two releases that do not match
    _, top = _top(_raised_in("ValueError: too many values to unpack (expected 2)",
                             "/py/site-packages/transformers/trainer.py", "/py/site-packages/swift/llm/model/model/qwen.py"))
    assert (top.rule_id, top.category) == ("unknown", "dependency-mismatch")
    assert "unpacking error raised in library code" in top.captures["family_words"]
    # the same error raised in the user's own script is a code bug: no family from its shape
    _, own = _top(_raised_in("ValueError: too many values to unpack (expected 2)", "/py/site-packages/transformers/trainer.py",
                             "/app/model.py"))
    assert own.rule_id == "unknown" and own.category != "dependency-mismatch"


def test_unpacking_another_modules_result_below_the_entry_script_is_a_release_mismatch():
    from llmtriage.detect.family import shape_cues
    msg = "too many values to unpack (expected 4)"
    files = ["/repo/nanotron/run_generate.py", "/repo/nanotron/src/nanotron/models/llama.py"]
    call = "(query_unpad, indices_q, cu_seqlens_q, max_seqlen_q) = bert_padding.unpad_input("
    assert [s[0] for s in shape_cues("ValueError", msg, files, call)] == ["dependency-mismatch"]
    # raised in the script that was run (a one-file traceback, or the same file outermost): a code bug
    assert shape_cues("ValueError", msg, ["/repo/train.py"], call) == []
    assert shape_cues("ValueError", msg, ["/repo/train.py", "/repo/train.py"], call) == []
    # the code's own object, or a data holder, unpacked: not another module's return signature
    for code in ("a, b = self.encoder(x)", "input_ids, labels = batch.values()", "x, y = model.forward(z)",
                 "a, b = pairs", "a, b = get_pair()"):
        assert shape_cues("ValueError", msg, files, code) == [], code
    # no source line known: the shape cannot be judged
    assert shape_cues("ValueError", msg, files) == []


def test_the_verdict_places_an_assertion_raised_inside_deepspeed():
    _, top = _top(_raised_in("AssertionError", "/py/site-packages/transformers/trainer.py",
                             "/py/site-packages/deepspeed/runtime/engine.py", "/py/site-packages/deepspeed/runtime/zero/stage_1_and_2.py"))
    assert (top.rule_id, top.category) == ("unknown", "deepspeed-config")
    # the same bare assertion in the user's own code names no family from its shape
    _, own = _top(_raised_in("AssertionError", "/app/data/loader.py"))
    assert own.rule_id == "unknown" and "family" not in own.captures


def test_every_shape_is_well_formed_and_re2_safe():
    spec = yaml.safe_load((RULES / "families.yaml").read_text(encoding="utf-8"))
    cats = set(yaml.safe_load((RULES / "taxonomy.yaml").read_text(encoding="utf-8"))["categories"]) - {"unknown"}
    assert spec["shapes"] and int(spec["frames_deep"]) >= 1
    re2 = pytest.importorskip("re2")
    for s in spec["shapes"]:
        assert s["family"] in cats and s["weight"] in (-4, -3, -2, -1, 1, 2, 3, 4) and s["name"], s
        assert set(s) <= {"name", "family", "weight", "type", "message", "unless", "frames", "innermost", "own_class",
                          "code", "code_unless", "below_entry", "within", "between_packages"}, s
        assert any(s.get(k) for k in ("type", "message", "frames", "innermost")), s
        for k in ("type", "message", "unless", "frames", "innermost", "code", "code_unless", "within"):
            if s.get(k):
                re2.compile(s[k])


def test_an_index_error_in_a_serving_engines_block_bookkeeping_is_not_a_token_id_range():
    # LMDeploy's prefix trie lost count of a sequence's blocks: numpy's words, the engine's bug
    message = "index 17 is out of bounds for axis 0 with size 17"
    _, top = _top(_raised_in(f"IndexError: {message}", "/py/site-packages/lmdeploy/pytorch/engine/engine.py",
                             "/py/site-packages/lmdeploy/pytorch/paging/scheduler.py",
                             "/py/site-packages/lmdeploy/pytorch/paging/block_trie.py"))
    assert (top.rule_id, top.category) == ("unknown", "unknown")
    # the same words raised in the user's own data code still read as an index out of range
    _, own = _top(_raised_in(f"IndexError: {message}", "/app/data/collate.py"))
    assert (own.rule_id, own.category) == ("unknown", "index-out-of-range")
    from llmtriage.detect.family import shape_cues
    for files in (["/py/site-packages/vllm/v1/core/sched/scheduler.py"], ["/py/site-packages/sglang/srt/mem_cache/radix_cache.py"],
                  ["/py/site-packages/tensorrt_llm/_torch/pyexecutor/resource_manager.py"]):
        assert [(s[0], s[1]) for s in shape_cues("IndexError", message, files)] == [("index-out-of-range", -3)]
    # not where the model reads token ids, and not another exception type
    assert shape_cues("IndexError", "index out of range in self", ["/py/site-packages/vllm/model_executor/layers/vocab_parallel_embedding.py"]) == []
    assert shape_cues("KeyError", "17", ["/py/site-packages/lmdeploy/pytorch/paging/block_trie.py"]) == []


def test_a_deepspeed_op_that_fails_to_build_is_not_a_config_shape():
    from llmtriage.detect.family import shape_cues
    files = ["/py/site-packages/deepspeed/ops/adam/cpu_adam.py", "/py/site-packages/deepspeed/ops/op_builder/builder.py"]
    assert shape_cues("RuntimeError", "Error building extension 'cpu_adam'", files) == []


def test_the_source_line_under_a_frame_is_code_not_context():
    """A traceback's source line printed under an ERROR prefix ("collective_rpc(method, timeout, ...)")
    is code: its words place the unknown exception in no family."""
    text = Path(__file__).with_name("data").joinpath("family_code_line.log").read_text(encoding="utf-8")
    _, f = _top(text)
    assert f is not None and f.rule_id == "unknown" and f.category == "unknown"


def test_a_low_precision_format_is_an_arch_gap_only_as_a_missing_table_entry():
    from llmtriage.detect.family import shape_cues
    fams = lambda t, m: [s[0] for s in shape_cues(t, m, [])]
    # a torch too old to know the dtype is an attribute the torch module lacks: two releases
    assert "cuda-version-mismatch" not in fams("AttributeError", "module 'torch' has no attribute 'float8_e8m0fnu'")
    # safetensors' own dtype names and a plain config key are not low-precision format names
    assert fams("KeyError", "'F8_E4M3'") == [] and fams("KeyError", "'fp8'") == []
    _, top = _top(_raised_in("KeyError: 'float8_e8m0fnu'", "/py/site-packages/vllm/v1/worker/gpu_model_runner.py"))
    assert (top.rule_id, top.category) == ("unknown", "cuda-version-mismatch")
    assert "KeyError on a low-precision number format" in top.captures["family_words"]


def test_an_abort_after_a_native_fatal_record_takes_the_family_the_record_names():
    """A glog/abseil FATAL record ("...: F path:line] X not available in this library.") then "Aborted":
    the record's words place the death (a plugin built for another release of its host library),
    even though the abort rule itself is only a symptom."""
    text = ("I0223 07:56:50.100000 1 tpu_init.cc:10] initializing TPU system\n"
            "2022-02-23 07:56:56.271731: F external/org_tensorflow/tensorflow/core/tpu/tpu_library_init_fns.inc:104]"
            " TpuEmbeddingEngine_WriteParameters not available in this library.\n"
            "Aborted (core dumped)\n")
    rep = llmtriage.analyze(text.encode())
    top = next(f for f in rep.findings if f.severity == "error")
    assert (top.rule_id, top.category) == ("unknown", "dependency-mismatch")
    assert any(f.rule_id == "process-aborted" and f.role == "symptom" for f in rep.findings)


def test_a_backend_graph_compiler_failure_is_a_compile_error():
    text = ("Traceback (most recent call last):\n"
            '  File "/app/serve.py", line 9, in <module>\n'
            "    engine.warmup()\n"
            "RuntimeError: Graph compile failed for the device backend (status 26).\n")
    _, f = _top(text)
    assert f is not None and f.rule_id == "unknown" and f.category == "compile-error"


def test_a_syscall_the_container_refuses_is_not_a_storage_error():
    """torch's CUDA IPC for expandable segments duplicates the sender's fd with pidfd_open / pidfd_getfd;
    a container whose seccomp / ptrace policy refuses it says "Operation not permitted", which is a
    process permission, not storage I/O: the death stays unknown rather than filesystem-error."""
    from llmtriage.detect.family import shape_cues
    files = ["/py/site-packages/torch/multiprocessing/reductions.py", "/py/site-packages/torch/storage.py"]
    assert [(s[0], s[1]) for s in shape_cues("RuntimeError", "pidfd_open:Operation not permitted", files)] == [("filesystem-error", -3)]
    assert [(s[0], s[1]) for s in shape_cues("RuntimeError", "pidfd_getfd: Operation not permitted", files)] == [("filesystem-error", -3)]
    _, f = _top(_crash("RuntimeError: pidfd_getfd: Operation not permitted"))
    assert f is not None and (f.rule_id, f.category) == ("unknown", "unknown")
    # the same words about a file are still the storage family
    _, f = _top(_crash("PermissionError: [Errno 1] Operation not permitted: '/mnt/nfs/ckpt/latest'"))
    assert f is not None and f.category == "filesystem-error"


def test_a_bare_assert_in_megatrons_lr_scheduler_is_a_config_shape():
    from llmtriage.detect.family import shape_cues
    files = ["/root/Megatron-LM/megatron/core/optimizer_param_scheduler.py", "/root/slime/slime/backends/megatron_utils/model.py"]
    assert [(s[0], s[1]) for s in shape_cues("AssertionError", "", files)] == [("deepspeed-config", 3)]


def test_a_network_error_to_a_local_service_is_not_the_hub():
    # a code sandbox / reward server on this machine timed out under load: that service, not the model hub
    local = "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=12345): Read timed out. (read timeout=30)"
    _, top = _top(_raised_in(local, "/home/u/SimpleTIR/recipe/simpletir/agent_utils.py"))
    assert top.rule_id == "unknown" and top.category == "unknown"
    # ... and one on the cluster's private network (a reward server on another node)
    lan = "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='10.18.3.44', port=5000): Read timed out. (read timeout=60)"
    _, top = _top(_raised_in(lan, "/app/rm_client.py"))
    assert top.category == "unknown"
    # the same read timeout from the hub's own host stays in the hub family
    hub = "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='cdn-lfs.hf.co', port=443): Read timed out. (read timeout=10)"
    _, top = _top(_raised_in(hub, "/app/download.py"))
    assert top.category == "hub-unreachable"
    from llmtriage.detect.family import shape_cues
    # a mirror on a private address named by its hub path keeps its hub words
    assert not shape_cues("ConnectionError", "HTTPConnectionPool(host='10.0.0.5', port=8080): Max retries exceeded with url: "
                          "/api/models/Qwen/Qwen2.5-7B/revision/main", [])


def test_an_error_while_writing_a_file_is_never_read_as_a_damaged_checkpoint():
    from llmtriage.detect.family import shape_cues
    # safetensors failing to WRITE: nothing was read back, so the checkpoint cannot be corrupt
    msg = "Error while serializing: I/O error: Invalid argument (os error 22)"
    shapes = shape_cues("SafetensorError", msg, ["/py/site-packages/safetensors/torch.py"])
    assert ("checkpoint-corrupt", -3) == shapes[0][:2]
    got = family_of(f"safetensors_rust.SafetensorError: {msg} checkpoint", shapes=shapes)
    assert got is not None and got[0] == "filesystem-error"
    # the Python form on a quoted path is a file-system error too
    got = family_of("OSError: [Errno 22] Invalid argument: '/mnt/jfs/ckpt/checkpoint-200/model.safetensors'")
    assert got is not None and got[0] == "filesystem-error"
    # ... but a bare EINVAL (a socket, an ioctl) names no family
    assert family_of("OSError: [Errno 22] Invalid argument") is None


def test_a_timeout_in_the_launchers_own_rendezvous_is_a_setup_failure_not_a_hang():
    # torchrun's agent forming the static TCPStore rendezvous before any worker started: the nodes never
    # met (a wrong --node_rank or master address), a communication set-up failure to fix
    agent = ("/py/site-packages/torch/distributed/launcher/api.py",
             "/py/site-packages/torch/distributed/elastic/agent/server/api.py",
             "/py/site-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py")
    rep, top = _top(_raised_in("torch.distributed.DistStoreError: Socket Timeout", *agent))
    assert (top.rule_id, top.category) == ("unknown", "nccl-error"), (top.rule_id, top.category)
    assert "timeout in the launcher's rendezvous" in top.captures["family_words"]
    assert rep.extra["action"] == "fix"
    # the same words raised from a worker's own store set-up keep the collective reading
    from llmtriage.detect.family import shape_cues
    worker = ["/app/pretrain.py", "/py/site-packages/torch/distributed/rendezvous.py"]
    assert shape_cues("DistStoreError", "Socket Timeout", worker) == []
    assert {s[0] for s in shape_cues("DistStoreError", "Socket Timeout", list(agent))} == {"nccl-error", "nccl-timeout"}


def test_a_registry_lookup_naming_a_chat_template_is_not_a_tokenizer_family():
    """Naming a chat template is not evidence of a tokenizer lacking special tokens: an unknown name in a
    library's own registry, listed with the names this release has, is a release older than the model."""
    registry = ("AssertionError: chat template 'qwen9' is not registered. The builtin chat templates are: "
                "dict_keys(['base', 'llama', 'qwen'])")
    assert family_of(registry)[0] == "dependency-mismatch"
    assert family_of("ValueError: scheduler 'cosine_v9' is not supported. Supported schedulers are: "
                     "['linear', 'cosine']")[0] == "dependency-mismatch"
    # the words alone only lean: no family from them
    assert family_of("RuntimeError: rendering the chat template failed") is None
    # a tokenizer without a chat template still names the tokenizer family
    assert family_of("ValueError: Cannot use chat template functions because tokenizer.chat_template is not "
                     "set and no template argument was passed!")[0] == "pad-token-missing"
    rep, top = _top(_crash("AssertionError: backend 'ragged_v9' is not registered. The builtin backends are: "
                           "dict_keys(['paged', 'flat'])"))
    assert top is not None and top.rule_id == "unknown" and top.category == "dependency-mismatch"


def test_a_backend_or_compiler_gated_on_a_gpu_arch_is_the_arch_family():
    """A serving backend that runs only on one GPU arch, and a kernel compiler whose release does not know
    the GPU's -arch, place an unrecognised death in cuda-version-mismatch; "only supported on CUDA GPUs"
    (no arch named) is not evidence of that."""
    assert family_of("ValueError: TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). "
                     "Please use a different prefill backend.")[0] == "cuda-version-mismatch"
    assert family_of("InternalError: Check failed: (0) is false: Not supported cuda -keys=cuda,gpu "
                     "-arch=sm_120 -max_num_threads=1024")[0] == "cuda-version-mismatch"
    assert family_of("RuntimeError: 8-bit optimizers are only supported on CUDA GPUs") is None


def test_a_tokenizer_whose_chat_template_is_null_is_still_the_tokenizer_family():
    assert family_of("ValueError: `chat_template choice is tokenizer_default but tokenizer's chat_template is null. "
                     "Please add a chat_template in tokenizer config")[0] == "pad-token-missing"


def test_an_operator_launch_step_naming_the_ai_core_is_no_hardware_word():
    # "LaunchAicore failed" is a host-side launch step of one operator (its kernel lookup failed before
    # anything reached the device); the AI Core as a word of its own still leans to a hardware fault
    launch = "RuntimeError: call aclnnPromptFlashAttentionV3 failed, detail:EZ1001: PromptFlashAttention LaunchAicore failed."
    for text in (launch, "RuntimeError: ArangeAiCore ADD_TO_LAUNCHER_LIST_AICORE failed."):
        got = family_of(text)
        assert got is None or got[0] != "gpu-hardware-fault", scores(text)[:3]
    got = family_of("RuntimeError: The aicore execution is abnormal, aicore error on device 3")
    assert got is not None and got[0] == "gpu-hardware-fault"


def test_an_attribute_missing_on_the_runs_own_arguments_is_no_version_gap():
    """argparse's Namespace / a config container holds what the script parsed: an attribute it lacks is a flag
    the script never defines, not a library release without that API; a library object's missing attribute
    keeps its dependency-mismatch family."""
    frames = ['  File "/work/openrlhf/trainer/ppo_trainer.py", line 381, in save_logs_and_checkpoints',
              '    self.strategy.save_ckpt(self.actor.model, os.path.join(args.ckpt_path, "_actor"))']
    for obj in ("Namespace", "DictConfig", "EasyDict"):
        text = ("Traceback (most recent call last):\n" + "\n".join(frames) +
                f"\nAttributeError: '{obj}' object has no attribute 'ckpt_path'\n")
        _, top = _top(text)
        assert (top.rule_id, top.category) == ("unknown", "unknown"), (obj, top.captures)
    lib = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.10/site-packages/peft/tuners/lora/model.py", line 402, in merge_and_unload\n'
           "    self.model.merge()\nAttributeError: 'LlamaForCausalLM' object has no attribute 'merge'\n")
    _, top = _top(lib)
    assert (top.rule_id, top.category) == ("unknown", "dependency-mismatch")


def _dataset_fetch_crash(headline: str, getitem_file: str = "/ws/LLaVA/llava/train/train.py") -> str:
    return "\n".join([
        "{'loss': 0.9298, 'learning_rate': 2.56e-06, 'epoch': 0.0}",
        "Traceback (most recent call last):",
        '  File "/ws/LLaVA/llava/train/train_mem.py", line 13, in <module>',
        "    train()",
        '  File "/py/site-packages/torch/utils/data/_utils/fetch.py", line 51, in fetch',
        "    data = [self.dataset[idx] for idx in possibly_batched_index]",
        f'  File "{getitem_file}", line 680, in __getitem__',
        "    image = load_image(os.path.join(image_folder, image_file))",
        f'  File "{getitem_file}", line 610, in load_image',
        "    return Image.open(path).convert('RGB')",
        '  File "/py/site-packages/PIL/Image.py", line 3243, in open',
        '    fp = builtins.open(filename, "rb")',
        headline, ""])


def test_a_file_missing_while_a_dataset_fetches_a_sample_is_a_data_defect():
    # the annotations name an image the data folder holds under another extension; the fetcher is four frames up
    _, top = _top(_dataset_fetch_crash(
        "FileNotFoundError: [Errno 2] No such file or directory: '/ws/data/ocr_vqa/images/782118577.jpg'"))
    assert top.rule_id == "unknown" and top.category == "data-corrupt"


def test_a_weights_file_missing_under_a_dataset_keeps_no_data_reading():
    # a dataset that loads a tokenizer or a checkpoint in __getitem__: the shape does not read it as a sample
    from llmtriage.detect.family import shape_cues
    calls = ["/app/train.py <module>", "/app/data.py __getitem__"]
    for msg in ("[Errno 2] No such file or directory: '/ws/ckpt/encoder.safetensors'",
                "[Errno 2] No such file or directory: '/ws/models/llama/tokenizer.model'"):
        assert "data-corrupt" not in [s[0] for s in shape_cues("FileNotFoundError", msg, ["/app/data.py"], "", calls)]
    # nor is a file missing outside any Dataset fetch
    calls = ["/app/train.py <module>", "/app/train.py main"]
    assert shape_cues("FileNotFoundError", "[Errno 2] No such file or directory: '/ws/a.jpg'", ["/app/train.py"], "", calls) == []


def test_an_attribute_read_before_the_constructor_set_it_is_no_version_gap():
    # a Ray actor's __init__ calls its own method, which reads self.dataset_iter before __init__ assigns it
    from llmtriage.detect.family import shape_cues
    msg = "'DynamicSamplingScheduler' object has no attribute 'dataset_iter'"
    f = "/ws/ROLL/roll/distributed/scheduler/generate_scheduler.py"
    calls = ["/ws/ROLL/start.py <module>", f"{f} __init__", f"{f} get_next_dataset_item"]
    got = dict((s[2], s[1]) for s in shape_cues("AttributeError", msg, [f, f], "if self.dataset_iter is None:", calls))
    assert got.get("AttributeError on the class's own state") == -2
    # the same error from a caller's object (not self), or with no constructor of that file on the stack, keeps its reading
    for code, stack in (("it = sched.dataset_iter", calls), ("if self.dataset_iter is None:", calls[:1] + calls[2:])):
        names = [s[2] for s in shape_cues("AttributeError", msg, [f, f], code, stack)]
        assert "AttributeError on the class's own state" not in names
    # read in the constructor itself: an attribute a base class or a build step was to set (a release gap)
    names = [s[2] for s in shape_cues("AttributeError", "'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'",
                                      ["/py/deepspeed/ops/adam/cpu_adam.py"], "self.ds_opt_adam.create_adam(self.opt_id)",
                                      ["/app/train.py <module>", "/py/deepspeed/ops/adam/cpu_adam.py __init__"])]
    assert "AttributeError on the class's own state" not in names


@pytest.mark.parametrize("text", [
    "pydantic.errors.PydanticImportError: `BaseSettings` has been moved to the `pydantic-settings` package. "
    "See https://docs.pydantic.dev/2.0.2/migration/#basesettings-has-moved-to-pydantic-settings for more details.",
    "pydantic.errors.PydanticImportError: `pydantic:ConstrainedFloat` has been removed in V2.",
    "TypeError: `dumps_kwargs` keyword arguments are no longer supported.",
    "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",
])
def test_an_api_gone_from_the_installed_release_is_a_version_mismatch(text):
    # the library says the caller's API was moved, removed or dropped (pydantic 2, NumPy 2), or a union
    # annotation of classes met a Python older than 3.10
    got = family_of(text)
    assert got is not None and got[0] == "dependency-mismatch", scores(text)[:3]


@pytest.mark.parametrize("text", [
    "TypeError: unsupported operand type(s) for |: 'Tensor' and 'NoneType'",   # a runtime `or` of values
    "ValueError: the cache is no longer valid",
    "TypeError: 'type' object is not subscriptable",                         # needs the annotation line (a shape)
])
def test_near_misses_of_an_api_gone_name_no_family(text):
    assert family_of(text) is None, scores(text)[:3]


def test_type_hint_syntax_newer_than_the_interpreter_is_placed_only_on_an_annotation():
    from llmtriage.detect.family import shape_cues
    files = ["/srv/app.py", "/usr/local/lib/python3.8/dist-packages/vllm/entrypoints/openai/serving_completion.py"]
    fams = lambda msg, code: [s[0] for s in shape_cues("TypeError", msg, files, code)]
    assert fams("'type' object is not subscriptable", "TypeTokenIDs = list[int]") == ["dependency-mismatch"]
    assert fams("'type' object is not subscriptable", "exc_type: Optional[type[BaseException]],") == ["dependency-mismatch"]
    assert fams("'type' object is not subscriptable", ") -> OrderedDict[str, torch.Tensor]:") == ["dependency-mismatch"]
    assert fams("unsupported operand type(s) for |: 'type' and 'NoneType'",
                "attn_logits_soft_cap: float | None = None):") == ["dependency-mismatch"]
    # the same words on a runtime expression (indexing a class by mistake) are a code bug
    assert fams("'type' object is not subscriptable", 'x = cfg["types"][idx]') == []
    assert fams("'type' object is not subscriptable", "") == []


def test_the_verdict_places_a_module_level_builtin_generic_on_an_old_python():
    text = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.8/runpy.py", line 87, in _run_code\n'
            "    exec(code, run_globals)\n"
            '  File "/usr/local/lib/python3.8/dist-packages/vllm/entrypoints/openai/serving_completion.py", line 22, in <module>\n'
            "    TypeTokenIDs = list[int]\n"
            "TypeError: 'type' object is not subscriptable\n")
    _, top = _top(text)
    assert (top.rule_id, top.category, top.confidence) == ("unknown", "dependency-mismatch", "low")
    # a user script indexing a class at run time stays plainly unknown
    bug = text.replace("TypeTokenIDs = list[int]", "ids = token_types[i]")
    _, top = _top(bug)
    assert (top.rule_id, top.category) == ("unknown", "unknown")


def test_a_rotary_shape_error_under_a_quantizers_layer_replay_is_a_release_pairing():
    from llmtriage.detect.family import shape_cues
    msg = "The size of tensor a (32) must match the size of tensor b (64) at non-singleton dimension 3"
    tf = "/py/site-packages/transformers/models/llama/modeling_llama.py"
    files = ["/py/site-packages/optimum/gptq/quantizer.py", "/py/site-packages/transformers/modeling_layers.py", tf]
    calls = [f"{files[0]} quantize_model", f"{files[1]} __call__", f"{tf} apply_rotary_pos_emb"]
    rope = "q_embed = (q * cos) + (rotate_half(q) * sin)"
    assert "dependency-mismatch" in [s[0] for s in shape_cues("RuntimeError", msg, files, rope, calls)]
    # the same words under the quantizer on another line (an MLP or a mask) say nothing about the pairing
    assert "dependency-mismatch" not in [s[0] for s in shape_cues("RuntimeError", msg, files, "x = x + residual", calls)]
    # rotary code run by a plain training step, no quantizer on the stack
    plain = ["/repo/train.py main", f"{tf} apply_rotary_pos_emb"]
    assert "dependency-mismatch" not in [s[0] for s in shape_cues("RuntimeError", msg, [tf], rope, plain)]
