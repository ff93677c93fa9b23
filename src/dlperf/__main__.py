"""`python -m dlperf`: the CLI, as `dlperf` runs it.

`python -m` puts the working directory first on sys.path, where a user's own statistics.py (or json.py, ...) would
replace the standard library's for dlperf itself ("module 'statistics' has no attribute 'median'"); it is moved
last, where every child has it (`python -P`, `workloads/user.py` puts it back last for a user's `module:function`),
before anything else is imported."""

import os
import sys

if sys.path and not sys.flags.safe_path and sys.path[0] in ("", os.getcwd()):
    sys.path.append(sys.path.pop(0))

from dlperf.cli import main

raise SystemExit(main())
