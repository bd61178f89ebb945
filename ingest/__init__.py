"""Parsers that turn profiler output into the commwall store (DuckDB). Knows nothing of analysis."""
