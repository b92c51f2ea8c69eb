//! The system's git, with pack windows small enough to thrash, run with
//! and without the library: byte-identical output, and the counters (and
//! strace) show deferral, reuse and flushes.

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::path::Path;
use std::process::Command;

/// A git the library can load into: on macOS not /usr/bin/git, a
/// SIP-protected shim that drops DYLD_* (Homebrew's instead, and none is
/// a failure that says so).
fn git_program() -> &'static str {
    if cfg!(target_os = "macos") {
        return ["/opt/homebrew/bin/git", "/usr/local/bin/git"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("no git outside SIP: brew install git");
    }
    "git"
}

fn git(repo: &Path) -> Command {
    let mut c = git_at(git_program(), repo, repo);
    c.args(TINY_WINDOWS);
    c
}

/// A packed repository from the probe's deterministic fast-import stream.
fn make_repo(name: &str, commits: usize, files: usize) -> Scratch {
    let repo = scratch(name);
    probe_repo(&repo, commits, files, git);
    repo
}

#[test]
fn git_output_is_identical_and_munmaps_are_deferred() {
    let repo = make_repo("git", 800, 300);
    // Every object, read by one git: no shell in between (on a Mac /bin/sh
    // is SIP-protected and would start git without the library).
    let cat_file = || {
        let mut c = git(&repo);
        c.args(["cat-file", "--batch-all-objects", "--batch"]);
        c
    };
    type MakeCommand<'a> = Box<dyn Fn() -> Command + 'a>;
    let commands: Vec<(&str, MakeCommand)> = vec![
        (
            "log --raw",
            Box::new(|| {
                let mut c = git(&repo);
                c.args(["log", "--raw"]);
                c
            }),
        ),
        (
            "ls-tree -r -l",
            Box::new(|| {
                let mut c = git(&repo);
                c.args(["ls-tree", "-r", "-l", "--full-tree", "HEAD"]);
                c
            }),
        ),
        ("cat-file --batch", Box::new(cat_file)),
    ];
    for (name, make) in &commands {
        // Default caps, then a queue so small it flushes all the time.
        let with = differential(make, &[]);
        println!(
            "git {name}: {} bytes identical; {} mmaps, {} reused, {} deferred",
            with.out.stdout.len(),
            with.get(Counter::MmapCalls),
            with.get(Counter::Reused),
            with.get(Counter::Deferred)
        );
        assert!(with.get(Counter::Deferred) > 10, "{name}");
        let small = differential(make, &[("MUNMAPQ_MAX_ENTRIES", "16")]);
        println!(
            "git {name}, 16 entries: {} flushes, {} munmap syscalls for {} munmaps",
            small.get(Counter::Flushes),
            small.get(Counter::MunmapSyscalls),
            small.get(Counter::MunmapCalls)
        );
        assert!(small.get(Counter::Flushes) > 0, "{name}");
        assert!(small.get(Counter::Deferred) > 10, "{name}");
    }
    // The same in seed mode (no reuse, flush everything when full).
    let seed = differential(
        &commands[0].1,
        &[
            ("MUNMAPQ_REUSE", "0"),
            ("MUNMAPQ_EVICT", "all"),
            ("MUNMAPQ_MAX_ENTRIES", "64"),
        ],
    );
    assert_eq!(seed.get(Counter::Reused), 0);
    assert!(seed.get(Counter::Flushes) > 0);
}

#[cfg(target_os = "linux")] // strace
#[test]
fn git_log_issues_far_fewer_map_syscalls() {
    let repo = make_repo("git-strace", 800, 300);
    let r = repo.to_str().unwrap();
    let mut cmd = vec!["git", "-C", r];
    cmd.extend(TINY_WINDOWS);
    cmd.extend(["log", "--raw"]);
    let env = [("GIT_CONFIG_NOSYSTEM", "1"), ("HOME", r)];
    let (mm0, mm1) = (
        strace_count(&cmd, false, &env, "mmap"),
        strace_count(&cmd, true, &env, "mmap"),
    );
    let (mu0, mu1) = (
        strace_count(&cmd, false, &env, "munmap"),
        strace_count(&cmd, true, &env, "munmap"),
    );
    println!("git log --raw, tiny windows: mmap {mm0} -> {mm1}, munmap {mu0} -> {mu1} (strace)");
    assert!(mu1 * 10 < mu0, "munmap {mu0} -> {mu1}");
    assert!(mm1 * 3 < mm0 * 2, "mmap {mm0} -> {mm1}");
}

/// A repository with loose objects besides its pack, read with
/// `cat-file --batch`: each loose object is mapped whole, its descriptor closed before
/// its munmap, and so forgotten (a small mapping outliving its descriptor
/// is never kept: `docs/guarantees.md`). Those mappings must not turn the
/// queue off for the pack's windows between them: the next whole small
/// file through a number whose close forgot one passes straight,
/// uncounted by the payoff. Loose objects first, then the packed ones in
/// `rev-list` order.
#[cfg(target_os = "linux")] // a shell the library loads into
#[test]
fn loose_objects_read_first_leave_the_pack_windows_queued() {
    let repo = make_repo("git-loose-first", 800, 300);
    let files = repo.join("loose-src");
    std::fs::create_dir_all(&files).unwrap();
    let names: Vec<_> = (0..3000)
        .map(|i| {
            let p = files.join(format!("f{i}"));
            std::fs::write(&p, format!("loose object {i}\n").repeat(1 + i % 7)).unwrap();
            p
        })
        .collect();
    let mut loose = Vec::new();
    for chunk in names.chunks(500) {
        let out = git(&repo)
            .args(["hash-object", "-w", "--"])
            .args(chunk)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        loose.extend(text(&out.stdout).lines().map(str::to_owned));
    }
    let out = git(&repo)
        .args(["rev-list", "--objects", "--all"])
        .output()
        .unwrap();
    let packed = text(&out.stdout);
    let mut list = String::new();
    for id in loose
        .iter()
        .map(String::as_str)
        .chain(packed.lines().map(|l| &l[..40]))
    {
        list.push_str(id);
        list.push('\n');
    }
    let list_file = repo.join("ids");
    std::fs::write(&list_file, list).unwrap();
    let with = differential(
        || {
            // The list on standard input, which the test's runs close.
            let mut c = Command::new("sh");
            c.args(["-c", "exec git \"$@\" cat-file --batch < \"$0\""])
                .arg(&list_file)
                .arg("-C")
                .arg(&*repo)
                .args(TINY_WINDOWS)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", &*repo);
            c
        },
        &[],
    );
    let (deferred, reused) = (with.get(Counter::Deferred), with.get(Counter::Reused));
    println!(
        "3,000 loose objects, then {} packed ones: {} mmaps, {deferred} deferred, \
         {reused} reused, {} forgotten, {} passed by the payoff",
        packed.lines().count(),
        with.get(Counter::MmapCalls),
        with.get(Counter::Forgotten),
        with.get(Counter::PassPayoff)
    );
    // cat-file maps each loose object 3 times: those pass, and no window
    // of the pack does (without the rule: 10,752 passed, 5,814 reused).
    assert!(with.get(Counter::PassPayoff) <= 9010, "pack windows passed");
    assert!(deferred > 500, "{deferred} deferred");
    assert!(
        reused * 10 >= with.get(Counter::MmapCalls) * 4,
        "{reused} reused"
    );
}
