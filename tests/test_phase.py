"""Phase and last step for every report (report.extra['phase'], report.extra['step'])."""
from __future__ import annotations

import pytest

from llmtriage import scan_source
from llmtriage.detect.phase import PHASES, classify_bar

TB = ("Traceback (most recent call last):\n  File \"/home/u/train.py\", line 88, in <module>\n    main()\n")

CASES = {
    "environment": ("Python 3.10.12\nCollecting flash-attn\n" + TB + "ModuleNotFoundError: No module named 'flash_attn'\n", None),
    "launch": ("W0501 10:00:00.000 1234 torch/distributed/run.py:779] Setting OMP_NUM_THREADS environment variable\n"
               "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n"
               "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500\n", None),
    "model-loading": ("loading configuration file config.json\nLoading checkpoint shards:  33%|###3      | 1/3 [00:04<00:09,  4.51s/it]\n"
                      + TB + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of 23.64 GiB of which 20.00 MiB is free.\n", None),
    "data-loading": ("Loading checkpoint shards: 100%|##########| 2/2 [00:03<00:00,  1.6s/it]\n"
                     "Running tokenizer on dataset:  12%|#2        | 1000/8000 [00:02<00:14, 480.00 examples/s]\n"
                     + TB + "pyarrow.lib.ArrowInvalid: JSON parse error: Missing a closing quotation mark in string. in row 12\n", None),
    "training": ("***** Running training *****\n  Total optimization steps = 1000\n"
                 "  1%|          | 12/1000 [00:30<40:00,  2.4s/it]\n{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 2e-05, 'epoch': 0.01}\n"
                 "  1%|1         | 13/1000 [00:33<40:00,  2.4s/it]\n" + TB +
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.14 GiB of which 1.00 GiB is free.\n", 13),
    "evaluation": ("***** Running training *****\n  Total optimization steps = 1000\n"
                   " 50%|#####     | 500/1000 [20:00<20:00,  2.4s/it]\n***** Running Evaluation *****\n  Num examples = 2000\n"
                   " 40%|####      | 100/250 [00:30<00:45,  3.3it/s]\n" + TB +
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 79.14 GiB of which 1.00 GiB is free.\n", 500),
    "checkpoint-save": ("***** Running training *****\n 50%|#####     | 500/1000 [20:00<20:00,  2.4s/it]\n"
                        "Saving model checkpoint to out/checkpoint-500\n" + TB +
                        "RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 2348928 vs 2348816\n"
                        "OSError: [Errno 28] No space left on device\n", 500),
    "generation": ("INFO 05-01 10:00:00 llm_engine.py:100] Initializing an LLM engine (v0.6.3) with config: model='m'\n"
                   "Processed prompts:  40%|####      | 40/100 [00:10<00:15, 4.0it/s]\n" + TB +
                   "ValueError: The decoder prompt (length 9000) is longer than the maximum model length of 8192.\n", None),
}


@pytest.mark.parametrize("phase", list(CASES))
def test_phase_and_step(engine, phase):
    text, step = CASES[phase]
    rep = scan_source(engine, text)
    assert rep.extra["phase"] == phase, [f.rule_id for f in rep.findings]
    assert rep.extra["step"] == step
    assert phase in PHASES


def test_unknown_when_nothing_tells(engine):
    rep = scan_source(engine, "hello\nworld\n")
    assert rep.extra["phase"] == "unknown" and rep.extra["step"] is None


def test_launcher_noise_after_the_crash_does_not_change_the_phase(engine):
    text = CASES["training"][0] + "".join(
        f"W0501 10:00:0{i}.000 1 torch/distributed/elastic/multiprocessing/api.py:908] Sending process {i} closing signal SIGTERM\n"
        for i in range(5)) + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    assert scan_source(engine, text).extra["phase"] == "training"


def test_a_custom_loop_s_snapshot_is_a_checkpoint_save(engine):
    """A training loop's own save wording ("snapshot(step=N): all ranks writing partials to DIR") is the
    checkpoint-save phase: a collective that times out there is the save's, not a step's (its action is fix)."""
    text = ("[rank0] step 4990 | loss 2.114\n[rank0] snapshot(step=5000): all ranks writing partials to /scratch/p/\n"
            "[rank0] snapshot: assembling canonical state from 144 partials on rank 0 ...\n"
            "[rank7]:[E528 23:01:20.1 ProcessGroupNCCL.cpp:632] [Rank 7] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=60007, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.\n")
    rep = scan_source(engine, text)
    assert rep.extra["phase"] == "checkpoint-save"
    assert rep.extra["action"] == "fix", rep.extra.get("action_reason")


def test_a_plain_saving_model_line_and_a_full_state_dict_gather_are_a_checkpoint_save(engine):
    """A script's own lower-case save lines ("--> saving model ...", "rank 0 gathering full state_dict")
    are the checkpoint-save phase, so the allgather that times out behind them is the save's (fix)."""
    for save in ("--> saving model ...\n", "[rank0] gathering the full state dict on rank 0 (offload_to_cpu=True)\n"):
        text = ("Evaluating: 100%|##########| 40/40 [00:20<00:00, 2.0it/s]\n--> epoch 3 done, val loss 0.71\n" + save +
                "[E ProcessGroupNCCL.cpp:737] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=90211, "
                "OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 1800554 milliseconds before timing out.\n")
        rep = scan_source(engine, text)
        assert rep.extra["phase"] == "checkpoint-save", save
        assert rep.extra["action"] == "fix", rep.extra.get("action_reason")


def test_a_collective_timeout_while_one_rank_evaluates_a_checkpoint_is_fix(engine):
    """A script's own lower-case eval line ("evaluating checkpoint X on rank 0") is the evaluation phase; a
    collective that times out behind it is the evaluation's (rank 0 alone outlasting the timeout): fix."""
    text = ("{ Epoch:[  4/ 20], step:[ 4720/ 4720], loss: 1.1290, per_step_time: 1109ms\n"
            "Epoch 4 finished, evaluating checkpoint ./output/ckpt/rank_0/net-4_4720.ckpt on rank 0\n"
            "EE9999 The error from device(chipId:3, dieId:0), serial number is 1, event wait timeout occurred during "
            "task execution, stream_id:122, sq_id:122, task_id:790, event_id=73, timeout=1980.\n"
            "RuntimeError: Sync stream failed:Ascend_0\n")
    rep = scan_source(engine, text)
    assert rep.extra["phase"] == "evaluation"
    assert rep.findings[0].category == "nccl-timeout"
    assert rep.extra["action"] == "fix", rep.extra.get("action_reason")


def test_bar_labels():
    assert classify_bar("Loading checkpoint shards") == "model-loading"
    assert classify_bar("Map (num_proc=8)") == "data-loading"
    assert classify_bar("Evaluating") == "evaluation"
    assert classify_bar("Processed prompts") == "generation"
    assert classify_bar("Epoch 3") == "training"


def test_json_and_human_output_carry_phase_and_step(engine):
    import io

    from llmtriage.report.render import render_human, render_json

    rep = scan_source(engine, CASES["training"][0])
    out = io.StringIO()
    render_json([rep], out)
    assert '"phase": "training"' in out.getvalue() and '"step": 13' in out.getvalue()
    out = io.StringIO()
    render_human([rep], out)
    assert "(training, step 13)" in out.getvalue()


def test_a_death_inside_a_save_function_is_the_checkpoint_save_phase(engine):
    """The traceback of the exception that ended the job runs through a save (save_logs_and_checkpoints):
    the job died saving, whatever marker the log printed last (here an inference engine's start-up lines);
    an RL trainer's "Episode" bar is its training loop."""
    text = ("Loading checkpoint shards: 100%|##########| 2/2 [00:06<00:00,  3.14s/it]\n"
            "INFO 03-27 08:16:41 llm_engine.py:322] # GPU blocks: 2781, # CPU blocks: 512\n"
            "Episode [1/2]: 100%|##########| 1024/1024 [11:42:16<00:00, 41.15s/it]\n"
            "Traceback (most recent call last):\n"
            '  File "/work/train_ppo.py", line 315, in <module>\n    train(args)\n'
            '  File "/work/openrlhf/trainer/ppo_trainer.py", line 195, in fit\n'
            "    self.save_logs_and_checkpoints(args, global_step, pbar, logs_dict)\n"
            '  File "/work/openrlhf/trainer/ppo_trainer.py", line 381, in save_logs_and_checkpoints\n'
            '    self.strategy.save_ckpt(self.actor.model, os.path.join(args.ckpt_path, "_actor"))\n'
            "AttributeError: 'Namespace' object has no attribute 'ckpt_path'\n")
    assert scan_source(engine, text).extra["phase"] == "checkpoint-save"
    # the same death raised in a training step (no save frame) is not a save
    step = text.replace("save_logs_and_checkpoints", "training_step")
    assert scan_source(engine, step).extra["phase"] != "checkpoint-save"
    assert classify_bar("Episode [1/2]") == "training"
