//! The tree says where code lives: no two files of a package import each
//! other, directly or around a circle. An import is any `crate::`,
//! `super::` or `self::` path (in `use` or in an expression) that names an
//! item of another file; `mod x;` declarations are not imports (a folder's
//! `mod.rs` declares its files), and a file's own tests (from its first
//! top-level `#[cfg(test)]` or `#[cfg(all(test, ...))]`) are left out, as they see their file whole.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every crate root of the workspace: (root file, the folder its modules live in).
fn crate_roots(top: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut roots = Vec::new();
    for (file, dir) in [
        ("src/main.rs", "src"),
        ("core/src/lib.rs", "core/src"),
        ("interpose/src/lib.rs", "interpose/src"),
        ("check/src/lib.rs", "check/src"),
        ("probes/src/lib.rs", "probes/src"),
    ] {
        roots.push((top.join(file), top.join(dir)));
    }
    if let Ok(bins) = std::fs::read_dir(top.join("probes/src/bin")) {
        for b in bins.flatten() {
            let main = b.path().join("main.rs");
            if main.is_file() {
                roots.push((main, b.path()));
            }
        }
    }
    roots
}

/// The `.rs` files below `dir` that belong to the crate rooted there (a
/// crate's `bin/` folder holds other crates).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().unwrap() != "bin" {
                files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A file's module path below its crate root: `a/b.rs` and `a/b/mod.rs`
/// are both `[a, b]`; the root file is `[]`.
fn module_of(dir: &Path, root: &Path, file: &Path) -> Vec<String> {
    if file == root {
        return Vec::new();
    }
    let rel = file.strip_prefix(dir).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into()).collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

/// The text that counts: comments and the file's own tests removed.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("#[cfg(test)]") || line.starts_with("#[cfg(all(test") {
            break;
        }
        let line = line.split("//").next().unwrap();
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every path that starts at `crate`, `super` or `self`, with `use`
/// groups (`a::{b, c::d}`) spread into one path each.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|s| code[i..].starts_with(s));
        let boundary =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        if starts && boundary {
            let (mut list, end) = spread(code, i);
            found.append(&mut list);
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// The path(s) starting at `at`: `a::b::{c, d::e}` gives a::b::c and
/// a::b::d::e. Returns them and where the path ends.
fn spread(code: &str, at: usize) -> (Vec<Vec<String>>, usize) {
    let b = code.as_bytes();
    let mut prefix = Vec::new();
    let mut i = at;
    loop {
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if i > start {
            prefix.push(code[start..i].to_string());
        }
        if code[i..].starts_with("::{") {
            // A group: split at top-level commas.
            let mut depth = 0;
            let open = i + 2;
            let mut j = open;
            let mut parts = Vec::new();
            let mut from = open + 1;
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            parts.push(&code[from..j]);
                            break;
                        }
                    }
                    b',' if depth == 1 => {
                        parts.push(&code[from..j]);
                        from = j + 1;
                    }
                    _ => {}
                }
                j += 1;
            }
            let mut all = Vec::new();
            for p in parts {
                let p = p.trim();
                if p.is_empty() {
                    continue;
                }
                let (subs, _) = spread(p, 0);
                for s in subs {
                    let mut full = prefix.clone();
                    full.extend(s.into_iter().filter(|x| x != "self"));
                    all.push(full);
                }
            }
            return (all, j + 1);
        }
        if code[i..].starts_with("::") {
            i += 2;
            continue;
        }
        return (vec![prefix], i);
    }
}

/// The file an absolute module path lands in: the longest prefix that is
/// a file's module.
fn target<'a>(modules: &'a BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<&'a PathBuf> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

/// `path` as seen from module `at` (a `mod.rs` or the root is its own
/// folder's module), made absolute.
fn absolute(at: &[String], path: &[String]) -> Vec<String> {
    let mut base: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        _ => at.to_vec(),
    };
    let mut rest = &path[1..];
    if path.first().map(String::as_str) == Some("super") {
        base.pop();
        while rest.first().map(String::as_str) == Some("super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().cloned());
    base
}

/// The circles among `edges`: strongly connected sets of two or more files.
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    let reach = |from: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(f) = todo.pop() {
            for t in edges.get(&f).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let all: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = edges.keys().map(|f| (f, reach(f))).collect();
    let mut out: Vec<Vec<PathBuf>> = Vec::new();
    for (f, r) in &all {
        let mut circle: Vec<PathBuf> = r
            .iter()
            .filter(|g| *g != *f && all.get(g).is_some_and(|back| back.contains(*f)))
            .cloned()
            .collect();
        if !circle.is_empty() {
            circle.push((*f).clone());
            circle.sort();
            if !out.contains(&circle) {
                out.push(circle);
            }
        }
    }
    out
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut read = 0;
    for (root, dir) in crate_roots(top) {
        if !root.is_file() {
            continue;
        }
        let mut list = Vec::new();
        files(&dir, &mut list);
        let modules: BTreeMap<Vec<String>, PathBuf> = list
            .iter()
            .map(|f| (module_of(&dir, &root, f), f.clone()))
            .collect();
        for (at, file) in &modules {
            read += 1;
            let text = code(&std::fs::read_to_string(file).unwrap());
            for p in paths(&text) {
                let abs = absolute(at, &p);
                if let Some(t) = target(&modules, &abs) {
                    if t != file {
                        edges.entry(file.clone()).or_default().insert(t.clone());
                    }
                }
            }
        }
    }
    assert!(read > 100, "read {read} files: the walk missed the tree");
    let found = circles(&edges);
    let show: Vec<String> = found
        .iter()
        .map(|c| {
            let names: Vec<String> = c
                .iter()
                .map(|p| p.strip_prefix(top).unwrap().display().to_string())
                .collect();
            names.join(" <-> ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "import circles between files:\n{}",
        show.join("\n")
    );
    println!(
        "layout: {read} files, {} importing files, no circle",
        edges.len()
    );
}

#[test]
fn the_parser_sees_groups_super_and_nested_paths() {
    let p =
        paths("use super::{real::{self, prlimit_raw}, sys};\nlet x = crate::git::repo::repo(a);");
    assert_eq!(
        p,
        [
            vec!["super", "real"],
            vec!["super", "real", "prlimit_raw"],
            vec!["super", "sys"],
            vec!["crate", "git", "repo", "repo"],
        ]
    );
    let edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(f, t)| (PathBuf::from(f), t.into_iter().map(PathBuf::from).collect()))
    .collect();
    assert_eq!(
        circles(&edges),
        [vec![
            PathBuf::from("a"),
            PathBuf::from("b"),
            PathBuf::from("c")
        ]]
    );
}

/// The hook names of a hook list (`macro_rules! NAME` in `file`): one
/// entry a line, `NAME(ARGS) -> RET...;`.
fn hook_names(file: &Path, list: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let block = text
        .split(&format!("macro_rules! {list}"))
        .nth(1)
        .and_then(|rest| rest.split("};").next())
        .unwrap_or_else(|| panic!("no {list} in {}", file.display()));
    block
        .lines()
        .map(str::trim)
        .filter(|l| l.contains(") ->") && !l.starts_with("//"))
        .filter_map(|l| l.split_once('('))
        .map(|(name, _)| name.to_string())
        .filter(|n| !n.is_empty() && n.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()))
        .collect()
}

/// Where `code` declares an `extern` function named `name` (any ABI).
fn extern_fn_of(code: &str, name: &str) -> bool {
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let head = format!("fn {name}(");
    code.match_indices(&head).any(|(at, _)| {
        let before = code[..at].trim_end();
        // `extern` or `extern "ABI"` right before `fn`.
        let before = match before.strip_suffix('"') {
            Some(b) => b.rsplit_once('"').map_or(b, |(b, _)| b).trim_end(),
            None => before,
        };
        before.ends_with("extern")
    })
}

/// A hook's C signature is written once, in its hook table: the C
/// functions of a hook's name are generated from the table (Linux's
/// exports, macOS's interpose replacements), and the bodies take the
/// table's `args::NAME`. So no file of a platform writes an `extern` fn of
/// one of that platform's hook names (the generators write `$name`).
#[test]
fn hook_signatures_are_written_only_in_the_tables() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("interpose/src");
    let shared = hook_names(&src.join("lib.rs"), "shared_hooks");
    let mut list = Vec::new();
    files(&src, &mut list);
    let mut found = Vec::new();
    for (platform, other) in [("linux", "macos"), ("macos", "linux")] {
        let own = hook_names(&src.join(platform).join("mod.rs"), "hook_table");
        assert!(
            shared.contains("mmap") && own.len() > 15,
            "{platform}: {own:?}"
        );
        for file in list.iter().filter(|f| !f.starts_with(src.join(other))) {
            let text = code(&std::fs::read_to_string(file).unwrap());
            for name in shared.iter().chain(&own) {
                if extern_fn_of(&text, name) {
                    let at = file.strip_prefix(&src).unwrap().display();
                    found.push(format!("{at}: extern fn {name} ({platform})"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "hook signatures restated outside the tables:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_extern_fn_check_sees_abis_and_spacing() {
    assert!(extern_fn_of(
        "pub unsafe extern \"C\" fn close(fd: c_int)",
        "close"
    ));
    assert!(extern_fn_of("extern\n    fn close(\n", "close"));
    assert!(!extern_fn_of(
        "pub unsafe fn close(a: args::close)",
        "close"
    ));
    assert!(!extern_fn_of(
        "extern \"C\" fn closefrom(lo: c_int)",
        "close"
    ));
    assert!(!extern_fn_of(
        "extern \"C\" fn $name($($arg: $ty),*)",
        "close"
    ));
}
