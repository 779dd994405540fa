//! End-to-end tests across crates: sim → TCP/serial → collector → trace.db → analysis, fault injection, and
//! the executable form of the dependency rules of docs/ARCHITECTURE.md.
//!
//! Start here: `tests/dependency_rules.rs`, and [`cargo_tree`] which it uses.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

pub mod modules;

/// The set of crate names `package` depends on (normal dependencies, transitively), as `cargo tree` sees
/// them with the given extra arguments (features, target).
pub fn cargo_tree(package: &str, extra: &[&str]) -> Result<BTreeSet<String>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args([
            "tree", "-q", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {package} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// How `package` comes to depend on `dependency`: `cargo tree --invert` from the dependency up to the
/// package, one crate a line, indented by depth (with the same extra arguments as [`cargo_tree`]).
pub fn dependency_path(package: &str, extra: &[&str], dependency: &str) -> Result<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args([
            "tree", "-q", "-p", package, "-e", "normal", "-i", dependency, "--format", "{p}",
        ])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {package} -i {dependency} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// The names of the workspace's packages.
pub fn workspace_packages() -> Result<BTreeSet<String>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))?;
    Ok(meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect())
}

/// The source directory of every library and binary crate of the workspace (package name, directory of its
/// `lib.rs` or `main.rs`), from `cargo metadata`; binaries under `src/bin/` are left out.
pub fn workspace_source_dirs() -> Result<Vec<(String, PathBuf)>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))?;
    let mut dirs = BTreeSet::new();
    for package in meta["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or_default();
        for target in package["targets"].as_array().into_iter().flatten() {
            let is_crate = target["kind"].as_array().into_iter().flatten().any(|k| {
                matches!(
                    k.as_str(),
                    Some("lib" | "rlib" | "cdylib" | "staticlib" | "bin")
                )
            });
            let Some(src) = target["src_path"].as_str().map(PathBuf::from) else {
                continue;
            };
            let Some(dir) = src.parent() else { continue };
            if is_crate && !dir.ends_with("bin") {
                dirs.insert((name.to_string(), dir.to_path_buf()));
            }
        }
    }
    Ok(dirs.into_iter().collect())
}
