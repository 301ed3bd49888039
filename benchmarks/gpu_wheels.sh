#!/usr/bin/env bash
# Fetch, on a development machine with a package index, the packages benchmarks/gpu.sh needs on a
# CUDA machine that cannot download anything and already has PyTorch (with CUDA), Triton and
# transformers. They go to .gpu-wheels/ (ignored by git), built for CPython $PYVER on x86-64
# Linux: the pure-Python packages the app and the tests import beyond those three, and two small
# binary ones (pandas, psutil). Hugging Face `datasets` is not fetched: TransformerLens imports it
# when it loads, but nothing here uses it, and with pyarrow it would weigh 45 MB; gpu.sh puts a
# stand-in in its place. Checks that the whole folder stays under 60 MiB.
#
#   benchmarks/gpu_wheels.sh            # CPython 3.12
#   PYVER=3.11 benchmarks/gpu_wheels.sh # another interpreter version
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${PYVER:-3.12}
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${GPU_WHEELS:-.gpu-wheels}
LIMIT_MIB=60

# The versions this repository runs (requirements.txt pins the first block; the rest are the
# versions of its development environment).
PACKAGES=(
  transformer-lens==4.3.0 accelerate==1.15.0 jaxtyping==0.3.11 wadler-lindig==0.1.8
  gguf==0.19.0 pandas==3.1.1
  beartype==0.23.1 einops==0.8.2 fancy-einsum==0.0.3 typeguard==4.6.1
  typing-extensions==4.16.0 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2
  pygments==2.21.0 psutil==7.2.2 python-dateutil==4.0.0 tzdata==2026.6
  pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 hypothesis==6.170.15 sortedcontainers==2.4.0
)

mkdir -p "$OUT"
echo "fetching ${#PACKAGES[@]} wheels for CPython $PYVER (manylinux x86_64) into $OUT/"
"$PYTHON" -m pip download --quiet --dest "$OUT" --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any \
  "${PACKAGES[@]}"

count=$(find "$OUT" -name '*.whl' | wc -l)
bytes=$(du -cb "$OUT"/*.whl | tail -1 | cut -f1)
mib=$((bytes / 1048576))
echo "$count wheels, $((bytes / 1024)) KiB in $OUT/"
if ((bytes >= LIMIT_MIB * 1048576)); then
  echo "error: $mib MiB is over the $LIMIT_MIB MiB these wheels may take" >&2
  exit 1
fi
echo "under $LIMIT_MIB MiB: copy the repository with $OUT/ to the GPU machine and run benchmarks/gpu.sh"
