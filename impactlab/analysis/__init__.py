"""What is derived from a run's event log: metrics, long-form tables, findings (warnings a
headline must carry), explanations of single jobs, and ``SimResult``, which holds them."""
