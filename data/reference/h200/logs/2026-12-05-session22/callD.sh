#!/usr/bin/env bash
# Call D (session 22), on whichever lent GPU comes: ab_settle.py, bench 07's recorder cost with and
# without the settling calls on one machine, in one process.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl_np/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
D=data/reference/h200/logs/2026-12-05-session22
R=$OUT/R; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . > $R/install.txt 2>&1
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  python3 -c "from kernellab.gpu import timeline; print(timeline.hot_path_words())"; } > $R/provenance.txt 2>&1
cat $R/provenance.txt
s=$SECONDS; timeout $((${BUDGET_S:-400} - SECONDS)) python3 $D/ab_settle.py $R/ab_settle.json ${ORDER:-0,20,20,0} > $R/ab_settle.txt 2>&1
echo "ab_settle rc=$? $((SECONDS-s)) s" | tee $R/stages.txt
cat $R/ab_settle.txt | cut -c1-1500
