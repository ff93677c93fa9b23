"""The GPU predictor: a training step's time on GPUs from a spec table, from the step's operators counted here.

Standard library only: the parent runs it (`dlperf predict`, `dlperf crossover`, a run on a GPU storing its
prediction); the counting itself needs PyTorch and runs in the probe (`frameworks/torch/opcount.py`).
"""

MAX_BATCH = 2**20  # the largest batch predicted or counted: far above any published mini-batch per GPU (64k)
