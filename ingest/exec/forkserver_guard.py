"""Imported by the forkserver of ingest's worker pool (a multiprocessing preload), and only
there: it ties the forkserver's life to the command's, so that after a `kill -9` of the command
the forkserver goes too, and with it the workers (each tied to it in turn)."""

from commwall.ingest.exec.forked import die_with_parent

die_with_parent()
