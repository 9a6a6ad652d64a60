"""Helpers every benchmark here shares: percentiles and wall-clock timing in milliseconds."""
import time


def pct(xs, p):
    """The p-th percentile of xs (nearest rank); nan when there are no samples."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def pss_bytes(pid):
    """A process's proportional set size in bytes (smaps_rollup); 0 once it is gone."""
    try:
        with open("/proc/%s/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def timed(f):
    """Milliseconds f() took."""
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1000


def timed_result(f):
    """(milliseconds f() took, what it returned)."""
    t = time.perf_counter()
    out = f()
    return (time.perf_counter() - t) * 1000, out
