"""The report and its caches: the run report's sections and their public keys (`build`,
`shape`), the answer to "why" (`diagnosis`), the maintenance checklist, the post-mortem's
figures and the merged Perfetto timeline; and what keeps a run's work between processes (the
session tables, `run_cache`, and the whole report, `cache`)."""
