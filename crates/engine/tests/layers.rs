//! The engine's modules import only downwards (D-050): the leaves, then `os` and `format`,
//! then `store`, then the features; and no two modules import each other, directly or
//! through others. Read from the sources, so a new `use crate::...` that breaks this fails
//! here rather than in review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The unit a source file belongs to: `os/fork`, `format/value`, `cache`, `error`, ...
fn unit_of_file(relative: &str) -> String {
    let mut parts: Vec<&str> = relative.trim_end_matches(".rs").split('/').collect();
    if parts.last() == Some(&"mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [group, name, ..] if ["os", "format", "store"].contains(group) => {
            format!("{group}/{name}")
        }
        [name, ..] => (*name).to_owned(),
        [] => "lib".to_owned(),
    }
}

/// The unit a `crate::a::b` path names, or `None` for a root re-export (`crate::Error`).
fn unit_of_path(path: &[&str]) -> Option<String> {
    match path {
        [group, name, ..] if ["os", "format", "store"].contains(group) => {
            Some(format!("{group}/{name}"))
        }
        [group] if ["os", "format", "store"].contains(group) => None,
        [name, ..] if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) => {
            Some((*name).to_owned())
        }
        _ => None,
    }
}

fn layer(unit: &str) -> u8 {
    match unit {
        "names" => 0,
        "error" => 1,
        "basics" | "settings" => 2,
        u if u.starts_with("os/") || u.starts_with("format/") => 3,
        u if u.starts_with("store/") => 4,
        _ => 5,
    }
}

fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((relative, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// unit -> the units it imports, from every `crate::a::b` outside comments.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (relative, text) in files {
        let unit = unit_of_file(&relative);
        if unit == "lib" {
            continue;
        }
        let entry = graph.entry(unit.clone()).or_default();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let path: Vec<&str> = rest
                    .split("::")
                    .map(|p| p.split(|c: char| !(c.is_alphanumeric() || c == '_')).next())
                    .take_while(|p| p.is_some_and(|p| !p.is_empty()))
                    .map(Option::unwrap)
                    .collect();
                if let Some(target) = unit_of_path(&path) {
                    if target != unit {
                        entry.insert(target);
                    }
                }
            }
        }
    }
    graph
}

#[test]
fn modules_import_only_downwards() {
    let graph = imports();
    assert!(graph.contains_key("os/platform") && graph.contains_key("format/stored"));
    let mut upward = Vec::new();
    for (unit, targets) in &graph {
        for target in targets {
            let (from, to) = (layer(unit), layer(target));
            // Within the features, and within os or format, imports go sideways freely; the
            // cycle test below keeps them acyclic. os and format never import each other.
            let sideways_ok =
                from == to && (from == 5 || unit.split('/').next() == target.split('/').next());
            if to > from || (to == from && !sideways_ok) {
                upward.push(format!("{unit} -> {target}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers: {upward:?}");
}

#[test]
fn no_module_cycle() {
    let graph = imports();
    fn visit(
        unit: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|u| u == unit) {
            panic!("a module cycle: {} -> {unit}", path[at..].join(" -> "));
        }
        if done.contains(unit) {
            return;
        }
        path.push(unit.to_owned());
        for next in graph.get(unit).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(unit.to_owned());
    }
    let mut done = BTreeSet::new();
    for unit in graph.keys() {
        visit(unit, &graph, &mut Vec::new(), &mut done);
    }
}
