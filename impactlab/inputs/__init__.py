"""What a run is given, as data: traces and their loaders, the synthetic generator, budget trees,
scenario files and a workload's overview. Knows nothing of the engine or the policies."""
