"""Steps and overlap: each rank's step windows, what fills them (compute, communication, their
overlap, idle time), the one sweep that measures every interval figure at once, the step
decomposition and its verdict (compute-bound or communication wall), and a step drawn as
tracks (docs/diagnosis.md)."""
