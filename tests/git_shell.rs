//! The shell functions and the git wrapper at their edges, as a user meets
//! them: an alias named git, closed stdio, git's argv[0], a
//! `munmapq.enable` that is not a boolean, `preload-env` evaluated twice,
//! no git in PATH; and the doctor's words for a directory, `git -C` with no
//! value and a git that fails.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn an_alias_named_git_cannot_rewrite_the_function() {
    let m = launcher().display().to_string();
    let mut shells = vec![(
        "bash",
        vec!["-O", "expand_aliases", "-c"],
        "declare -F git >/dev/null && ! declare -F hub >/dev/null && \\git --version",
    )];
    if has("zsh") {
        shells.push((
            "zsh",
            vec!["-c"],
            "(( $+functions[git] )) && (( ! $+functions[hub] )) && \\git --version",
        ));
    } else {
        println!("zsh: not installed, not checked");
    }
    for (shell, flags, check) in shells {
        let script = format!(
            "alias git=hub\neval \"$('{m}' shell-init {})\"\n{check}\n",
            if shell == "zsh" { "zsh" } else { "bash" }
        );
        let out = output_within(Command::new(shell).args(&flags).arg(&script), MINUTE);
        let (o, e) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{shell}: {o} {e}");
        assert!(o.starts_with("git version"), "{shell}: {o} {e}");
    }
    println!("alias git=hub, then shell-init: the function is git's, in bash and zsh");
}

/// `front... ARGS` with stdout closed: its status and stderr.
fn closed_stdout(front: &[&str]) -> (Option<i32>, String) {
    let mut c = Command::new(front[0]);
    c.args(&front[1..]).stderr(Stdio::piped());
    // SAFETY: close between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let out = c.output().unwrap();
    (out.status.code(), text(&out.stderr))
}

#[test]
fn closed_stdio_stays_closed() {
    let m = launcher().display().to_string();
    let direct = closed_stdout(&["sh", "-c", "echo hi"]);
    assert_ne!(direct.0, Some(0), "sh with stdout closed: {direct:?}");
    for front in [&[m.as_str()][..], &[m.as_str(), "--stats"]] {
        let mut args = front.to_vec();
        args.extend(["sh", "-c", "echo hi"]);
        let through = closed_stdout(&args);
        assert_eq!(through.0, direct.0, "{front:?}: {through:?}");
        assert!(
            through.1.contains("I/O error") || through.1.contains("Bad file"),
            "{through:?}"
        );
    }
    let git = closed_stdout(&["git", "--version"]);
    let wrapped = closed_stdout(&[&m, "__git", "--version"]);
    assert_eq!(
        wrapped.0, git.0,
        "git: {git:?}, through the wrapper: {wrapped:?}"
    );
    println!(
        "stdout closed: sh fails as without munmapq ({:?}), git too ({:?})",
        direct.0, git.0
    );
}

#[test]
fn git_gets_the_callers_argv0() {
    if !has("strace") {
        println!("strace not installed: not checked");
        return;
    }
    let dir = scratch("git-argv0");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(launcher(), bin.join("git")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    for (what, args) in [
        (
            "the function",
            vec![
                launcher().display().to_string(),
                "__git".into(),
                "--version".into(),
            ],
        ),
        ("the symlink", vec!["git".into(), "--version".into()]),
    ] {
        let log = dir.join("trace");
        let out = output_within(
            Command::new("strace")
                .args(["-f", "-qq", "-e", "trace=execve", "-o"])
                .arg(&log)
                .args(&args)
                .env("PATH", &path)
                .current_dir(&dir),
            MINUTE,
        );
        assert!(out.status.success(), "{what}: {}", text(&out.stderr));
        let trace = std::fs::read_to_string(&log).unwrap();
        let last = trace.lines().rfind(|l| l.contains("execve(")).unwrap();
        assert!(last.contains("[\"git\", \"--version\"]"), "{what}: {last}");
    }
    println!("git exec'd with argv[0] \"git\" by the function and the symlink");
}

#[test]
fn a_wrong_munmapq_enable_is_said() {
    let dir = scratch("git-enable-maybe");
    let repo = repo::small_repo(&dir, "r");
    let m = launcher();
    let out = output_within(
        Command::new(&m)
            .args(["__git", "-c", "munmapq.enable=maybe", "status"])
            .current_dir(&repo)
            .env("XDG_CACHE_HOME", dir.join("cache")),
        MINUTE,
    );
    assert!(out.status.success());
    assert_contains(
        &out.stderr,
        "munmapq.enable=maybe (command line) is not a boolean",
    );
    let out = output_within(
        Command::new(&m)
            .args(["doctor", "git", "-c", "munmapq.enable=maybe", "status"])
            .current_dir(&repo)
            .env("XDG_CACHE_HOME", dir.join("cache")),
        MINUTE,
    );
    assert_contains(&out.stdout, "is not a boolean");
    println!("munmapq.enable=maybe: said by the wrapper and by doctor git");
}

#[test]
fn preload_env_twice_lists_the_library_once() {
    let m = launcher().display().to_string();
    let script = format!(
        "eval \"$('{m}' preload-env)\"; eval \"$('{m}' preload-env)\"; echo \"$LD_PRELOAD\""
    );
    let out = output_within(
        Command::new("sh")
            .args(["-c", &script])
            .env("LD_PRELOAD", "libc.so.6"),
        MINUTE,
    );
    let v = text(&out.stdout);
    let lib = lib().canonicalize().unwrap();
    assert_eq!(v.matches(lib.to_str().unwrap()).count(), 1, "{v}");
    assert!(v.trim_end().ends_with("libc.so.6"), "{v}");
    println!("preload-env evaluated twice: {}", v.trim());
}

#[test]
fn misleading_messages_are_gone() {
    let m = launcher();
    let empty = scratch("no-git-in-path");
    let out = output_within(
        Command::new(&m)
            .args(["__git", "--version"])
            .env_clear()
            .env("PATH", &*empty),
        MINUTE,
    );
    assert_eq!(out.status.code(), Some(127));
    assert_contains(&out.stderr, "git: command not found");
    let out = output_within(Command::new(&m).args(["doctor", "/etc"]), MINUTE);
    assert_eq!(out.status.code(), Some(126));
    assert_contains(&out.stdout, "/etc: is a directory");
    let out = output_within(Command::new(&m).args(["doctor", "git", "-C"]), MINUTE);
    assert_ne!(out.status.code(), Some(0));
    assert_contains(&out.stdout, "git -C needs a value");
    let dir = scratch("doctor-git-fails");
    let out = output_within(
        Command::new(&m).args([
            "doctor",
            "git",
            "-C",
            dir.join("missing").to_str().unwrap(),
            "log",
        ]),
        MINUTE,
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert_contains(&out.stdout, "git here fails");
    println!("no git in PATH, doctor /etc, doctor git -C, a failing git: each said as it is");
}
