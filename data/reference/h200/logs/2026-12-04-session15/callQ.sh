#!/usr/bin/env bash
# Call Q (session 15): why the recorder's 5% test read +6.9% in call P's subset where the bench read
# +1.7-1.9% in the same call. The test alone in fresh processes, 3 at the driver's default of 8
# connections (as pytest runs it), 3 at 32 (as the bench measures the pipeline), each printing its
# figure and the last recording's starts; then the subset of call P again.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=$OUT/R; mkdir -p $R/logs
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
T=tests/instruments/test_timeline.py::test_the_recorder_keeps_a_four_stream_pipeline_within_5_percent_of_bare
i=0; for c in default 32 default 32 default 32; do i=$((i+1))
  s=$SECONDS
  if [ $c = default ]; then env -u CUDA_DEVICE_MAX_CONNECTIONS python3 -m pytest -q -s -p no:cacheprovider $T > $R/logs/alone_${i}_$c.txt 2>&1
  else CUDA_DEVICE_MAX_CONNECTIONS=$c python3 -m pytest -q -s -p no:cacheprovider $T > $R/logs/alone_${i}_$c.txt 2>&1; fi
  echo "alone connections=$c rc=$? $((SECONDS-s)) s: $(grep -o 'inside the recorder.*' $R/logs/alone_${i}_$c.txt | head -1)" | tee -a $R/logs/stages.txt
done
s=$SECONDS
python3 -m pytest -q -s -p no:cacheprovider tests -k "lab07 or timeline or hooks or makespan or streams" > $R/logs/subset.txt 2>&1
echo "subset rc=$? $((SECONDS-s)) s: $(grep -o 'inside the recorder.*' $R/logs/subset.txt | head -1)" | tee -a $R/logs/stages.txt
tail -n 3 $R/logs/subset.txt
