#!/bin/sh
# Health check of the model server with a failure counter (used by reviewbot-vllm-health.service).
#   health-check.sh probe COMMAND...  run COMMAND; count failures in a row in $STATE_DIRECTORY;
#                                     exit 75 when they reach $HEALTH_FAILURES_BEFORE_RESTART
#   health-check.sh after             (as root, ExecStopPost) restart $HEALTH_VLLM_UNIT when the
#                                     probe exited 75 ($EXIT_STATUS, set by systemd)
# $HEALTH_SYSTEMCTL replaces systemctl in tests.
set -u
SYSTEMCTL="${HEALTH_SYSTEMCTL:-systemctl}"
UNIT="${HEALTH_VLLM_UNIT:?HEALTH_VLLM_UNIT is not set}"
LIMIT="${HEALTH_FAILURES_BEFORE_RESTART:-3}"
RESTART_REQUESTED=75

case "${1:-}" in
probe)
    shift
    counter="${STATE_DIRECTORY:?STATE_DIRECTORY is not set}/consecutive-failures"
    # A unit that is starting (compiling, warming up) or stopped is not probed: a restart
    # loop during a 4-minute cold start is exactly what this check must not cause.
    if ! "$SYSTEMCTL" is-active --quiet "$UNIT"; then
        echo "$UNIT is not active; not probed"
        echo 0 > "$counter"
        exit 0
    fi
    if "$@"; then
        echo 0 > "$counter"
        exit 0
    fi
    failures=$(( $(cat "$counter" 2>/dev/null || echo 0) + 1 ))
    if [ "$failures" -ge "$LIMIT" ]; then
        echo "model server unhealthy $failures times in a row: restarting $UNIT"
        echo 0 > "$counter"
        exit "$RESTART_REQUESTED"
    fi
    echo "$failures" > "$counter"
    echo "model server unhealthy ($failures of $LIMIT before a restart)"
    exit 1
    ;;
after)
    if [ "${EXIT_STATUS:-}" = "$RESTART_REQUESTED" ]; then
        exec "$SYSTEMCTL" restart "$UNIT"
    fi
    exit 0
    ;;
*)
    echo "usage: $0 probe COMMAND... | $0 after" >&2
    exit 2
    ;;
esac
