//! Filter terms that the files' statistics prove are not evaluated row by row, and the rows stay the
//! same: a time window over whole captures, one that cuts a capture, one that covers one board's files
//! but not another's, and terms the rule must leave alone.
#![cfg(feature = "fleet")]

use socscope_fleet::Dataset;
use socscope_fleet::query::{Engine, Rows};
use socscope_fleet::sync::{SyncOptions, sync};

mod common;
use common::{DAY, NIGHT, write_trace};

fn dataset() -> (tempfile::TempDir, Engine) {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("rig");
    std::fs::create_dir_all(&cat).unwrap();
    // Board 1: 2 000 rounds of 1 µs from NIGHT; board 2: 500 rounds a day later.
    write_trace(&cat, "a", "stb-1", NIGHT, 2_000, false, true);
    write_trace(&cat, "b", "stb-2", NIGHT + DAY, 500, false, true);
    let out = tmp.path().join("ds");
    let s = sync(&[cat], &out, SyncOptions::default(), &mut |_| {}).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let engine = Engine::open(&Dataset::open(&out).unwrap()).unwrap();
    (tmp, engine)
}

fn plan(engine: &Engine, sql: &str) -> String {
    let rows = engine.rows(&format!("EXPLAIN {sql}")).unwrap();
    let col = rows.col("plan").unwrap();
    rows.rows
        .iter()
        .map(|r| r[col].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The query's rows, and the same query with its time terms hidden from the rule (`+ 0`), sorted.
fn both(engine: &Engine, sql: &str) -> (Rows, Rows) {
    let sorted = |mut r: Rows| {
        r.rows.sort_by_key(|row| format!("{row:?}"));
        r
    };
    let plain = sql.replace("time_unix_ns", "(time_unix_ns + 0)");
    (
        sorted(engine.rows(sql).unwrap()),
        sorted(engine.rows(&plain).unwrap()),
    )
}

fn count_by_type(board: &str, from: i64, to: i64) -> String {
    format!(
        "SELECT type, count(*) AS n FROM events WHERE board = '{board}' AND time_unix_ns >= {from} \
         AND time_unix_ns < {to} GROUP BY type"
    )
}

#[test]
fn a_window_over_whole_files_is_not_evaluated_and_counts_every_row() {
    let (_tmp, engine) = dataset();
    let hour = 3_600_000_000_000;
    let sql = count_by_type("stb-1", NIGHT - hour, NIGHT + hour);
    let p = plan(&engine, &sql);
    assert!(!p.contains("FilterExec"), "{p}");
    // The time column is no longer read by the scan either.
    let scan = p.lines().find(|l| l.contains("DataSourceExec")).unwrap();
    let projection = scan.split("projection=[").nth(1).unwrap();
    assert!(
        !projection
            .split(']')
            .next()
            .unwrap()
            .contains("time_unix_ns"),
        "{scan}"
    );
    let (with_rule, without) = both(&engine, &sql);
    assert_eq!(with_rule, without);
    let n: i64 = with_rule.rows.iter().map(|r| r[1].as_i64().unwrap()).sum();
    assert_eq!(n, 2_000 * 2 + 400 * 2, "every event of board 1");
}

#[test]
fn a_window_that_cuts_a_file_is_evaluated() {
    let (_tmp, engine) = dataset();
    // Rounds are 1 µs apart: the first 500 µs keep about a quarter of board 1's events.
    let sql = count_by_type("stb-1", NIGHT, NIGHT + 500_000);
    assert!(plan(&engine, &sql).contains("FilterExec"));
    let (with_rule, without) = both(&engine, &sql);
    assert_eq!(with_rule, without);
    let n: i64 = with_rule.rows.iter().map(|r| r[1].as_i64().unwrap()).sum();
    assert!(n > 0 && n < 4_800, "{n}");
}

#[test]
fn every_file_of_the_scan_must_satisfy_the_term() {
    let (_tmp, engine) = dataset();
    // Covers board 1's night whole and none of board 2's: with both boards scanned, the term stays.
    let sql = "SELECT board, count(*) AS n FROM events WHERE time_unix_ns < 20515 * 86400000000000 \
               GROUP BY board";
    let sql = sql.replace("20515 * 86400000000000", &(NIGHT + DAY / 2).to_string());
    assert!(plan(&engine, &sql).contains("FilterExec"));
    let (with_rule, without) = both(&engine, &sql);
    assert_eq!(with_rule, without);
    assert_eq!(
        with_rule.rows.len(),
        1,
        "only board 1: {:?}",
        with_rule.rows
    );
    // The same bound with board 2's partition pruned away: now every file satisfies it.
    let one = format!(
        "{} AND board = 'stb-1' GROUP BY board",
        sql.split(" GROUP BY").next().unwrap()
    );
    assert!(!plan(&engine, &one).contains("FilterExec"));
    assert_eq!(both(&engine, &one).0, with_rule);
}

#[test]
fn other_terms_stay_and_a_limit_keeps_its_filter() {
    let (_tmp, engine) = dataset();
    let hour = 3_600_000_000_000;
    // The proven time term goes, the type term stays.
    let sql = format!(
        "SELECT count(*) AS n FROM events WHERE board = 'stb-1' AND time_unix_ns >= {} AND type = 'irq'",
        NIGHT - hour
    );
    let p = plan(&engine, &sql);
    let filter = p.lines().find(|l| l.contains("FilterExec")).expect(&p);
    assert!(
        filter.contains("type") && !filter.contains("time_unix_ns"),
        "{filter}"
    );
    let (with_rule, without) = both(&engine, &sql);
    assert_eq!(with_rule, without);
    assert_eq!(with_rule.rows[0][0].as_i64(), Some(2_000));
    // Rows out of a proven filter under a LIMIT: as many as asked.
    let limited = format!(
        "SELECT ts_ns FROM events WHERE board = 'stb-1' AND time_unix_ns >= {} LIMIT 7",
        NIGHT - hour
    );
    assert_eq!(engine.rows(&limited).unwrap().rows.len(), 7);
}
