"""A job that died of symptoms only, whose single cause was judged recovered: that cause is the root cause again."""
from __future__ import annotations

import llmtriage

CLI_THEN_CLIENT = (
    "$ trl vllm-serve --model ckpts/qwen2.5-0.5b-sft\n"
    "usage: trl\n"
    "TRL CLI: error: argument command: invalid choice: 'vllm-serve' (choose from 'chat', 'dpo', 'env', 'grpo', 'kto', 'sft')\n"
    "$ accelerate launch --num_processes 3 train_grpo.py --config grpo.yaml\n"
    "Loading checkpoint shards: 100%|##########| 1/1 [00:00<00:00,  2.31it/s]\n"
    + "INFO:trl.extras.vllm_client:Server is not up yet. Retrying in 2.0 seconds...\n" * 4
    + "[rank0]: Traceback (most recent call last):\n"
    "[rank0]:   File \"/work/train_grpo.py\", line 88, in <module>\n"
    "[rank0]:     trainer = GRPOTrainer(model=model, args=args, train_dataset=ds)\n"
    "[rank0]:   File \"/opt/venv/lib/python3.11/site-packages/trl/extras/vllm_client.py\", line 121, in check_server\n"
    "[rank0]:     raise ConnectionError(\n"
    "[rank0]: ConnectionError: The vLLM server can't be reached at 0.0.0.0:8000 after 120 seconds. "
    "Make sure the server is running by running `trl vllm-serve`.\n"
)


def test_the_only_cause_before_a_symptom_death_is_not_recovered():
    rep = llmtriage.analyze(CLI_THEN_CLIENT)
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.rule_id == "cli-subcommand-unknown" and top.category == "dependency-mismatch"
    assert top.judgement["context"] == "symptom-death" and top.judgement["severity_was"] == "warning"
    # the client's give-up stays in the report as the consequence
    assert any(f.rule_id == "trl-vllm-server-unreachable" and f.role == "symptom" for f in rep.findings)


def test_a_recovered_cause_stays_a_warning_when_the_job_died_of_its_own_cause():
    # the same rejected command, but the job then dies of an exception no symptom stands for: that is the cause
    text = CLI_THEN_CLIENT.split("[rank0]: Traceback")[0] + (
        "Traceback (most recent call last):\n"
        "  File \"/work/train_grpo.py\", line 90, in <module>\n"
        "    reward = reward_fn(batch)\n"
        "ZeroDivisionError: division by zero\n")
    rep = llmtriage.analyze(text)
    cli = next(f for f in rep.findings if f.rule_id == "cli-subcommand-unknown")
    assert cli.severity == "warning" and cli.judgement["context"] != "symptom-death"
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.rule_id == "unknown"
