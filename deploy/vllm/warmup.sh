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
curl -fsS --max-time 300 "$BASE/v1/chat/completions" -H 'Content-Type: application/json' -d @- >/dev/null <<JSON
{"model": "${PROFILE_MODEL}", "max_tokens": 16,
 "messages": [{"role": "user", "content": "Warm-up: report no finding for this empty diff."}],
 "tools": [{"type": "function", "function": {"name": "report_finding",
   "description": "Report one review finding.",
   "parameters": {"type": "object", "properties": {"line": {"type": "integer"}, "title": {"type": "string"}},
                  "required": ["line", "title"]}}}],
 "chat_template_kwargs": {"enable_thinking": false}}
JSON
echo "vLLM warmed up at $BASE"
