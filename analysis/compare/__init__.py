"""Comparing runs: two runs side by side (`pair`), several against a baseline with step time
judged against run-to-run noise (`diff`, built from `facts`, `step_time`, `decomposition`,
`sections`, `sentence` and `gate`), and the two-sample tests behind it (`noise`)."""
