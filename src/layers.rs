//! The layer check: which top-level module may use which. Arrows only point down, so no
//! two modules import each other and a newcomer can read the crate from the bottom up:
//!
//! ```text
//! app                       builds and runs everything
//! http, admin, worker       the doors: REST and tool calls, the panel, jobs
//! service                   one home for each operation the doors share, and the state
//! auth                      tokens, scopes, the rate limit
//! telemetry                 logs and metrics
//! config                    settings, and the extractor and embedder they name
//! extract, embed, store     conversations → facts; texts → vectors; SQL: the
//!                           `engram-extract`, `engram-embed`, `engram-store` crates
//! error, remote_servers     the API error; calls to other servers (`engram-remote`)
//! domain, crypto            pure rules and types, hashes and secrets: the
//!                           `engram-domain` crate
//! ```
//!
//! A module may use modules of lower layers only: nothing below `service/` uses it, and
//! no door uses another. Inside a door, a handler file uses only the door's shared parts
//! (`mod.rs`, `ctx`, `input`, `json`; `session`, `forms`), never another handler file: an
//! operation two handlers need belongs in `service/`. No two files of one folder use each
//! other, directly or round a longer circle. The request doors (`http`, with MCP and the
//! tools, and `admin`) never name the store: what they read or write goes through a
//! `service` function, so that a rule added there holds for every door. The worker may
//! call the store for what only it does (claiming jobs, sweeping), saying why at each
//! call. Nor does `service` use `error`, the REST API's error: it names its failures by
//! meaning (`service::error::ServiceError`) and each door renders them. The tests read
//! the source, so adding an import of the request handlers from under `worker/` (or any
//! arrow up, or sideways) fails them.

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, fs, path::Path};

    /// Each top-level module's layer; higher layers use lower ones. `domain` and `crypto`
    /// (`engram-domain`), `remote_servers` (`engram-remote`), `extract`, `embed` and `store`
    /// are crates of their own, re-exported under these names: the compiler already keeps
    /// them from using anything of the server's.
    const LAYERS: &[(&str, u8)] = &[
        ("crypto", 0),
        ("domain", 0),
        ("remote_servers", 1),
        ("error", 1),
        ("extract", 2),
        ("embed", 2),
        ("store", 2),
        ("config", 3),
        ("telemetry", 4),
        ("auth", 5),
        ("service", 6),
        ("http", 7),
        ("worker", 7),
        ("admin", 7),
        ("app", 8),
    ];

    fn layer(module: &str) -> Option<u8> {
        LAYERS.iter().find(|(name, _)| *name == module).map(|(_, layer)| *layer)
    }

    /// The top-level modules a source text names through `crate::…`, including inside
    /// `use crate::{a::…, b};` groups.
    fn crate_uses(source: &str) -> BTreeSet<String> {
        uses(source, "crate::")
    }

    /// The names a source text reaches through `prefix` (`crate::`, `super::`, …),
    /// including inside `use prefix{a::…, b};` groups. Comment lines are not read: a doc
    /// link to another module is no use of it.
    fn uses(source: &str, prefix: &str) -> BTreeSet<String> {
        let code: String =
            source.lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let source = code.as_str();
        let mut used = BTreeSet::new();
        let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
        for (at, _) in source.match_indices(prefix) {
            // `crate::` inside `engram::crate::…` cannot occur; `super::` inside `super::super::` can.
            if at >= 2 && &source[at - 2..at] == "::" {
                continue;
            }
            let rest = &source[at + prefix.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 0usize;
                let mut expect_name = true;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => expect_name = true,
                        c if c.is_whitespace() => {}
                        _ if expect_name && depth == 0 => {
                            used.insert(ident(&group[i..]));
                            expect_name = false;
                        }
                        _ => {}
                    }
                }
            } else {
                used.insert(ident(rest));
            }
        }
        used.retain(|name| !name.is_empty());
        used
    }

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in fs::read_dir(dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn arrows_only_point_down() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut violations = Vec::new();
        for file in &files {
            let relative = file.strip_prefix(&src).expect("under src");
            let first = relative.components().next().expect("a path").as_os_str().to_string_lossy().into_owned();
            let module = first.trim_end_matches(".rs");
            if matches!(module, "lib" | "main" | "bin" | "layers") {
                continue;
            }
            let Some(own) = layer(module) else {
                violations.push(format!("{}: module `{module}` has no layer in LAYERS", relative.display()));
                continue;
            };
            let source = fs::read_to_string(file).expect("read source");
            for used in crate_uses(&source) {
                if used == module {
                    continue;
                }
                match layer(&used) {
                    Some(theirs) if theirs < own => {}
                    Some(_) => violations.push(format!("{}: `{module}` uses `{used}`", relative.display())),
                    None => violations.push(format!("{}: uses unknown module `{used}`", relative.display())),
                }
            }
        }
        assert!(violations.is_empty(), "arrows pointing up or sideways:\n{}", violations.join("\n"));
    }

    /// The parts of each door that its handler files share; every other file of the door
    /// is a handler, which no other file of the door may use.
    const SHARED: &[(&str, &[&str])] = &[("http", &["ctx", "input", "json"]), ("admin", &["session", "forms"])];

    #[test]
    fn handler_files_use_no_other_handler() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut violations = Vec::new();
        for (door, shared) in SHARED {
            let mut files = Vec::new();
            rust_files(&src.join(door), &mut files);
            let handlers: BTreeSet<String> = files
                .iter()
                .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .filter(|name| name != "mod" && !shared.contains(&name.as_str()))
                .collect();
            assert!(handlers.len() > 3, "{door}: found handlers {handlers:?}");
            for file in &files {
                let own = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                let source = fs::read_to_string(file).expect("read source");
                let mut reached = uses(&source, "super::");
                reached.extend(uses(&source, &format!("crate::{door}::")));
                for name in reached.intersection(&handlers) {
                    if *name != own {
                        violations.push(format!("{door}/{own}.rs uses the handler file {door}/{name}.rs"));
                    }
                }
            }
        }
        assert!(violations.is_empty(), "handler files using each other:\n{}", violations.join("\n"));
    }

    /// The service speaks no protocol: its failures are its own type, which REST, MCP and
    /// the panel each render, so it never names the API's error (`crate::error`).
    #[test]
    fn service_uses_no_api_error() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src.join("service"), &mut files);
        assert!(files.len() > 5, "service: found {files:?}");
        let violations: Vec<String> = files
            .iter()
            .filter(|file| crate_uses(&fs::read_to_string(file).expect("read source")).contains("error"))
            .map(|file| file.strip_prefix(&src).unwrap_or(file).display().to_string())
            .collect();
        assert!(violations.is_empty(), "service files using the API's error:\n{}", violations.join("\n"));
    }

    /// `source` without its comment lines, with the white space around each `.` removed,
    /// so that a chain broken over lines (`state\n    .store\n    .x()`) reads as one.
    fn chained(source: &str) -> String {
        let code: Vec<&str> = source.lines().filter(|line| !line.trim_start().starts_with("//")).collect();
        let joined = code.join("\n").split_whitespace().collect::<Vec<_>>().join(" ");
        joined.replace(" .", ".").replace(". ", ".")
    }

    fn is_ident(c: char) -> bool {
        c.is_alphanumeric() || c == '_'
    }

    /// What in `source` reaches the store: its module (`crate::store…`, or the crate
    /// `engram_store` itself) or a store value (`state.store`, across line breaks).
    fn store_references(source: &str) -> Vec<String> {
        let mut found: Vec<String> =
            crate_uses(source).into_iter().filter(|used| used == "store").map(|_| "crate::store".into()).collect();
        let code = chained(source);
        for (at, _) in code.match_indices(".store") {
            if !code[at + ".store".len()..].starts_with(is_ident) {
                let before: String = code[..at].chars().rev().take_while(|c| is_ident(*c)).collect();
                found.push(format!("{}.store", before.chars().rev().collect::<String>()));
            }
        }
        found.extend(code.match_indices("engram_store").map(|_| "engram_store".to_owned()));
        found
    }

    /// The store methods `source` calls (`store.` then a name, across line breaks),
    /// except `clone`: handing the store to a task is no operation.
    fn store_calls(source: &str) -> Vec<String> {
        let code = chained(source);
        code.match_indices("store.")
            .filter(|(at, _)| !code[..*at].ends_with(is_ident))
            .map(|(at, _)| code[at + "store.".len()..].chars().take_while(|c| is_ident(*c)).collect::<String>())
            .filter(|name| name != "clone")
            .collect()
    }

    /// The request doors (REST, MCP and tool calls, the panel's pages) reach the database
    /// only through `service`: they name neither the store nor its module. Of the doors,
    /// only `worker/` may, and each of its store calls says why on a `// Worker-only:`
    /// line: the service holds every operation that has a second caller.
    #[test]
    fn only_the_worker_reaches_the_store() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut violations = Vec::new();
        for door in ["http", "admin", "worker"] {
            let mut files = Vec::new();
            rust_files(&src.join(door), &mut files);
            assert!(files.len() > 5, "{door}: found {files:?}");
            for file in files {
                let source = fs::read_to_string(&file).expect("read source");
                let name = file.strip_prefix(&src).unwrap_or(&file).display().to_string();
                if door == "worker" {
                    let calls = store_calls(&source);
                    let reasons =
                        source.lines().filter(|line| line.trim_start().starts_with("// Worker-only: ")).count();
                    if calls.len() > reasons {
                        violations
                            .push(format!("{name}: {} store calls, {reasons} `// Worker-only:` reasons", calls.len()));
                    }
                } else {
                    violations.extend(store_references(&source).into_iter().map(|what| format!("{name}: {what}")));
                }
            }
        }
        assert!(violations.is_empty(), "the store reached from a door:\n{}", violations.join("\n"));
    }

    #[test]
    fn store_uses_are_found_across_lines() {
        // Assembled, so that this file itself calls no store.
        let st = "st";
        let source = format!(
            "use crate::{{\n    {st}ore::jobs::JobFilter,\n}};\nlet x = state\n    .{st}ore\n    .get_job(t, id);\n\
             f(&state.{st}ore, y);\nmatch {st}ore.claim_job(t) {{}}\n// state.{st}ore.commented()\nspawn(state.{st}ore.clone());"
        );
        assert_eq!(store_calls(&source), ["get_job", "claim_job"]);
        assert_eq!(store_references(&source), ["crate::store", "state.store", "state.store", "state.store"]);
        assert_eq!(store_references("restored.stored_at; engram_store::Store"), ["engram_store"]);
    }

    /// Files of one folder never use each other in a circle (a → b → … → a): a newcomer
    /// can read each folder from the file that uses no sibling upwards.
    #[test]
    fn sibling_files_form_no_circle() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let src = root.to_path_buf();
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        for krate in fs::read_dir(root.join("crates")).expect("read crates") {
            rust_files(&krate.expect("crate dir").path().join("src"), &mut files);
        }
        let mut folders: std::collections::BTreeMap<std::path::PathBuf, Vec<std::path::PathBuf>> = Default::default();
        for file in files {
            if file.file_stem().is_some_and(|s| s != "mod") {
                folders.entry(file.parent().expect("in a folder").to_path_buf()).or_default().push(file);
            }
        }
        let mut circles = Vec::new();
        for (folder, files) in &folders {
            let stem =
                |f: &std::path::PathBuf| f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let names: BTreeSet<String> = files.iter().map(stem).collect();
            let edges: std::collections::BTreeMap<String, BTreeSet<String>> = files
                .iter()
                .map(|f| {
                    let source = fs::read_to_string(f).expect("read source");
                    let used =
                        uses(&source, "super::").intersection(&names).filter(|n| **n != stem(f)).cloned().collect();
                    (stem(f), used)
                })
                .collect();
            if let Some(circle) = find_circle(&edges) {
                circles.push(format!(
                    "{}: {}",
                    folder.strip_prefix(&src).unwrap_or(folder).display(),
                    circle.join(" → ")
                ));
            }
        }
        assert!(circles.is_empty(), "files using each other in a circle:\n{}", circles.join("\n"));
    }

    /// A circle in the graph, as the names along it (first name repeated at the end).
    fn find_circle(edges: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
        fn visit(
            node: &str,
            edges: &std::collections::BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|n| n == node) {
                let mut circle = path[at..].to_vec();
                circle.push(node.to_owned());
                return Some(circle);
            }
            if done.contains(node) {
                return None;
            }
            path.push(node.to_owned());
            for next in edges.get(node).into_iter().flatten() {
                if let Some(circle) = visit(next, edges, path, done) {
                    return Some(circle);
                }
            }
            path.pop();
            done.insert(node.to_owned());
            None
        }
        let mut done = BTreeSet::new();
        edges.keys().find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
    }

    #[test]
    fn a_circle_of_two_is_found() {
        let edges = [("a", vec!["b"]), ("b", vec!["c", "a"]), ("c", vec![])]
            .into_iter()
            .map(|(n, to)| (n.to_owned(), to.into_iter().map(str::to_owned).collect()))
            .collect();
        assert_eq!(find_circle(&edges), Some(vec!["a".to_owned(), "b".to_owned(), "a".to_owned()]));
    }

    #[test]
    fn the_check_reads_grouped_and_plain_paths() {
        // The sample is assembled, so that this file itself names no module it may not use.
        let source =
            ["use crate::{\n    domain::{a, b::c},\n    store::Store,\n};\nfn f() { crate", "::worker::x(); }"]
                .concat();
        let used: Vec<_> = crate_uses(&source).into_iter().collect();
        assert_eq!(used, ["domain", "store", "worker"]);
        let sideways = ["use su", "per::{ctx::Ctx, facts::owner};"].concat();
        assert_eq!(uses(&sideways, "super::").into_iter().collect::<Vec<_>>(), ["ctx", "facts"]);
    }
}
