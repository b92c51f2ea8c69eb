//! The tests' scratch directories go away: each with its test (kept only
//! when the test fails, to look at), the shared ones when the test process
//! exits. A full run left 35 directories (281 MB) in /tmp before.

mod common;
use common::*;
use std::process::Command;

#[test]
fn a_scratch_directory_is_removed_with_its_test() {
    let dir = scratch("scratch-cleanup");
    let path = dir.to_path_buf();
    std::fs::write(path.join("file"), "x").unwrap();
    drop(dir);
    assert!(!path.exists(), "{} left behind", path.display());
    println!("scratch: a test's directory removed when it ends");
}

/// Run by the next test in a child process: makes a directory shared by
/// the whole run and prints where.
#[test]
#[ignore = "run by shared_scratch_directories_are_removed_at_exit"]
fn make_a_shared_scratch_directory() {
    let dir = scratch("scratch-shared").for_the_whole_run();
    std::fs::write(dir.join("file"), "x").unwrap();
    println!("shared={}", dir.display());
}

#[test]
fn shared_scratch_directories_are_removed_at_exit() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "make_a_shared_scratch_directory",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let path = stdout
        .lines()
        .find_map(|l| l.split_once("shared=").map(|(_, p)| p.trim()))
        .expect("the child printed no directory");
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} left behind after the test process exited"
    );
    println!("scratch: a directory shared by a run removed when the process exits");
}
