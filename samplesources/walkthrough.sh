#!/usr/bin/env bash
# Walks Tenure's API with curl, as an operator and a worker would.
#   TENURE_API    base address (default http://127.0.0.1:8787)
#   TENURE_TOKEN  an admin operator token (default: the one `make local` wrote to .tenure/admin-token)
set -euo pipefail

API="${TENURE_API:-http://127.0.0.1:8787}/api/v1"
ADMIN_TOKEN="${TENURE_TOKEN:-$(cat .tenure/admin-token)}"
RUN="${RUN_ID:-$(date +%s)}"
SPACE="WALK${RUN}"
POOL="walk-${RUN}"

json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }
call() { # call METHOD PATH TOKEN [BODY] -> prints the body; fails unless the status is 2xx
  local method=$1 path=$2 token=$3 body=${4:-}
  local out status
  out=$(mktemp)
  status=$(curl -s -o "$out" -w '%{http_code}' -X "$method" "$API$path" \
    -H "Authorization: Bearer $token" -H 'content-type: application/json' \
    ${body:+--data "$body"})
  if [[ $status != 2* ]]; then
    echo "$method $path -> $status: $(cat "$out")" >&2
    rm -f "$out"
    return 1
  fi
  cat "$out"
  rm -f "$out"
}

echo "== health";        curl -sf "$API/health"; echo
echo "== space";         call POST /spaces "$ADMIN_TOKEN" "{\"key\":\"$SPACE\",\"name\":\"Walkthrough\"}" >/dev/null
echo "== pool";          call POST /pools "$ADMIN_TOKEN" "{\"name\":\"$POOL\",\"space\":\"$SPACE\",\"kind\":\"command\"}" >/dev/null
WORKER_TOKEN=$(call POST /tokens "$ADMIN_TOKEN" "{\"name\":\"$POOL-worker\",\"kind\":\"worker\",\"pools\":[\"$POOL\"]}" | json '["token"]')
TASK=$(call POST /tasks "$ADMIN_TOKEN" "{\"space\":\"$SPACE\",\"title\":\"Rotate the logs\",\"pool\":\"$POOL\"}")
TASK_ID=$(echo "$TASK" | json '["task"]["id"]')
echo "== task $TASK_ID queued"

CLAIM=$(call POST "/pools/$POOL/claim" "$WORKER_TOKEN" '{"worker_id":"walker-1","wait_seconds":5}')
LEASE_ID=$(echo "$CLAIM" | json '["lease"]["id"]')
LEASE_TOKEN=$(echo "$CLAIM" | json '["token"]')
echo "== claimed $LEASE_ID (fence $(echo "$CLAIM" | json '["fence"]'))"

echo "== heartbeat";     call POST "/leases/$LEASE_ID/heartbeat" "$LEASE_TOKEN" '{}'; echo
echo "== payload kind";  call GET "/leases/$LEASE_ID/payload" "$LEASE_TOKEN" | json '["subject"]["kind"]'
echo "== complete";      call POST "/leases/$LEASE_ID/complete" "$LEASE_TOKEN" '{"outcome":"success","details":{"rotated":3}}' | json '["lease"]["state"]'
echo "== task status";   call GET "/tasks/$TASK_ID" "$ADMIN_TOKEN" | json '["task"]["status"]'
echo "== leases";        call GET "/leases?space=$SPACE" "$ADMIN_TOKEN" | json '["leases"][0]["state"]'
sleep 1
echo "== activity";      call GET "/tasks/$TASK_ID/activity" "$ADMIN_TOKEN" | json '["events"]' 
echo "walkthrough done"
