#!/usr/bin/env bash
# Call B (session 18): probe_order.py x2 in fresh processes: the place of a way in the order of time_host_in_turn.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/logs
P=data/reference/h200/logs/2026-12-04-session18
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
python3 -c "from kernellab.gpu import hooks, timeline; print(hooks.hot_path(), timeline.hot_path_words())" | tee $R/logs/hot_path.txt
{ date -u; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $R/logs/provenance.txt 2>&1
for i in 1 2; do
  s=$SECONDS
  timeout 200 python3 $P/probe_order.py $R/order$i.json > $R/logs/order$i.txt 2>&1
  echo "order$i rc=$? $((SECONDS-s)) s" | tee -a $R/logs/stages.txt
  cat $R/logs/order$i.txt | cut -c1-1500
done
