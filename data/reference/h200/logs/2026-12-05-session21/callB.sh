#!/usr/bin/env bash
# Call B (session 21), on whichever lent GPU comes: context.py, the recorders' cost per copy beside the
# bare call alone and with each group of bench 07's other ways added.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
R=$OUT/R; mkdir -p $R/logs
python3 -m pip install --no-deps --no-build-isolation -e . > $R/logs/install.txt 2>&1
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version; } > $R/logs/provenance.txt 2>&1
cat $R/logs/provenance.txt
s=$SECONDS; timeout 400 python3 data/reference/h200/logs/2026-12-05-session21/context.py $R/context.json > $R/logs/context.txt 2>&1
echo "context rc=$? $((SECONDS-s)) s" | tee $R/logs/stages.txt
cut -c1-400 $R/logs/context.txt
gzip -f $R/context.json
tar czf $OUT/results.tgz -C $R context.json.gz logs
