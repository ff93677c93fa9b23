"""The commands' defaults and bounds that their --help quotes, as plain values: this module imports nothing of dlperf's.

Building the parsers (`dlperf --help`, `dlperf COMMAND --help`, and every command before it reads its flags) reads
these here, not from the code that uses them (`spec`, `measure.timer`, `predict`, `advise`), which would load 14 of
dlperf's modules more and theirs: a third of the CPU time a help screen or a bad flag's one-line error took. Each
value has one home, this one; the modules that check or use it import it from here (`spec` makes the timers
TimerConfigs).
"""

from _thread import TIMEOUT_MAX  # threading's, without importing threading

# ---- the request's bounds (spec.py checks them)
MAX_SECONDS = TIMEOUT_MAX  # the longest wait the platform can make (about 292 years)
INT64_MAX = 2**63 - 1  # SQLite's largest integer: a stored count or id beyond it cannot be written
MAX_COMPILE_AT_ONCE = 16  # --compile-at-once: each is a process holding its model on the device while it waits
MAX_PROFILE_STEPS = 100  # a profile's steps: their events are held in memory and written into the trace
TRACE_CAP_MIB = 50.0  # a profile's trace, compressed, kept up to this (--max-trace-mib); beyond it, the figures alone
MAX_TRACE_CAP_MIB = float(2**20)  # --max-trace-mib at most 1 TiB
FIT_MAX_BATCH = 2**16  # `dlperf fit`'s cap on the batches tried: far above any published mini-batch per device

# ---- each search's timer: `measure.timer.TimerConfig`'s fields (spec.py makes each a TimerConfig)
OPTIMIZE_TIMING = {"min_steps": 10, "min_time": 2.0, "max_time": 10.0, "max_warmup": 30}  # `dlperf optimize`
CROSSOVER_TIMING = {"min_steps": 6, "min_time": 0.5, "max_time": 10.0, "max_warmup": 10}  # many cells; 6 steps: 95% CI
# `dlperf fit`: 6 warm-up steps can settle; 0.3 s the least over which the CPUs' busy counters read other processes'
# load on 2 CPUs or more (`system.share_window_s`): at 0.2 s each try of a small model was stored "other processes'
# load not read", and `dlperf table` marked every cell of a fit's run `?`
FIT_TIMING = {"min_steps": 3, "min_time": 0.3, "max_time": 5.0, "max_warmup": 6}
OPTIMIZE_BUDGET_MIN = 15.0  # `dlperf optimize --budget`'s default, in minutes

# ---- `dlperf advise`
BUDGET_S = 150.0  # the default: 2.5 minutes of measuring on 2 cores, the thread search and a short optimize
# --budget's least: the first CPU process, never stopped, may time this long
LEAST_BUDGET_S = CROSSOVER_TIMING["max_time"]

# ---- the predictor's cost (`predict/cost.py`)
CPU_WATTS = 100.0  # an assumption: a desktop or one server socket busy training (--cpu-watts gives yours)
KWH_PRICE = 0.15  # US dollars per kWh, an assumption near a US average retail price (--kwh-price gives yours)

# The GPUs a command predicts when --gpu is not given. They differ by what each command prints, on purpose:
# - `dlperf advise` ranks GPUs by time and cost to answer which one to rent: every GPU with a price
#   (`predict.prices.priced`), the only ones the cost can rank;
# - `dlperf crossover` prints a column per GPU at each batch, and stores a prediction per GPU beside each batch's cell:
#   two GPUs that bracket what one rents (`BRACKET`), a data-centre GPU of today and an inference/cloud GPU of the T4
#   class, keep the table readable;
# - `dlperf predict` prints a row per GPU and mode (four modes): it has no default, the GPUs are named.
# Each command's --gpu help says its default and why:
BRACKET = ("H100-SXM5-80GB", "T4")
PRICED_HELP = "default: every GPU with a price, as the answer ranks them by time and cost"  # advise
BRACKET_HELP = (
    f"default: {','.join(BRACKET)}, a data-centre GPU and a T4-class cloud GPU, a column each; dlperf advise ranks "
    "every GPU with a price"
)  # crossover
NAMED_HELP = "no default: a row per GPU and mode; dlperf advise ranks every GPU with a price"  # predict
