"""How parsing is executed: in this process, in forked workers per file (`forked`, `parallel`),
or on a Dask cluster writing Parquet shards (`distributed`, `cluster`, `shard_writer`). The
formats and the store do not depend on which."""
