"""Time units, and times and counts in words: every time in impactlab is float seconds from
the start of the trace."""

HOUR_S = 3600.0
DAY_S = 86_400.0


def hours(t_s: float) -> str:
    """A time as hours from the start of the run."""
    return f"{t_s / HOUR_S:.2f} h"


def span(seconds: float) -> str:
    """A duration in words: seconds, minutes or hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * HOUR_S:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / HOUR_S:.1f} h"


def plural(n: int) -> str:
    """ "s" unless ``n`` is one."""
    return "" if n == 1 else "s"
