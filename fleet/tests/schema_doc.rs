//! `docs/FLEET.md` is the dataset's contract: its column tables must equal the schemas the writer uses,
//! column by column (name, type, nullability), and every table must be documented.

use std::collections::BTreeMap;

use socscope_fleet::Table;
use socscope_fleet::schema::type_name;

/// `### name` sections of the document, each with its `| column | type | nullable | meaning |` rows.
fn documented() -> BTreeMap<String, Vec<(String, String, bool)>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/FLEET.md");
    let text = std::fs::read_to_string(path).expect("docs/FLEET.md");
    let mut out: BTreeMap<String, Vec<(String, String, bool)>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            current = Some(h.trim().to_owned());
            continue;
        }
        if line.starts_with("## ") {
            current = None;
        }
        let Some(table) = &current else { continue };
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if !line.trim_start().starts_with('|')
            || cells.len() < 4
            || cells[0] == "column"
            || cells[0].starts_with("---")
        {
            continue;
        }
        let nullable = match cells[2] {
            "yes" => true,
            "no" => false,
            other => panic!(
                "{table}.{}: nullable is {other:?}, expected yes or no",
                cells[0]
            ),
        };
        out.entry(table.clone()).or_default().push((
            cells[0].to_owned(),
            cells[1].to_owned(),
            nullable,
        ));
    }
    out
}

#[test]
fn the_document_describes_every_column_the_writer_writes() {
    let doc = documented();
    let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(
        doc.keys()
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>(),
        names.iter().copied().collect(),
        "documented tables"
    );
    for t in Table::ALL {
        let schema = t.schema();
        let written: Vec<(String, String, bool)> = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), type_name(f.data_type()), f.is_nullable()))
            .collect();
        assert_eq!(
            doc[t.name()],
            written,
            "table {} in docs/FLEET.md",
            t.name()
        );
    }
}

#[test]
fn the_checker_sees_a_difference() {
    // A column with another type in the document must not pass: the comparison is of real values.
    let doc = documented();
    let mut events = doc["events"].clone();
    events[2].1 = "int32".into();
    let written: Vec<(String, String, bool)> = Table::Events
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), type_name(f.data_type()), f.is_nullable()))
        .collect();
    assert_ne!(events, written);
}
