//! The import graph between the modules of one crate, read from its source files, and the cycles in it.
//!
//! A module `a` imports a module `b` when `a`'s code (comments, string literals and `#[cfg(test)]` modules
//! left out) names a path `crate::b…` or `super::b…` that resolves to `b`, or to an item inside it. A module
//! and its own ancestors or descendants are not counted as importing each other: a child using its parent's
//! items, and a parent declaring and re-exporting its children, is how Rust modules nest. A cycle between
//! unrelated modules (`writer` → `recovery` → `catalog` → `reader` → `writer`) means none of them can be
//! read, tested or moved without the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`gui::gantt`; the crate root is `""`) → the modules it imports.
pub type ModuleGraph = BTreeMap<String, BTreeSet<String>>;

/// The import graph of the crate whose root file (`lib.rs` or `main.rs`) is in `src_dir`. Files under
/// `src_dir/bin/` are other crates and left out.
pub fn crate_module_graph(src_dir: &Path) -> Result<ModuleGraph, String> {
    let mut files = Vec::new();
    collect_rs_files(src_dir, src_dir, &mut files)?;
    let mut sources = BTreeMap::new();
    for file in files {
        let module = module_path(src_dir, &file);
        if module.rsplit("::").next() == Some("tests") {
            // A `#[cfg(test)] mod tests;` in a file of its own: test code, like the inline ones.
            continue;
        }
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        sources.insert(module, code_only(&text));
    }
    Ok(graph_of_sources(&sources))
}

/// The import graph of modules given as (module path → code with comments and strings removed).
pub fn graph_of_sources(sources: &BTreeMap<String, String>) -> ModuleGraph {
    let modules: BTreeSet<&str> = sources.keys().map(String::as_str).collect();
    let mut graph = ModuleGraph::new();
    for (module, code) in sources {
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        let mut imports = BTreeSet::new();
        for (anchor, path) in referenced_paths(code) {
            let base = match anchor {
                Anchor::Crate => String::new(),
                Anchor::Super if module.is_empty() => continue,
                Anchor::Super => parent.to_string(),
            };
            // The longest prefix of the path that names a module of the crate.
            let mut target = None;
            for k in (1..=path.len()).rev() {
                let candidate = join(&base, &path[..k].join("::"));
                if modules.contains(candidate.as_str()) {
                    target = Some(candidate);
                    break;
                }
            }
            if let Some(target) = target
                && !is_same_line(module, &target)
            {
                imports.insert(target);
            }
        }
        graph.insert(module.clone(), imports);
    }
    graph
}

/// Every cycle of `graph`: its strongly connected components of more than one module, each sorted.
pub fn import_cycles(graph: &ModuleGraph) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative so that deep module trees cannot overflow the stack.
    let names: Vec<&String> = graph.keys().collect();
    let index_of: BTreeMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let edges: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            graph[*n]
                .iter()
                .filter_map(|t| index_of.get(t.as_str()).copied())
                .collect()
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut cycles) = (Vec::new(), 0, Vec::new());
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(*edge) {
                *edge += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    cycles.push(component);
                }
            }
        }
    }
    cycles
}

/// `source` with comments, string and char literals emptied and `#[cfg(test)]` modules removed, so that
/// only code that builds into the product names modules.
pub fn code_only(source: &str) -> String {
    let stripped = strip_comments_and_literals(source);
    remove_test_modules(&stripped)
}

fn strip_comments_and_literals(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(' ');
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // A raw string: r"…", r#"…"#, … (or an identifier like `r#type`, kept as is).
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += 2 + hashes;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{7f}') or a lifetime ('a), which has no closing quote.
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                    out.push_str("' '");
                } else if let Some(c) = s[i + 1..].chars().next()
                    && s[i + 1 + c.len_utf8()..].starts_with('\'')
                {
                    i += 2 + c.len_utf8();
                    out.push_str("' '");
                } else {
                    out.push('\'');
                    i += 1;
                }
            }
            _ => {
                let c = s[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

fn remove_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = after.trim_start();
        if item.starts_with("mod ")
            && let Some(open) = item.find(['{', ';'])
            && item.as_bytes()[open] == b'{'
        {
            let mut depth = 0usize;
            let mut end = item.len();
            for (k, c) in item[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &item[end..];
        } else {
            // A test-only item other than an inline module (a `mod tests;` file, a function): the file
            // itself is left out by its path, the rest is kept.
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Anchor {
    Crate,
    Super,
}

/// Every path that starts at `crate::` or `super::`, grouped imports (`use crate::{a::B, c}`) expanded.
fn referenced_paths(code: &str) -> Vec<(Anchor, Vec<String>)> {
    let mut found = Vec::new();
    let b = code.as_bytes();
    for (anchor, word) in [(Anchor::Crate, "crate::"), (Anchor::Super, "super::")] {
        let mut from = 0;
        while let Some(at) = code[from..].find(word) {
            let start = from + at;
            from = start + word.len();
            if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
                continue;
            }
            // `super::super::x` climbs further than one level: rare, and resolved as the sibling `super`.
            let mut pos = from;
            parse_use_tree(code, &mut pos, Vec::new(), &mut |path| {
                found.push((anchor, path))
            });
        }
    }
    found
}

/// Parses `a::b::{c, d::e}` at `pos`, handing every leaf path (prefixed) to `leaf`.
fn parse_use_tree(
    code: &str,
    pos: &mut usize,
    prefix: Vec<String>,
    leaf: &mut dyn FnMut(Vec<String>),
) {
    let b = code.as_bytes();
    let skip_ws = |pos: &mut usize| {
        while *pos < b.len() && b[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
    };
    let mut path = prefix;
    loop {
        skip_ws(pos);
        if b.get(*pos) == Some(&b'{') {
            *pos += 1;
            loop {
                skip_ws(pos);
                match b.get(*pos) {
                    None => return,
                    Some(b'}') => {
                        *pos += 1;
                        return;
                    }
                    Some(b',') => *pos += 1,
                    Some(_) => {
                        let before = *pos;
                        parse_use_tree(code, pos, path.clone(), leaf);
                        if *pos == before {
                            *pos += 1;
                        }
                    }
                }
            }
        }
        let start = *pos;
        while *pos < b.len() && (b[*pos].is_ascii_alphanumeric() || b[*pos] == b'_') {
            *pos += 1;
        }
        if *pos == start {
            if !path.is_empty() {
                leaf(path);
            }
            return;
        }
        let ident = &code[start..*pos];
        if ident != "self" {
            path.push(ident.to_string());
        }
        if code[*pos..].starts_with("::") {
            *pos += 2;
        } else {
            leaf(path);
            return;
        }
    }
}

/// Whether `a` and `b` are the same module or one contains the other.
fn is_same_line(a: &str, b: &str) -> bool {
    let within = |inner: &str, outer: &str| {
        outer.is_empty() || inner == outer || inner.starts_with(&format!("{outer}::"))
    };
    within(a, b) || within(b, a)
}

fn join(base: &str, rest: &str) -> String {
    if base.is_empty() {
        rest.to_string()
    } else {
        format!("{base}::{rest}")
    }
}

fn module_path(src_dir: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src_dir)
        .unwrap_or(file)
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts.join("::")
}

fn collect_rs_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if path.is_dir() {
            if path != root.join("bin") {
                collect_rs_files(root, &path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
