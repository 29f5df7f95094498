#!/usr/bin/env bash
# Call H (session 19): the pipeline's recorder taken apart (probe_parts.py), twice. COMMIT: the local commit.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/logs
P=data/reference/h200/logs/2026-12-04-session19
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
for i in 1 2; do
  s=$SECONDS; timeout 200 python3 $P/probe_parts.py $R/logs/probe_parts_$i.json > $R/logs/probe_parts_$i.txt 2>&1
  echo "probe_parts_$i rc=$? $((SECONDS-s)) s"; cat $R/logs/probe_parts_$i.txt | tail -4
done
tar czf $OUT/logs.tgz -C $R logs
