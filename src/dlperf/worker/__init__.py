"""The child's side: what a child process runs (one module per kind of child, named by its task in `protocol.py`).

A child imports the standard library, dlperf's standard-library-only modules and one framework; never `runner/`, the
parent's side, which starts it and reads its events."""
