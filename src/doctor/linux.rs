//! The doctor's Linux rules: does ld.so preload the library into the
//! program?

use super::facts::{Facts, Verdict};

/// The Linux rules.
pub fn judge_linux(f: &Facts) -> Verdict {
    let no = |why: &str, instead: &str| Verdict::WontLoad(why.into(), instead.into());
    if let Some(why) = &f.secure {
        return Verdict::WontLoad(
            format!("it would run in secure mode ({why}): the dynamic linker ignores LD_PRELOAD"),
            "run an ordinary (not set-id, no capabilities) copy of the program, with your own ids"
                .into(),
        );
    }
    // `run` follows #! lines to the program first; facts of a script
    // itself mean its interpreter could not be followed.
    if let Some(sh) = &f.shebang {
        return Verdict::WontLoad(
            format!("it is a script (#!{sh}): the library loads into the program that runs it"),
            "run `munmapq doctor` on the script: it follows #! lines to that program".into(),
        );
    }
    if !f.elf {
        return no(
            "it is not an ELF executable",
            "point munmapq at the real program",
        );
    }
    if let Some(machine) = &f.foreign {
        return Verdict::WontLoad(
            format!(
                "it is a program for {machine}, and the library is built for {}: that machine's dynamic linker cannot load it",
                std::env::consts::ARCH
            ),
            format!("run a build of the program for {}, or munmapq built for {machine}", std::env::consts::ARCH),
        );
    }
    if f.dynamic_linker {
        return Verdict::Loads;
    }
    match &f.interpreter {
        Some(i) if f.interpreter_missing => Verdict::WontLoad(
            format!("its dynamic linker {i} does not exist, so the program does not run at all (the exec fails: 127)"),
            format!("install what provides {i}, or run a build of the program for this system"),
        ),
        None => no(
            "it is statically linked: there is no dynamic linker to preload anything",
            "use a dynamically linked build of the program (e.g. your distribution's package)",
        ),
        Some(i) if i.contains("musl") => no(
            "it uses musl's dynamic linker; libmunmapq is built for glibc",
            "build munmapq for the musl target, or use a glibc build of the program",
        ),
        Some(i) if !i.contains("ld-linux") && !i.contains("ld64.so") => Verdict::WontLoad(
            format!("its dynamic linker {i} is not glibc's"),
            "use a glibc build of the program".into(),
        ),
        Some(_) => match crate::program::asan::judge(f.asan.as_ref(), f.asan_check_off) {
            Err((why, instead)) => Verdict::WontLoad(why, instead),
            Ok(_) => Verdict::Loads,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(interp: Option<&str>) -> Facts {
        Facts {
            elf: true,
            interpreter: interp.map(String::from),
            ..Facts::default()
        }
    }

    #[test]
    fn linux_rules() {
        assert_eq!(
            judge_linux(&linux(Some("/lib64/ld-linux-x86-64.so.2"))),
            Verdict::Loads
        );
        assert_eq!(
            judge_linux(&linux(Some("/lib/ld-linux-aarch64.so.1"))),
            Verdict::Loads
        );
        assert!(
            matches!(judge_linux(&linux(None)), Verdict::WontLoad(w, _) if w.contains("statically"))
        );
        assert!(
            matches!(judge_linux(&linux(Some("/lib/ld-musl-x86_64.so.1"))), Verdict::WontLoad(w, _) if w.contains("musl"))
        );
        let gone = Facts {
            interpreter_missing: true,
            ..linux(Some("/lib64/ld-linux-x86-64.so.2"))
        };
        assert!(
            matches!(judge_linux(&gone), Verdict::WontLoad(w, _) if w.contains("does not exist"))
        );
        let suid = Facts {
            secure: Some("it is setuid, and the exec changes your ids".into()),
            ..linux(Some("/lib64/ld-linux-x86-64.so.2"))
        };
        assert!(matches!(judge_linux(&suid), Verdict::WontLoad(w, _) if w.contains("setuid")));
        let own = Facts {
            setuid: true,
            ..linux(Some("/lib64/ld-linux-x86-64.so.2"))
        };
        assert_eq!(judge_linux(&own), Verdict::Loads, "the exec changes no id");
        let foreign = Facts {
            foreign: Some("arm64".into()),
            ..linux(Some("/lib/ld-linux-aarch64.so.1"))
        };
        assert!(
            matches!(judge_linux(&foreign), Verdict::WontLoad(w, _) if w.contains("a program for arm64"))
        );
        let ld_so = Facts {
            dynamic_linker: true,
            ..linux(None)
        };
        assert_eq!(
            judge_linux(&ld_so),
            Verdict::Loads,
            "ld.so takes LD_PRELOAD"
        );
        let script = Facts {
            shebang: Some("/bin/sh".into()),
            ..Facts::default()
        };
        assert!(
            matches!(judge_linux(&script), Verdict::WontLoad(w, i) if w.contains("script") && !i.contains("/usr/bin/env"))
        );
        let asan = Facts {
            asan: Some(crate::program::elf::Asan::Shared("libasan.so.8".into())),
            ..linux(Some("/lib64/ld-linux-x86-64.so.2"))
        };
        assert!(
            matches!(judge_linux(&asan), Verdict::WontLoad(w, i) if w.contains("AddressSanitizer") && i.contains("verify_asan_link_order=0"))
        );
        let asan_off = Facts {
            asan_check_off: true,
            ..asan
        };
        assert_eq!(judge_linux(&asan_off), Verdict::Loads);
    }
}
