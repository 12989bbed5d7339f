"""Time units: every time in impactlab is float seconds from the start of the trace."""

HOUR_S = 3600.0
DAY_S = 86_400.0
