//! Small git repositories for the doctor and git wrapper tests, made with
//! the real git under a HOME of the test's own (no user configuration).

use super::{output_within, MINUTE};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the real git in `dir` with HOME=`home`; panics on failure.
pub fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = output_within(
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("MUNMAPQ_GIT_WRAPPER")
            .env_remove("LD_PRELOAD"),
        MINUTE,
    );
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dir/name`: one commit of a few small files, no pack.
pub fn small_repo(dir: &Path, name: &str) -> PathBuf {
    git(dir, dir, &["init", "-q", name]);
    let repo = dir.join(name);
    for i in 0..5 {
        std::fs::write(repo.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    commit(&repo, dir);
    repo
}

/// `dir/name`: one commit of a 300 KB file of incompressible bytes, packed.
pub fn packed_repo(dir: &Path, name: &str) -> PathBuf {
    git(dir, dir, &["init", "-q", name]);
    let repo = dir.join(name);
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let data: Vec<u8> = (0..300_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(repo.join("big"), data).unwrap();
    commit(&repo, dir);
    git(&repo, dir, &["repack", "-adq"]);
    repo
}

fn commit(repo: &Path, home: &Path) {
    git(repo, home, &["add", "."]);
    git(
        repo,
        home,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "files",
        ],
    );
}
