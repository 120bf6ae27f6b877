#!/usr/bin/env bash
# The H200 check, on the GPU machine (issue 23; docs/capacity.md has the results and the recipe).
#
#   deploy/h200-check/run.sh stash            # keep the carried kit parts (.h200/kit.tar.xz.NN)
#   deploy/h200-check/run.sh boot             # unpack the kit, build the model, start vLLM
#   deploy/h200-check/run.sh measure STEP...  # measure.py's steps against the running server
#
# Each is one device call; the machine keeps /tmp and a server started in its own session
# between calls while it stays warm. The kit (build_wheels.py, run here beforehand) travels in
# parts of under 64 MiB, one part per call, named in `carry`.
#
# boot starts the profile's command (serve.py) with FP8 dummy weights; if that server dies before
# it is healthy, the same command with bf16 dummy weights (the issue allows it; the summary says
# which one ran). Results and logs go to $OUT (at most 8 files come back).
set -uo pipefail

KIT=/tmp/h200kit
SITE=/tmp/site
MODELS=/tmp/h200-models
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${OUT:-/tmp/h200-out}"
BOOT_WAIT_S="${BOOT_WAIT_S:-540}"
POLL_S=5
export PYTHONPATH="$SITE:$REPO"
mkdir -p "$KIT" "$OUT"

say() { echo "h200-check: $*" >&2; }

machine_facts() {
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
    df -h /tmp | tail -1
}

stash() {
    for part in "$REPO"/.h200/kit.tar.xz.*; do
        [ -e "$part" ] || continue
        cp "$part" "$KIT/" && say "kept $(basename "$part") ($(du -h "$part" | cut -f1))"
    done
    ls -la "$KIT"
}

unpack() {
    if [ -d "$SITE/vllm" ]; then
        say "kit already unpacked"
        return 0
    fi
    say "unpacking $(ls "$KIT" | wc -l) parts"
    cat "$KIT"/kit.tar.xz.* | xz -d | tar -x -C /tmp || return 1
    python3 -c 'import vllm, sys; print("vllm", vllm.__version__, file=sys.stderr)'
}

healthy() { curl -fsS -m 5 http://127.0.0.1:8000/health >/dev/null 2>&1; }

# start_server KIND: serve.py with the KIND (fp8|bf16) model, in its own session; echo its pid.
start_server() {
    local kind="$1" flag=""
    [ "$kind" = fp8 ] && flag="--fp8"
    python3 "$HERE/model_dir.py" "$MODELS/$kind" $flag >&2 || return 1
    setsid nohup python3 "$HERE/serve.py" "$MODELS/$kind" >"/tmp/vllm-$kind.log" 2>&1 < /dev/null &
    echo $!
}

# wait_server PID: 0 healthy, 1 died, 2 still starting after BOOT_WAIT_S.
wait_server() {
    local pid="$1" waited=0
    while [ "$waited" -lt "$BOOT_WAIT_S" ]; do
        if healthy; then say "healthy after ${waited} s"; return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then say "server $pid died after ${waited} s"; return 1; fi
        sleep "$POLL_S"; waited=$((waited + POLL_S))
    done
    return 2
}

boot() {
    machine_facts > "$OUT/machine.txt" 2>&1
    unpack || { say "the kit did not unpack"; return 1; }
    local pid status kind
    for kind in fp8 bf16; do
        pid="$(start_server "$kind")" || { say "no $kind model directory"; continue; }
        echo "$kind" > /tmp/h200-kind
        say "started vLLM ($kind dummy weights), pid $pid"
        wait_server "$pid"; status=$?
        tail -c 60000 "/tmp/vllm-$kind.log" > "$OUT/vllm-$kind.log"
        [ "$status" -ne 1 ] && break
    done
    say "serving: $(cat /tmp/h200-kind) (status $status)"
    return "$status"
}

measure() {
    local kind log
    kind="$(cat /tmp/h200-kind 2>/dev/null || echo fp8)"
    log="/tmp/vllm-$kind.log"
    PYTHONUNBUFFERED=1 python3 "$HERE/measure.py" "$OUT/results.json" "$@" --log "$log"
    local status=$?
    tail -c 200000 "$log" > "$OUT/vllm-$kind.log"
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
    return "$status"
}

case "${1:-}" in
    stash) stash; machine_facts ;;
    boot) stash; boot ;;
    measure) shift; measure "$@" ;;
    *) echo "usage: $0 stash | boot | measure STEP..." >&2; exit 2 ;;
esac
