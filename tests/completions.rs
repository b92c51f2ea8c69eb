//! `munmapq completions bash|zsh|fish`: each script loads in its shell and
//! completes what `--help` lists (every option, an option's values, the
//! words and their arguments), since both are made from the same
//! definitions. bash's completion function is called as bash calls it,
//! fish's through `complete -C`, zsh's in a terminal (zsh/zpty) as a user
//! presses Tab. A shell that is not installed is said and skipped.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::process::Command;

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The script for `shell`, written to a file in `dir`.
fn script(dir: &std::path::Path, shell: &str) -> std::path::PathBuf {
    let out = output_within(
        Command::new(launcher()).args(["completions", shell]),
        MINUTE,
    );
    assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
    let path = dir.join(format!("munmapq.{shell}"));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// Every long option `--help` lists.
fn help_options() -> Vec<String> {
    let help = text(&output_within(Command::new(launcher()).arg("--help"), MINUTE).stdout);
    let section = help
        .split("\noptions:\n")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .unwrap_or_default()
        .to_string();
    let options: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("  -"))
        // The option column: up to the two spaces before its text.
        .map(|l| l.trim_start().split("  ").next().unwrap_or_default())
        .flat_map(|l| l.split([' ', ',', '[']))
        .filter(|w| w.starts_with("--"))
        .map(str::to_string)
        .collect();
    assert!(options.len() >= 10, "{options:?}");
    options
}

/// What each line typed should offer: (typed, offered).
const CASES: [(&str, &[&str]); 4] = [
    ("munmapq --ev", &["--evict"]),
    ("munmapq --evict ", &["aged", "oldest", "all"]),
    ("munmapq shell-init ", &["bash", "zsh", "fish"]),
    ("munmapq help ", &["doctor", "completions", "git"]),
];

#[test]
fn bash_completes_munmapq() {
    let dir = scratch("completions-bash");
    let file = script(&dir, "bash");
    let mut program = format!(
        "source '{}' || exit 1\n\
         complete -p munmapq >/dev/null || exit 2\n\
         offered() {{ read -ra COMP_WORDS <<<\"$1\"; [[ $1 == *' ' ]] && COMP_WORDS+=(''); \
         COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMPREPLY=(); _munmapq; echo \"${{COMPREPLY[*]}}\"; }}\n",
        file.display()
    );
    for (typed, _) in CASES {
        program.push_str(&format!("offered '{typed}'\n"));
    }
    program.push_str("offered 'munmapq --'\n");
    let out = output_within(Command::new("bash").args(["-c", &program]), MINUTE);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    for ((typed, want), got) in CASES.iter().zip(&lines) {
        for w in *want {
            assert!(got.split(' ').any(|g| g == *w), "{typed}: {w} not in {got}");
        }
    }
    let all = &lines[CASES.len()];
    for o in help_options() {
        assert!(
            all.split(' ').any(|g| g == o),
            "munmapq --: {o} not in {all}"
        );
    }
    println!("bash: {} cases and every option of --help", CASES.len());
}

#[test]
fn fish_completes_munmapq() {
    if !has("fish") {
        println!("fish: not installed, not checked");
        return;
    }
    let dir = scratch("completions-fish");
    let file = script(&dir, "fish");
    let mut program = format!("source '{}'; or exit 1\n", file.display());
    for (typed, _) in CASES.iter().chain([&("munmapq --", &[][..])]) {
        program.push_str(&format!(
            "echo (complete -C '{typed}' | string replace -r '\\t.*' '')\n"
        ));
    }
    let out = output_within(
        Command::new("fish")
            .args(["--no-config", "-c", &program])
            .env("HOME", &*dir),
        MINUTE,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    for ((typed, want), got) in CASES.iter().zip(&lines) {
        for w in *want {
            assert!(got.split(' ').any(|g| g == *w), "{typed}: {w} not in {got}");
        }
    }
    let all = &lines[CASES.len()];
    for o in help_options() {
        assert!(
            all.split(' ').any(|g| g == o),
            "munmapq --: {o} not in {all}"
        );
    }
    println!("fish: {} cases and every option of --help", CASES.len());
}

#[test]
fn zsh_completes_munmapq() {
    if !has("zsh") {
        println!("zsh: not installed, not checked");
        return;
    }
    let dir = scratch("completions-zsh");
    let file = script(&dir, "zsh");
    // An interactive zsh in a terminal: load compinit and the script, type
    // each line and Tab, read the screen.
    for (typed, want) in CASES {
        let program = format!(
            "zmodload zsh/zpty || exit 3\n\
             zpty z zsh -f -i\n\
             zpty -w z 'PS1=\"%% \"; autoload -U compinit; compinit -u -d {dir}/zcompdump; source {file}; print RE\"\"ADY'\n\
             zpty -r z ready '*READY*'\n\
             zpty -w -n z $'{typed}\\t'\n\
             sleep 1\n\
             out=\n\
             while zpty -r -t z line; do out+=$line; done\n\
             zpty -d z\n\
             print -r -- \"$out\"\n",
            dir = dir.display(),
            file = file.display(),
        );
        let out = output_within(
            Command::new("zsh")
                .args(["-f", "-c", &program])
                .env("HOME", &*dir),
            MINUTE,
        );
        if out.status.code() == Some(3) {
            println!("zsh: no zsh/zpty module, not checked");
            return;
        }
        let screen = text(&out.stdout);
        assert!(!screen.contains("_arguments:"), "{typed}: {screen}");
        // What the line became, and the list under it.
        let shown = screen.rsplit("% ").next().unwrap_or_default();
        for w in want {
            assert!(
                shown.contains(w) || screen.contains(&format!("{typed}{w}")),
                "{typed}: {w} not offered: {screen:?}"
            );
        }
    }
    println!("zsh: {} cases, by Tab in a terminal", CASES.len());
}
