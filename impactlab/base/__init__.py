"""The floor every layer stands on: declared knobs (``params``, ``config``), the policy registry,
units, seeded random streams, a gang's geometry, file checks and the version. Imports nothing
else from impactlab."""
