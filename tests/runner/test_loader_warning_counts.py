"""A loader cell's warnings count one worker as one: "1 loader worker + 2 compute threads", not "1 loader workers"
(seen on a 2-core machine with `--threads 2 --data DIR`)."""

from dlperf.runner.collect import loader_warnings
from dlperf.store.records import LoaderRecord


def test_one_loader_worker_is_singular():
    one = LoaderRecord("w1", workers=1, threads=2, cores=2, oversubscribed=True, samples=8)
    said = loader_warnings(one, batch=4)
    assert said[0].startswith("1 loader worker + 2 compute threads exceed the 2 cores")
    assert "so the 1 worker starts again every 2 steps" in said[1]
    two = LoaderRecord("w2", workers=2, threads=1, cores=2, oversubscribed=True)
    assert loader_warnings(two, batch=4)[0].startswith("2 loader workers + 1 compute thread exceed")
