"""Runs on top of everything below: one run (``simulate``, ``compare``), a grid of runs
(``sweep``, with its local, process and Dask backends) and the machine they run on."""
