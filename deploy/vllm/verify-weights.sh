#!/bin/sh
# Weights check for reviewbot-vllm@.service (ExecStartPre): when the profile's env file sets
# REVIEWBOT_WEIGHTS_MANIFEST, verify the model directory against it before vLLM loads it, so a
# truncated or damaged shard stops the start with the file named (docs/weights.md). Unset: the
# check is skipped, and says so in the journal.
#
# The model directory: REVIEWBOT_WEIGHTS_DIR, else PROFILE_MODEL when it is a directory, else
# PROFILE_MODEL's snapshot in the unit's Hugging Face cache ($HF_HOME/hub/models--org--name,
# the revision refs/main names). The result is recorded for `reviewbot doctor` in
# REVIEWBOT_WEIGHTS_STATE_FILE (default: the unit's state directory, weights-verify.json).
set -eu
if [ -z "${REVIEWBOT_WEIGHTS_MANIFEST:-}" ]; then
    echo "verify-weights: REVIEWBOT_WEIGHTS_MANIFEST is not set in the profile: weights not verified"
    exit 0
fi
REVIEWBOT="${REVIEWBOT_BIN:-/opt/reviewbot/.venv/bin/reviewbot}"
STATE="${REVIEWBOT_WEIGHTS_STATE_FILE:-${STATE_DIRECTORY:-/var/lib/reviewbot-vllm}/weights-verify.json}"
MODEL_DIR="${REVIEWBOT_WEIGHTS_DIR:-}"
if [ -z "$MODEL_DIR" ]; then
    if [ -d "${PROFILE_MODEL:?the profile sets no PROFILE_MODEL}" ]; then
        MODEL_DIR="$PROFILE_MODEL"
    else
        HUB="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
        REPOSITORY="$HUB/models--$(printf '%s' "$PROFILE_MODEL" | sed 's|/|--|g')"
        if [ ! -f "$REPOSITORY/refs/main" ]; then
            echo "verify-weights: $PROFILE_MODEL is not in $HUB (no refs/main): download it first" \
                "(huggingface-cli download $PROFILE_MODEL) or set REVIEWBOT_WEIGHTS_DIR" >&2
            exit 1
        fi
        MODEL_DIR="$REPOSITORY/snapshots/$(cat "$REPOSITORY/refs/main")"
    fi
fi
exec "$REVIEWBOT" weights verify "$MODEL_DIR" --manifest "$REVIEWBOT_WEIGHTS_MANIFEST" \
    --state-file "$STATE"
