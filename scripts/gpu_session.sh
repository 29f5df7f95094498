#!/usr/bin/env bash
# One GPU session: the test suite on the GPU, then every lab's benchmarks, recorded with provenance.
# This is how data/reference/h200/ was made (on a lent H200 whose image lacks our pins):
#   bash scripts/gpu_session.sh OUTDIR [LAB ...]
# It leaves OUTDIR/session.tgz holding reference/*.json and the logs (TOUR=1: live figures too).
set -uo pipefail
out=${1:?usage: gpu_session.sh OUTDIR [LAB ...]}; shift
mkdir -p "$out/reference" "$out/figures" "$out/logs"
export PYTHONUNBUFFERED=1 KERNELLAB_DEVICE=gpu
if ls .whl/*.whl > /dev/null 2>&1; then   # numpy 2.4.x and numba-cuda 0.30.4 for an image that has others
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/logs/install.txt" 2>&1
python3 -m kernellab.cli info 2>&1 | tee "$out/logs/info.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  | tee -a "$out/logs/info.txt"
if [ -z "${SKIP_TESTS:-}" ]; then
  python3 -m pytest --target solutions -q -p no:cacheprovider --results "$out/logs/results-gpu.json" \
    > "$out/logs/pytest-gpu.txt" 2>&1
  tail -n 30 "$out/logs/pytest-gpu.txt"
fi
KERNELLAB_TARGET=solutions python3 -m kernellab.cli bench "$@" --out "$out/reference" 2>&1 \
  | tee "$out/logs/bench.txt"
if [ -n "${TOUR:-}" ]; then
  KERNELLAB_TARGET=solutions python3 -m kernellab.cli tour "$@" --figures "$out/figures" \
    > "$out/logs/tour.txt" 2>&1
  tail -n 15 "$out/logs/tour.txt"
fi
tar czf "$out/session.tgz" -C "$out" reference figures logs
