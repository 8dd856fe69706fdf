"""Memory of this process: its peak and current resident set size (Linux), and a reset
of the peak mark, so that benchmarks report the peak of what they measure."""

from __future__ import annotations

import os
import resource


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss() -> bool:
    """Reset this process's peak-RSS mark (Linux >= 4.0: ``/proc/self/clear_refs``), so
    that :func:`peak_rss_mb` reports the peak of what runs next. False where the mark
    cannot be reset: :func:`peak_rss_mb` then keeps reporting the process's peak so far."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def current_rss_mb() -> float:
    """Resident memory of this process now (``/proc/self/statm``; NaN elsewhere). Beside a
    peak it shows how much of the peak was already held (TensorFlow keeps what it
    allocated for earlier measurements)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2.0 ** 20
    except (OSError, ValueError, IndexError):
        return float("nan")
