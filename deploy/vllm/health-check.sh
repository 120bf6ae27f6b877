#!/bin/sh
# Health check of the model server with a failure counter (used by reviewbot-vllm-health.service).
#   health-check.sh probe COMMAND...  run COMMAND (at most $HEALTH_PROBE_TIMEOUT_S seconds; a
#                                     probe still running then failed); count failures in a row
#                                     in $STATE_DIRECTORY; exit 75 when they reach
#                                     $HEALTH_FAILURES_BEFORE_RESTART
#   health-check.sh after             (as root, ExecStopPost) restart $HEALTH_VLLM_UNIT when the
#                                     probe exited 75 ($EXIT_STATUS, set by systemd)
# $HEALTH_SYSTEMCTL replaces systemctl in tests.
set -u
SYSTEMCTL="${HEALTH_SYSTEMCTL:-systemctl}"
UNIT="${HEALTH_VLLM_UNIT:?HEALTH_VLLM_UNIT is not set}"
LIMIT="${HEALTH_FAILURES_BEFORE_RESTART:-3}"
# Below the unit's TimeoutStartSec=25: a hung probe must end here, counted as a failure, not be
# killed by systemd before it is counted.
PROBE_TIMEOUT_S="${HEALTH_PROBE_TIMEOUT_S:-22}"
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
    # Counted before the probe runs and taken back when it passes, so even a probe killed
    # from outside (SIGKILL) counts as a failure.
    failures=$(( $(cat "$counter" 2>/dev/null || echo 0) + 1 ))
    echo "$failures" > "$counter"
    if timeout "$PROBE_TIMEOUT_S" "$@"; then
        echo 0 > "$counter"
        exit 0
    fi
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
