//! The documents as a newcomer meets them: every relative link and
//! `#anchor` in README.md, CHANGELOG.md, BENCHMARKS.md and docs/ lands on a
//! file and a heading that exist; every figure the README quotes is one
//! BENCHMARKS.md gives; the README opens with the two commands CI runs;
//! and the README's code blocks marked `<!-- test: run -->` run as shown
//! (with the launcher built here first in PATH) and exit 0.

mod common;
use common::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents a reader is sent through.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "BENCHMARKS.md"]
        .iter()
        .map(|f| root().join(f))
        .collect();
    let mut more: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The text outside fenced code blocks, one line per line (fenced lines
/// become empty, so line numbers stay right).
fn outside_fences(md: &str) -> Vec<String> {
    let mut fenced = false;
    md.lines()
        .map(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                String::new()
            } else if fenced {
                String::new()
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// Prose without inline code: a backtick toggles code, and a paragraph
/// (ended by a blank line) never leaves one open.
fn prose(lines: &[String]) -> String {
    let mut out = String::new();
    let mut code = false;
    for l in lines {
        if l.trim().is_empty() {
            code = false;
        }
        for c in l.chars() {
            if c == '`' {
                code = !code;
            } else if !code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// GitHub's anchor for a heading: lowercase, letters, digits, `-` and `_`
/// kept, spaces turned into `-`, everything else (punctuation, the
/// backticks of inline code) dropped; a repeated heading gets `-1`, `-2`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(md: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for l in outside_fences(md) {
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && l[hashes..].starts_with(' ') {
            let base = slug(&l[hashes..]);
            let mut s = base.clone();
            let mut n = 0;
            while seen.contains(&s) {
                n += 1;
                s = format!("{base}-{n}");
            }
            seen.insert(s);
        }
    }
    seen
}

/// The targets of inline links `[text](target)`, outside code.
fn links(md: &str) -> Vec<String> {
    let text = prose(&outside_fences(md));
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_link_lands_on_a_file_and_a_heading() {
    let mut checked = 0;
    let mut broken = Vec::new();
    for doc in documents() {
        let md = read(&doc);
        for target in links(&md) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(path)
            };
            checked += 1;
            let name = doc.strip_prefix(root()).unwrap().display().to_string();
            if !file.exists() {
                broken.push(format!("{name}: {target}: no such file"));
                continue;
            }
            if let Some(a) = anchor {
                if !anchors(&read(&file)).contains(a) {
                    broken.push(format!("{name}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 50,
        "only {checked} links found: is the parser right?"
    );
    println!(
        "{checked} relative links in {} documents resolve",
        documents().len()
    );
}

/// Figures: decimals (`0.068`, `1.13`) and numbers grouped by commas
/// (`6,561`), in prose and tables, not in code.
fn figures(md: &str) -> Vec<String> {
    let text = prose(&outside_fences(md));
    let mut out = Vec::new();
    let mut token = String::new();
    for c in text.chars().chain([' ']) {
        if c.is_ascii_digit() || c == '.' || c == ',' {
            token.push(c);
            continue;
        }
        let t = token.trim_end_matches(['.', ',']);
        let grouped = t.contains(',') && t.split(',').skip(1).all(|g| g.len() == 3);
        let decimal = t.matches('.').count() == 1 && !t.starts_with('.');
        if (grouped && !t.contains('.')) || (decimal && !t.contains(',')) {
            out.push(t.to_string());
        }
        token.clear();
    }
    out
}

#[test]
fn the_readme_quotes_only_figures_benchmarks_gives() {
    let bench = read(&root().join("BENCHMARKS.md"));
    let given: HashSet<String> = figures(&bench).into_iter().collect();
    let readme = read(&root().join("README.md"));
    // The licence's "Version 2.0" is no measurement.
    let measured = readme.split("\n## License").next().unwrap();
    let quoted = figures(measured);
    let missing: Vec<&String> = quoted.iter().filter(|f| !given.contains(*f)).collect();
    assert!(
        missing.is_empty(),
        "figures in README.md that BENCHMARKS.md does not give: {missing:?}"
    );
    assert!(quoted.len() > 10, "only {} figures found", quoted.len());
    println!(
        "{} figures quoted in README.md, each in BENCHMARKS.md",
        quoted.len()
    );
}

#[test]
fn the_readme_opens_with_the_two_commands_ci_runs() {
    let readme = read(&root().join("README.md"));
    let opening = "# munmapq\n\n```sh\n\
        cargo build --release && ./target/release/munmapq --stats git -c core.packedGitWindowSize=16k -c core.packedGitLimit=32k log --raw > /dev/null\n\
        scripts/test.sh\n```\n";
    assert!(
        readme.starts_with(opening),
        "README.md must open with:\n{opening}"
    );
    let ci = read(&root().join(".github/workflows/ci.yml"));
    for command in opening.lines().skip(3).take(2) {
        assert!(ci.contains(command), "ci.yml no longer runs {command}");
    }
}

/// The code blocks marked to run: a line `<!-- test: run -->`, then a
/// fenced block.
fn blocks_to_run(md: &str) -> Vec<String> {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() != "<!-- test: run -->" {
            continue;
        }
        let open = lines.get(i + 1).copied().unwrap_or_default();
        assert!(
            open.starts_with("```"),
            "a fenced block must follow line {}",
            i + 1
        );
        let body: Vec<&str> = lines[i + 2..]
            .iter()
            .take_while(|l| !l.starts_with("```"))
            .copied()
            .collect();
        out.push(body.join("\n"));
    }
    out
}

#[test]
fn the_readme_blocks_marked_to_run_exit_0() {
    let blocks = blocks_to_run(&read(&root().join("README.md")));
    assert!(
        !blocks.is_empty(),
        "no block marked <!-- test: run --> in README.md"
    );
    let home = scratch("docs-readme");
    let path = format!(
        "{}:{}",
        launcher().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for block in &blocks {
        let mut sh = Command::new("bash");
        sh.args(["-e", "-u", "-o", "pipefail", "-c", block])
            .current_dir(root())
            .env("PATH", &path)
            .env("HOME", &*home)
            .env("XDG_CACHE_HOME", home.join("cache"))
            .env_remove("MUNMAPQ_LIB");
        let out = output_within(&mut sh, Duration::from_secs(60));
        assert!(
            out.status.success(),
            "README block failed ({}):\n{block}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    println!("{} README block(s) ran and exited 0", blocks.len());
}

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(slug(" The seed's setting"), "the-seeds-setting");
    assert_eq!(
        slug(" git log -p with tiny pack windows"),
        "git-log--p-with-tiny-pack-windows"
    );
    assert_eq!(
        slug(" clone(CLONE_VM) without CLONE_SETTLS"),
        "cloneclone_vm-without-clone_settls"
    );
    assert_eq!(slug(" The new policy: `aged`"), "the-new-policy-aged");
    assert_eq!(slug(" git.git"), "gitgit");
    let twice = anchors("# A\n## B\n```\n# not a heading\n```\n## B\n");
    assert!(twice.contains("b") && twice.contains("b-1") && !twice.contains("not-a-heading"));
}

#[test]
fn the_readme_installs_with_homebrew_then_archives_then_cargo() {
    let readme = read(&root().join("README.md"));
    let install = readme
        .split("\n## Install\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md has an Install section");
    let at = |what: &str| {
        install
            .find(what)
            .unwrap_or_else(|| panic!("README's Install section lacks {what}"))
    };
    // A Mac user's order: Homebrew, a release archive, then cargo.
    let order = [
        at("brew install munmapq/tap/munmapq"),
        at("SHA256SUMS"),
        at("universal-apple-darwin.tar.gz"),
        at("cargo install --locked munmapq"),
    ];
    assert!(order.is_sorted(), "README's Install order: {order:?}");
    // The tap it names is the one docs/packaging.md tells how to make, and
    // the formula it installs is the repository's.
    let packaging = read(&root().join("docs/packaging.md"));
    assert!(packaging.contains("brew install munmapq/tap/munmapq"));
    assert!(root().join("packaging/homebrew/munmapq.rb").is_file());
}
