//! `cargo install` gives a working tool with no further step: the installed
//! launcher carries its library, runs git with it (from a directory outside
//! the checkout), and its shell integration makes `git` go through munmapq
//! where git thrashes its windows.
//!
//! By default this installs from the checkout (`cargo install --path`);
//! scripts/install-test.sh installs from a local registry of the packaged
//! crates and from `--git`, and points `MUNMAPQ_INSTALLED_BIN` at each.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn install() -> (PathBuf, PathBuf) {
    let dir = scratch("install").for_the_whole_run();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    if let Some(bin) = std::env::var_os("MUNMAPQ_INSTALLED_BIN") {
        return (PathBuf::from(bin), home);
    }
    let root = dir.join("root");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A target directory of its own, kept between runs so a re-run is quick.
    let status = Command::new(env!("CARGO"))
        .args(["install", "--quiet", "--debug", "--locked", "--path"])
        .arg(repo)
        .arg("--root")
        .arg(&root)
        .env("CARGO_TARGET_DIR", repo.join("target/install-test"))
        .status()
        .unwrap();
    assert!(status.success(), "cargo install failed");
    (root.join("bin/munmapq"), home)
}

#[test]
fn installed_launcher_works_alone() {
    let (bin, home) = install();
    // Nothing but the binary was installed.
    let installed: Vec<_> = std::fs::read_dir(bin.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(installed, ["munmapq"]);
    let run = |args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(args)
            .current_dir(&home)
            .env("HOME", &home)
            .env_remove("MUNMAPQ_LIB")
            .env_remove("XDG_CACHE_HOME");
        output_within(&mut c, MINUTE)
    };

    // The library it carries, written to a private cache under HOME.
    let lib = text(&run(&["--print-lib"]).stdout).trim().to_string();
    assert!(
        lib.starts_with(home.join(".cache/munmapq").to_str().unwrap()),
        "{lib}"
    );

    // git, with tiny windows on this repository: the stats prove the
    // library was loaded and at work.
    let repo = env!("CARGO_MANIFEST_DIR");
    let git = ["--stats=json", "git", "-C", repo];
    let out = run(&[&git[..], &TINY_WINDOWS, &["log", "--raw"]].concat());
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("\"loaded\":1"), "{err}");
    assert!(!err.contains("\"mmap_calls\":0,"), "{err}");
    assert!(!err.contains("\"reused\":0,"), "no reuse: {err}");
    println!("installed munmapq, git log --raw: {err}");

    // shell-init, evaluated by bash: `git` goes through munmapq where git
    // thrashes its windows (this repository with tiny ones), and runs as it
    // is outside a repository.
    let init = text(&run(&["shell-init", "bash"]).stdout);
    let bash_git = |args: &str| {
        let out = output_within(
            Command::new("bash")
                .args([
                    "-c",
                    &format!("{init}\nMUNMAPQ_STATS=1 git {args} >/dev/null"),
                ])
                .current_dir(&home)
                .env("HOME", &home)
                .env_remove("XDG_CACHE_HOME"),
            MINUTE,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stderr).contains("munmapq pid=")
    };
    assert!(
        bash_git(&format!(
            "-C {repo} -c core.packedGitWindowSize=16k -c core.packedGitLimit=32k log -1"
        )),
        "git did not go through munmapq where it thrashes"
    );
    assert!(
        !bash_git("--version"),
        "git went through munmapq outside a repository"
    );
    println!("installed munmapq, shell-init bash: git with munmapq where it thrashes, without outside a repository");

    // Exit statuses and signals pass through; errors are one line each.
    assert_eq!(run(&["sh", "-c", "exit 3"]).status.code(), Some(3));
    assert_eq!(
        run(&["sh", "-c", "kill -INT $$"]).status.signal(),
        Some(libc::SIGINT)
    );
    for (args, status) in [
        (&["no-such-command-here"][..], 127),
        (&["--max-bytes", "x", "true"][..], 125),
        (&["--lib", "/nope.so", "true"][..], 125),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(status), "{args:?}");
        // One line, and for a wrong command line where help is.
        let err = text(&out.stderr);
        let rest: Vec<&str> = err.lines().skip(1).collect();
        assert!(
            rest.is_empty() || rest == ["Try 'munmapq --help' for more information."],
            "{args:?}: {err}"
        );
    }
}
