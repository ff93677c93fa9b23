"""The parent's side: launch one child per task, collect what it reports, store it; `worker/` is the child's side."""
