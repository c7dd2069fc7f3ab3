//! The page cache of a paged bundle: verified raw page bodies by name, under a byte budget
//! (least recently used pages are evicted between queries), and the set of pages a query
//! asked for that were not there.
//!
//! Readers never block on I/O: a page that is not in the cache is recorded as missing and
//! the read answers "absent". The engine runs the query again once the caller has added
//! the missing pages (see the `paged` module docs).

use crate::hash::Map as HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::page;
use crate::error::{FormatError, Result};

/// Default byte budget: 32 MiB of raw page bodies.
pub const DEFAULT_BUDGET: usize = 32 << 20;

/// Counters of a [`PageCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Pages held.
    pub pages: usize,
    /// Raw bytes held.
    pub bytes: usize,
    /// Reads that found their page.
    pub hits: u64,
    /// Reads that did not.
    pub misses: u64,
    /// Pages added so far.
    pub added: u64,
    /// Pages evicted so far.
    pub evicted: u64,
}

struct Entry {
    body: Arc<Vec<u8>>,
    last_use: u64,
    pinned: bool,
}

#[derive(Default)]
struct Inner {
    pages: HashMap<String, Entry>,
    /// Sorted, no duplicates: a few names per query round, so a sorted `Vec` (binary search)
    /// rather than a `BTreeSet`, whose insert/remove code is ~8 kB of wasm (sixth round of
    /// `docs/design/wasm-size.md`).
    missing: Vec<String>,
    clock: u64,
    budget: usize,
    stats: CacheStats,
}

/// Verified raw page bodies, shared by every reader of one bundle. Thread-safe.
pub struct PageCache {
    inner: Mutex<Inner>,
}

impl Default for PageCache {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET)
    }
}

impl PageCache {
    /// An empty cache holding at most `budget` raw bytes between queries.
    pub fn new(budget: usize) -> Self {
        PageCache {
            inner: Mutex::new(Inner {
                budget,
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map inconsistent (every update
        // is a single insert or remove), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The raw body of page `name`, or `None` (the page is then recorded as missing).
    pub fn get(&self, name: &str) -> Option<Arc<Vec<u8>>> {
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        match g.pages.get_mut(name) {
            Some(e) => {
                e.last_use = now;
                let body = e.body.clone();
                g.stats.hits += 1;
                Some(body)
            }
            None => {
                g.stats.misses += 1;
                if let Err(i) = g.missing.binary_search_by(|m| m.as_str().cmp(name)) {
                    g.missing.insert(i, name.to_string());
                }
                None
            }
        }
    }

    /// The raw body of page `name`, or [`FormatError::PageMissing`] (recorded as missing).
    pub fn require(&self, name: &str) -> Result<Arc<Vec<u8>>> {
        self.get(name).ok_or_else(|| FormatError::PageMissing {
            name: name.to_string(),
        })
    }

    /// True if page `name` is held (does not count as a read, records nothing).
    pub fn contains(&self, name: &str) -> bool {
        self.lock().pages.contains_key(name)
    }

    /// Adds page `name` given as header + raw body (see [`page::verify_raw`]). Errors on a
    /// page that fails verification; nothing is added then.
    pub fn add_raw(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let body = page::verify_raw(name, bytes)?;
        self.insert(name, body, false);
        Ok(())
    }

    /// Adds page `name` as stored on disk (header + stored body), inflating and verifying it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn add_stored(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let body = page::decode_stored(name, bytes)?;
        self.insert(name, body, false);
        Ok(())
    }

    /// Inserts an already verified body; `pinned` pages are never evicted.
    pub(crate) fn insert(&self, name: &str, body: Vec<u8>, pinned: bool) {
        let mut g = self.lock();
        g.clock += 1;
        let now = g.clock;
        if let Ok(i) = g.missing.binary_search_by(|m| m.as_str().cmp(name)) {
            g.missing.remove(i);
        }
        g.stats.added += 1;
        g.pages.insert(
            name.to_string(),
            Entry {
                body: Arc::new(body),
                last_use: now,
                pinned,
            },
        );
    }

    /// Takes the set of pages recorded as missing since the last call, sorted by name.
    pub fn take_missing(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().missing)
    }

    /// True if a page was recorded as missing since the last [`PageCache::take_missing`] or
    /// [`PageCache::clear_missing`]: what has been computed from the cache since may be
    /// incomplete.
    pub fn has_missing(&self) -> bool {
        !self.lock().missing.is_empty()
    }

    /// Forgets the recorded misses (at the start of a query).
    pub fn clear_missing(&self) {
        self.lock().missing.clear();
    }

    /// Evicts least recently used unpinned pages until their bytes fit the budget (pinned
    /// pages, the few every query reads, do not count). Called
    /// by the engine before a query, never during one, so a query never loses a page it
    /// fetched (a query larger than the budget still completes; the excess goes next time).
    pub fn trim(&self) {
        let mut g = self.lock();
        let mut held: usize = g
            .pages
            .values()
            .filter(|e| !e.pinned)
            .map(|e| e.body.len())
            .sum();
        if held <= g.budget {
            return;
        }
        let mut order: Vec<(u64, String, usize)> = g
            .pages
            .iter()
            .filter(|(_, e)| !e.pinned)
            .map(|(k, e)| (e.last_use, k.clone(), e.body.len()))
            .collect();
        crate::sort::sort(&mut order);
        for (_, k, len) in order {
            if held <= g.budget {
                break;
            }
            g.pages.remove(&k);
            g.stats.evicted += 1;
            held -= len;
        }
    }

    /// Sets the byte budget (takes effect at the next [`PageCache::trim`]).
    pub fn set_budget(&self, budget: usize) {
        self.lock().budget = budget;
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let g = self.lock();
        CacheStats {
            pages: g.pages.len(),
            bytes: g.pages.values().map(|e| e.body.len()).sum(),
            ..g.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_are_recorded_and_lru_is_trimmed_between_queries() {
        let c = PageCache::new(10);
        assert!(c.get("d-a").is_none());
        assert!(c.require("d-b").unwrap_err().is_page_missing());
        assert_eq!(c.take_missing(), ["d-a", "d-b"]);
        assert!(c.take_missing().is_empty());
        c.insert("a", vec![0; 6], false);
        c.insert("b", vec![0; 6], false);
        c.insert("pin", vec![0; 50], true);
        c.get("a");
        c.trim();
        assert!(c.contains("a") && !c.contains("b") && c.contains("pin"));
        assert_eq!(c.stats().evicted, 1);
    }
}
