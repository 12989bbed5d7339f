"""Real-browser tests (chromium + playwright) of the Explorer in Voila and the notebooks in JupyterLab."""
