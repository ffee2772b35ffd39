"""Units of cloudvault.repro: compare rules, timings, the stand-in, preflight, executors' scripts."""
