#!/bin/sh
# Warm-up for reviewbot-vllm@.service (ExecStartPost): wait until vLLM answers /health, then send
# one short chat request with reviewbot's tool so the first real review does not pay for kernel
# compilation (measured: first-request TTFT 2.1 s instead of 0.18 s). The unit becomes "active"
# only when this succeeds, so the health timer never probes a half-started server.
set -eu
BASE="${WARMUP_BASE_URL:-http://127.0.0.1:8000}"
# One probe a few seconds; the unit's TimeoutStartSec bounds the whole start.
POLL_SECONDS=5
until curl -fsS "$BASE/health" >/dev/null 2>&1; do
    sleep "$POLL_SECONDS"
done
# With an API key (VLLM_API_KEY, from the unit's optional api-key.env) vLLM refuses /v1/ without
# it. The headers go through file descriptor 3, not the command line, which every user can read.
HEADERS="Content-Type: application/json"
if [ -n "${VLLM_API_KEY:-}" ]; then
    HEADERS="$HEADERS
Authorization: Bearer $VLLM_API_KEY"
fi
curl -fsS --max-time 300 "$BASE/v1/chat/completions" -H @/dev/fd/3 -d @- >/dev/null 3<<HEADERS <<JSON
$HEADERS
HEADERS
{"model": "${PROFILE_MODEL}", "max_tokens": 16,
 "messages": [{"role": "user", "content": "Warm-up: report no finding for this empty diff."}],
 "tools": [{"type": "function", "function": {"name": "report_finding",
   "description": "Report one review finding.",
   "parameters": {"type": "object", "properties": {"line": {"type": "integer"}, "title": {"type": "string"}},
                  "required": ["line", "title"]}}}],
 "chat_template_kwargs": {"enable_thinking": false}}
JSON
echo "vLLM warmed up at $BASE"
