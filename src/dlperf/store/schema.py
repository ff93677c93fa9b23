"""The store's tables, as the migrations that build them: version reached -> the statements that get there from the
version before. A file is upgraded in place, one version after the other, in one transaction (`Store._migrate`);
an older file is never rewritten any other way."""

SCHEMA_VERSION = 13
LEASES = 6  # the version that has the leases table
PROFILES = 7  # the version that has the profiles table
DISPATCH = 8  # the version whose peaks may be a dispatch cost
LOADERS = 9  # the version whose cells may read real data through a loader, and whose peaks may be copies
PREDICTIONS = 10  # the version that has the predictions table
STRATEGIES = 11  # the version whose multi-process cells name their strategy (`--parallel`)
SESSIONS = 12  # the version whose measurements name the session of their run that took them
RUN_TOKENS = 13  # the version whose runs carry a token of their own (`runs.token`)
PEAK_KINDS = ("matmul", "bandwidth", "dispatch", "memcpy", "h2d", "d2h")


def _peaks_table(name: str, kinds: tuple[str, ...]) -> str:
    """The peaks table as created by migration 2 (matmul and bandwidth) and rebuilt by DISPATCH and LOADERS (SQLite
    cannot change a CHECK constraint in place)."""
    return f"""CREATE TABLE {name} (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            measured_at TEXT NOT NULL,
            fingerprint_json TEXT NOT NULL, -- envinfo.fingerprint of env_json: peaks are looked up by machine
            env_json TEXT NOT NULL,
            framework TEXT NOT NULL,
            framework_version TEXT,
            device TEXT NOT NULL,
            threads INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ({", ".join(f"'{k}'" for k in kinds)})),
            dtype TEXT,                     -- fp32 | bf16 | fp16 for matmul; NULL for the others
            value REAL,                     -- FLOP/s, bytes/s or seconds per op; NULL when nothing could be timed
            detail_json TEXT NOT NULL DEFAULT '{{}}',
            CHECK ((kind = 'matmul') = (dtype IS NOT NULL))
        )"""


# version reached -> statements that get there from the version before
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,          -- running | complete | interrupted
            argv TEXT,
            spec_json TEXT NOT NULL,
            env_json TEXT NOT NULL,
            fingerprint_json TEXT NOT NULL
        )""",
        """CREATE TABLE cells (
            run_id INTEGER NOT NULL REFERENCES runs(id),
            key TEXT NOT NULL,
            position INTEGER NOT NULL,
            workload TEXT NOT NULL,
            framework TEXT NOT NULL,
            device TEXT NOT NULL,
            threads INTEGER NOT NULL,
            mode TEXT NOT NULL,
            batch INTEGER,
            workload_json TEXT NOT NULL,
            status TEXT NOT NULL,          -- pending | ok | failed | timeout | unsupported
            error TEXT,
            median_s REAL, iqr_s REAL, mean_s REAL, stdev_s REAL, ci_low_s REAL, ci_high_s REAL,
            n INTEGER, samples_s REAL, warmup_steps INTEGER,
            params INTEGER, flops_per_step INTEGER,
            peak_mem_bytes INTEGER, peak_mem_kind TEXT,
            extra_json TEXT NOT NULL DEFAULT '{}',
            updated_at TEXT,
            PRIMARY KEY (run_id, key)
        )""",
        """CREATE TABLE measurements (
            run_id INTEGER NOT NULL,
            cell_key TEXT NOT NULL,
            repeat INTEGER NOT NULL,
            status TEXT NOT NULL,
            error TEXT,
            finished_at TEXT NOT NULL,
            duration_s REAL,
            samples_json TEXT NOT NULL,     -- every raw timed sample, seconds, in order
            detail_json TEXT NOT NULL,      -- warm-up, settings, memory, steal, ... as the worker reported them
            PRIMARY KEY (run_id, cell_key, repeat),
            FOREIGN KEY (run_id, cell_key) REFERENCES cells(run_id, key)
        )""",
    ],
    2: [
        # Hardware peaks measured by `dlperf peak`: what a step's utilization is held against. One row per figure.
        _peaks_table("peaks", ("matmul", "bandwidth")),
        "CREATE INDEX peaks_by_device ON peaks (device, threads, kind)",
    ],
    3: [
        # Where a run copied in by `dlperf merge` came from: {"db", "run_id", "merged_at"}; NULL if measured here.
        "ALTER TABLE runs ADD COLUMN origin_json TEXT",
    ],
    4: [
        # Collective bandwidth measured by `dlperf comm`: one row per message size of one job, nccl-tests' figures.
        """CREATE TABLE comm (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            measured_at TEXT NOT NULL,
            fingerprint_json TEXT NOT NULL, -- envinfo.fingerprint of the node that ran the command
            env_json TEXT NOT NULL,
            backend TEXT NOT NULL,          -- gloo | nccl
            device TEXT NOT NULL CHECK (device IN ('cpu', 'cuda')),
            world INTEGER NOT NULL,         -- processes in the job, every node's
            nnodes INTEGER NOT NULL,
            threads INTEGER NOT NULL,       -- CPU threads per process
            op TEXT NOT NULL DEFAULT 'all_reduce',
            bytes INTEGER NOT NULL,         -- message size per rank
            time_s REAL,                    -- the slowest rank's median time of one collective
            algbw REAL,                     -- bytes / time_s, bytes/s
            busbw REAL,                     -- algbw times the bytes a link carries per message byte, bytes/s
            wrong INTEGER,                  -- elements of the checked result that differ from the expected sum
            detail_json TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX comm_by_job ON comm (backend, world, bytes)",
    ],
    5: [
        # Data-parallel cells (`dlperf run --nproc`): processes in all, and the scaling protocol; 0 and NULL for a
        # plain one-process cell.
        "ALTER TABLE cells ADD COLUMN nproc INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE cells ADD COLUMN scaling TEXT",
    ],
    LEASES: [
        # Who measures a running run now (`store/lease.py`): one row per run, dropped when the run ends.
        """CREATE TABLE leases (
            run_id INTEGER PRIMARY KEY REFERENCES runs(id),
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            token TEXT,                     -- boot id and start time of the pid: a recycled pid is someone else
            since TEXT NOT NULL,
            seen TEXT NOT NULL              -- the holder's last heartbeat
        )""",
    ],
    PROFILES: [
        # Where a cell's step time goes (`dlperf profile`, `run --profile`): one untimed profiled process per cell.
        """CREATE TABLE profiles (
            run_id INTEGER NOT NULL,
            cell_key TEXT NOT NULL,
            profiled_at TEXT NOT NULL,
            status TEXT NOT NULL,          -- ok | failed | timeout | unsupported
            error TEXT,
            duration_s REAL,                -- the profiled process's wall-clock life, start-up included
            step_s REAL,                    -- the profiled step's wall time (the mean of the profiled steps)
            overhead REAL,                  -- step_s / the cell's timed median: the profiler's own cost
            trace TEXT,                     -- the gzip Chrome trace, or NULL
            profile_json TEXT NOT NULL,     -- the Profiled event's fields (protocol.Profiled); {} without one
            PRIMARY KEY (run_id, cell_key),
            FOREIGN KEY (run_id, cell_key) REFERENCES cells(run_id, key)
        )""",
    ],
    DISPATCH: [
        # The host time to dispatch one tiny operator (`dlperf peak`): a step's floor when it is launch-bound.
        _peaks_table("peaks_dispatch", ("matmul", "bandwidth", "dispatch")),
        "INSERT INTO peaks_dispatch SELECT * FROM peaks",
        "DROP TABLE peaks",
        "ALTER TABLE peaks_dispatch RENAME TO peaks",
        "CREATE INDEX peaks_by_device ON peaks (device, threads, kind)",
    ],
    LOADERS: [
        # A cell that reads real data (`--data DIR`): its loader setting, `w2+pin`; NULL on synthetic data.
        "ALTER TABLE cells ADD COLUMN loader TEXT",
        # Copies measured by `dlperf peak`: host memcpy, host->device and device->host, in bytes/s at one size each
        # (detail_json: {"bytes", "pinned"}).
        _peaks_table("peaks_copies", PEAK_KINDS),
        "INSERT INTO peaks_copies SELECT * FROM peaks",
        "DROP TABLE peaks",
        "ALTER TABLE peaks_copies RENAME TO peaks",
        "CREATE INDEX peaks_by_device ON peaks (device, threads, kind)",
    ],
    PREDICTIONS: [
        # A cell's step predicted on a GPU (predict/roofline.py): beside a GPU cell's measurement, for its own GPU;
        # beside a CPU cell of `dlperf crossover`, for the GPU it is set against. One row per cell and GPU.
        """CREATE TABLE predictions (
            run_id INTEGER NOT NULL,
            cell_key TEXT NOT NULL,
            gpu TEXT NOT NULL,              -- the name in dlperf's GPU table (predict/gpus.py)
            predicted_at TEXT NOT NULL,
            mode TEXT NOT NULL,             -- the precision predicted: fp32 | tf32 | bf16 | fp16
            batch INTEGER NOT NULL,
            step_s REAL NOT NULL,           -- device_s + transfer_s
            device_s REAL NOT NULL,         -- the step with its inputs on the device
            transfer_s REAL NOT NULL,       -- the batch over the host link
            bound TEXT NOT NULL CHECK (bound IN ('compute', 'memory', 'launch')),
            detail_json TEXT NOT NULL DEFAULT '{}',  -- parts, kernels, the efficiencies used, the uncertainty
            PRIMARY KEY (run_id, cell_key, gpu),
            FOREIGN KEY (run_id, cell_key) REFERENCES cells(run_id, key)
        )""",
    ],
    STRATEGIES: [
        # A multi-process (or multi-replica) cell's strategy (`dlperf.parallel`): ddp, fsdp, gpipe, 1f1b, tp,
        # mirrored; NULL for a plain cell. A cell of an older file with nproc > 0 was data parallel.
        "ALTER TABLE cells ADD COLUMN parallel TEXT",
        "UPDATE cells SET parallel = 'ddp' WHERE nproc > 0",
        # a pipeline's micro-batches per step; NULL for every other cell
        "ALTER TABLE cells ADD COLUMN microbatches INTEGER",
    ],
    SESSIONS: [
        # Which session of its run measured a process: 1 for the command that created the run, one more each time
        # `--resume` took it up; NULL for a process stored before, so a run's sessions are told apart from here on.
        "ALTER TABLE measurements ADD COLUMN session INTEGER",
    ],
    RUN_TOKENS: [
        # A random token each run gets when it is begun, which no other run has: what tells it from another of its id
        # (a store made again at the path) begun in the same second with the same spec on the same machine
        # (`spill.mark`). NULL for a run begun before; a copy (`dlperf merge`, a rescued file) keeps its run's.
        "ALTER TABLE runs ADD COLUMN token TEXT",
    ],
}

PEAK_COLUMNS = ("framework", "framework_version", "device", "threads", "kind", "dtype", "value")
COMM_COLUMNS = ("backend", "device", "world", "nnodes", "threads", "op", "bytes", "time_s", "algbw", "busbw", "wrong")
