"""Repeated runs: the seeds of the repeats, each metric's mean with a 95% interval, and the noise check.

``testbed compare --repeat N`` runs each mode (or sweep point) N times.  Run
``i`` takes :func:`repeat_seeds`'s ``i``-th seed: the spec's own for the
first (so a repeated comparison contains the single run), the others derived
from it.  Each table column then holds, per row, :func:`describe` of the N
values (mean, Student-t 95% confidence interval of the mean, min, max), and
:func:`separability` flags the metrics whose rows cannot be told apart at
N runs: their intervals overlap although their means differ, so an ordering
read from them could be noise.
"""
import math

from testbed.experiment.spec import MAX_REPEAT, derive_seed

#: two-sided 95% quantiles of Student's t distribution, by degrees of freedom (1..30)
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z95 = 1.960          # the normal quantile, which t approaches beyond 30 degrees of freedom


def t95(degrees):
    """The two-sided 95% Student-t quantile for ``degrees`` degrees of freedom (>= 1).

    Beyond 30 degrees the quantile is interpolated in 1/degrees toward the normal 1.960
    (within 0.2% of the exact value).

    >>> t95(4)
    2.776
    >>> round(t95(120), 3)
    1.98
    """
    if degrees < 1:
        raise ValueError(f"degrees of freedom must be >= 1 (got {degrees})")
    if degrees <= len(T95):
        return T95[degrees - 1]
    last = len(T95)
    return Z95 + (T95[-1] - Z95) * last / degrees


def repeat_seeds(seed, runs, same=False):
    """The seeds of ``runs`` repeats of a spec whose seed is ``seed``: ``seed`` first, then derived ones.

    Different seeds draw different flows (queue pairs, ports, seeded hash seeds...): the
    interval then covers the network's variation over draws as well as the emulator's
    run-to-run noise.  ``same`` repeats the spec's own seed: the emulator's noise alone
    (the figures of one seed, as a README quotes them).

    >>> repeat_seeds(4, 1)
    [4]
    >>> seeds = repeat_seeds(4, 3); seeds[0], len(set(seeds))
    (4, 3)
    >>> repeat_seeds(4, 3, same=True)
    [4, 4, 4]
    """
    if not 1 <= runs <= MAX_REPEAT:
        raise ValueError(f"runs must be in [1, {MAX_REPEAT}] (got {runs})")
    if same:
        return [seed] * runs
    return [seed] + [derive_seed(seed, "repeat", index) for index in range(1, runs)]


def _number(value):
    """``value`` as a float if it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def describe(values):
    """Mean, 95% confidence interval of the mean (Student t), min and max of the measured ``values``.

    Values that are not numbers (None: not measured) are left out and counted in ``missing``.

    Args:
        values: one metric's values, one per run.

    Returns:
        dict: ``n``, ``missing``, ``mean``, ``ci95`` (half width; 0 for one value), ``low``/``high``
        (the interval's ends), ``min``, ``max``, ``stdev``; the numbers are None when no value was measured.

    >>> row = describe([1.0, 2.0, 3.0]); row["mean"], round(row["ci95"], 3), row["min"], row["max"]
    (2.0, 2.484, 1.0, 3.0)
    >>> describe([None, 5])["n"], describe([None, 5])["missing"], describe([None, 5])["ci95"]
    (1, 1, 0.0)
    """
    numbers = [number for number in (_number(value) for value in values) if number is not None]
    missing = len(values) - len(numbers)
    if not numbers:
        return {"n": 0, "missing": missing, "mean": None, "ci95": None, "low": None, "high": None,
                "min": None, "max": None, "stdev": None}
    count = len(numbers)
    mean = sum(numbers) / count
    stdev = math.sqrt(sum((number - mean) ** 2 for number in numbers) / (count - 1)) if count > 1 else 0.0
    half = t95(count - 1) * stdev / math.sqrt(count) if count > 1 else 0.0
    return {"n": count, "missing": missing, "mean": mean, "ci95": half, "low": mean - half, "high": mean + half,
            "min": min(numbers), "max": max(numbers), "stdev": stdev}


def numeric(values):
    """True when every measured value of a column is a number (a column with statistics)."""
    measured = [value for value in values if value is not None]
    return bool(measured) and all(_number(value) is not None for value in measured)


def separable(first, second):
    """Can two rows' values of one metric be told apart?  (:func:`describe` results.)

    True when their 95% intervals do not overlap, or when both are exactly the same
    constant (nothing to tell apart, no ordering to misread); None when either was not measured.

    >>> separable(describe([1, 1.1, 0.9]), describe([3, 3.2, 2.8]))
    True
    >>> separable(describe([1, 2, 3]), describe([2, 3, 4]))
    False
    >>> separable(describe([0, 0]), describe([0, 0]))
    True
    """
    if not first["n"] or not second["n"]:
        return None
    if first["mean"] == second["mean"] and first["ci95"] == 0 and second["ci95"] == 0:
        return True
    return first["high"] < second["low"] or second["high"] < first["low"]


def separability(labels, stats_by_label, keys):
    """The metrics whose rows overlap: ``{key: [(label, label), ...]}`` of the pairs not separable.

    Args:
        labels: the rows' labels in table order.
        stats_by_label: ``{label: {key: describe(...)}}``.
        keys: the metric keys to check.

    Returns:
        dict: only the keys with at least one pair not separable.

    >>> stats = {"a": {"m": describe([1, 2, 3])}, "b": {"m": describe([2, 3, 4])}, "c": {"m": describe([9, 9.1])}}
    >>> separability(["a", "b", "c"], stats, ["m"])
    {'m': [('a', 'b')]}
    """
    found = {}
    for key in keys:
        pairs = []
        for index, first in enumerate(labels):
            for second in labels[index + 1:]:
                a, b = stats_by_label[first].get(key), stats_by_label[second].get(key)
                if a and b and separable(a, b) is False:
                    pairs.append((first, second))
        if pairs:
            found[key] = pairs
    return found


def tally(values):
    """A text column over repeats: the value when all agree, else ``value xcount`` parts.

    >>> tally(["ok", "ok"]), tally(["ok", "error", "ok"]), tally([None, None])
    ('ok', 'ok x2, error x1', None)
    """
    counts = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{value if value is not None else '-'} x{count}" for value, count in counts.items())
