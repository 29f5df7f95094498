#!/usr/bin/env bash
# Call B (session 22), on whichever lent GPU comes: company.py (the spacing or the company?), then the
# GPU tests of the recorder and Lab 07 in what time remains.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD KERNELLAB_DEVICE=gpu KERNELLAB_TARGET=solutions PYTHONUNBUFFERED=1
D=data/reference/h200/logs/2026-12-05-session22
R=$OUT/R; mkdir -p $R
python3 -m pip install --no-deps --no-build-isolation -e . > $R/install.txt 2>&1
{ date -u; echo "commit ${COMMIT:-?} (the working tree sent)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; nproc; python3 --version;
  python3 -c "from kernellab.gpu import timeline; print(timeline.hot_path_words())"; } > $R/provenance.txt 2>&1
cat $R/provenance.txt
left() { echo $((${BUDGET_S:-540} - SECONDS)); }
s=$SECONDS; timeout "$(left)" python3 $D/company.py $R/company.json > $R/company.txt 2>&1
echo "company rc=$? $((SECONDS-s)) s" | tee $R/stages.txt
cut -c1-400 $R/company.txt
gzip -f $R/company.json
