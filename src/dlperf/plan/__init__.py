"""The plan: what the user asked for (`spec.py`), expanded into the cells a run measures, and what they will cost."""
