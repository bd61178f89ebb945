"""The file formats commwall reads, one package (or module) each, all behind one contract:
`sniff(path, head_bytes) -> bool` says whether a file is of the format (by content, never by name
alone) and `parse(path, opts) -> Parsed` reads it. `registry` lists them in the order they are
tried. How to add one: docs/adding_a_format.md."""
