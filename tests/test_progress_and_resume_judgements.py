"""Judgements of what a job went on to do: serving stats and loop counters as progress, an fp16 scaler that settled,
a trained head or trained weights not restored on reload or resume."""
from __future__ import annotations

from llmtriage import analyze

_TRT_STATS = ('[TensorRT-LLM][INFO] {{"Active Request Count":{active},"Context Requests":2,"Free KV cache blocks":1012,'
              '"Generation Requests":36,"Iteration Counter":{it},"Max KV cache blocks":2342,"MicroBatch ID":0}}')
_TRT_REJECT = ("[TensorRT-LLM][ERROR] Cannot process new request: Prompt length (3072) exceeds maximum input length (2048) "
               "(/app/tensorrt_llm/cpp/tensorrt_llm/batch_manager/GptManager.cpp:246)")


def _trt_log(active_after: int) -> str:
    rows = [_TRT_STATS.format(active=38, it=18211), _TRT_STATS.format(active=41, it=18412), _TRT_REJECT]
    rows += [_TRT_STATS.format(active=active_after, it=18613 + 200 * i) for i in range(6)]
    return "\n".join(rows) + "\n"


def test_trtllm_stats_with_requests_in_flight_after_a_rejection_make_it_per_request():
    rep = analyze(_trt_log(40))
    f = next(f for f in rep.findings if f.rule_id == "trtllm-request-exceeds-engine-length")
    assert f.severity == "warning" and f.judgement["context"] == "request-rejected-job-went-on"
    assert not any(x.severity == "error" for x in rep.findings)


def test_trtllm_stats_of_an_idle_engine_are_no_serving():
    rep = analyze(_trt_log(0))
    f = next(f for f in rep.findings if f.rule_id == "trtllm-request-exceeds-engine-length")
    assert f.severity == "error"


def _ds_log(skips_after: bool) -> str:
    rows, scale, skipped = [], 65536.0, 0
    ts = "[2023-04-05 11:16:{:02d},102] [INFO] "
    for i in range(17):
        rows.append(ts.format(i % 60) + f"[stage_1_and_2.py:1769:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                    f"Attempted loss scale: {scale:.1f}, reducing to {scale / 2:.1f}")
        scale /= 2
        skipped += 1
    for step in range(20, 320, 10):
        skipped += 9 if skips_after else (1 if step == 140 else 0)
        rows.append(ts.format(step % 60) + f"[logging.py:75:log_dist] [Rank 0] step={step}, skipped={min(skipped, step)}, "
                    "lr=[1e-05], mom=[[0.9, 0.95]]")
        rows.append(f"loss:{3.9 - step * 0.006:.6f}, global_step:{step}")
    return "\n".join(rows) + "\n"


def test_loss_scale_at_minimum_then_deepspeed_steps_again_is_a_warning():
    rep = analyze(_ds_log(False))
    f = next(f for f in rep.findings if f.rule_id == "loss-scale-at-minimum")
    assert f.severity == "warning" and f.judgement["context"] == "scaler-settled"


def test_loss_scale_at_minimum_with_skips_keeping_pace_stays_an_error():
    rep = analyze(_ds_log(True))
    f = next(f for f in rep.findings if f.rule_id == "loss-scale-at-minimum")
    assert f.severity == "error"


_VISDOM_TB = """Traceback (most recent call last):
  File "/home/u/env/lib/python3.7/site-packages/visdom/__init__.py", line 711, in _send
    data=json.dumps(msg),
  File "/home/u/env/lib/python3.7/site-packages/requests/adapters.py", line 516, in send
    raise ConnectionError(e, request=request)
requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', port=8097): Max retries exceeded with url: /events
"""


def test_epoch_bracket_lines_after_a_plotting_exception_are_progress():
    rows = []
    for epoch in range(3):
        rows.append(_VISDOM_TB)
        rows += [f"NET_TRAIN train [{epoch}: {i}/200] emd1: {0.08 - epoch * 0.01:.6f} emd2: 0.0659" for i in range(0, 200, 50)]
        rows.append("saving net...")
    rep = analyze("\n".join(rows) + "\n")
    assert rep.extra["status"] != "crashed" and not any(f.severity == "error" for f in rep.findings)
    rows = [r for r in rows if not r.startswith("NET_TRAIN")] + [_VISDOM_TB]
    assert analyze("\n".join(rows) + "\n").extra["status"] == "crashed"     # no counter lines: the exception ends it


def test_a_loop_that_reached_its_last_epoch_finished():
    rows = [f"(epoch: {e}, iters: {i}, time: 0.210) D_A: 0.180 G_A: 0.566" for e in (199, 200) for i in (100, 500)]
    rows.insert(2, "End of epoch 199 / 200 \t Time Taken: 245 sec")
    rows.insert(3, "requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', port=8097): Max retries exceeded")
    rows.append("End of epoch 200 / 200 \t Time Taken: 238 sec")
    assert analyze("\n".join(rows) + "\n").extra["status"] == "finished"
    assert analyze("\n".join(rows[:-1]) + "\nEnd of epoch 200 / 300 \t Time Taken: 238 sec\n").extra["status"] != "finished"


def test_work_units_done_after_a_ray_worker_death_warning_are_progress():
    warn = ("2023-06-07 15:23:25,642\tWARNING worker.py:1986 -- A worker died or was killed while executing a task by an "
            "unexpected system error. To troubleshoot the problem, check the logs for the dead worker.")
    rows = [f"[pipeline] {n}/400 shards done ({n * 2511} records)" for n in range(10, 110, 10)] + [warn]
    rows += [f"[pipeline] {n}/400 shards done ({n * 2511} records)" for n in range(110, 410, 10)]
    rep = analyze("\n".join(rows) + "\n")
    assert rep.extra["status"] != "crashed" and not any(f.severity == "error" for f in rep.findings)


_HEAD = ("Some weights of LlamaForSequenceClassification were not initialized from the model checkpoint at "
         "meta-llama/Llama-2-7b-hf and are newly initialized: ['score.weight']\n"
         "You should probably TRAIN this model on a down-stream task to be able to use it for predictions and inference.\n")


def _reload_log(after_f1: float, after_micro: float) -> str:
    rows = [_HEAD]
    rows += [f"{{'loss': {0.39 - i * 0.02:.4f}, 'learning_rate': 9e-05, 'epoch': {0.1 * (i + 1):.2f}}}\n" for i in range(12)]
    rows.append("{'eval_loss': 0.0842, 'eval_f1_macro': 0.5104, 'eval_f1_micro': 0.6511, 'eval_runtime': 267.9, 'epoch': 2.0}\n")
    rows.append("{'train_runtime': 34611.2, 'train_samples_per_second': 0.347, 'train_loss': 0.148, 'epoch': 2.0}\n")
    rows.append("INFO  ===== inference pipeline: reload from ckpt/final =====\n" + _HEAD)
    rows.append(f"INFO  reload eval: f1_macro={after_f1} f1_micro={after_micro}\n")
    return "".join(rows)


def test_head_newly_initialized_again_after_training_with_scores_collapsed_is_state_dict_keys():
    rep = analyze(_reload_log(0.1303, 0.1817))
    top = rep.findings[0]
    assert top.rule_id == "metric-head-reinitialised-on-reload" and top.category == "state-dict-keys"
    assert top.severity == "error" and "0.1303" in top.message and "0.5104" in top.message


def test_head_warning_on_a_reload_that_scores_like_training_is_expected():
    """PEFT's modules_to_save head is loaded from the adapter after the base model warned: the scores match."""
    rep = analyze(_reload_log(0.5031, 0.6422))
    assert not any(f.severity == "error" for f in rep.findings)


def _megatron_resume(after: float) -> str:
    row = (" iteration {it:8d}/     100 | consumed samples: {s:12d} | elapsed time per iteration (ms): 2169.7 | "
           "learning rate: 1.000000E-04 | global batch size:    64 | lm loss: {loss:.6E} | loss scale: 1.0 |\n")
    first = [10.9, 9.4, 7.9, 5.9, 4.0, 2.6, 1.5, 0.87, 0.52, 0.31]
    out = "".join(row.format(it=i + 1, s=64 * (i + 1), loss=v) for i, v in enumerate(first))
    out += "saving checkpoint at iteration      10 to ./ckpt in torch_dist format\n"
    out += " loading distributed checkpoint from ./ckpt at iteration 10\n"
    out += "  successfully loaded checkpoint from ./ckpt [ t 1/1, p 1/1 ] at iteration 10\n"
    out += "".join(row.format(it=11 + i, s=64 * (11 + i), loss=after - 0.05 * i) for i in range(8))
    return out


def test_loss_back_near_its_start_after_a_resume_is_a_reset_of_the_weights():
    top = analyze(_megatron_resume(10.02)).findings[0]
    assert top.rule_id == "metric-loss-reset-at-resume" and top.category == "state-dict-keys" and top.severity == "error"


def test_loss_a_little_higher_after_a_resume_is_the_optimizer_warming_up():
    assert not any(f.rule_id == "metric-loss-reset-at-resume" for f in analyze(_megatron_resume(0.95)).findings)
