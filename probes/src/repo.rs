//! A deterministic `git fast-import` stream: `commits` commits over a tree
//! of `files` files in nested directories, each commit editing a few lines
//! of a few files, so packs hold long delta chains and many trees.

use munmapq_check::sys::Rng;
use std::io::Write;

fn file_path(i: usize) -> String {
    format!("src/d{:02}/s{:02}/file{:04}.txt", i % 17, (i / 17) % 13, i)
}

fn initial_lines(rng: &mut Rng, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| format!("line {:016x} {:016x}", rng.next_u64(), rng.next_u64()))
        .collect()
}

pub fn fast_import(commits: usize, files: usize, out: &mut impl Write) -> std::io::Result<()> {
    let mut rng = Rng(0x5eed);
    let mut contents: Vec<Vec<String>> = (0..files)
        .map(|_| {
            let n = 20 + rng.below(60) as usize;
            initial_lines(&mut rng, n)
        })
        .collect();
    let mut mark = 0usize;
    let blob =
        |out: &mut dyn Write, lines: &[String], mark: &mut usize| -> std::io::Result<usize> {
            *mark += 1;
            let data = lines.join("\n") + "\n";
            write!(out, "blob\nmark :{mark}\ndata {}\n{data}\n", data.len())?;
            Ok(*mark)
        };
    for c in 0..commits {
        let changed: Vec<usize> = if c == 0 {
            (0..files).collect()
        } else {
            (0..1 + rng.below(8))
                .map(|_| rng.below(files as u64) as usize)
                .collect()
        };
        let mut marks = Vec::new();
        for &f in &changed {
            if c > 0 {
                let lines = &mut contents[f];
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(lines.len() as u64) as usize;
                    lines[at] = format!("edit {c} {:016x}", rng.next_u64());
                }
                if rng.below(4) == 0 {
                    lines.push(format!("grow {c} {:016x}", rng.next_u64()));
                }
            }
            marks.push((f, blob(out, &contents[f], &mut mark)?));
        }
        let msg = format!("commit {c}: touch {} files\n", changed.len());
        let files = marks.into_iter().map(|(f, m)| (file_path(f), m));
        commit(out, c, &msg, files)?;
    }
    Ok(())
}

/// A stream whose pack is large and whose trees thrash big windows, like a
/// kernel-sized repository under a small `core.packedGitLimit`: every
/// commit adds one incompressible blob of `blob_kib` KiB (so the pack is
/// about `commits * blob_kib` KiB) and edits a text file in one of `dirs`
/// directories, so `git log --raw` reads, for each commit, the previous
/// version of a directory tree last written far back in the pack (and its
/// delta chain, further back still).
pub fn fast_import_big(
    commits: usize,
    dirs: usize,
    blob_kib: usize,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut rng = Rng(0xb16_5eed);
    let mut mark = 0usize;
    let mut text: Vec<Vec<String>> = (0..dirs).map(|_| initial_lines(&mut rng, 12)).collect();
    let mut bin = vec![0u8; blob_kib * 1024];
    for c in 0..commits {
        let mut files = Vec::new();
        let touched: Vec<usize> = if c == 0 {
            (0..dirs).collect()
        } else {
            vec![rng.below(dirs as u64) as usize]
        };
        for &d in &touched {
            if c > 0 {
                let lines = &mut text[d];
                let at = rng.below(lines.len() as u64) as usize;
                lines[at] = format!("edit {c} {:016x}", rng.next_u64());
            }
            mark += 1;
            let data = text[d].join("\n") + "\n";
            write!(out, "blob\nmark :{mark}\ndata {}\n{data}\n", data.len())?;
            files.push((
                format!("tree/d{:03}/s{:02}/notes.txt", d % 97, d / 97),
                mark,
            ));
        }
        for chunk in bin.chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        mark += 1;
        write!(out, "blob\nmark :{mark}\ndata {}\n", bin.len())?;
        out.write_all(&bin)?;
        writeln!(out)?;
        files.push((format!("data/b{:02}/blob{c:05}.bin", c % 41), mark));
        commit(out, c, &format!("commit {c}\n"), files)?;
    }
    Ok(())
}

/// Commit number `c` on main (an hour after the one before), its message
/// `msg`, setting each `(path, blob mark)` of `files`.
fn commit(
    out: &mut impl Write,
    c: usize,
    msg: &str,
    files: impl IntoIterator<Item = (String, usize)>,
) -> std::io::Result<()> {
    let when = 1_600_000_000 + c * 3600;
    write!(
        out,
        "commit refs/heads/main\nauthor Probe <probe@example.com> {when} +0000\n\
         committer Probe <probe@example.com> {when} +0000\ndata {}\n{msg}",
        msg.len()
    )?;
    for (path, m) in files {
        writeln!(out, "M 100644 :{m} {path}")?;
    }
    writeln!(out)
}
