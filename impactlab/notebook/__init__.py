"""What a notebook, the Explorer app or the HTML report shows: charts, widgets, lesson helpers
and the report. ``impactlab.charts`` and ``impactlab.widgets`` are the documented paths of the
first two."""
