//! The man page is `munmapq --help`, in roff: `munmapq.1` is
//! generated from the usage text (src/cli.rs) by [`roff`] below, and this
//! test fails when the committed page no longer matches it. To regenerate:
//! `MUNMAPQ_BLESS=1 cargo test --test manpage`. And the licenses the crates
//! name are there.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// Escapes text for roff: backslashes, minus signs, and a leading `.` or
/// `'` (which would start a request).
fn escape(line: &str) -> String {
    let s = line.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The help text as a man page. The first line is the name and what it
/// does; the `usage:` block the synopsis; the paragraphs after it the
/// description; a line of its own ending in `:` starts a section; indented
/// lines are kept as they are (no filling).
fn roff(help: &str) -> String {
    let mut lines = help.lines();
    let first = lines.next().unwrap_or_default();
    let (name, what) = first.split_once(": ").expect("NAME: what it does");
    let mut out = format!(
        ".\\\" Generated from `munmapq --help` by tests/manpage.rs; do not edit:\n\
         .\\\" MUNMAPQ_BLESS=1 cargo test --test manpage writes it again.\n\
         .TH MUNMAPQ 1 \"\" \"{name}\" \"User Commands\"\n\
         .SH NAME\n{name} \\- {}\n",
        escape(what)
    );
    let mut section = String::new();
    // Inside .nf (lines as they are), inside a filled paragraph, after a
    // blank line.
    let (mut nf, mut para, mut gap) = (false, false, false);
    for line in lines {
        if line.is_empty() {
            gap = true;
            continue;
        }
        let indented = line.starts_with(' ');
        if nf && (!indented || gap) {
            out.push_str(".fi\n");
            nf = false;
        }
        if let Some(synopsis) = line.strip_prefix("usage: ") {
            section = "SYNOPSIS".into();
            out.push_str(".SH SYNOPSIS\n.nf\n");
            out.push_str(&escape(synopsis));
            nf = true;
        } else if !indented && line.ends_with(':') {
            section = line.trim_end_matches(':').to_uppercase();
            out.push_str(&format!(".SH {}", escape(&section)));
            para = false;
        } else if indented {
            if !nf {
                out.push_str(if gap || para { ".PP\n.nf\n" } else { ".nf\n" });
                nf = true;
                para = false;
            }
            // The synopsis' lines align under the first one, after "usage: ".
            let text = match section.as_str() {
                "SYNOPSIS" => line.strip_prefix("       ").unwrap_or(line),
                _ => line,
            };
            out.push_str(&escape(text));
        } else {
            if section == "SYNOPSIS" {
                section = "DESCRIPTION".into();
                out.push_str(".SH DESCRIPTION\n");
            }
            if gap || !para {
                out.push_str(".PP\n");
                para = true;
            }
            out.push_str(&escape(line));
        }
        out.push('\n');
        gap = false;
    }
    if nf {
        out.push_str(".fi\n");
    }
    out
}

#[test]
fn man_page_is_the_help_text() {
    let help = Command::new(launcher()).arg("--help").output().unwrap();
    assert!(help.status.success());
    let page = roff(&String::from_utf8(help.stdout).unwrap());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("munmapq.1");
    if std::env::var_os("MUNMAPQ_BLESS").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == page,
        "munmapq.1 does not match `munmapq --help`: MUNMAPQ_BLESS=1 cargo test --test manpage \
         writes it again"
    );
    // groff reads it without a warning, where groff is installed.
    let groff = Command::new("groff")
        .args(["-man", "-ww", "-z"])
        .arg(&path)
        .output();
    if let Ok(out) = groff {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.is_empty(), "groff: {err}");
    }
    println!(
        "munmapq.1: {} lines, the same text as --help",
        page.lines().count()
    );
}

#[test]
fn the_licenses_the_crates_name_are_there() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    assert!(read("Cargo.toml").contains("license = \"MIT OR Apache-2.0\""));
    let mit = read("LICENSE-MIT");
    assert!(mit.starts_with("MIT License\n\nCopyright (c) the munmapq developers\n"));
    assert!(mit.contains("THE SOFTWARE IS PROVIDED \"AS IS\""));
    let apache = read("LICENSE-APACHE");
    assert!(apache.contains("Apache License\n") && apache.contains("Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));
    // Each published crate carries them (the root's include list; the
    // others' directories hold links to the root's files).
    let manifest = read("Cargo.toml");
    for f in ["/LICENSE-MIT", "/LICENSE-APACHE", "/munmapq.1"] {
        assert!(manifest.contains(&format!("\"{f}\"")), "{f} not in include");
    }
    for krate in ["core", "interpose", "check"] {
        for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
            assert_eq!(read(&format!("{krate}/{f}")), read(f), "{krate}/{f}");
        }
    }
}
