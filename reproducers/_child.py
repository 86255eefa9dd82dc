"""Child-side kit for reproducer variants.

This file runs only inside the child interpreter started by the harness
(``python -u reproducers/<scenario>.py <variant> <device>``). It imports torch and
transformers lazily, builds tiny models and a locally defined tokenizer (no downloads),
and records the variant's observations in ``result.json`` in the working directory, so the
captured stdout/stderr stays exactly what a user would see.
"""
from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

WORDS = (
    "the a an model train training loss step data token tokens batch memory layer weight "
    "weights grad gradient checkpoint file load save error fix run cpu gpu text small tiny "
    "fast slow good bad new old one two three four five six seven eight nine ten is was "
    "and or not with without of to in on for from by at as it this that we you they "
    "learn learning rate value values large long short sequence length input output"
).split()
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]


class Kit:
    """Helpers handed to every variant function."""

    def __init__(self, device: str, work: Path, scenario: str = "") -> None:
        self.device = device
        self.scenario = scenario
        self.work = work
        self._result: dict = {}

    # ------------------------------------------------------------ results
    def result(self, **kw) -> None:
        """Record observations for the parent's scenario check (written to result.json)."""
        self._result.update(kw)
        (self.work / "result.json").write_text(json.dumps(self._result, default=float))

    def skip(self, reason: str) -> None:
        """This machine cannot show the failure (no toolchain, no way to drop root...): end the
        variant and have `verify` report the scenario as skipped, not as passed or failed."""
        self.result(skipped=reason)
        print(f"[reproducer skipped: {reason}]")
        sys.exit(0)

    # ------------------------------------------------------------ data / tokenizer
    def text(self, n_words: int, seed: int = 0) -> str:
        rng = random.Random(seed)
        return " ".join(rng.choice(WORDS) for _ in range(n_words))

    def tokenizer(self, *, model_max_length: int = 64, pad: bool = True, extra_words=()):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        vocab = {w: i for i, w in enumerate(SPECIALS + WORDS + list(extra_words))}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        kw = dict(unk_token="<unk>", bos_token="<s>", eos_token="</s>")
        if pad:
            kw["pad_token"] = "<pad>"
        return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=model_max_length, **kw)

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + len(WORDS)

    # ------------------------------------------------------------ models
    def llama_config(self, **kw):
        from transformers import LlamaConfig

        base = dict(
            vocab_size=self.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
            pad_token_id=0, bos_token_id=2, eos_token_id=3, tie_word_embeddings=False,
        )
        base.update(kw)
        return LlamaConfig(**base)

    def llama(self, **kw):
        import torch
        from transformers import LlamaForCausalLM

        torch.manual_seed(0)
        return LlamaForCausalLM(self.llama_config(**kw))

    def gpt2(self, **kw):
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        base = dict(vocab_size=self.vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                    bos_token_id=2, eos_token_id=3, pad_token_id=0)
        base.update(kw)
        torch.manual_seed(0)
        return GPT2LMHeadModel(GPT2Config(**base))

    def generate(self, model, tok, prompt: str = "the model", new_tokens: int = 8) -> str:
        """Greedy generation on this device: the check that a loaded model really works."""
        import torch

        # no token_type_ids: transformers 4.x tokenizers return them and generate() then refuses them for
        # decoder-only models ("model_kwargs are not used by the model"); every reproducer asks the same
        enc = tok(prompt, return_tensors="pt", return_token_type_ids=False).to(self.device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
        text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        print("generated:", text)
        self.result(generated=text)
        return text

    def batch(self, n: int, seq: int, vocab: int | None = None, seed: int = 0):
        import torch

        g = torch.Generator().manual_seed(seed)
        return torch.randint(4, vocab or self.vocab_size, (n, seq), generator=g)

    # ------------------------------------------------------------ memory
    @staticmethod
    def _status_kib(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return 0

    def peak_mib(self) -> float:
        if self.device.startswith("cuda"):
            import torch

            return torch.cuda.max_memory_allocated() / 2**20
        return self._status_kib("VmPeak") / 1024

    def cap_memory(self, budget_mib: float) -> float:
        """Cap this process: RLIMIT_AS = VmSize + budget on the CPU, a memory fraction on CUDA.

        Returns the cap in MiB as seen by ``peak_mib`` (absolute VmPeak limit on the CPU,
        allocator bytes on CUDA). ``LLMTRIAGE_OOM_BUDGET_MIB=0`` disables the cap (calibration).
        """
        budget_mib = float(os.environ.get("LLMTRIAGE_OOM_BUDGET_MIB", budget_mib))
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            if budget_mib > 0:
                total = torch.cuda.get_device_properties(0).total_memory
                torch.cuda.set_per_process_memory_fraction((base + budget_mib * 2**20) / total, 0)
            self.result(cap_mib=base / 2**20 + budget_mib, base_mib=base / 2**20)
            return base / 2**20 + budget_mib
        import resource

        size_kib = self._status_kib("VmSize")
        cap = size_kib * 1024 + int(budget_mib * 2**20)
        if budget_mib > 0:
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        self.result(cap_mib=cap / 2**20, base_mib=size_kib / 1024)
        return cap / 2**20


def run_main(namespace: dict) -> None:
    """Entry point of a scenario file run as a script: ``<file> <variant> [device [scenario]]``."""
    variant = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    scenario = sys.argv[3] if len(sys.argv) > 3 else ""
    random.seed(0)
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    kit = Kit(device, Path.cwd(), scenario)
    fn = namespace[variant.replace("-", "_")]
    fn(kit)
    kit.result(completed=True)
