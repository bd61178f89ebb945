"""NCCL Inspector over the whole run: stragglers per communicator over time, the fabric's bus
bandwidth over time with its change points, hosts slow in every communicator they share, and
the records the plugin lost (docs/inspector.md)."""
