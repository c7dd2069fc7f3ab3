//! `jikji update` of a binary dense index at ≥ 100,000 chunks, in memory (issue 14,
//! `docs/design/update.md`, "Binary lists kept"): synthetic e5-like vectors (the generator
//! of `bench_ivf_1m --synthetic`), a full build of the first `--n` (the builder's k-means
//! capped at 125, 4-bit centred centroids, coded sample, rows per list, grouped rows as the
//! builder writes them at this size), then
//! `--add` vectors appended (new chunks at the end) and the update's path: `plan_update` on
//! the stored centroids, `write_pages_kept_binary` over the old pages. Printed: the seconds of
//! each, pages renamed by kind and the bytes of the renamed pages (as stored: what a returning
//! visitor re-downloads of the index when it needs them), and recall@10 against the exact
//! int8 scan for the update and for a full rebuild of all `n + add` vectors (same nprobe and
//! rescoring), and for the old index before the update (against the exact scan of its `n`
//! vectors: the like-for-like baseline).
//!
//! `--int8`: an int8 index instead, as the builder writes one below 100,000 chunks
//! (`--dense-index ivf`): the k-means' `default_nlist(n)` lists uncapped, int8 centroids,
//! int8 sample, int8 rows in each list page; the update as `jikji update` runs it for int8
//! lists (`plan_update_with(…, Some(1))`, `edit_centroids` when lists split,
//! `write_pages_kept`). nprobe: the default without pseudo-queries,
//! `default_nprobe(nlist)` of the old index (a real build measures it on its calibration's
//! pseudo-queries instead). Also printed: what the code before the int8 split did
//! (`plan_update_with(…, None)`: kept, or a refit = the full rebuild's figures).
//!
//! ```text
//! cargo run --release -p jikji-builder --example bench_update_binary -- [--int8] [--cap-longest] [--n 100000] [--add 1000] [--queries 300] [--nprobe 16] [--cap 250]
//! ```
//!
//! `--cap N`: the longest list the update may make instead of `update_cap` (125 from
//! 100,000 chunks; below it twice the longest old list), at most the rows reserved per
//! list with binary lists. A list passing it is split (`plan_update_with`,
//! `edit_centroids`: `docs/design/update.md`, "Splits past the cap"). `--cap-longest`: the
//! longest old list (as `builder/tests/update_split_lists.rs` forces it), so the split
//! path runs where the default cap would not split.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use jikji_engine::ivf::{search_pages, IndexPages, Place};
use jikji_format::paged::ivf::{self, IvfParts, IvfRoot, ListCodes, PageOptions};
use jikji_format::paged::page::{decode_stored, Encoded};
use jikji_format::paged::PageSink;
use jikji_format::vectors::{write_vectors, Vectors};

#[path = "support/rows.rs"]
mod rows;
use rows::synthetic;

const DIM: usize = 384;

/// Pages in memory: name → (stored size, raw body).
#[derive(Default)]
struct Store {
    all: HashMap<String, (usize, Arc<Vec<u8>>)>,
}

impl Store {
    fn add(&mut self, p: Encoded) {
        let raw = decode_stored(&p.name, &p.bytes).expect("a page");
        self.all.insert(p.name, (p.bytes.len(), Arc::new(raw)));
    }
}

/// An update's sink: pages of the previous store whose name is kept are "linked".
struct UpdateSink<'a> {
    old: &'a Store,
    new: Store,
    linked: usize,
}

impl PageSink for UpdateSink<'_> {
    fn put(&mut self, page: Encoded) -> jikji_format::Result<()> {
        self.new.add(page);
        Ok(())
    }
    fn reuse(&mut self, name: &str, old: &str) -> jikji_format::Result<bool> {
        match self.old.all.get(old) {
            Some(p) => {
                self.new.all.insert(name.to_string(), p.clone());
                self.linked += 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn previous_body(&self, name: &str) -> Option<Vec<u8>> {
        self.old.all.get(name).map(|p| p.1.to_vec())
    }
}

struct Reader<'a>(&'a Store, Mutex<Vec<String>>);

impl IndexPages for Reader<'_> {
    fn page(&self, name: &str) -> Option<Arc<Vec<u8>>> {
        let p = self.0.all.get(name).map(|p| p.1.clone());
        if p.is_none() {
            self.1.lock().unwrap().push(name.to_string());
        }
        p
    }
}

fn full_build(v: &Vectors, store: &mut Store, threads: usize, int8: bool) -> (IvfRoot, f64) {
    let t = Instant::now();
    let n = v.len();
    let ivf = jikji_builder::ivf::build(v, None, jikji_builder::ivf::default_nlist(n), 7, threads)
        .unwrap();
    let scoring = |i: usize| v.get(i);
    let per = jikji_builder::ivf::default_rows_per_page(n);
    let grouping = |docs: &[u32]| jikji_builder::ivf::row_groups(&scoring, docs, per);
    let (codes, options) = if int8 {
        // `ingest::write::write_dense_index` for int8 lists: int8 centroids below 100,000
        // chunks, an int8 sample, rows in the list pages.
        (
            ListCodes::Int8,
            PageOptions {
                centroids: jikji_builder::ingest::write::centroid_codes_for(n, None).unwrap(),
                coded_sample: false,
                sample_queries: &[],
                rows_per_list: false,
                row_groups: None,
            },
        )
    } else {
        (
            ListCodes::Binary {
                scoring: &scoring,
                rows_per_page: jikji_builder::ivf::default_rows_per_page(n),
                rescore: jikji_builder::ivf::default_rescore(n),
            },
            PageOptions {
                centroids: ivf::CentroidCodes::Int4Centred,
                coded_sample: true,
                sample_queries: &[],
                rows_per_list: true,
                // The builder's layout at this size (grouped rows from 100,000 chunks,
                // `JIKJI_IVF_ROW_GROUPS=0`: one row a page in list order).
                row_groups: jikji_builder::ivf::default_row_groups(n)
                    .then_some(&grouping as &ivf::RowGrouping),
            },
        )
    };
    // The default nprobe without pseudo-queries (the bench's recall uses its own).
    let nprobe = if int8 {
        jikji_builder::ivf::default_nprobe(ivf.lists.len())
    } else {
        16
    };
    let root = ivf::write_pages_with(
        &IvfParts {
            centroids: &ivf.centroids,
            lists: &ivf.lists,
            nprobe,
            codes,
        },
        &options,
        v,
        &mut |p| {
            store.add(p);
            Ok(())
        },
    )
    .unwrap();
    (root, t.elapsed().as_secs_f64())
}

/// Recall@10 against the exact scan of `v` at each of `nprobes`.
fn recall(
    store: &Store,
    root: &IvfRoot,
    v: &Vectors,
    queries: &[Vec<f32>],
    nprobes: &[usize],
) -> Vec<f64> {
    let at = Place {
        chunks: v.len(),
        dim: v.dim(),
    };
    let reader = Reader(store, Mutex::new(Vec::new()));
    let mut sum = vec![0.0; nprobes.len()];
    for q in queries {
        let mut exact: Vec<(usize, f32)> = (0..v.len()).map(|d| (d, v.dot(d, q))).collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let want: Vec<u32> = exact[..10].iter().map(|x| x.0 as u32).collect();
        for (s, &nprobe) in sum.iter_mut().zip(nprobes) {
            let got =
                search_pages(&reader, at, root, q, 10, nprobe, None).expect("every page held");
            *s += got.iter().filter(|h| want.contains(&h.0)).count() as f64 / 10.0;
        }
    }
    sum.iter().map(|s| s / queries.len() as f64).collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut n, mut add, mut nq, mut nprobe) = (100_000usize, 1_000usize, 300usize, 0usize);
    let (mut cap_arg, mut int8, mut cap_longest) = (0usize, false, false);
    while let Some(a) = args.next() {
        if a == "--int8" {
            int8 = true;
            continue;
        }
        if a == "--cap-longest" {
            cap_longest = true;
            continue;
        }
        let v: usize = args.next().and_then(|x| x.parse().ok()).expect("a number");
        match a.as_str() {
            "--n" => n = v,
            "--add" => add = v,
            "--queries" => nq = v,
            "--nprobe" => nprobe = v,
            "--cap" => cap_arg = v,
            _ => panic!("unknown option {a}"),
        }
    }
    let threads = 2;
    let (base, queries) = synthetic(n + add, nq, DIM);
    let v_old = Vectors::open(&write_vectors(DIM, &base[..n]).unwrap()).unwrap();
    let v_new = Vectors::open(&write_vectors(DIM, &base).unwrap()).unwrap();
    let mut old = Store::default();
    let (root, s_build) = full_build(&v_old, &mut old, threads, int8);
    if nprobe == 0 {
        // Binary: the session-29 figure; int8: the old index's default without
        // pseudo-queries.
        nprobe = if int8 { root.nprobe } else { 16 };
    }
    let old_lists: Vec<Vec<u32>> = (0..root.nlist)
        .map(|j| {
            let name = root.list_page(j);
            let body = &old.all[&name].1;
            if int8 {
                ivf::ListPage::open(&name, body, n, DIM).unwrap().docs
            } else {
                root.open_list(&name, body, n, DIM).unwrap().docs
            }
        })
        .collect();
    let sizes: Vec<usize> = old_lists.iter().map(Vec::len).collect();
    println!(
        "full build of {n} ({}): {s_build:.1} s, {} lists (longest {}), default nprobe {}, list_rows {:?}, rows a page {:?}, grouped {}, {} pages",
        root.codes,
        root.nlist,
        sizes.iter().max().unwrap(),
        root.nprobe,
        root.list_rows,
        root.rows.as_ref().map(|r| r.per_page),
        root.grouped(),
        old.all.len()
    );

    // The update: the stored centroids, the new vectors assigned, the kept pages written.
    let t = Instant::now();
    let cbodies: Vec<Vec<u8>> = (0..root.centroids.pages)
        .map(|p| old.all[&root.centroid_page(p)].1.to_vec())
        .collect();
    // As `update::kept_index`: int8 centroids as stored, 4-bit ones re-quantized to int8.
    let cents = jikji_builder::ingest::write::stored_centroids(&root, &cbodies, DIM).unwrap();
    let from_old: Vec<Option<usize>> = (0..n + add).map(|d| (d < n).then_some(d)).collect();
    let scoring = |i: usize| v_new.get(i);
    // As `update::kept_index`: grouped lists hold at most `S` groups of at least
    // `⌊per_page/2⌋ + 1` rows once split; int8 lists have no row pages.
    let per = root.rows.as_ref().map_or(1, |r| r.per_page);
    let room = match root.list_rows {
        Some(s) if root.rows.is_some() => s * if root.grouped() { per / 2 + 1 } else { per },
        _ => usize::MAX,
    };
    let cap = if cap_longest {
        // As `builder/tests/update_split_lists.rs` forces it: the longest old list, so a
        // list holding it that receives a new chunk is split.
        sizes.iter().copied().max().unwrap().min(room)
    } else if cap_arg > 0 {
        cap_arg.min(room)
    } else {
        jikji_builder::ivf::update_cap(n + add, &old_lists).min(room)
    };
    let split_rows = if root.is_binary() {
        root.list_rows
    } else {
        Some(1)
    };
    println!("update cap {cap}, split Some({})", split_rows.unwrap_or(0));
    let plan = jikji_builder::ivf::plan_update_with(
        &cents, &old_lists, n, &from_old, &scoring, cap, split_rows,
    );
    let (lists, split) = match plan {
        jikji_builder::ivf::UpdatePlan::Keep { lists, split, .. } => (lists, split),
        jikji_builder::ivf::UpdatePlan::Refit(why) => {
            println!("update: refit ({why})");
            return;
        }
    };
    // Lists split past the cap: their centroids replaced and appended, the run's pages
    // named per page (what `jikji update` does, `update::kept_index`).
    let (base, cbodies) = if split.is_empty() {
        println!("no list past the cap {cap}: no split");
        (root.clone(), cbodies)
    } else {
        let cut: Vec<usize> = split
            .iter()
            .map(|x| x.0)
            .filter(|&j| j < root.nlist)
            .collect();
        println!(
            "split past the cap {cap}: lists {cut:?} into {} parts ({} -> {} lists)",
            split.len(),
            root.nlist,
            lists.len()
        );
        ivf::edit_centroids(&root, &cbodies, &split, lists.len(), DIM).unwrap()
    };
    let regroup = |docs: &[u32]| jikji_builder::ivf::row_groups(&scoring, docs, per);
    let mut sink = UpdateSink {
        old: &old,
        new: Store::default(),
        linked: 0,
    };
    let (new_root, stats) = if int8 {
        // `ingest::write::write_kept_index` for int8 lists; its nprobe without
        // pseudo-queries.
        let p = jikji_builder::ivf::default_nprobe(lists.len());
        ivf::write_pages_kept(&base, &cbodies, &lists, p, &v_new, &mut sink).unwrap()
    } else {
        ivf::write_pages_kept_binary(
            &base,
            &cbodies,
            &lists,
            16,
            &v_new,
            &scoring,
            root.grouped().then_some(&regroup as &ivf::RowGrouping),
            &[],
            &mut sink,
        )
        .unwrap()
    };
    let s_update = t.elapsed().as_secs_f64();
    new_root.check(n + add).unwrap();
    let new = sink.new;
    let mut by_kind: std::collections::BTreeMap<char, (usize, usize, usize)> = Default::default();
    for (name, (size, _)) in &new.all {
        let k = by_kind.entry(name.chars().next().unwrap()).or_default();
        k.0 += 1;
        if !old.all.contains_key(name) {
            k.1 += 1;
            k.2 += size;
        }
    }
    println!(
        "update (+{add}): {s_update:.2} s, {} lists, default nprobe {}, lists kept {} / rewritten {}, row pages kept {} / rewritten {}, list_gens {}, pages linked {}",
        new_root.nlist,
        new_root.nprobe,
        stats.kept,
        stats.rewritten,
        stats.row_pages_kept,
        stats.row_pages_rewritten,
        new_root.list_gens.as_ref().map_or(0, Vec::len),
        sink.linked
    );
    for (k, (all, renamed, bytes)) in &by_kind {
        println!("  {k}: {renamed} of {all} pages renamed, {bytes} B of them (stored)");
    }
    // Which lists should have been renamed: those whose chunks changed, and new ones.
    let changed = (0..lists.len())
        .filter(|&j| old_lists.get(j) != Some(&lists[j]))
        .count();
    println!(
        "  lists whose chunks changed or are new: {changed} (the `j` pages renamed should be these)"
    );
    let total: usize = new.all.values().map(|p| p.0).sum();
    let renamed: usize = by_kind.values().map(|k| k.2).sum();
    println!(
        "  index pages: {renamed} B renamed of {total} B ({:.2} of {:.2} MB, {:.1} %)",
        renamed as f64 / 1e6,
        total as f64 / 1e6,
        100.0 * renamed as f64 / total as f64
    );
    // The code before the split (int8: session 29's `plan_update`; binary: before
    // session 29): a list past the cap refitted the whole index.
    let before =
        match jikji_builder::ivf::plan_update(&cents, &old_lists, n, &from_old, &scoring, cap) {
            jikji_builder::ivf::UpdatePlan::Keep { .. } => {
                "kept (no list past the cap)".to_string()
            }
            jikji_builder::ivf::UpdatePlan::Refit(why) => {
                format!("refit ({why}): the full rebuild's figures, every index page renamed")
            }
        };
    println!("before the split: {before}");
    // The default nprobe, and (int8, whose default probes a quarter of the lists and
    // saturates) fewer lists, where the indexes' differences show.
    let mut nprobes = vec![nprobe];
    if int8 {
        nprobes.extend([32, 16, 8].into_iter().filter(|&p| p < nprobe));
    }
    if !split.is_empty() {
        // How many queries reach a split list (the routing by the updated stored
        // centroids' dot products, as the engine ranks them): the recall can only move
        // for those.
        let new_cents =
            jikji_builder::ingest::write::stored_centroids(&base, &cbodies, DIM).unwrap();
        let parts: Vec<usize> = split.iter().map(|x| x.0).collect();
        for &p in &nprobes {
            let (mut reach, mut all) = (0, 0);
            for q in &queries {
                let mut by: Vec<(usize, f32)> = (0..new_cents.len())
                    .map(|j| (j, new_cents.dot(j, q)))
                    .collect();
                by.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let probed: Vec<usize> = by[..p.min(by.len())].iter().map(|x| x.0).collect();
                let hit = parts.iter().filter(|j| probed.contains(j)).count();
                reach += usize::from(hit > 0);
                all += usize::from(hit == parts.len());
            }
            println!(
                "  queries probing a split list's part at nprobe {p}: {reach} of {} (every part: {all})",
                queries.len()
            );
        }
    }
    let ro = recall(&old, &root, &v_old, &queries, &nprobes);
    let ru = recall(&new, &new_root, &v_new, &queries, &nprobes);
    let mut full = Store::default();
    let (froot, s_full) = full_build(&v_new, &mut full, threads, int8);
    let rf = recall(&full, &froot, &v_new, &queries, &nprobes);
    let ftotal: usize = full.all.values().map(|p| p.0).sum();
    // What a refit (the code before the split) renames: the rebuild's pages whose names
    // the old index does not have.
    let fnew: Vec<usize> = full
        .all
        .iter()
        .filter(|(name, _)| !old.all.contains_key(*name))
        .map(|(_, p)| p.0)
        .collect();
    println!(
        "full rebuild of {}: {s_full:.1} s, {} lists, default nprobe {}, {} pages, {:.2} MB; {} of its pages renamed against the old index ({:.2} MB)",
        n + add,
        froot.nlist,
        froot.nprobe,
        full.all.len(),
        ftotal as f64 / 1e6,
        fnew.len(),
        fnew.iter().sum::<usize>() as f64 / 1e6
    );
    for (i, p) in nprobes.iter().enumerate() {
        println!(
            "recall@10 vs exact at nprobe {p}: old index (of {n}, vs its exact scan) {:.4}, update {:.4}, full rebuild {:.4} (update − old {:+.4}, update − rebuild {:+.4})",
            ro[i],
            ru[i],
            rf[i],
            ru[i] - ro[i],
            ru[i] - rf[i]
        );
    }
    println!("update {s_update:.2} s vs full build {s_build:.1} s, full rebuild {s_full:.1} s");
}
