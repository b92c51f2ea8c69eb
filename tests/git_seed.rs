//! The seed's own setting, scaled: git with 64 MiB windows under a 128 MiB
//! `core.packedGitLimit` set in ~/.gitconfig (the seed author's was
//! `packedGitLimit = 128m`), on a generated repository whose pack (~176
//! MiB) holds more windows than the limit lets git keep. Byte-identical
//! output; nearly every munmap deferred and nearly every window map reused
//! with default settings; `--stats` and `munmapq doctor git` name the
//! setting and where it is set.
#![cfg(target_os = "linux")] // LD_PRELOAD and /proc: Linux only

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository and a HOME whose ~/.gitconfig is like the seed's, made
/// once for both tests.
fn seed_repo() -> (PathBuf, PathBuf) {
    static REPO: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    REPO.get_or_init(make_seed_repo).clone()
}

fn make_seed_repo() -> (PathBuf, PathBuf) {
    let dir = scratch("git-seed").for_the_whole_run();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Probe\n[core]\n\tpackedGitLimit = 128m\n\tpackedGitWindowSize = 64m\n",
    )
    .unwrap();
    let repo = dir.join("repo");
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .arg(&repo));
    // 700 commits, each adding a 256 KiB blob, stored uncompressed so the
    // stream is quick to import: one ~176 MiB pack.
    let mut gen = probe_cmd(&["fast-import-big", "700", "300", "256"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let st = git(&repo, &home)
        .args(["-c", "pack.compression=0", "-c", "core.compression=0"])
        .args(["fast-import", "--quiet"])
        .stdin(gen.stdout.take().unwrap())
        .status()
        .unwrap();
    assert!(st.success() && gen.wait().unwrap().success());
    (repo, home)
}

fn git(repo: &Path, home: &Path) -> Command {
    git_at("git", repo, home)
}

#[test]
fn seed_setting_windows_are_deferred_and_reused_by_default() {
    let (repo, home) = seed_repo();
    let with = differential(
        || {
            let mut c = git(&repo, &home);
            c.args(["log", "--raw"]);
            c
        },
        &[],
    );
    let maps = with.get(Counter::Eligible);
    let unmaps = with.get(Counter::MunmapCalls);
    let (deferred, reused) = (with.get(Counter::Deferred), with.get(Counter::Reused));
    let real_munmaps = with.get(Counter::MunmapSyscalls);
    println!(
        "git log --raw, 64 MiB windows under a 128 MiB limit: {} bytes identical; \
         {maps} window maps, {deferred} of {unmaps} munmaps deferred, {reused} reused, \
         {real_munmaps} real munmaps, pages dropped {} times",
        with.out.stdout.len(),
        with.get(Counter::PagesDropped)
    );
    assert!(maps > 100, "the setting must make git thrash: {maps} maps");
    assert!(
        deferred * 100 >= unmaps * 95,
        "deferred {deferred} of {unmaps}"
    );
    assert!(reused * 100 >= maps * 90, "reused {reused} of {maps}");
    assert!(
        real_munmaps * 100 <= maps * 5,
        "{real_munmaps} real munmaps"
    );
}

#[test]
fn stats_and_doctor_name_the_setting() {
    let (repo, home) = seed_repo();
    // The report (on stderr) of git log --raw run with `stats`.
    let report = |stats: &str| {
        let out = Command::new(launcher())
            .arg(stats)
            .arg("git")
            .args(["-C", repo.to_str().unwrap(), "log", "--raw"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &home)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = report("--stats");
    let last = err.lines().last().unwrap_or("");
    println!("{last}");
    assert!(
        last.contains("window maps of 64 MiB under core.packedGitLimit=128m (~/.gitconfig:4)"),
        "{err}"
    );
    assert!(last.contains("git's defaults would map this"), "{last}");
    // The same advice in the JSON report, as fields.
    let json = report("--stats=json");
    for field in [
        "\"git\":{\"window_maps\":",
        "\"window_bytes\":67108864,\"settings\":[{\"key\":\"core.packedGitLimit\",\"value\":\"128m\",\"origin\":\"~/.gitconfig:4\"}],\"advice\":\"",
        "\"exit_code\":0,",
        "\"command\":[\"git\",\"-C\",",
    ] {
        assert!(json.contains(field), "{field}: {json}");
    }
    let doc = Command::new(launcher())
        .args(["doctor", "git"])
        .current_dir(&repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", &home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doc.stdout);
    println!("{text}");
    assert!(
        text.contains("core.packedGitLimit=128m (~/.gitconfig:4)"),
        "{text}"
    );
    assert!(
        text.contains("git config --unset core.packedGitLimit"),
        "{text}"
    );
    // The same repository under git's defaults: nothing to say.
    let fine = Command::new(launcher())
        .args(["doctor", "git"])
        .current_dir(&repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo.parent().unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fine.stdout);
    assert!(text.contains("without thrashing"), "{text}");
}
