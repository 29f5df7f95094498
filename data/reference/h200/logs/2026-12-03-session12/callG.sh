#!/usr/bin/env bash
# Call G (session 12): the GPU suite again with the fixed `-n auto` (kernellab's hook answers first:
# no worker on a GPU; call F ran 16), then every notebook live. COMMIT: the local commit it runs.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
echo "commit ${COMMIT:-?}"
SKIP_INSTALL=1 STAGES="tests notebooks" timeout 560 bash scripts/gpu_session.sh $OUT/S > $OUT/session.txt 2>&1
grep -E "gw[0-9]|passed|failed|exit|FAILED|^ok|^FAILED" $OUT/S/logs/tests.txt $OUT/S/logs/notebooks.txt | tail -30
cat $OUT/S/logs/stages.tsv
