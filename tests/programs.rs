//! Widely used programs that map files through libc, on the same input with
//! and without the library: byte-identical output. (git has its own file.)
#![cfg(target_os = "linux")]

mod common;
use common::*;
use munmapq_core::stats::Counter;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn python_mmap_module_private_windows() {
    // Python's mmap module with MAP_PRIVATE/PROT_READ: eligible mappings,
    // mapped, hashed and closed window after window, many times over.
    let (_dir, file) = scratch_with_data("python", 256);
    let script = r#"
import hashlib, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
h = hashlib.sha256()
win = 4 * mmap.PAGESIZE
for i in range(20000):
    off = (i * 7 % (size // win)) * win
    m = mmap.mmap(fd, win, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ, offset=off)
    h.update(m[i % win : i % win + 64])
    m.close()
print(h.hexdigest())
"#;
    let with = differential(
        || {
            let mut c = Command::new("python3");
            c.args(["-c", script, &file]);
            c
        },
        &[],
    );
    println!(
        "python3 mmap: {} maps, {} reused, {} deferred",
        with.get(Counter::MmapCalls),
        with.get(Counter::Reused),
        with.get(Counter::Deferred)
    );
    assert!(with.get(Counter::Reused) > 10000);
}

#[test]
fn sqlite_with_mmap_io() {
    assert!(have("sqlite3"), "sqlite3 is missing (.ci/run installs it)");
    let dir = scratch("sqlite");
    let db = dir.join("t.db");
    let setup = "PRAGMA page_size=4096; CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 50000)
        INSERT INTO t SELECT i, hex(randomblob(40)) || i FROM n;";
    let ok = Command::new("sqlite3")
        .arg(&db)
        .arg(setup)
        .status()
        .unwrap();
    assert!(ok.success());
    let query =
        "PRAGMA mmap_size=268435456; SELECT count(*), sum(length(v)), min(v), max(v) FROM t;
        SELECT v FROM t WHERE k % 997 = 0 ORDER BY v; PRAGMA integrity_check;";
    let with = differential(
        || {
            let mut c = Command::new("sqlite3");
            c.arg(&db).arg(query);
            c
        },
        &[],
    );
    println!(
        "sqlite3 (mmap_size 256 MiB): {} bytes identical, {} mmap calls seen",
        with.out.stdout.len(),
        with.get(Counter::MmapCalls)
    );
    assert!(
        with.get(Counter::MmapCalls) > 0,
        "sqlite did not map the database"
    );
}

#[test]
fn ripgrep_with_mmap() {
    assert!(have("rg"), "ripgrep is missing (.ci/run installs it)");
    let dir = scratch("rg");
    for i in 0..300 {
        let body: String = (0..200)
            .map(|l| {
                format!(
                    "file {i} line {l} {}\n",
                    if l % 17 == i % 17 { "needle" } else { "hay" }
                )
            })
            .collect();
        std::fs::write(dir.join(format!("f{i:03}.txt")), body).unwrap();
    }
    let with = differential(
        || {
            let mut c = Command::new("rg");
            c.args(["--mmap", "-j1", "--sort", "path", "-n", "needle"])
                .arg(&dir);
            c
        },
        &[],
    );
    println!(
        "rg --mmap over 300 files: {} bytes identical, {} mmap / {} munmap calls seen",
        with.out.stdout.len(),
        with.get(Counter::MmapCalls),
        with.get(Counter::MunmapCalls)
    );
    assert!(
        with.get(Counter::MmapCalls) >= 300,
        "rg did not map the files"
    );
}
