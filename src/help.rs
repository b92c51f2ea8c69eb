//! The help texts: `munmapq --help` (USAGE, the options, the variables,
//! USAGE_END) and one text per word (`munmapq help WORD`, `munmapq WORD
//! --help`). The options are defined once, in [`OPTIONS`]: `--help`, the
//! man page (tests/manpage.rs checks munmapq.1 against `--help`), the typo
//! hints and the shell completions (completions.rs) are all made from it.
//! Every line fits in 80 columns.

/// What an option takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Takes {
    Nothing,
    /// Only as `--OPTION=VALUE`, one of these (or nothing).
    Inline(&'static [&'static str]),
    /// A file's path, as the next argument or after `=`.
    File(&'static str),
    /// A value of this name, typed.
    Value(&'static str),
    /// One of these.
    OneOf(&'static [&'static str]),
}

/// One option of the launcher.
pub struct Opt {
    pub long: &'static str,
    pub short: Option<&'static str>,
    pub takes: Takes,
    pub help: &'static str,
}

/// Every option of the launcher, in `--help`'s order.
pub const OPTIONS: [Opt; 12] = [
    Opt {
        long: "--stats",
        short: None,
        takes: Takes::Inline(&["full", "json"]),
        help: "after COMMAND, on stderr: what COMMAND used (time, CPU, peak RSS) and what \
               was saved (summed over COMMAND and its children, however each ended), \
               every counter (full), or one JSON object (json); munmapq then stays \
               COMMAND's parent until it ends, as time(1) does",
    },
    Opt {
        long: "--stats-out",
        short: None,
        takes: Takes::File("FILE"),
        help: "write them to FILE instead (- for stdout); implies --stats; FILE is \
               truncated once COMMAND has started",
    },
    Opt {
        long: "--max-entries",
        short: None,
        takes: Takes::Value("N"),
        help: "most mappings queued at once (MUNMAPQ_MAX_ENTRIES)",
    },
    Opt {
        long: "--max-bytes",
        short: None,
        takes: Takes::Value("SIZE"),
        help: "a fixed cap on the bytes queued, with a K, M, G or T suffix, e.g. 64M \
               (MUNMAPQ_MAX_BYTES; default: the memory kept resident, a quarter of the \
               program's RSS, at least 4 MiB)",
    },
    Opt {
        long: "--no-reuse",
        short: None,
        takes: Takes::Nothing,
        help: "never hand a queued mapping back to an mmap (MUNMAPQ_REUSE=0)",
    },
    Opt {
        long: "--evict",
        short: None,
        takes: Takes::OneOf(&["aged", "oldest", "all"]),
        help: "on overflow unmap the oldest with their old touching neighbours, down to \
               15/16 (aged, the default); the oldest with its whole run, down to 3/4; or all",
    },
    Opt {
        long: "--disable",
        short: None,
        takes: Takes::Nothing,
        help: "load the library but pass every call through (MUNMAPQ_DISABLE=1)",
    },
    Opt {
        long: "--lib",
        short: None,
        takes: Takes::File("PATH"),
        help: "use this libmunmapq (default: $MUNMAPQ_LIB, else next to munmapq or in \
               ../lib, else the one built in; never the current directory); a path the \
               preload variable would split (a space or a colon; on macOS a colon) is refused",
    },
    Opt {
        long: "--print-lib",
        short: None,
        takes: Takes::Nothing,
        help: "print the library's path and exit",
    },
    Opt {
        long: "--quiet",
        short: Some("-q"),
        takes: Takes::Nothing,
        help: "no warning that COMMAND runs without the library",
    },
    Opt {
        long: "--help",
        short: Some("-h"),
        takes: Takes::Nothing,
        help: "this text",
    },
    Opt {
        long: "--version",
        short: Some("-V"),
        takes: Takes::Nothing,
        help: "the version, the commit it was built from and the built-in library's \
               identity",
    },
];

impl Opt {
    /// How `--help` names it: `-q, --quiet`, `--stats[=full|json]`,
    /// `--evict aged|oldest|all`.
    pub fn synopsis(&self) -> String {
        let mut s = match self.short {
            Some(short) => format!("{short}, {}", self.long),
            None => self.long.to_string(),
        };
        match self.takes {
            Takes::Nothing => {}
            Takes::Inline(v) => s.push_str(&format!("[={}]", v.join("|"))),
            Takes::File(v) | Takes::Value(v) => s.push_str(&format!(" {v}")),
            Takes::OneOf(v) => s.push_str(&format!(" {}", v.join("|"))),
        }
        s
    }
}

/// Every name an option goes by, for typo hints.
pub fn option_names() -> Vec<&'static str> {
    OPTIONS
        .iter()
        .flat_map(|o| std::iter::once(o.long).chain(o.short))
        .collect()
}

/// `--help`'s start, before the options. A line of a few words ending in
/// `:`, after a blank line, starts a section (the man page's too);
/// indented lines are kept as they are. Names are written as they are
/// typed, without Markdown's backticks (neither a terminal nor man shows
/// them as code).
pub const USAGE: &str = "\
munmapq: defer and reuse the munmap()s of read-only file mappings

usage: munmapq [OPTIONS] [--] COMMAND [ARGS...]
       munmapq doctor COMMAND [ARGS...]
       munmapq selftest [--lib PATH]
       munmapq bench [OPTIONS] [--] COMMAND [ARGS...] | bench --seed
       munmapq shell-init bash|zsh|fish [COMMAND...]
       munmapq preload-env [bash|zsh|fish]
       munmapq completions bash|zsh|fish
       munmapq help [WORD] | version | --print-lib

Runs COMMAND with libmunmapq preloaded (LD_PRELOAD on Linux,
DYLD_INSERT_LIBRARIES on macOS, put before what is already there); the
programs COMMAND starts inherit it. Without --stats or --stats-out munmapq
execs COMMAND: same process, pid, signals, job control and exit status.
If the library cannot load into COMMAND (a static, setuid or restricted
program), munmapq says so in one line first (-q: not at all).

doctor, selftest, bench, shell-init, preload-env, completions, help and
version are munmapq's own words (munmapq help WORD, or munmapq WORD
--help, for each; munmapq help git for the git wrapper). A program of one
of these names runs with munmapq -- NAME [ARGS...].

Linked under another name (ln -s \"$(command -v munmapq)\" ~/bin/make),
munmapq runs the next program of that name in PATH with the library, its
arguments its own, as eatmydata does; linked as git, it is the git
wrapper. Where PATH is unset, commands are searched where env(1) searches
them (/bin:/usr/bin).
";

/// After the options, before the variables.
pub const USAGE_ENVIRONMENT: &str = "
environment:
  MUNMAPQ_LIB          the library to preload, as --lib
  The library reads the variables below; munmapq checks those COMMAND
  would inherit before it starts it (an empty one counts as unset), and
  refuses a MUNMAPQ_* name that looks like a misspelling of one of them:
";

/// After the variables.
pub const USAGE_END: &str = "
files:
  The library built into munmapq is written once, to preload it, to
  $XDG_CACHE_HOME/munmapq (if absolute), else ~/.cache/munmapq (the home
  from /etc/passwd if HOME is unset), else $TMPDIR/munmapq-UID (/tmp by
  default): the first of them this user can write to, in directories that
  belong to the user alone, and whose path the preload variable would not
  split (no space or colon; on macOS no colon). If none can be written,
  COMMAND runs without the library, after one line saying why. Versions no
  munmapq has used for 30 days are removed from there. With --stats, the
  processes' reports and counters go to a private directory in $TMPDIR
  that munmapq removes when it ends (or, if munmapq is killed, a helper
  does, even when the whole process group is): nothing is written
  otherwise.

signals:
  Without --stats, COMMAND is munmapq (an exec): nothing stands between.
  With --stats, munmapq is COMMAND's parent in the same process group, as
  timeout --foreground leaves it. A signal sent to munmapq alone is passed
  on to COMMAND (every signal that can be caught); one sent to the process
  group, or by the terminal (Ctrl-C, Ctrl-Z), reached COMMAND already and
  is not sent twice: a helper process in the group, which blocks every
  signal, tells which is which. When COMMAND stops by job control (Ctrl-Z,
  SIGTSTP, SIGTTIN, SIGTTOU), munmapq stops; SIGTSTP sent to munmapq stops
  COMMAND, SIGCONT continues it. A COMMAND stopped by a SIGSTOP sent to it
  alone (a debugger, htop) leaves munmapq waiting, as time does. Signals
  the caller ignored stay ignored. If munmapq is killed, so is COMMAND
  (Linux).

exit status:
  COMMAND's own; if a signal killed COMMAND, munmapq kills itself with the
  same signal (its own core dump turned off first), but for SIGPIPE (a
  pager quit, | head), where it exits 141 (128+13), as GNU time does
  125  munmapq itself failed: a bad option, setting or MUNMAPQ_* variable,
       a library or a file it cannot use (nothing was run), a write error
       (of the --stats report too, whatever COMMAND's status)
  126  COMMAND was found but cannot be run
  127  COMMAND (or its #! interpreter) was not found
";

/// Each word's help: what `munmapq help WORD` and `munmapq WORD --help`
/// print, and that word's part of the man page.
pub const WORDS: [(&str, &str); 8] = [
    (
        "doctor",
        "\
usage: munmapq doctor COMMAND [ARGS...]

Would the library load into COMMAND, and if not, why and what to do
instead (static, setuid, restricted, a #! interpreter that cannot take it).
Exit status: 0 it would load, 1 it would not, 2 it would but git itself
fails here, 125 its report could not be written, 126 not runnable, 127
not found (COMMAND or its #! interpreter). For git (munmapq doctor git
[-C DIR ...]) it also says whether git's pack settings make it map and
unmap its packs over and over, what the git wrapper would do here and
why, and whether the git wrapper is installed as far as it can see: a
shell function is the shell's own (type git shows it).
",
    ),
    (
        "selftest",
        "\
usage: munmapq selftest [--lib PATH]

Does the library load and behave on this system? Runs a few small
programs with and without it and compares; prints a report to paste into
a bug report. Exit status 0 when every check passed, 125 when the report
could not be written.
",
    ),
    (
        "bench",
        "\
usage: munmapq bench [OPTIONS] [--] COMMAND [ARGS...]
       munmapq bench [OPTIONS] --seed

Does munmapq pay for COMMAND on this machine? Runs it once without and
once with the library to warm up, then in pairs, alternating which runs
first, until --runs pairs or --time seconds; a progress line on stderr.
Each run reads /dev/null and its standard output is hashed: if two runs
differ, or COMMAND fails, or the library does not load, there is no ratio
and the status is 1. Prints CPU (user + system) and wall time, median
and range, peak RSS and page faults of each configuration, the median of
the pairs' CPU ratios, the library's counters (summed over COMMAND's
processes), the platform, the version and the library's identity, and a
verdict line; for git, the pack settings munmapq doctor git names. The
MUNMAPQ_* variables COMMAND inherits apply to the runs with the library.

  --runs N        at most N pairs (default 10)
  --time SECS     start no pair after SECS seconds (default 60; --seed:
                  120 per row)
  --warmup N      warm-up runs of each configuration (default 1)
  --json          the report as one JSON object
  --lib PATH      the library to measure (as munmapq --lib)
  --seed          in a git repository: git log --raw under the seed's
                  core.packedGitLimit=128m with 1 GiB windows, then with
                  64 MiB windows; each row's git log -n grown until a run
                  without the library takes an eighth of --time; status 1
                  unless every row deferred munmaps

Exit status: 0 measured, 1 no result (said why), 125 a bad option,
126/127 COMMAND not runnable or not found.
",
    ),
    (
        "shell-init",
        "\
usage: munmapq shell-init bash|zsh|fish [COMMAND...]

Prints shell functions that run each COMMAND (default: git) through
munmapq: eval \"$(munmapq shell-init bash)\" in ~/.bashrc. They are
defined so that an alias of the same name cannot rewrite them. A function
of that name the shell already has (in fish also an alias) is kept, and
said on stderr with how to replace it or call munmapq from it.

git goes to the git wrapper, not to the launcher (munmapq help git).
",
    ),
    (
        "preload-env",
        "\
usage: munmapq preload-env [bash|zsh|fish]

Prints the shell code that preloads the library into everything the
shell starts: eval \"$(munmapq preload-env)\". Evaluated twice, it lists the
library once. Refused on macOS, where dyld kills a program whose inserted
library is gone or fails library validation: use shell-init there.
",
    ),
    (
        "completions",
        "\
usage: munmapq completions bash|zsh|fish

Prints the shell's completion of munmapq's options, words and commands
(the command's own completion after it):
  source <(munmapq completions bash)      in ~/.bashrc
  source <(munmapq completions zsh)       in ~/.zshrc, after compinit
  munmapq completions fish | source       in config.fish
",
    ),
    (
        "help",
        "\
usage: munmapq help [WORD]

munmapq's help, or the help of one of its words.
",
    ),
    (
        "version",
        "\
usage: munmapq version

Prints munmapq's version.
",
    ),
];

/// Help on a topic that is not a word: `munmapq help git`.
pub const TOPICS: [(&str, &str); 1] = [(
    "git",
    "\
usage: git ARGS... (through shell-init's git function, or munmapq linked
       as git: ln -s \"$(command -v munmapq)\" ~/bin/git, ~/bin first in
       PATH, which reaches editors, cron and scripts too)

The git wrapper runs git with the library only in a repository where
munmapq pays, and execs git either way (git's pid, status and signals,
with the caller's argv[0]). It decides in this order.

  git config munmapq.enable true|false decides when set (another value is
  said on stderr and taken as unset; munmapq doctor git says it too);
  else munmapq pays where git's pack settings make it map and unmap its
  pack windows over and over (core.packedGitLimit below the packs' size,
  or core.packedGitWindowSize under 1 MiB); on macOS also with more than
  6700 loose objects (git's gc --auto threshold, estimated as git does),
  each of whose munmaps is dear there (on Linux they are cheap, and loose
  objects alone do not turn munmapq on); anywhere else, and outside a
  repository, git runs as it is. munmapq doctor git names the rule.

The decision is cached per repository in ~/.cache/munmapq/git, with the
identity of every file it came from (each configuration file git reads or
would read, and the pack directory): any change and the next git asks
again. A git started under git (hooks, aliases) inherits the decision.
The wrapper runs the next git in PATH that is neither itself nor another
munmapq (MUNMAPQ_GIT_WRAPPER lists those passed). When no cache directory
can take the library, git runs without it, said once a day.
",
)];

/// The help of `name`, a word or a topic (`munmapq help NAME`).
pub fn topic(name: &str) -> Option<&'static str> {
    word(name).or_else(|| TOPICS.iter().find(|(t, _)| *t == name).map(|(_, h)| *h))
}

/// The help of `word`, if it is one of munmapq's words.
pub fn word(word: &str) -> Option<&'static str> {
    WORDS.iter().find(|(w, _)| *w == word).map(|(_, h)| *h)
}

/// How far apart two words are: the edits (insert, delete, substitute, swap
/// two neighbours) that turn one into the other.
pub fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        for j in 0..=b.len() {
            d[i * w + j] = if i == 0 || j == 0 {
                i + j
            } else {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[(i - 1) * w + j] + 1)
                    .min(d[i * w + j - 1] + 1)
                    .min(d[(i - 1) * w + j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[(i - 2) * w + j - 2] + 1);
                }
                v
            };
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidates closest to `typed`: a prefix of one, or within a third of
/// its length in edits (at least one edit, at most three). Ties are all
/// given; nothing when nothing is close.
pub fn similar<'a>(typed: &str, candidates: &[&'a str]) -> Vec<&'a str> {
    if typed.is_empty() {
        return Vec::new();
    }
    let limit = (typed.chars().count() / 3).clamp(1, 3);
    // Twice the edits; a prefix counts as a little closer than its edits.
    let scored: Vec<(usize, &str)> = candidates
        .iter()
        .filter_map(|c| {
            let d = distance(typed, c);
            if c.starts_with(typed) && typed.len() >= 3 {
                Some(((2 * d.min(limit)).saturating_sub(1), *c))
            } else {
                (d <= limit).then_some((2 * d, *c))
            }
        })
        .collect();
    let best = scored.iter().map(|(d, _)| *d).min();
    scored
        .into_iter()
        .filter(|(d, _)| Some(*d) == best)
        .map(|(_, c)| c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similar_words() {
        assert_eq!(distance("doctr", "doctor"), 1);
        assert_eq!(distance("dcotor", "doctor"), 1);
        assert_eq!(similar("doctr", &["doctor", "selftest"]), ["doctor"]);
        assert_eq!(similar("--stat", &["--stats", "--stats-out"]), ["--stats"]);
        assert_eq!(
            similar("--stats-o", &["--stats", "--stats-out"]),
            ["--stats-out"]
        );
        assert_eq!(similar("help", &["doctor", "help"]), ["help"]);
        assert!(similar("ls", &["doctor", "help"]).is_empty());
        assert!(similar("grep", &["doctor", "help"]).is_empty());
    }

    #[test]
    fn help_fits_in_80_columns() {
        for text in [USAGE, USAGE_END]
            .into_iter()
            .chain(WORDS.iter().map(|w| w.1))
            .chain(TOPICS.iter().map(|w| w.1))
        {
            for l in text.lines() {
                assert!(l.chars().count() <= 80, "{l}");
                assert!(!l.contains('`'), "a backtick shows as one: {l}");
            }
        }
    }
}
