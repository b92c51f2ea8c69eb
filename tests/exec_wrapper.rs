//! The launcher as an exec wrapper, side by side with `env`: every signal
//! that can be caught reaches the command once, with and without
//! `--stats`; a signal sent to the process group is not doubled; stop and
//! continue; no core dump of munmapq's own; no file left behind after a
//! SIGKILL or by a detached child.
#![cfg(target_os = "linux")]

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `env`, `munmapq` and `munmapq --stats` in front of a command.
fn forms() -> [Vec<String>; 3] {
    let m = launcher().display().to_string();
    [
        vec!["env".into()],
        vec![m.clone()],
        vec![m, "--stats".into()],
    ]
}

/// Starts `front COMMAND...` in a process group of its own, with TMPDIR
/// set to `tmp`; answers it and its first line.
fn start(
    front: &[String],
    command: &[&str],
    tmp: &Path,
) -> (Child, String, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(&front[0]);
    c.args(&front[1..])
        .args(command)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: setpgid between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    (child, first.trim().to_string(), out)
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {pid} {sig}");
}

/// Every signal a process can catch (not KILL, STOP, nor glibc's 32, 33).
fn catchable() -> Vec<i32> {
    (1..=libc::SIGRTMAX())
        .filter(|&s| {
            s != libc::SIGKILL && s != libc::SIGSTOP && !(32..libc::SIGRTMIN()).contains(&s)
        })
        .collect()
}

#[test]
fn every_catchable_signal_reaches_the_command_as_through_env() {
    let tmp = scratch("exec-every-signal");
    let mut wrong = Vec::new();
    for sig in catchable() {
        // bash traps any signal number and exits with the trap's status.
        let script = format!("trap 'exit 42' {sig}; echo ready; i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done");
        let mut env_status = None;
        for front in forms() {
            let (mut child, first, _out) = start(&front, &["bash", "-c", &script], &tmp);
            assert_eq!(first, "ready");
            kill(child.id() as i32, sig);
            let s = wait_a_minute(&mut child);
            // As through env (42, the trap's status; bash's own rules for
            // SIGCHLD).
            let expected = *env_status.get_or_insert(s);
            if s != expected {
                wrong.push(format!(
                    "{sig} via {:?}: {s:?}, env: {expected:?}",
                    front.last().unwrap()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "not as through env: {wrong:#?}");
    println!(
        "{} signals x env, munmapq, munmapq --stats: the trap's 42 each time",
        catchable().len()
    );
}

#[test]
fn a_signal_to_the_process_group_arrives_once() {
    let dir = scratch("exec-group");
    let count = c_program("sigcount", &dir);
    let usr1 = libc::SIGUSR1.to_string();
    let rt = (libc::SIGRTMIN() + 1).to_string();
    for front in forms() {
        let c = count.to_str().unwrap();
        let (mut child, first, out) = start(&front, &[c, "1.5", &usr1, &rt], &dir);
        assert!(first.starts_with("ready "), "{first}");
        let pgid = child.id() as i32;
        // To the group, then (after a pause) to the first process alone.
        kill(-pgid, libc::SIGUSR1);
        kill(-pgid, libc::SIGRTMIN() + 1);
        std::thread::sleep(Duration::from_millis(300));
        kill(pgid, libc::SIGUSR1);
        std::thread::sleep(Duration::from_millis(100));
        kill(pgid, libc::SIGRTMIN() + 1);
        let s = wait_a_minute(&mut child);
        let lines: Vec<String> = out.lines().map(|l| l.unwrap()).collect();
        assert_eq!(s.code(), Some(0), "{front:?}: {s:?} {lines:?}");
        assert_eq!(lines, [format!("{usr1} 2"), format!("{rt} 2")], "{front:?}");
    }
    println!("USR1 and SIGRTMIN+1, once to the group and once to the first process: 2 each under env, munmapq, munmapq --stats");
}

fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Waits until `pid` is in state `want` (T stopped, S/R running).
fn becomes(pid: i32, want: &[char], what: &str) {
    let start = Instant::now();
    while !state(pid).is_some_and(|s| want.contains(&s)) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what}: state {:?}",
            state(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_command_stops_and_continues_with_the_launcher() {
    let tmp = scratch("exec-stop");
    let m = launcher().display().to_string();
    let front = [m, "--stats".to_string()];
    let script = "echo $$; while :; do sleep 0.05; done";
    let (mut child, first, _out) = start(&front, &["sh", "-c", script], &tmp);
    let (l, c) = (child.id() as i32, first.parse::<i32>().unwrap());
    for stop in [libc::SIGTSTP, libc::SIGSTOP] {
        kill(l, stop);
        becomes(
            c,
            &['T'],
            &format!("the command after signal {stop} to munmapq"),
        );
        becomes(l, &['T'], "munmapq");
        kill(l, libc::SIGCONT);
        becomes(c, &['S', 'R'], "the command after SIGCONT to munmapq");
        becomes(l, &['S', 'R'], "munmapq after SIGCONT");
    }
    kill(l, libc::SIGTERM);
    assert_eq!(wait_a_minute(&mut child).signal(), Some(libc::SIGTERM));
    println!(
        "munmapq --stats: SIGTSTP and SIGSTOP to munmapq stop the command, SIGCONT continues both"
    );
}

#[test]
fn no_core_dump_of_munmapq() {
    for front in forms() {
        let dir = scratch("exec-core");
        let mut c = Command::new(&front[0]);
        c.args(&front[1..])
            .args(["sh", "-c", "kill -SEGV $$"])
            .current_dir(&dir)
            .stderr(Stdio::null());
        // SAFETY: setrlimit between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let all = libc::rlimit {
                    rlim_cur: libc::RLIM_INFINITY,
                    rlim_max: libc::RLIM_INFINITY,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &all);
                Ok(())
            });
        }
        let s = output_within(&mut c, MINUTE).status;
        assert_eq!(s.signal(), Some(libc::SIGSEGV), "{front:?}");
        // A core's NT_PRPSINFO holds the command line joined by spaces:
        // munmapq's would hold "PATH/munmapq sh -c".
        let ours = format!("{} sh -c", launcher().display());
        for e in std::fs::read_dir(&dir).unwrap() {
            let bytes = std::fs::read(e.unwrap().path()).unwrap_or_default();
            let found = bytes.windows(ours.len()).any(|w| w == ours.as_bytes());
            assert!(!found, "{front:?}: a core of munmapq");
        }
        // Under --stats the status's core flag is munmapq's own dump.
        if front.len() > 2 {
            assert!(!s.core_dumped(), "{front:?}: munmapq dumped core");
        }
    }
    println!("sh killed by SIGSEGV under munmapq and munmapq --stats: no core of munmapq");
}

/// The names in `dir`, waiting up to 5 s for it to be empty.
fn left_in(dir: &Path) -> Vec<String> {
    let start = Instant::now();
    loop {
        let names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("munmapq"))
            .collect();
        if names.is_empty() || start.elapsed() > Duration::from_secs(5) {
            return names;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn nothing_left_after_sigkill_or_by_a_detached_child() {
    let m = launcher().display().to_string();
    for front in [vec![m.clone()], vec![m.clone(), "--stats".into()]] {
        let tmp = scratch("exec-left-kill");
        let (mut child, _first, _out) = start(&front, &["sh", "-c", "echo $$; sleep 30"], &tmp);
        kill(child.id() as i32, libc::SIGKILL);
        wait_a_minute(&mut child);
        assert_eq!(
            left_in(&tmp),
            Vec::<String>::new(),
            "{front:?} after SIGKILL"
        );

        // A detached child loads the library after munmapq has ended.
        let tmp = scratch("exec-left-detached");
        let mut c = Command::new(&front[0]);
        c.args(&front[1..])
            .args([
                "sh",
                "-c",
                "setsid sh -c 'sleep 0.5; /bin/true' </dev/null >/dev/null 2>&1 &",
            ])
            .env("TMPDIR", &*tmp);
        assert!(output_within(&mut c, MINUTE).status.success());
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(
            left_in(&tmp),
            Vec::<String>::new(),
            "{front:?}: by a detached child"
        );
    }
    println!("munmapq and munmapq --stats: nothing in TMPDIR after SIGKILL or a detached child");
}

#[test]
fn a_run_killed_with_its_helper_is_swept_by_the_next() {
    let tmp = scratch("exec-sweep");
    // A pid that is gone, and a directory as a run of it would leave.
    let mut dead = Command::new("true").spawn().unwrap();
    dead.wait().unwrap();
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    let stale = tmp.join(format!("munmapq-stats-{ns}-{}-1-0", dead.id()));
    // The same pid in another pid namespace (a container sharing /tmp).
    let other = tmp.join(format!("munmapq-stats-{}-{}-1-0", ns + 1, dead.id()));
    std::fs::create_dir(&other).unwrap();
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("report"), "munmapq-loaded pid=1\n").unwrap();
    let live = tmp.join(format!("munmapq-stats-{ns}-{}-1-0", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let mut c = Command::new(launcher());
    c.args(["--stats", "true"]).env("TMPDIR", &*tmp);
    assert!(output_within(&mut c, MINUTE).status.success());
    assert!(!stale.exists(), "the dead run's directory stayed");
    assert!(live.exists(), "a live run's directory was removed");
    assert!(other.exists(), "another namespace's directory was removed");
    std::fs::remove_dir(&live).unwrap();
    std::fs::remove_dir(&other).unwrap();
    assert_eq!(left_in(&tmp), Vec::<String>::new());
    println!("--stats: a dead run's report directory removed, a live one's kept");
}

#[test]
fn no_report_variable_without_a_report() {
    let out = output_within(
        Command::new(launcher()).args([
            "sh",
            "-c",
            "echo \"${MUNMAPQ_STATS_FILE-unset} $$ $PPID\"",
        ]),
        MINUTE,
    );
    let t = text(&out.stdout);
    assert!(t.starts_with("unset "), "{t}");
    println!("munmapq without --stats: MUNMAPQ_STATS_FILE unset");
}
