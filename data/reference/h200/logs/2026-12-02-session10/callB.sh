#!/usr/bin/env bash
# Call B (session 10): the whole GPU pytest suite (--target solutions), the recorder's 5% test
# included, with the slowest tests listed. COMMIT: the local commit it ran.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
s=$SECONDS; timeout ${BUDGET_S:-560} python3 -m pytest tests -q --target solutions -p no:cacheprovider --durations=30 > $R/logs/gputests.txt 2>&1; echo "gputests rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
grep -E "passed|failed|error" $R/logs/gputests.txt | tail -n 5
grep -E "^(FAILED|ERROR)" $R/logs/gputests.txt | head -20
