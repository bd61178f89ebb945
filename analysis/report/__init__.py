"""The report and its caches: the run report's sections and their public keys (`build`,
`shape`), the answer to "why" (`diagnosis`, with `answer` at a glance, the `culprits` who make
the others wait and the bandwidth in words, `bandwidth_words`), the maintenance checklist
(`checklist`, its items on `checklist_base` and the NCCL and network ones in
`checklist_network`), the post-mortem's figures and the merged Perfetto timeline; and what
keeps a run's work between processes (the session tables, `run_cache`, and the whole report,
`cache`)."""
