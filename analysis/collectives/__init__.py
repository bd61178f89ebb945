"""Collectives and stragglers: communication calls matched across ranks into instances per
process group, clocks aligned on them, bus bandwidth per op and size, who arrives late and
what that costs the others, and the robust outlier rule both use (docs/stragglers.md)."""
