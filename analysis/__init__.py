"""Metrics over the commwall store. Reads only the database schema; knows nothing of parsers."""
