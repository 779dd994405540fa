//! The dependency rules of docs/ARCHITECTURE.md, checked with `cargo tree` so a forbidden dependency fails the build.

use std::collections::BTreeSet;

use socscope_tests::{
    cargo_tree, dependency_path, modules, workspace_packages, workspace_source_dirs,
};

/// (package, extra cargo-tree arguments, crates it must never pull in)
const RULES: &[(&str, &[&str], &[&str])] = &[
    (
        "socscope-wire",
        &["--no-default-features"],
        &[
            "tokio",
            "nom",
            "rusqlite",
            "zstd",
            "egui",
            "eframe",
            "serialport",
        ],
    ),
    (
        "socscope-agent",
        &[],
        &[
            "tokio",
            "nom",
            "rusqlite",
            "zstd",
            "egui",
            "eframe",
            "serialport",
        ],
    ),
    (
        "socscope-agent-capi",
        &[],
        &[
            "tokio",
            "nom",
            "rusqlite",
            "zstd",
            "egui",
            "eframe",
            "serialport",
        ],
    ),
    (
        "socscope-tracedb",
        &[],
        &[
            "tokio",
            "egui",
            "eframe",
            "socscope-wire",
            "socscope-analyzer",
        ],
    ),
    (
        "socscope-formats",
        &[],
        &["tokio", "egui", "eframe", "rusqlite", "socscope-analyzer"],
    ),
    (
        "socscope-collector",
        &[],
        &["egui", "eframe", "socscope-analyzer", "socscope-analysis"],
    ),
    (
        "socscope-analysis",
        &[],
        &[
            "egui",
            "eframe",
            "tokio",
            "socscope-collector",
            "socscope-wire",
            "socscope-analyzer",
        ],
    ),
    (
        // The dataset and its reports: the store and the analysis engine, never the GUI, the capture side
        // or the program; DataFusion only behind its feature `fleet` (its default build is the quick one).
        "socscope-fleet",
        &[],
        &[
            "egui",
            "eframe",
            "tokio",
            "datafusion",
            "socscope-collector",
            "socscope-wire",
            "socscope-analyzer",
        ],
    ),
    (
        "socscope-fleet",
        &["--features", "fleet"],
        &[
            "egui",
            "eframe",
            "socscope-collector",
            "socscope-wire",
            "socscope-analyzer",
        ],
    ),
    (
        "socscope-sim",
        &[],
        &["socscope-analyzer", "rusqlite", "egui", "eframe"],
    ),
];

/// What breaks `rules` in a workspace of `present` packages: a rule whose crate does not exist (renamed or
/// removed: its rule would silently stop applying), or a forbidden dependency, with the path that pulls it in.
fn broken_rules(rules: &[(&str, &[&str], &[&str])], present: &BTreeSet<String>) -> Vec<String> {
    let mut broken = Vec::new();
    for (package, extra, forbidden) in rules {
        if !present.contains(*package) {
            broken.push(format!(
                "{package}: no such crate in the workspace (renamed? update the rule)"
            ));
            continue;
        }
        let deps = cargo_tree(package, extra).expect("cargo tree");
        for f in *forbidden {
            if deps.contains(*f) {
                let path = dependency_path(package, extra, f)
                    .unwrap_or_else(|e| format!("(no path: {e})"));
                broken.push(format!("{package} depends on {f}:\n{path}"));
            }
        }
    }
    broken
}

#[test]
fn forbidden_dependencies_are_absent() {
    let present = workspace_packages().expect("cargo metadata");
    let broken = broken_rules(RULES, &present);
    assert!(
        broken.is_empty(),
        "dependency rules broken:\n{}",
        broken.join("\n\n")
    );
}

#[test]
fn a_rule_for_a_missing_crate_fails_and_a_violation_shows_its_path() {
    let present = workspace_packages().expect("cargo metadata");
    let broken = broken_rules(&[("socscope-renamed-away", &[], &["tokio"])], &present);
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(broken[0].contains("no such crate"), "{broken:?}");
    // The collector really uses tokio: the report names the chain from tokio up to the collector.
    let broken = broken_rules(&[("socscope-collector", &[], &["tokio"])], &present);
    assert_eq!(broken.len(), 1, "{broken:?}");
    let lines: Vec<&str> = broken[0].lines().collect();
    assert!(
        lines[0] == "socscope-collector depends on tokio:"
            && lines[1].starts_with("tokio v")
            && lines
                .iter()
                .any(|l| l.trim_start().contains("socscope-collector v")),
        "{broken:?}"
    );
}

#[test]
fn nothing_depends_on_the_application() {
    let present = workspace_packages().expect("cargo metadata");
    for package in present
        .iter()
        .filter(|p| p.as_str() != "socscope-analyzer" && p.as_str() != "socscope-tests")
    {
        let deps = cargo_tree(package, &[]).expect("cargo tree");
        assert!(
            !deps.contains("socscope-analyzer"),
            "{package} depends on the application crate"
        );
    }
}

#[test]
fn the_rule_checker_sees_real_dependencies() {
    // Guards the checker itself: the decoder feature must pull in nom and zstd, or the rules above prove nothing.
    let deps = cargo_tree("socscope-wire", &["--features", "decode"]).expect("cargo tree");
    assert!(deps.contains("nom") && deps.contains("zstd"), "{deps:?}");
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut cycles = Vec::new();
    let dirs = workspace_source_dirs().expect("cargo metadata");
    assert!(
        dirs.iter().any(|(p, _)| p == "socscope-tracedb"),
        "the store's sources are among {dirs:?}"
    );
    for (package, dir) in dirs {
        let graph = modules::crate_module_graph(&dir).expect("readable sources");
        for cycle in modules::import_cycles(&graph) {
            let edges: Vec<String> = cycle
                .iter()
                .flat_map(|m| {
                    graph[m]
                        .iter()
                        .filter(|t| cycle.contains(t))
                        .map(move |t| format!("{m} → {t}"))
                })
                .collect();
            cycles.push(format!("{package}: {}", edges.join(", ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other (move what both need into a module of its own):\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_checker_sees_cycles_through_grouped_imports_and_not_through_comments() {
    use std::collections::BTreeMap;
    let sources: BTreeMap<String, String> = [
        ("", "mod a; mod b; mod c; mod d;"),
        ("a", "use crate::{b::Thing, c};"),
        ("b", "pub struct Thing; fn f() { super::c::g(); }"),
        (
            "c",
            "// crate::d::x() is only a comment\nfn g() { let s = \"crate::d\"; crate::a::h(); }",
        ),
        (
            "d",
            "/// See [`crate::a`].\nfn x() {} #[cfg(test)] mod tests { use crate::a; }",
        ),
        ("d::inner", "use super::x; use crate::d::x as y;"),
    ]
    .into_iter()
    .map(|(m, s)| (m.to_string(), modules::code_only(s)))
    .collect();
    let graph = modules::graph_of_sources(&sources);
    assert_eq!(graph["a"], ["b", "c"].map(String::from).into());
    assert!(graph["d"].is_empty(), "{:?}", graph["d"]);
    assert!(
        graph["d::inner"].is_empty(),
        "a child using its parent: {:?}",
        graph["d::inner"]
    );
    assert_eq!(
        modules::import_cycles(&graph),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
}
