#!/usr/bin/env python3
"""One query of `socscope bench fleet` on another engine, for its anchors: DuckDB (the anchor DataFusion is
held to) or Spark in local mode, on the same Parquet files. Prints {"seconds": S, "hot_seconds": H, "rows": N}
for the query alone (the engine's start and the tables' registration are not counted): S for its first run,
H for the same query run again in the same session (DataFusion's side does the same).

    python3 scripts/fleet/bench_queries.py --engine duckdb DATASET "SELECT ..."
"""

import argparse
import json
import time

TABLES = ["traces", "events", "producers", "types", "losses"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=["duckdb", "spark"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("dataset")
    ap.add_argument("sql")
    o = ap.parse_args()
    base = o.dataset.rstrip("/")
    if o.engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute(f"SET threads = {o.threads}")
        for t in TABLES:
            con.execute(
                f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{base}/{t}/*/*/*.parquet', hive_partitioning = true, hive_types = {{'board': VARCHAR, 'date': VARCHAR}})"
            )
        seconds = []
        for _ in range(2):
            started = time.perf_counter()
            rows = con.execute(o.sql).fetchall()
            seconds.append(time.perf_counter() - started)
    else:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.appName("socscope-bench")
            .master(f"local[{o.threads}]")
            .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        for t in TABLES:
            spark.read.option("basePath", f"{base}/{t}").parquet(f"{base}/{t}").createOrReplaceTempView(t)
        seconds = []
        for _ in range(2):
            started = time.perf_counter()
            rows = spark.sql(o.sql).collect()
            seconds.append(time.perf_counter() - started)
        spark.stop()
    print(json.dumps({"engine": o.engine, "seconds": seconds[0], "hot_seconds": seconds[1], "rows": len(rows)}))


if __name__ == "__main__":
    main()
