//! The git wrapper: `munmapq __git`, the `git` function of `shell-init`
//! and a munmapq linked as `git`. `wrap` finds the real git past every
//! wrapper (`locate`), asks `decide` whether munmapq pays in this
//! repository (from `repo`'s facts, `check`'s pack settings and the
//! decision `cache`), and execs git. `check` also gives doctor's and
//! `--stats`' advice on pack windows.

pub mod cache;
pub mod check;
pub mod decide;
pub mod locate;
pub mod repo;
pub mod wrap;
