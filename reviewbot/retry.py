"""When to try again: the ``Retry-After`` header and the backoff, for GitLab, the model and jobs.

Owns: the one reading of ``Retry-After`` (:func:`retry_after_seconds`) and the one backoff
formula (:func:`backoff_s`: exponential from a base, capped, optionally jittered, with the
server's ``Retry-After`` as a floor). The GitLab adapter, the model runner and the job queue
each pass their own base, cap and jitter; none has a formula of its own.

Pure: no sleeping, no clock, no randomness of its own. The caller passes ``now`` where a date
is read and the random draw where a wait is jittered, so every rule here is tested on data.
Must not: import an adapter (HTTP client, database) or know which server it serves.

``Retry-After`` (RFC 9110 section 10.2.3) is ``HTTP-date / delay-seconds`` with
``delay-seconds = 1*DIGIT``. Read here:

- ASCII digits: that many seconds. A value too large for a float reads as infinite, which
  every caller caps: the server asked for a long wait.
- A decimal such as ``"1.5"`` (digits, one dot, digits) is not valid ``delay-seconds``, but
  it is read as those seconds rather than ignored: the sender's meaning is plain, and
  ignoring it would retry on our shorter backoff, sooner than the server asked. Only this
  shape is: a sign, an exponent (``"1e3"``), ``"inf"``, ``"nan"``, non-ASCII digits
  (``"²"``, ``"٣"``) or a bare dot are not read.
- An HTTP-date in any of the three forms a recipient must accept (RFC 9110 section 5.6.7:
  IMF-fixdate, RFC 850, asctime; without a zone it is UTC): the seconds from ``now`` until
  then, 0 for a date already past.
- Anything else (absent, blank, negative, garbage): None, the caller's own backoff applies.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["Uniform", "backoff_s", "retry_after_seconds"]

# A draw from [low, high] (random.uniform's shape): the jitter source a caller passes.
Uniform = Callable[[float, float], float]

# delay-seconds, with the lenient decimal part explained in the module notes; ASCII only.
_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)
NO_WAIT_S = 0.0


def retry_after_seconds(value: str | None, *, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (see the module notes), or None.

    ``now`` (timezone-aware) is when the answer came, for the HTTP-date form."""
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(text)
    return _seconds_until(text, now)


def _seconds_until(http_date: str, now: datetime) -> float | None:
    try:
        moment = parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # asctime, or "-0000": UTC by RFC 9110 and RFC 5322
        moment = moment.replace(tzinfo=UTC)
    return max((moment - now).total_seconds(), NO_WAIT_S)


def backoff_s(
    attempt: int,
    *,
    base_s: float,
    cap_s: float,
    uniform: Uniform | None = None,
    retry_after_s: float | None = None,
    retry_after_cap_s: float | None = None,
) -> float:
    """The wait before try ``attempt + 1`` after ``attempt`` retries already made (0 first).

    The ceiling is ``base_s * 2**attempt``, never above ``cap_s``. With ``uniform`` the wait
    is drawn from [0, ceiling] ("full jitter", so callers that failed together spread out);
    without it, it is the ceiling. A ``Retry-After`` (``retry_after_s``), capped at
    ``retry_after_cap_s`` (default ``cap_s``), is a floor: never retry sooner than the server
    asked, nor wait longer than the cap because it asked.
    """
    try:
        ceiling = min(cap_s, base_s * 2.0 ** max(attempt, 0))
    except OverflowError:  # 2.0**attempt beyond a float: far past any cap
        ceiling = cap_s
    wait = ceiling if uniform is None else uniform(NO_WAIT_S, ceiling)
    if retry_after_s is None:
        return wait
    floor = min(retry_after_s, cap_s if retry_after_cap_s is None else retry_after_cap_s)
    return max(wait, floor)
