//! ARCHITECTURE.md's dependency rules, checked with `cargo tree` so a forbidden dependency fails the build.

use socscope_tests::{cargo_tree, workspace_packages};

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
        "socscope-sim",
        &[],
        &["socscope-analyzer", "rusqlite", "egui", "eframe"],
    ),
];

#[test]
fn forbidden_dependencies_are_absent() {
    let present = workspace_packages().expect("cargo metadata");
    let mut checked = 0;
    let mut violations = Vec::new();
    for (package, extra, forbidden) in RULES {
        if !present.contains(*package) {
            continue;
        }
        checked += 1;
        let deps = cargo_tree(package, extra).expect("cargo tree");
        for f in *forbidden {
            if deps.contains(*f) {
                violations.push(format!("{package} depends on {f}"));
            }
        }
    }
    assert!(
        checked >= 3,
        "the wire, agent and sim crates at least are checked"
    );
    assert!(
        violations.is_empty(),
        "dependency rules broken: {violations:#?}"
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
