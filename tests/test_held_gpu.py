"""A CUDA OOM on a GPU another process holds (analyzer/detect/held_gpu.py, rules/verdict.yaml
`oom_on_held_gpu`): the free-the-GPU fix first, and after a failed GPU selection the OOM is its symptom."""
from llmtriage import analyze
from llmtriage.detect.held_gpu import size_bytes

OOM = ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 1 has a total capacity "
       "of 79.10 GiB of which 96.06 MiB is free. Process 88123 has {held} memory in use. Including non-PyTorch memory, "
       "this process has {own} memory in use. Of the allocated memory 11.20 GiB is allocated by PyTorch, and 1.10 GiB "
       "is reserved by PyTorch but unallocated.\n")
SLOT = ("Detected CUDA_VISIBLE_DEVICES=6,7: setting --include=localhost:6,7\n"
        "ValueError: No slot '6' specified on host 'localhost'\n"
        "+ deepspeed train.py --deepspeed ds.json\n"
        "[INFO] [launch.py:168:main] Setting CUDA_VISIBLE_DEVICES=0,1\n")


def _errors(text, lang=None):
    rep = analyze(text, lang=lang) if lang else analyze(text)
    return [f for f in rep.findings if f.severity == "error"], rep


def test_size_bytes():
    assert size_bytes("1.5 GiB") == 1.5 * (1 << 30) and size_bytes("512 bytes") == 512 and size_bytes("lots") is None


def test_an_oom_on_a_gpu_mostly_held_by_another_process_frees_that_gpu_first():
    errors, _ = _errors(OOM.format(held="66.12 GiB", own="12.80 GiB"))
    top = errors[0]
    assert top.rule_id == "torch-cuda-oom" and top.role == "cause"
    assert top.fixes[0]["title"] == "Free the GPU held by another process"


def test_an_oom_with_a_small_neighbour_keeps_the_batch_size_advice_first():
    errors, _ = _errors(OOM.format(held="6.10 GiB", own="72.80 GiB"))
    assert errors[0].rule_id == "torch-cuda-oom" and errors[0].fixes[0]["title"] != "Free the GPU held by another process"


def test_an_oom_on_another_jobs_gpu_after_a_failed_gpu_selection_is_its_symptom():
    errors, rep = _errors(SLOT + OOM.format(held="66.12 GiB", own="12.80 GiB"))
    assert errors[0].rule_id == "deepspeed-include-slot-not-visible", [(f.rule_id, f.role) for f in errors]
    oom = next(f for f in rep.findings if f.rule_id == "torch-cuda-oom")
    assert oom.role == "symptom" and oom.judgement["context"] == "oom-on-held-gpu"
    assert "88123" in oom.judgement["reason"] and rep.extra["action"] == "fix"


def test_the_free_the_gpu_fix_is_found_by_its_chinese_title_too():
    errors, _ = _errors(OOM.format(held="66.12 GiB", own="12.80 GiB"), lang="zh")
    assert errors[0].fixes[0]["title"] == "释放被其他进程占用的 GPU"
