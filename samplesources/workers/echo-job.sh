#!/usr/bin/env bash
# A sample job for `tenure worker run`: reads its work bundle, does a little work, reports.
#   tenure worker run --pool shell -- samplesources/workers/echo-job.sh
# The worker sets TENURE_API, TENURE_LEASE_ID, TENURE_LEASE_TOKEN and TENURE_PAYLOAD_FILE.
set -euo pipefail

tenure=${TENURE_CLI:-tenure}
title=$(python3 -c 'import json, os; print(json.load(open(os.environ["TENURE_PAYLOAD_FILE"]))["subject"]["title"])')
echo "working on: $title (lease $TENURE_LEASE_ID)"

steps=${STEPS:-3}
for i in $(seq 1 "$steps"); do
  echo "step $i of $steps"
  sleep 1
done

words=$(echo "$title" | wc -w)
# Reporting from inside the job: the worker sees the report and does not report again.
"$tenure" worker complete --outcome success --details "{\"title_words\": $words, \"steps\": $steps}" >/dev/null
echo "reported"
