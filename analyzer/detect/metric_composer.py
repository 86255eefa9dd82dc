"""MosaicML Composer's console logger (llm-foundry), read into a `metrics.MetricTracker` (`self`):
one record spread over several lines, a header with the batch counter and one indented line per metric

    [epoch=1][batch=500/20000]:
    	 Train time/batch: 500
    	 Train loss/train/total: 11.4875
    	 Train l2_norm/grad/global: 1.2128
    	 Train lr-DecoupledAdamW/group0: 0.0006

The record is the header's batch, the loss line's value (and line number), the grad norm and the
first parameter group's learning rate printed under the same header (a record cut by a block
boundary keeps what its own block shows). The whole-model gradient norm goes by several keys:
`l2_norm/grad/global` (OptimizerMonitor), `grad_l2_norm/step` (the older GradMonitor) and a custom
callback's `grad(ient)_norm(s)/.../model|global|total`; per-layer norms (`l2_norm/grad/<layer>`,
`layer_grad_l2_norm/...`) are not the model's.
"""
from __future__ import annotations

import re
from typing import Any

_HEADER = re.compile(rb"\[batch=(\d+)/\d+\]:[ \t]*$", re.M)
_FIELD = re.compile(rb"(?<![\w/])Train (loss/train/total|l2_norm/grad/global|grad_l2_norm/step|"
                    rb"grad(?:ient)?_norms?/(?:l2_norm/)?(?:model|global|total)|lr-[\w.]+/group0): *"
                    rb"([-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))[ \t]*$", re.M)
_INDEX = {b"loss/train/total": 1}


def scan_composer(self: Any, lines: bytes, view: bytes, line_base: int) -> None:
    heads = list(_HEADER.finditer(view))
    for k, h in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(view)
        rec: list[Any] = [int(h.group(1)), None, None, None, None]
        loss_at = -1
        for m in _FIELD.finditer(view, h.end(), end):
            i = _INDEX.get(m.group(1), 3 if m.group(1).startswith(b"lr-") else 2)
            if rec[i] is None:
                rec[i] = float(m.group(2))
                if i == 1:
                    loss_at = m.start()
        if rec[1] is None:
            continue
        self.add(line_base + lines.count(b"\n", 0, loss_at), tuple(rec))
