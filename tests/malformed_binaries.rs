//! The launcher reads the headers of whatever file a user names:
//! truncated and byte-flipped ELF programs and Mach-O files (thin and
//! universal) get an answer or an error line, never a panic or a signal.
//! On Linux `munmapq doctor` reads an ELF program's interpreter, needed
//! libraries and symbols; a Mach-O file it runs with /bin/sh as execvp
//! does, so the Mach-O files are also named as the library, whose
//! architectures `munmapq selftest` reads from its header (the load
//! commands' reader, macOS-only here, is fed the same damage in
//! src/macho/tests.rs).
#![cfg(target_os = "linux")] // the ELF sample is this machine's /bin/true

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn le(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn name16(s: &str) -> Vec<u8> {
    let mut b = s.as_bytes().to_vec();
    b.resize(16, 0);
    b
}

/// A 64-bit arm64 MH_EXECUTE with one `__RESTRICT` segment holding one
/// `__restrict` section (loader.h's `segment_command_64`, `section_64`).
fn thin_macho() -> Vec<u8> {
    let mut seg = le(&[0x19, 72 + 80]);
    seg.extend(name16("__RESTRICT"));
    seg.resize(64, 0);
    seg.extend(le(&[1, 0])); // nsects, flags
    seg.extend(name16("__restrict"));
    seg.extend(name16("__RESTRICT"));
    seg.resize(72 + 80, 0);
    let mut v = le(&[0xfeed_facf, 0x0100_000c, 0, 2, 1, seg.len() as u32, 0, 0]);
    v.extend(seg);
    v
}

/// A universal file (big-endian `fat_header`, `fat_arch`) holding the
/// thin file twice, as arm64 and as x86_64.
fn universal_macho() -> Vec<u8> {
    let thin = thin_macho();
    let mut v: Vec<u8> = [0xcafe_babe_u32, 2]
        .iter()
        .flat_map(|w| w.to_be_bytes())
        .collect();
    for (i, cpu) in [0x0100_000c_u32, 0x0100_0007].into_iter().enumerate() {
        let at = 0x1000 * (i as u32 + 1);
        for w in [cpu, 0, at, thin.len() as u32, 12] {
            v.extend(w.to_be_bytes());
        }
    }
    for i in 0..2 {
        v.resize(0x1000 * (i + 1), 0);
        v.extend(&thin);
    }
    v
}

/// The damaged copies of `good`: cut at many lengths, and one byte at a
/// time flipped (every byte of the headers, then a stride).
fn damaged(good: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let cuts = (0..96).chain((96..good.len().min(8192)).step_by(61));
    for n in cuts {
        out.push(good[..n].to_vec());
    }
    let flips = (0..256.min(good.len())).chain((256..good.len().min(16384)).step_by(97));
    for (i, at) in flips.enumerate() {
        let mut v = good.to_vec();
        v[at] ^= [0xff, 0x80, 0x01, 0x7f][i % 4];
        out.push(v);
    }
    out
}

fn doctor_never_panics(name: &str, good: &[u8]) {
    let dir = scratch(name);
    let cases = damaged(good);
    for (i, bytes) in cases.iter().enumerate() {
        let p = dir.join(format!("{name}-{i}"));
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = output_within(Command::new(launcher()).arg("doctor").arg(&p), MINUTE);
        let code = out.status.code();
        assert!(
            matches!(code, Some(c) if c != 101 && c < 128),
            "doctor on {} ({} bytes): {:?}\n{}",
            p.display(),
            bytes.len(),
            out.status,
            text(&out.stderr)
        );
        assert!(
            !text(&out.stderr).contains("panicked"),
            "{}",
            text(&out.stderr)
        );
        std::fs::remove_file(&p).unwrap();
    }
    println!("{name}: {} damaged files, no panic", cases.len());
}

#[test]
fn damaged_elf_programs() {
    doctor_never_panics("elf", &std::fs::read(Path::new("/bin/true")).unwrap());
}

#[test]
fn damaged_thin_macho_files() {
    doctor_never_panics("macho-thin", &thin_macho());
}

#[test]
fn damaged_universal_macho_files() {
    doctor_never_panics("macho-universal", &universal_macho());
}

/// An ELF program cut inside its program headers is no program to the
/// kernel (ENOEXEC), and execvp runs it with /bin/sh, which fails on it:
/// munmapq runs it as env does (same status, same output) and does not warn
/// that the library will not load into a "statically linked" program.
#[test]
fn a_cut_elf_program_runs_as_env_runs_it() {
    let dir = scratch("elf-cut");
    let p = dir.join("cut");
    std::fs::write(&p, &std::fs::read("/bin/true").unwrap()[..100]).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    // In the scratch directory: /bin/sh reads the bytes as commands, and a
    // `>` among them makes a file.
    let run = |c: &str| output_within(Command::new(c).arg(&p).current_dir(&dir), MINUTE);
    let (with, env) = (run(launcher().to_str().unwrap()), run("env"));
    assert_eq!(with.status.code(), env.status.code());
    assert_eq!(text(&with.stderr), text(&env.stderr));
    let said = output_within(Command::new(launcher()).arg("doctor").arg(&p), MINUTE);
    assert_contains(&said.stdout, "not an ELF program the kernel can load");
    println!(
        "a 100-byte cut of /bin/true: exit {:?} and stderr as under env; doctor: run by /bin/sh",
        with.status.code()
    );
}

/// What the kernel does with an ELF file decides what the launcher says
/// before it runs it: one for a machine no emulator takes is refused
/// (ENOEXEC) and run by /bin/sh, as under env, unwarned; the dynamic
/// linker run as a program preloads the library into the program it runs;
/// a file that cannot be executed gets the exec's one line (126) alone.
#[test]
fn what_runs_an_elf_file_decides_the_warning() {
    let dir = scratch("elf-kinds");
    let run = |args: &[&std::ffi::OsStr], via: &str| {
        let mut c = Command::new(via);
        c.args(args).current_dir(&dir);
        output_within(&mut c, MINUTE)
    };
    let l = launcher();
    let l = l.to_str().unwrap();
    // e_machine 0x1234: no kernel runs it.
    let mut bytes = std::fs::read("/bin/true").unwrap();
    bytes[18..20].copy_from_slice(&0x1234u16.to_le_bytes());
    let other = dir.join("other-machine");
    std::fs::write(&other, &bytes).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (with, env) = (
        run(&[other.as_os_str()], l),
        run(&[other.as_os_str()], "env"),
    );
    assert_eq!(with.status.code(), env.status.code());
    assert_eq!(text(&with.stderr), text(&env.stderr));
    // The dynamic linker as the program.
    let ld_so = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap();
    let args =
        [ld_so, "/bin/grep", "-c", "libmunmapq", "/proc/self/maps"].map(std::ffi::OsStr::new);
    let out = run(&args, l);
    assert!(
        !text(&out.stderr).contains("will not load"),
        "{}",
        text(&out.stderr)
    );
    assert_ne!(text(&out.stdout).trim(), "0");
    // Not executable: permission denied, one line.
    let lib = dir.join("not-executable.so");
    std::fs::copy("/bin/true", &lib).unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&[lib.as_os_str()], l);
    assert_eq!(out.status.code(), Some(126));
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
    println!("an ELF file for no machine here: as under env; ld.so as the program: loaded, unwarned; not executable: 126, one line");
}
