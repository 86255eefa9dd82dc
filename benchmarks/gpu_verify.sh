#!/bin/bash
# The CUDA reproducers in one call on a lent GPU machine (see README "Reproducers"): verify every CUDA
# scenario under the machine's transformers and, when `.whl4/` holds a transformers 4.x stack, under that
# too, merging both into one record. Run from the repository root:
#   bash benchmarks/gpu_verify.sh [OUTDIR]        (OUTDIR defaults to $OUT, else ./gpu-out)
# Wheels the machine lacks travel in `.whl/` (pydantic, pydantic-core, annotated-types, typing-inspection,
# google-re2 for its Python), `.whl4/` optional (transformers 4.57.x + the tokenizers and huggingface_hub it
# pins). The project is imported from a copy laid out as the installed package (no build step there).
# VERIFY_TIMEOUT (seconds, default 300) bounds each transformers stack's verify run; SCENARIOS (names,
# space-separated) limits the run to those scenarios.
# Afterwards copy OUTDIR/verified.json over rules/verified.json and review the diff.
set -o pipefail
OUTDIR=${1:-${OUT:-gpu-out}}
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY=${PYTHON:-python3}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; $PY --version; } > "$OUTDIR/env.txt" 2>&1
SITE=/tmp/llmtriage-site
rm -rf "$SITE" /tmp/llmtriage-pkg /tmp/llmtriage-logs && mkdir -p "$SITE" /tmp/llmtriage-pkg
if ls .whl/*.whl > /dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl || exit 3
fi
cp -r analyzer /tmp/llmtriage-pkg/llmtriage && cp -r reproducers /tmp/llmtriage-pkg/llmtriage/reproducers \
  && cp -r rules /tmp/llmtriage-pkg/llmtriage/rules || exit 3
export PYTHONPATH=/tmp/llmtriage-pkg:$SITE
$PY -c "import llmtriage, torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())" >> "$OUTDIR/env.txt" 2>&1
cat "$OUTDIR/env.txt"
cp rules/verified.json "$OUTDIR/verified.json"
rc=0
verify() {  # $1: label, $2: PYTHONPATH
  PYTHONPATH=$2 timeout ${VERIFY_TIMEOUT:-300} $PY -m llmtriage verify $SCENARIOS --device cuda -j 6 -q --format json \
    --save-logs "/tmp/llmtriage-logs/$1" --record-file "$OUTDIR/verified.json" > "$OUTDIR/verify-$1.json"
  local r=$?; echo "verify $1: exit $r"; [ $r -eq 0 ] || rc=1
}
verify transformers-image "$PYTHONPATH"
if ls .whl4/*.whl > /dev/null 2>&1; then
  rm -rf /tmp/llmtriage-site4 && $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/llmtriage-site4 .whl4/*.whl \
    && verify transformers-4 "/tmp/llmtriage-pkg:/tmp/llmtriage-site4:$SITE"
fi
tar czf "$OUTDIR/logs.tgz" -C /tmp llmtriage-logs
$PY - "$OUTDIR" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("verify-*.json")):
    try:
        d = json.loads(f.read_text())
    except ValueError as e:
        print(f.name, "unreadable:", e); continue
    print(f.name, json.dumps(d.get("totals", {})))
    for s in d.get("scenarios", []):
        if s.get("status") != "verified":
            print("  ", s.get("name"), s.get("status"), s.get("problems"))
PY
exit $rc
