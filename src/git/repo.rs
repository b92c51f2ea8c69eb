//! What git itself says about a repository, asked the way the user's
//! command would ask it: with the same global options (`-C`, `-c`,
//! `--git-dir`, ...), from the real git (never a munmapq linked as git).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// git's global options in `command` (everything before the subcommand),
/// if `command` runs git: `git config` runs with the same ones, so it sees
/// the same repository and `-c` settings. The options that take their
/// value as the next word are git.c's `handle_options` ones.
pub fn git_prefix(command: &[OsString]) -> Option<Vec<OsString>> {
    let prog = Path::new(command.first()?).file_name()?.to_str()?;
    if prog != "git" {
        return None;
    }
    Some(global_options(&command[1..]))
}

/// The global options at the start of git's arguments `args`.
pub fn global_options(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let Some(s) = a.to_str() else { break };
        if matches!(
            s,
            "-c" | "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
        ) {
            out.push(a.clone());
            match args.next() {
                Some(v) => out.push(v.clone()),
                None => break,
            }
        } else if [
            "--git-dir=",
            "--work-tree=",
            "--namespace=",
            "--config-env=",
        ]
        .iter()
        .any(|p| s.starts_with(p))
            || s == "--bare"
        {
            out.push(a.clone());
        } else if !s.starts_with('-') {
            break;
        }
    }
    out
}

/// The global option at the end of git's arguments `args` that lacks its
/// value (`git -C`), if one does.
pub fn missing_value(args: &[OsString]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let s = a.to_str()?;
        if matches!(
            s,
            "-c" | "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
        ) {
            if it.next().is_none() {
                return Some(s.to_string());
            }
        } else if !s.starts_with('-') {
            return None;
        }
    }
    None
}

/// Whether the options carry configuration of their own (`-c`,
/// `--config-env`), which no cache may answer for.
pub fn sets_config(prefix: &[OsString]) -> bool {
    prefix.iter().any(|a| {
        a == "-c" || a == "--config-env" || a.to_string_lossy().starts_with("--config-env=")
    })
}

/// The directory git starts in: the current one, moved by each `-C`.
pub fn start_dir(prefix: &[OsString]) -> PathBuf {
    let mut dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut it = prefix.iter();
    while let Some(a) = it.next() {
        if a == "-C" {
            if let Some(d) = it.next().filter(|d| !d.is_empty()) {
                dir = dir.join(d);
            }
        }
    }
    dir
}

/// The program to run for `git`: the first git in PATH that is not a
/// munmapq (see git/wrap.rs), else the name itself.
pub fn git_program() -> PathBuf {
    crate::git::locate::real_git().unwrap_or_else(|| PathBuf::from("git"))
}

/// Runs the real git with `prefix` and `args`: its stdout, or its first
/// line of stderr as the error.
pub fn git(prefix: &[OsString], args: &[&str]) -> Result<String, String> {
    git_bytes(prefix, args).map(|out| String::from_utf8_lossy(&out).into_owned())
}

/// [`git`], its stdout as git wrote it (paths need not be UTF-8).
pub fn git_bytes(prefix: &[OsString], args: &[&str]) -> Result<Vec<u8>, String> {
    git_with(prefix, args, &[])
}

/// The system configuration file this git reads (GIT_CONFIG_SYSTEM, else
/// where it was built to look: `/etc/gitconfig`, or
/// `/usr/local/etc/gitconfig` for a git built under /usr/local, ...), as
/// git itself names it: the file its `config --system --edit` would open,
/// handed to an "editor" that prints it. None: git would not say.
pub fn system_config() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let editor = [("GIT_EDITOR", "printf '%s\\0'")];
    let out = git_with(&[], &["config", "--system", "--edit"], &editor).ok()?;
    let path = out.strip_suffix(b"\0")?;
    (!path.is_empty() && !path.contains(&0))
        .then(|| PathBuf::from(OsString::from_vec(path.to_vec())))
        .filter(|p| p.is_absolute())
}

fn git_with(prefix: &[OsString], args: &[&str], env: &[(&str, &str)]) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new(git_program());
    cmd.args(prefix)
        .args(args)
        .envs(env.iter().copied())
        .env(
            crate::git::locate::GUARD_VAR,
            crate::git::locate::guard_for_children(),
        )
        .stdin(Stdio::null());
    unseen(&mut cmd);
    dies_with_us(&mut cmd);
    let out = {
        let _reaped = ChildrenWaited::now();
        cmd.output().map_err(|e| format!("git: {e}"))?
    };
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err.lines().next().unwrap_or("git failed").to_string())
    }
}

/// The git asked for the decision dies with the wrapper: killed while
/// git was blocked (an include on a hung file system, a FIFO), the wrapper
/// left it running, orphaned, where plain git would have died. On Linux it
/// gets SIGKILL when its parent thread ends (the wrapper asks from its only
/// thread). macOS has no parent-death signal: there such a git runs on
/// until what blocks it gives way, and its first write to the pipe no one
/// reads then ends it (SIGPIPE).
fn dies_with_us(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only prctl and getppid, both async-signal-safe; it touches
        // no memory but the copied pid.
        unsafe {
            cmd.pre_exec(move || {
                // A parent gone before the prctl would send no signal.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                    || libc::getppid() != parent
                {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            })
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// SIGCHLD back to its default while git runs: a caller that ignores it
/// (the disposition survives exec) has the kernel reap our children, and
/// the wait for git's status failed with ECHILD. Put back as it was when
/// dropped, so the git the wrapper execs inherits what its caller set.
struct ChildrenWaited(Option<libc::sigaction>);

impl ChildrenWaited {
    fn now() -> ChildrenWaited {
        // SAFETY: sigaction with a null new action only reads the current
        // one into `old`, a zeroed struct of the right type.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction != libc::SIG_IGN
        {
            return ChildrenWaited(None);
        }
        let mut dfl = old;
        dfl.sa_sigaction = libc::SIG_DFL;
        // SAFETY: installs the default disposition; no handler runs.
        unsafe { libc::sigaction(libc::SIGCHLD, &dfl, std::ptr::null_mut()) };
        ChildrenWaited(Some(old))
    }
}

impl Drop for ChildrenWaited {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: restores the disposition read in `now` (SIG_IGN).
            unsafe { libc::sigaction(libc::SIGCHLD, old, std::ptr::null_mut()) };
        }
    }
}

/// The gits munmapq asks are not the user's: they stay out of the user's
/// traces (`GIT_TRACE`, `GIT_TRACE2_EVENT`, ... and trace2 targets set in
/// the system or global configuration, which trace2's variables override:
/// "0" turns a target off), where plain git shows one run.
fn unseen(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.as_encoded_bytes().starts_with(b"GIT_TRACE") {
            cmd.env_remove(name);
        }
    }
    for target in ["GIT_TRACE2", "GIT_TRACE2_EVENT", "GIT_TRACE2_PERF"] {
        cmd.env(target, "0");
    }
}

/// Where a repository keeps things, as git resolves them.
#[derive(Clone, Debug, PartialEq)]
pub struct Repo {
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
    pub pack_dir: PathBuf,
    /// Where git runs its command from (the top of the work tree): the
    /// base of the relative paths `--show-origin` prints.
    pub base: PathBuf,
}

/// The repository `prefix` selects. Err: git's reason (usually "not a git
/// repository").
pub fn repo(prefix: &[OsString]) -> Result<Repo, String> {
    // What is asked, one answer each.
    const ASKED: [&[&str]; 4] = [
        &["--git-dir"],
        &["--git-common-dir"],
        &["--git-path", "objects/pack"],
        &["--show-prefix"],
    ];
    let ask = |what: &[&str]| {
        let mut args = vec!["rev-parse", "--path-format=absolute"];
        args.extend_from_slice(what);
        git_bytes(prefix, &args)
    };
    let out = ask(&ASKED.concat())?;
    // One line each, raw bytes; a path with a newline in it makes more
    // lines, and then each is asked alone (one answer, one final newline).
    let answers: Vec<Vec<u8>> = match out.strip_suffix(b"\n").map(|o| o.split(|&b| b == b'\n')) {
        Some(lines) if out.iter().filter(|&&b| b == b'\n').count() == ASKED.len() => {
            lines.map(<[u8]>::to_vec).collect()
        }
        _ => {
            let mut v = Vec::new();
            for what in ASKED {
                let one = ask(what)?;
                let one = one
                    .strip_suffix(b"\n")
                    .ok_or("git rev-parse said nothing")?;
                v.push(one.to_vec());
            }
            v
        }
    };
    let path = |b: &[u8]| {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(OsString::from_vec(b.to_vec()))
    };
    let [git_dir, common_dir, pack_dir, sub] = [0, 1, 2, 3].map(|i| path(&answers[i]));
    let start = start_dir(prefix);
    let base = sub
        .components()
        .try_fold(start.clone(), |d, _| d.parent().map(Path::to_path_buf))
        .unwrap_or(start);
    if [&git_dir, &common_dir, &pack_dir]
        .iter()
        .any(|p| p.as_os_str().is_empty())
    {
        return Err(format!(
            "git rev-parse said {:?}",
            String::from_utf8_lossy(&out)
        ));
    }
    Ok(Repo {
        git_dir,
        common_dir,
        pack_dir,
        base,
    })
}

/// One configuration entry: where it comes from (`file:PATH` made
/// absolute, `command line:`, ...), its key as git lists it (section and
/// name in lower case), its value (None: a bare `key`, which means true).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub origin: String,
    /// The file of a `file:` origin, absolute, as git named it (its bytes
    /// need not be UTF-8, unlike `origin`'s).
    pub file: Option<PathBuf>,
    pub key: String,
    pub value: Option<String>,
}

impl Repo {
    /// Every configuration entry git reads here, in git's order (the last
    /// one of a key wins), with `file:` origins made absolute.
    /// Err: git could not list it (an include it cannot read, ...).
    pub fn config(&self, prefix: &[OsString]) -> Result<Vec<Entry>, String> {
        let out = git_bytes(prefix, &["config", "--list", "--show-origin", "-z"])?;
        Ok(parse_list(&out)
            .into_iter()
            .map(|mut e| {
                if let Some(p) = e.file.take() {
                    let p = self.absolute(&p);
                    e.origin = format!("file:{}", p.display());
                    e.file = Some(p);
                }
                e
            })
            .collect())
    }

    fn absolute(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            return p.to_path_buf();
        }
        let from_base = self.base.join(p);
        if from_base.exists() {
            from_base
        } else {
            self.git_dir.join(p)
        }
    }

    /// The sizes of the repository's packs.
    pub fn pack_sizes(&self) -> Vec<u64> {
        std::fs::read_dir(&self.pack_dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().extension() == Some(OsStr::new("pack")))
                    .filter_map(|e| e.metadata().ok().map(|m| m.len()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `git config --list --show-origin -z`: `ORIGIN\0KEY\nVALUE\0` per entry,
/// `ORIGIN\0KEY\0` for a key without a value (with `-z` git writes a
/// `file:` origin's path unquoted, as its bytes).
pub fn parse_list(out: &[u8]) -> Vec<Entry> {
    use std::os::unix::ffi::OsStringExt;
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut fields = out.split(|&b| b == 0);
    let mut v = Vec::new();
    while let (Some(origin), Some(kv)) = (fields.next(), fields.next()) {
        let (key, value) = match kv.iter().position(|&b| b == b'\n') {
            Some(i) => (&kv[..i], Some(lossy(&kv[i + 1..]))),
            None => (kv, None),
        };
        let file = origin
            .strip_prefix(b"file:")
            .map(|p| PathBuf::from(OsString::from_vec(p.to_vec())));
        v.push(Entry {
            origin: lossy(origin),
            file,
            key: lossy(key),
            value,
        });
    }
    v
}

/// The last entry for `key` (any case), as git's `--get` answers.
pub fn last<'a>(entries: &'a [Entry], key: &str) -> Option<&'a Entry> {
    entries
        .iter()
        .rev()
        .find(|e| e.key.eq_ignore_ascii_case(key))
}

/// A git boolean: `true`/`yes`/`on`/`1` or a bare key; `false`/`no`/`off`/
/// `0`/empty. None: not a boolean.
pub fn boolean(value: Option<&str>) -> Option<bool> {
    let Some(v) = value else { return Some(true) };
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" | "" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn global_options_are_kept() {
        let cmd = os(&[
            "/usr/bin/git",
            "-C",
            "r",
            "-c",
            "a=b",
            "--no-pager",
            "--git-dir",
            "g",
            "--work-tree=w",
            "log",
            "-c",
            "x",
        ]);
        let p = git_prefix(&cmd).unwrap();
        assert_eq!(
            p,
            os(&["-C", "r", "-c", "a=b", "--git-dir", "g", "--work-tree=w"])
        );
        assert!(sets_config(&p) && !sets_config(&os(&["-C", "r"])));
        assert!(git_prefix(&os(&["ls"])).is_none());
        assert!(start_dir(&os(&["-C", "/a", "-C", "b"])).ends_with("/a/b"));
    }

    #[test]
    fn config_lists_and_booleans() {
        let e = parse_list(b"file:/h/.gitconfig\0user.name\nMe\0file:.git/config\0munmapq.enable\0command line:\0core.packedgitlimit\n32k\0");
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].value, None);
        assert_eq!(
            last(&e, "core.packedGitLimit").unwrap().origin,
            "command line:"
        );
        assert_eq!(boolean(None), Some(true));
        assert_eq!(boolean(Some("Off")), Some(false));
        assert_eq!(boolean(Some("maybe")), None);
    }
}
