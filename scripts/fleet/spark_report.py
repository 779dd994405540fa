#!/usr/bin/env python3
"""socscope's fleet report on Apache Spark: the report of `socscope fleet report`, computed from the same
Parquet dataset (docs/FLEET.md) with the same SQL in Spark's dialect, so that a fleet too large for one
machine gets the same numbers from a cluster. The code is the same on a laptop and on a cluster: the
dataset is a path or any URI Spark reads (s3a://bucket/fleet, hdfs://...), the master comes from
spark-submit or --master.

    python3 scripts/fleet/spark_report.py DATASET [--where SQL] [--reference TRACE_ID] [--json OUT]
    spark-submit --master yarn scripts/fleet/spark_report.py s3a://rig/fleet --reference ID --json -

Departure scores use the `compare` engine's algorithm (analyzer/core/src/compare.rs: the Ocelotl temporal
aggregation of |run - reference|, windows scored by the dissimilarity of their state proportions), ported
below operation for operation so that its floating-point results are the same bits.
"""

import argparse
import json
import math
import struct
import sys
import time

TABLES = ["traces", "events", "producers", "types", "losses"]


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def selection(where):
    if where:
        return f"sel AS (SELECT * FROM traces WHERE ({where}))"
    return "sel AS (SELECT * FROM traces)"


def nights_sql(o):
    return f"""WITH {selection(o.where)}
SELECT board, date, count(*) AS runs, sum(events) AS events, sum(lost_records) AS lost_records,
       sum(loss_records) AS loss_records, sum(duration_ns) AS duration_ns
FROM sel GROUP BY board, date ORDER BY board, date"""


def states_sql(o):
    return f"""WITH {selection(o.where)},
hist AS (SELECT e.board, e.date, e.type, e.duration_ns AS d, count(*) AS n
         FROM events e JOIN sel s ON e.trace_id = s.trace_id
         WHERE e.category = 'state' GROUP BY e.board, e.date, e.type, e.duration_ns),
cum AS (SELECT board, date, type, d, n,
               sum(n) OVER (PARTITION BY board, date, type ORDER BY d ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS c,
               sum(n) OVER (PARTITION BY board, date, type) AS total
        FROM hist)
SELECT board, date, type, max(total) AS states,
       min(CASE WHEN c * 100 >= total * 50 THEN d END) AS p50_ns,
       min(CASE WHEN c * 100 >= total * 99 THEN d END) AS p99_ns,
       max(d) AS max_ns
FROM cum GROUP BY board, date, type ORDER BY board, date, type"""


def gaps_sql(o):
    name = quote(o.periodic)
    return f"""WITH {selection(o.where)},
occ AS (SELECT e.board, e.date, e.trace_id, e.ts_ns FROM events e JOIN sel s ON e.trace_id = s.trace_id
        WHERE (e.producer = {name} OR e.type = {name}) AND e.category IN ('state', 'punctual')),
iv AS (SELECT board, date, ts_ns - lag(ts_ns) OVER (PARTITION BY trace_id ORDER BY ts_ns) AS gap FROM occ)
SELECT board, date, count(gap) AS intervals,
       sum(CASE WHEN gap > {o.gap_bound_ns} THEN 1 ELSE 0 END) AS beyond_bound,
       max(gap) AS max_interval_ns
FROM iv GROUP BY board, date ORDER BY board, date"""


def runs_sql(o):
    return f"""WITH {selection(o.where)},
ref AS (SELECT trace_id, t_min_ns, t_max_ns FROM traces WHERE trace_id = {quote(o.reference)})
SELECT s.trace_id, s.board, s.date,
       s.t_max_ns + 1 - s.t_min_ns AS run_ns, ref.t_max_ns + 1 - ref.t_min_ns AS ref_ns
FROM sel s CROSS JOIN ref WHERE s.trace_id <> ref.trace_id ORDER BY s.trace_id"""


def state_time_sql(o):
    n = max(o.slices, 1)
    r = quote(o.reference)
    return f"""WITH {selection(o.where)},
ref AS (SELECT trace_id, t_min_ns, t_max_ns FROM traces WHERE trace_id = {r}),
grids AS (SELECT s.trace_id AS run, s.t_min_ns AS run_lo, ref.t_min_ns AS ref_lo,
                 greatest(s.t_max_ns + 1 - s.t_min_ns, ref.t_max_ns + 1 - ref.t_min_ns, {n}) AS len
          FROM sel s CROSS JOIN ref WHERE s.trace_id <> ref.trace_id),
spans AS (SELECT g.run, 'run' AS side, e.producer, e.type, e.ts_ns, e.ts_ns + e.duration_ns AS end_ns, g.run_lo AS lo, g.len
          FROM events e JOIN grids g ON e.trace_id = g.run WHERE e.category = 'state'
          UNION ALL
          SELECT g.run, 'ref' AS side, e.producer, e.type, e.ts_ns, e.ts_ns + e.duration_ns AS end_ns, g.ref_lo AS lo, g.len
          FROM events e CROSS JOIN grids g WHERE e.trace_id = {r} AND e.category = 'state'),
clipped AS (SELECT run, side, producer, type, lo, len,
                   greatest(ts_ns, lo) AS a, least(end_ns, lo + len) AS b FROM spans),
cut AS (SELECT run, side, producer, type, lo, len, a, b,
               explode(sequence(({n} * (a - lo + 1) - 1) div len, ({n} * (b - lo) - 1) div len)) AS slice
        FROM clipped WHERE b > a)
SELECT run, side, producer, type, slice,
       sum(least(b, lo + (len * (slice + 1)) div {n}) - greatest(a, lo + (len * slice) div {n})) AS ns
FROM cut GROUP BY run, side, producer, type, slice"""


# --- The compare engine (analyzer/core/src/compare.rs and ocelotl/temporal.rs), operation for operation.

LN2 = math.log(2.0)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def ieee_div(a, b):
    """a / b as IEEE 754 (and Rust) divides: by zero gives an infinity or NaN instead of an exception."""
    if b != 0.0:
        return a / b
    if a == 0.0 or a != a:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def entropy(x):
    return (x * math.log(x)) / LN2


def entropy_reduction(s, micro):
    return entropy(s) - micro if s > 0.0 else 0.0


def divergence(ln_size, s, reduction):
    return (s * ln_size) / LN2 - reduction


def best_partition(series, n, p):
    """TemporalAggregation::new(model, normalize=true).best_partition(p) for a model of one type."""
    active = []
    for values in series:
        if any(v != 0.0 for v in values):
            active.append((values, [entropy_reduction(v, 0.0) for v in values]))
    ln = [-math.inf] + [math.log(k) for k in range(1, n + 1)]
    gain = [[0.0] * n for _ in range(n)]  # gain[start][end]
    loss = [[0.0] * n for _ in range(n)]
    for start in range(n):
        g = gain[start]
        lo = loss[start]
        for values, micro in active:
            s = values[start]
            e = micro[start]
            for i in range(1, n - start):
                s += values[start + i]
                e += micro[start + i]
                red = entropy_reduction(s, e)
                g[start + i] += red
                lo[start + i] += divergence(ln[i + 1], s, red)
    wg, wl = gain[0][n - 1], loss[0][n - 1]
    for start in range(n):
        for end in range(start, n):
            gain[start][end] = ieee_div(gain[start][end], wg)
            loss[start][end] = ieee_div(loss[start][end], wl)
    p32 = f32(p)
    pd = p32
    q1 = f32(1.0 - p32)
    best = [0.0] * n
    cut = [0] * n
    for end in range(1, n):
        cq = pd * gain[0][end] - q1 * loss[0][end]
        cc = 0
        for k in range(1, end + 1):
            val = (best[k - 1] + pd * gain[k][end]) - q1 * loss[k][end]
            if val >= cq:
                cc = k
                cq = val
        cut[end] = cc
        best[end] = cq
    ranges = []
    end = n
    while end > 0:
        start = cut[end - 1]
        ranges.append((start, end - 1))
        end = start
    ranges.reverse()
    return ranges


def fsum(values):
    acc = -0.0
    for v in values:
        acc += v
    return acc


def compare_state_time(ref, run, ref_ns, run_ns, slices, threshold, p):
    """compare::compare_state_time: the windows of a run against the reference."""
    length = max(ref_ns, run_ns, max(slices, 1))
    zero = [0.0] * slices
    names = sorted(set(ref) | set(run))
    rv = [ref.get(k, zero) for k in names]
    xv = [run.get(k, zero) for k in names]
    slice_ns = float(length) / float(slices)
    if not names:
        ranges = [(0, slices - 1)]
    else:
        series = [[abs(xv[k][t] - rv[k][t]) for t in range(slices)] for k in range(len(names))]
        ranges = best_partition(series, slices, p)
    windows = []
    for a, b in ranges:
        span = slice_ns * float(b - a + 1)
        rs = [fsum(s[a:b + 1]) / span for s in rv]
        xs = [fsum(s[a:b + 1]) / span for s in xv]
        diff, both = 0.0, 0.0
        for r, x in zip(rs, xs):
            diff += abs(x - r)
            both += x if x > r else r
        score = diff / both if both > 0.0 else 0.0
        by_producer = {}
        for k, (prod, _ty) in enumerate(names):
            m = by_producer.setdefault(prod, [0.0, 0.0])
            m[0] += rs[k]
            m[1] += xs[k]
        moving = any(m[1] - m[0] != 0.0 for m in by_producer.values())
        windows.append({"score": score, "departure": score >= threshold, "moving": moving})
    merged = []
    for w in windows:
        if merged and merged[-1]["score"] == 0.0 and w["score"] == 0.0 and not merged[-1]["moving"] and not w["moving"]:
            continue
        merged.append(w)
    max_score = 0.0
    for w in merged:
        max_score = max(max_score, w["score"])
    return len(merged), sum(1 for w in merged if w["departure"]), max_score


# --- The report.


def rows(spark, sql):
    return [r.asDict() for r in spark.sql(sql).collect()]


def as_int(v):
    return 0 if v is None else int(v)


def report(spark, o):
    nights = [
        {
            "board": r["board"], "date": r["date"], "runs": as_int(r["runs"]), "events": as_int(r["events"]),
            "lost_records": as_int(r["lost_records"]), "loss_records": as_int(r["loss_records"]),
            "duration_ns": as_int(r["duration_ns"]),
        }
        for r in rows(spark, nights_sql(o))
    ]
    states = [
        {
            "board": r["board"], "date": r["date"], "type": r["type"], "states": as_int(r["states"]),
            "p50_ns": as_int(r["p50_ns"]), "p99_ns": as_int(r["p99_ns"]), "max_ns": as_int(r["max_ns"]),
        }
        for r in rows(spark, states_sql(o))
    ]
    gaps = [
        {
            "board": r["board"], "date": r["date"], "intervals": as_int(r["intervals"]),
            "beyond_bound": as_int(r["beyond_bound"]), "max_interval_ns": as_int(r["max_interval_ns"]),
        }
        for r in rows(spark, gaps_sql(o))
    ]
    departures = None
    if o.reference:
        known = rows(spark, f"SELECT count(*) AS n FROM traces WHERE trace_id = {quote(o.reference)}")
        if not known or known[0]["n"] != 1:
            raise SystemExit(f"spark_report: --reference {o.reference}: no such trace in the dataset")
        slices = max(o.slices, 1)
        models = {}
        for r in rows(spark, state_time_sql(o)):
            key = (r["run"], r["side"] == "ref")
            series = models.setdefault(key, {}).setdefault((r["producer"], r["type"]), [0.0] * slices)
            series[int(r["slice"])] += float(r["ns"])
        runs = []
        for r in rows(spark, runs_sql(o)):
            x = {k: v for k, v in models.get((r["trace_id"], False), {}).items() if any(t != 0.0 for t in v)}
            rf = {k: v for k, v in models.get((r["trace_id"], True), {}).items() if any(t != 0.0 for t in v)}
            windows, departing, max_score = compare_state_time(
                rf, x, max(int(r["ref_ns"]), 1), max(int(r["run_ns"]), 1), slices, o.threshold, o.p
            )
            runs.append({
                "trace_id": r["trace_id"], "board": r["board"], "date": r["date"], "windows": windows,
                "departures": departing, "max_score": max_score,
            })
        departures = {"reference": o.reference, "slices": slices, "threshold": o.threshold, "p": o.p, "runs": runs}
    return {
        "where": o.where, "nights": nights, "states": states, "periodic": o.periodic,
        "gap_bound_ns": o.gap_bound_ns, "gaps": gaps, "departures": departures,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", help="the dataset: a directory or any URI Spark reads")
    ap.add_argument("--where", help="a condition on the traces table (and board, date) choosing the runs")
    ap.add_argument("--reference", help="the reference run's trace id")
    ap.add_argument("--periodic", default="vsync", help="producer or type name of the periodic event")
    ap.add_argument("--gap-bound-ns", type=int, default=25_000_000, help="an interval beyond this is a gap")
    ap.add_argument("--slices", type=int, default=100)
    ap.add_argument("--threshold", type=float, default=0.25)
    ap.add_argument("--p", type=float, default=0.5)
    ap.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    ap.add_argument("--json", metavar="OUT", help="write the report as JSON to OUT ('-': standard output)")
    ap.add_argument("--timings", action="store_true", help="print each query's seconds on standard error")
    o = ap.parse_args()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SystemExit("spark_report: pyspark is not installed (scripts/install-test-deps.sh installs it into target/python-venv)")
    builder = SparkSession.builder.appName("socscope-fleet-report")
    if o.master:
        builder = builder.master(o.master)
    # Partition values stay strings (board names that look like numbers, dates as text), as the report keys them.
    builder = builder.config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    builder = builder.config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    base = o.dataset.rstrip("/")
    for t in TABLES:
        spark.read.option("basePath", f"{base}/{t}").parquet(f"{base}/{t}").createOrReplaceTempView(t)
    started = time.time()
    rep = report(spark, o)
    if o.timings:
        print(f"spark_report: {time.time() - started:.2f} s", file=sys.stderr)
    text = json.dumps(rep, indent=2)
    if o.json and o.json != "-":
        with open(o.json, "w") as f:
            f.write(text)
    elif o.json == "-":
        print(text)
    else:
        for n in rep["nights"]:
            print(f"{n['board']}  {n['date']}  runs {n['runs']}  events {n['events']}  lost {n['lost_records']}")
        if rep["departures"]:
            for r in rep["departures"]["runs"]:
                print(f"{r['trace_id']}  departures {r['departures']}  max score {r['max_score']:.3f}")
    spark.stop()


if __name__ == "__main__":
    main()
