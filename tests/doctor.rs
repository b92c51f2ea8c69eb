//! `munmapq doctor` on what really runs: scripts followed through their
//! `#!` lines (and `/usr/bin/env NAME`) to the program, a file without
//! `#!` judged by /bin/sh as execvp runs it; `doctor git ...` with git's
//! own `-c`/`-C`/`--git-dir` options; a `--lib` that is no library.
#![cfg(target_os = "linux")] // ELF, LD_PRELOAD and the kernel's #! rules

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Output};

fn munmapq_in(dir: &Path, args: &[&str]) -> Output {
    output_within(
        Command::new(launcher())
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .env("XDG_CACHE_HOME", dir.join("cache")),
        MINUTE,
    )
}

fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn doctor_follows_scripts_to_the_program_that_runs_them() {
    let dir = scratch("doctor-scripts");
    script(
        &dir,
        "s.sh",
        "#!/bin/sh\ngrep -c libmunmapq /proc/$$/maps\n",
    );
    script(&dir, "env.sh", "#!/usr/bin/env sh\necho\n");
    script(&dir, "env-s.sh", "#!/usr/bin/env -S sh -e\necho\n");
    script(&dir, "plain.sh", "grep -c libmunmapq /proc/$$/maps\n");
    script(
        &dir,
        "nested.sh",
        &format!("#!{}\n", dir.join("s.sh").display()),
    );
    for (name, needle) in [
        ("./s.sh", "run by /bin/sh"),
        ("./env.sh", "env runs sh"),
        ("./env-s.sh", "env runs sh"),
        ("./plain.sh", "run it with /bin/sh"),
        ("./nested.sh", "run by /bin/sh"),
    ] {
        let out = munmapq_in(&dir, &["doctor", name]);
        let said = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {said}");
        assert!(said.contains(needle), "{name}: {said}");
        assert!(said.contains("the library would load"), "{name}: {said}");
        assert!(!said.contains("doctor /usr/bin/env"), "{name}: {said}");
    }
    // What the doctor says is what happens: the library is in the shell
    // running each script.
    for name in ["./s.sh", "./plain.sh"] {
        let out = munmapq_in(&dir, &[name]);
        let count: u32 = text(&out.stdout).trim().parse().unwrap_or(0);
        assert!(count > 0, "{name}: {}", text(&out.stderr));
    }
    script(&dir, "gone.sh", "#!/usr/bin/env no-such-program-here\n");
    // Not found, as the launcher answers (127); `--` as the launcher takes it.
    let out = munmapq_in(&dir, &["doctor", "--", "./gone.sh"]);
    assert_eq!(out.status.code(), Some(127));
    assert_contains(&out.stdout, "no-such-program-here is not in PATH");
    let out = munmapq_in(&dir, &["./gone.sh"]);
    assert_eq!(out.status.code(), Some(127));
    println!("doctor: 5 scripts (#!/bin/sh, #!/usr/bin/env sh, env -S, no #!, a script as interpreter) followed to the program; 2 run with the library loaded; a missing #!env program named, 127 as the launcher answers");
}

#[test]
fn a_program_whose_dynamic_linker_is_missing_is_said_not_to_run() {
    let dir = scratch("doctor-linker");
    // A copy of `true` whose PT_INTERP names a linker that is not there.
    let mut elf = std::fs::read("/bin/true").unwrap();
    let at = elf
        .windows(9)
        .position(|w| w == b"/ld-linux")
        .expect("an interpreter");
    let end = at + elf[at..].iter().position(|&b| b == 0).unwrap();
    elf[end - 1] = b'Z';
    let gone = String::from_utf8_lossy(&elf[at..end]).into_owned();
    let prog = dir.join("prog");
    std::fs::write(&prog, &elf).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = munmapq_in(&dir, &["doctor", "./prog"]);
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("would NOT load"), "{said}");
    assert!(said.contains(&format!("{gone} does not exist")), "{said}");
    // The launcher adds no warning of its own before the exec's 127,
    // which names the linker (where the kernel runs the program itself:
    // qemu-user reports a missing linker in its own way).
    let out = munmapq_in(&dir, &["./prog"]);
    let err = text(&out.stderr);
    assert!(!err.contains("will not load"), "{err}");
    if !under_qemu() {
        assert_eq!(out.status.code(), Some(127), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("was not found"), "{err}");
    }
    println!("a missing dynamic linker: the doctor says the program does not run (1), the launcher 127 in one line");
}

#[test]
fn a_library_path_that_is_no_library_is_one_line() {
    let dir = scratch("doctor-lib");
    let out = munmapq_in(&dir, &["--lib", "/tmp", "true"]);
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--lib /tmp: is a directory"), "{err}");
    std::fs::write(dir.join("notes.txt"), "not a library").unwrap();
    let out = munmapq_in(&dir, &["--lib", "notes.txt", "true"]);
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a shared library"), "{err}");
    println!("--lib: a directory and a text file refused in one line each");
}

#[test]
fn doctor_git_reads_gits_own_options() {
    let dir = scratch("doctor-git");
    let repo = repo::packed_repo(&dir, "repo");
    let thrash = [
        "-c",
        "core.packedGitWindowSize=16k",
        "-c",
        "core.packedGitLimit=32k",
    ];
    let doctor = |cwd: &Path, before: &[&str], opts: &[&str]| {
        let mut args = vec!["doctor", "git"];
        args.extend(before);
        args.extend(opts);
        args.push("log");
        let out = munmapq_in(cwd, &args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        text(&out.stdout)
    };
    let repo_s = repo.to_str().unwrap();
    let git_dir = format!("--git-dir={repo_s}/.git");
    let forms: [(&Path, Vec<&str>); 4] = [
        (&repo, vec![]),
        (&dir, vec!["-C", repo_s]),
        (&dir, vec![git_dir.as_str()]),
        (&dir, vec!["-C", repo_s, "--git-dir", ".git"]),
    ];
    for (cwd, before) in &forms {
        let said = doctor(cwd, before, &thrash);
        assert!(
            said.contains("maps and unmaps windows of 16 KiB")
                && said.contains("core.packedGitLimit=32k (command line)"),
            "{before:?}: {said}"
        );
        let said = doctor(cwd, before, &[]);
        assert!(said.contains("without thrashing"), "{before:?}: {said}");
    }
    let said = doctor(&dir, &["--git-dir", &format!("{repo_s}/.git")], &thrash);
    assert!(said.contains("maps and unmaps windows"), "{said}");
    // Outside a repository git fails: said, and status 2.
    let mut args = vec!["doctor", "git"];
    args.extend(thrash);
    args.push("log");
    let out = munmapq_in(&dir, &args);
    assert_eq!(out.status.code(), Some(2));
    let said = text(&out.stdout);
    assert!(
        said.contains("skipped the pack check") && said.contains("not a git repository"),
        "{said}"
    );
    println!("doctor git: -c windows read with -C, --git-dir=, --git-dir DIR and in the repository: thrashing named; without -c: none; outside a repository: check skipped");
}

/// Whether the file system holding `dir` ignores set-id bits (nosuid).
fn nosuid(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a zeroed struct the call fills.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut st) == 0 && st.f_flag & libc::ST_NOSUID != 0
    }
}

/// Linux ignores LD_PRELOAD (secure mode) only where the exec changes the
/// ids: a set-user-ID program owned by the caller (root's own, run by root)
/// gets the library, and the launcher must not say it will not; one owned
/// by another user does not, and the launcher and the doctor say so.
#[test]
fn set_id_programs_are_refused_only_where_the_exec_changes_the_ids() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("doctor-setid");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || nosuid(&dir) {
        println!("SKIPPED: set-id programs need root and a file system without nosuid");
        return;
    }
    let cat = dir.join("cat");
    std::fs::copy("/bin/cat", &cat).unwrap();
    std::fs::set_permissions(&cat, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let maps = |out: &Output| text(&out.stdout).contains("libmunmapq");
    let own = munmapq_in(&dir, &["./cat", "/proc/self/maps"]);
    assert!(maps(&own), "root's own set-user-ID program: loaded");
    assert!(
        !text(&own.stderr).contains("will not load"),
        "{}",
        text(&own.stderr)
    );
    let said = munmapq_in(&dir, &["doctor", "./cat"]);
    assert_contains(&said.stdout, "the library would load");
    // Another owner: the exec changes the effective user.
    std::os::unix::fs::chown(&cat, Some(65534), None).unwrap();
    std::fs::set_permissions(&cat, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let other = munmapq_in(&dir, &["./cat", "/proc/self/maps"]);
    assert!(!maps(&other), "secure mode: not loaded");
    assert_contains(
        &other.stderr,
        "the library will not load: it would run in secure mode (it is setuid",
    );
    let said = munmapq_in(&dir, &["doctor", "./cat"]);
    assert_contains(&said.stdout, "setuid");
    // Under no_new_privs (containers, systemd's NoNewPrivileges) the exec
    // ignores the bit: the library loads, and nothing says otherwise.
    let nnp = Path::new("/usr/bin/setpriv");
    if nnp.exists() {
        let out = output_within(
            Command::new(nnp)
                .args(["--no-new-privs", "--"])
                .arg(launcher())
                .args(["./cat", "/proc/self/maps"])
                .current_dir(&dir),
            MINUTE,
        );
        assert!(maps(&out), "no_new_privs: loaded");
        assert!(
            !text(&out.stderr).contains("will not load"),
            "{}",
            text(&out.stderr)
        );
    }
    println!("set-user-ID cat: root's own run by root gets the library and no warning; owned by uid 65534, the launcher and the doctor say it will not load, and it does not; under no_new_privs it loads, unwarned");
}
