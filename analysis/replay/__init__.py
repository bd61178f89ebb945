"""What-if replay of the measured run: the run's own timeline as chains of compute gaps and
collective barriers (`chain`), walked again with one thing changed (`walk`), and the what-ifs
the report shows (`engine`): a straggler at the others' pace, transfer hidden or faster, idle
time removed."""
