//! The ordered parallel walk behind `grep` and `find`: the entries of [`super::walk`]'s sorted
//! walk, visited on several threads, handed back in exactly the sequential walk's order, and
//! stopped soon after the caller has what it needs.
//!
//! rg and fd walk with `ignore`'s `WalkParallel`, whose order is whatever the threads happen to
//! produce; it cannot be sorted without walking everything first, so a search that a limit stops
//! after a hundred matches would pay for the whole tree. Instead:
//!
//! 0. **Alone first**: the calling thread walks with `ignore`'s sequential, sorted `Walk` for
//!    5 ms (or 2,048 entries). A small tree, or a search that a limit stops early, is done
//!    before any thread is started. The rest, from the first entry not visited yet (the
//!    *resume* point, in walk order), is split into subtrees:
//! 1. **Plan** (on the calling thread): the top levels are listed, one level at a time (each
//!    level is one `Walk` over the previous level's directories, `max_depth(1)`), until a level
//!    has enough directories to keep every thread busy ([`Walker::units_per_thread`]) or
//!    [`MAX_PLAN_DEPTH`] is reached; what comes before the resume point is dropped (the
//!    directory that holds it stays, marked). The listed entries are the plan's *items*, in walk
//!    order; the directories of the last level listed are *units*, whose contents are not
//!    listed yet.
//! 2. **Groups**: the items are taken in order, a group at a time: the first group holds
//!    [`FIRST_GROUP_PER_THREAD`] units per thread, each next one [`GROUP_GROWTH`] times as
//!    many, or fewer when the results so far say that fewer will reach the limit. A group's
//!    items are visited (files on several threads: `grep` may search large ones), and its units'
//!    contents are walked by **one** `WalkParallel` over all of them: rg's and fd's own walker,
//!    work stealing entry by entry, ignore files found in each directory's listing instead of
//!    probed for by name, the parents' ignore files compiled once per group. A unit walked
//!    from its own directory with `parents(true)` sees the same ignore rules as the whole walk
//!    does when it gets there: the ignore files of every directory above it, nearest first, git
//!    repository boundaries included. Visiting is the caller's per-entry work (`grep` searches
//!    the file, `find` matches the name).
//! 3. **Order**: what a group gave is sorted into walk order (the paths' bytes, `/` below every
//!    other byte: a directory before its contents, siblings by name) and handed to the caller,
//!    which stops once it has enough; the next group starts only if it has not.
//!
//! Stopping: the caller's `take` says when it has enough; at most the rest of the group it
//! came from was walked for nothing, and groups grow by at most [`GROUP_GROWTH`], so a search
//! stopped by its limit walks at most a few times what it needed. An abort stops every thread
//! at its next entry. Memory is bounded by the limit: results count toward it
//! ([`Visitor::weight`]), and a thread keeps only its own first results, in walk order, up to
//! the limit (nothing after them can be taken).
//!
//! Why (issue 29): the walk this replaces kept the sequential walk's order all the way: each
//! thread walked whole units with the sequential `Walk` (which probes every directory for each
//! ignore file by name: a `statx` per name, the path looked up from `/` each time) and handed
//! its results back through channels to a merge in plan order. Profiled over the bench's tree
//! (`perf`, `find *.json`, 100,000 files, 2 cores), 42% of its time was in the kernel
//! (directory reads, and path lookups for the probes), 18% in libc (`malloc`, `free`,
//! `realloc`), 40% in pith and its crates; it took 150 ms of CPU and 114 ms where pi with fd
//! took 100 and 60. A whole-tree search gains nothing from keeping order while it walks: it
//! sorts what matched, which is little.
//!
//! Allocator (issue 29's main finding): the walk's threads allocate side by side for every
//! entry (`ignore`'s paths, directory listings, ignore matchers). With the single glibc arena
//! pith kept for memory's sake they took turns on its lock: 30,000-50,000 context switches and
//! 1.5-1.8x the CPU of the same walk with an arena per thread (`perf`: `futex_wake` from
//! `__lll_lock_wake_private` the largest symbol, 10-12%). So `malloc.rs` gives the process an
//! arena per walk thread ([`threads`]) besides main's.
//!
//! Threads: as many as the machine has cores (up to [`MAX_THREADS`]), as rg and fd use; with
//! one, step 0 is the whole walk. They were once limited to the cores the 1-minute load average
//! left idle (to spare the CPU time a walk on several threads can add where every core is
//! busy), but on such a host one thread gets one share of the CPU while rg and fd compete with
//! one per core: a whole-tree search took up to half again as long as theirs (issue 29, at a
//! load average of 14 on 2 cores: `find *.json` 1,070 ms on one thread, 740 ms on two, for the
//! same CPU time).

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ignore::{DirEntry, Error, ParallelVisitor, ParallelVisitorBuilder, WalkState};

use super::walk::{Flavor, builder};
use crate::cancel::CancelToken;

/// One entry of the walk, or an error met while walking.
pub type Entry = Result<DirEntry, Error>;

/// The per-entry work of a walk.
pub trait Visitor: Sync {
    /// Per-thread state (a searcher, a buffer).
    type State: Send;
    /// What an entry gives the caller.
    type Out: Send;
    fn state(&self) -> Self::State;
    /// Visit one entry (never the search root itself); `None` when it gives nothing.
    fn visit(&self, state: &mut Self::State, entry: &Entry) -> Option<Self::Out>;
    /// How much `out` counts toward [`Walker::limit`].
    fn weight(&self, out: &Self::Out) -> usize;
}

/// The plan lists at most this many levels below the root.
pub const MAX_PLAN_DEPTH: usize = 3;
/// A level that would make the plan longer than this is not listed (its directories are units).
const MAX_PLAN_ITEMS: usize = 20_000;
/// Units per thread in the first group of the plan (one when the calling thread alone found
/// an eighth of the limit already).
const FIRST_GROUP_PER_THREAD: usize = 8;
/// Entries a thread of a group visits between two looks at the cancel token (a look takes
/// the token's lock; `grep`'s search of one file looks on its own).
const CANCEL_EVERY: u32 = 16;
/// Each group of the plan has at most this many times the units of the one before.
const GROUP_GROWTH: usize = 4;
/// Entries visited on the calling thread before the walk goes parallel.
const SEQUENTIAL_BUDGET: usize = 2048;
/// Time spent on the calling thread alone before the walk goes parallel (searching a few large
/// files can take longer than walking thousands of entries).
const SEQUENTIAL_TIME: Duration = Duration::from_millis(5);
/// The most threads a walk uses.
pub const MAX_THREADS: usize = 8;

/// The threads a walk uses: one per core, at most [`MAX_THREADS`].
pub fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS)
}

/// A walk of `root` with `flavor`'s ignore rules.
pub struct Walker<'a> {
    pub root: &'a Path,
    pub cwd: &'a Path,
    pub flavor: Flavor,
    /// Threads that visit entries; 1 walks on the calling thread alone.
    pub threads: usize,
    /// The caller stops once the weights of the results it took reach this; no thread looks
    /// further than that (`usize::MAX`: no limit).
    pub limit: usize,
    /// The plan goes one level deeper while it has fewer than `threads × this` directories.
    pub units_per_thread: usize,
    /// The calling thread walks alone until it has visited this many entries or spent
    /// `sequential_time`, whichever comes first; then the other threads start.
    pub sequential_budget: usize,
    pub sequential_time: Duration,
}

impl<'a> Walker<'a> {
    pub fn new(root: &'a Path, cwd: &'a Path, flavor: Flavor, limit: usize) -> Walker<'a> {
        let threads = threads();
        Walker {
            root,
            cwd,
            flavor,
            threads,
            limit,
            units_per_thread: 16,
            sequential_budget: SEQUENTIAL_BUDGET,
            sequential_time: SEQUENTIAL_TIME,
        }
    }

    /// Visit every entry under the root and hand the results to `take` in the order of the
    /// sequential sorted walk, until `take` returns true or `cancel` fires.
    pub fn run<V: Visitor>(
        &self,
        visitor: &V,
        cancel: &CancelToken,
        take: &mut dyn FnMut(V::Out) -> bool,
    ) {
        // The first entries on this thread alone: a small tree, or a search that a limit stops
        // early, is done before a thread would have started.
        let budget = if self.threads <= 1 {
            usize::MAX
        } else {
            self.sequential_budget
        };
        let mut state = visitor.state();
        let mut taken = 0usize;
        let mut visits = 0usize;
        let mut resume = None;
        let started = Instant::now();
        for entry in builder(&[self.root], self.cwd, &self.flavor).build() {
            if cancel.is_cancelled() {
                return;
            }
            if let Ok(e) = &entry {
                if e.depth() == 0 {
                    continue;
                }
                if visits >= budget
                    || (budget != usize::MAX && started.elapsed() >= self.sequential_time)
                {
                    resume = Some(e.path().to_path_buf());
                    break;
                }
            }
            visits += 1;
            if let Some(out) = visitor.visit(&mut state, &entry) {
                taken = taken.saturating_add(visitor.weight(&out));
                if take(out) {
                    return;
                }
            }
        }
        // The rest (from `resume` on) in parallel.
        let Some(resume) = resume else {
            return;
        };
        drop(state);
        let stop = || cancel.is_cancelled();
        let Some(items) = self.plan(&resume, &stop) else {
            return;
        };
        if !items.is_empty() {
            let limit = self.limit.saturating_sub(taken).max(1);
            // Many results already (an eighth of the limit): the first group is small, the
            // limit may be near.
            let first = if taken.saturating_mul(8) < self.limit {
                FIRST_GROUP_PER_THREAD
            } else {
                1
            };
            self.run_groups(&items, &resume, limit, first, visitor, cancel, take);
        }
    }

    /// The plan's items in walk order from `resume` on; `None` when stopped.
    fn plan(&self, resume: &Path, stop: &dyn Fn() -> bool) -> Option<Vec<Item>> {
        let target = self.threads.saturating_mul(self.units_per_thread);
        let mut items: Vec<Item> = Vec::new();
        let mut frontier: Vec<usize> = Vec::new();
        // Level 1: the root's own entries.
        let listing = self.list(&[self.root], stop)?;
        for (_, entry) in listing {
            items.push(Item::new(entry, 1));
        }
        for level in 1..=MAX_PLAN_DEPTH {
            items = skip_before(items, resume);
            frontier.clear();
            frontier.extend((0..items.len()).filter(|&i| items[i].is_dir_at(level)));
            let last = level == MAX_PLAN_DEPTH
                || frontier.len() >= target
                || items.len() >= MAX_PLAN_ITEMS;
            if frontier.is_empty() {
                break;
            }
            if last {
                for &i in &frontier {
                    items[i].unit = true;
                }
                break;
            }
            // List the next level: one walk over every directory of this one.
            let roots: Vec<PathBuf> = frontier
                .iter()
                .filter_map(|&i| items[i].path().map(Path::to_path_buf))
                .collect();
            let root_refs: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
            let mut children: Vec<Vec<Entry>> = (0..roots.len()).map(|_| Vec::new()).collect();
            for (k, entry) in self.list(&root_refs, stop)? {
                children[k].push(entry);
            }
            let mut next =
                Vec::with_capacity(items.len() + children.iter().map(Vec::len).sum::<usize>());
            let mut lists = children.into_iter();
            let mut expanded = frontier.iter().peekable();
            for (i, item) in items.into_iter().enumerate() {
                next.push(item);
                if expanded.peek() == Some(&&i) {
                    expanded.next();
                    for entry in lists.next().unwrap_or_default() {
                        next.push(Item::new(entry, level + 1));
                    }
                }
            }
            items = next;
        }
        Some(items)
    }

    /// The entries one level below each of `roots`, each with the index of its root; `None`
    /// when stopped.
    fn list(&self, roots: &[&Path], stop: &dyn Fn() -> bool) -> Option<Vec<(usize, Entry)>> {
        let mut b = builder(roots, self.cwd, &self.flavor);
        b.max_depth(Some(1));
        let mut out = Vec::new();
        let mut current = 0usize;
        let mut started = false;
        for entry in b.build() {
            if stop() {
                return None;
            }
            if let Ok(e) = &entry {
                if e.depth() == 0 {
                    // The next root starts (the roots come in order; one that vanished since
                    // it was listed yields an error instead, kept with the root before it).
                    if let Some(k) = (current + usize::from(started)..roots.len())
                        .find(|&k| roots[k] == e.path())
                    {
                        current = k;
                        started = true;
                    }
                    continue;
                }
            }
            out.push((current, entry));
        }
        Some(out)
    }

    /// Visit the plan's items group by group: each group is walked in parallel in whatever
    /// order the threads happen to meet its entries, then what it found is sorted into walk
    /// order and handed to `take`.
    #[allow(clippy::too_many_arguments)]
    fn run_groups<V: Visitor>(
        &self,
        items: &[Item],
        resume: &Path,
        limit: usize,
        first_per_thread: usize,
        visitor: &V,
        cancel: &CancelToken,
        take: &mut dyn FnMut(V::Out) -> bool,
    ) {
        let stop = || cancel.is_cancelled();
        let mut taken = 0usize;
        let mut start = 0;
        let mut size = self.threads.saturating_mul(first_per_thread).max(1);
        while start < items.len() {
            // The group: the items up to and including its `size`-th unit.
            let mut end = start;
            let mut units = 0;
            while end < items.len() && units < size {
                units += usize::from(items[end].unit);
                end += 1;
            }
            let need = limit.saturating_sub(taken).max(1);
            let mut found = self.visit_group(&items[start..end], resume, need, visitor, &stop);
            if stop() {
                return;
            }
            prune(visitor, &mut found, need);
            let mut weight = 0usize;
            for f in found {
                weight = weight.saturating_add(visitor.weight(&f.out));
                if take(f.out) {
                    return;
                }
            }
            taken = taken.saturating_add(weight);
            // The next group: GROUP_GROWTH times as many units, or as many as the rate of this
            // one says the rest of the limit needs (a quarter more), whichever is fewer.
            let needed = match (limit.saturating_sub(taken), weight) {
                (_, 0) | (usize::MAX, _) => usize::MAX,
                (rest, w) => rest
                    .saturating_mul(units.max(1))
                    .saturating_mul(5)
                    .div_ceil(w.saturating_mul(4)),
            };
            size = needed
                .min(size.saturating_mul(GROUP_GROWTH))
                .max(self.threads);
            start = end;
        }
    }

    /// Everything one group of the plan gives, in no particular order: the items themselves
    /// on a few threads, then the units' contents by one `WalkParallel` over them all. Nothing
    /// before `resume` in walk order is visited (it was before the threads started).
    fn visit_group<V: Visitor>(
        &self,
        group: &[Item],
        resume: &Path,
        limit: usize,
        visitor: &V,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Vec<Found<V::Out>> {
        let sink: Mutex<Vec<Found<V::Out>>> = Mutex::new(Vec::new());
        // The items' own entries, units included (not the one that holds `resume`: visited).
        let plain: Vec<&Item> = group.iter().filter(|i| !i.holds_resume).collect();
        let next = AtomicUsize::new(0);
        let work = || {
            let mut state = visitor.state();
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                let Some(item) = plain.get(i) else { break };
                if stop() {
                    break;
                }
                if let Some(out) = visitor.visit(&mut state, &item.entry) {
                    mine.push(Found::new(&item.entry, out));
                }
            }
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .append(&mut mine);
        };
        // Helper threads only for files (`grep` may search large ones); directories are
        // visited at once.
        let files = plain.iter().filter(|i| !i.is_dir_at(i.depth)).count();
        let helpers = if files >= 2 {
            self.threads.min(plain.len()).saturating_sub(1)
        } else {
            0
        };
        std::thread::scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(work);
            }
            work();
        });
        // The units' contents.
        let roots: Vec<&Path> = group
            .iter()
            .filter(|i| i.unit)
            .filter_map(Item::path)
            .collect();
        if !roots.is_empty() && !stop() {
            let resume = group
                .iter()
                .any(|i| i.unit && i.holds_resume)
                .then_some(resume);
            let mut b = builder(&roots, self.cwd, &self.flavor);
            b.threads(self.threads.max(1));
            let mut build = GroupBuilder {
                visitor,
                limit,
                resume,
                stop,
                sink: &sink,
            };
            b.build_parallel().visit(&mut build);
        }
        sink.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sort `found` into walk order and keep only what a caller that stops once the weights reach
/// `limit` can take.
fn prune<V: Visitor>(visitor: &V, found: &mut Vec<Found<V::Out>>, limit: usize) {
    found.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let mut weight = 0usize;
    if let Some(last) = found.iter().position(|f| {
        weight = weight.saturating_add(visitor.weight(&f.out));
        weight >= limit
    }) {
        found.truncate(last + 1);
    }
}

/// A result and where the walk met it.
struct Found<T> {
    key: Key,
    out: T,
}

impl<T> Found<T> {
    fn new(entry: &Entry, out: T) -> Found<T> {
        let key = match entry {
            Ok(e) => Key::At(e.path().to_path_buf(), 0),
            Err(err) => error_path(err).map_or(Key::Nowhere, |p| Key::At(p.to_path_buf(), 1)),
        };
        Found { key, out }
    }
}

/// Where a result belongs in walk order: at a path (an entry, then an error about it), or,
/// for an error that names no path, after everything else of its group.
#[derive(PartialEq, Eq)]
enum Key {
    At(PathBuf, u8),
    Nowhere,
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::At(a, x), Key::At(b, y)) => walk_order(a, b).then(x.cmp(y)),
            (Key::At(..), Key::Nowhere) => Ordering::Less,
            (Key::Nowhere, Key::At(..)) => Ordering::Greater,
            (Key::Nowhere, Key::Nowhere) => Ordering::Equal,
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The sequential walk's order of two paths under the same root: a directory before its
/// contents, siblings by name, byte by byte. That is the order of their bytes with `/` below
/// every other byte (component by component, without taking the paths apart).
pub fn walk_order(a: &Path, b: &Path) -> Ordering {
    use std::os::unix::ffi::OsStrExt;
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match (a.get(same), b.get(same)) {
        (Some(&x), Some(&y)) => {
            let rank = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
            rank(x).cmp(&rank(y))
        }
        _ => a.len().cmp(&b.len()),
    }
}

/// The path an error is about, if it names one.
fn error_path(err: &Error) -> Option<&Path> {
    match err {
        Error::WithPath { path, .. } => Some(path),
        Error::WithDepth { err, .. } | Error::WithLineNumber { err, .. } => error_path(err),
        Error::Loop { child, .. } => Some(child),
        _ => None,
    }
}

/// Makes one [`GroupVisitor`] per thread of a group's `WalkParallel`.
struct GroupBuilder<'a, V: Visitor> {
    visitor: &'a V,
    limit: usize,
    resume: Option<&'a Path>,
    stop: &'a (dyn Fn() -> bool + Sync),
    sink: &'a Mutex<Vec<Found<V::Out>>>,
}

impl<'s, V: Visitor> ParallelVisitorBuilder<'s> for GroupBuilder<'s, V> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(GroupVisitor {
            visitor: self.visitor,
            state: self.visitor.state(),
            found: Vec::new(),
            weight: 0,
            limit: self.limit,
            resume: self.resume,
            stop: self.stop,
            sink: self.sink,
            unchecked: 0,
        })
    }
}

/// One thread of a group's walk: visits the entries it meets, keeps what they give (no more
/// than the limit can take: memory stays bounded), and adds it to the group's results when
/// the walk ends.
struct GroupVisitor<'a, V: Visitor> {
    visitor: &'a V,
    state: V::State,
    found: Vec<Found<V::Out>>,
    weight: usize,
    limit: usize,
    resume: Option<&'a Path>,
    stop: &'a (dyn Fn() -> bool + Sync),
    sink: &'a Mutex<Vec<Found<V::Out>>>,
    /// Entries visited since the last look at the cancel token.
    unchecked: u32,
}

impl<V: Visitor> ParallelVisitor for GroupVisitor<'_, V> {
    fn visit(&mut self, entry: Entry) -> WalkState {
        self.unchecked += 1;
        if self.unchecked >= CANCEL_EVERY {
            self.unchecked = 0;
            if (self.stop)() {
                return WalkState::Quit;
            }
        }
        if let Ok(e) = &entry {
            if e.depth() == 0 {
                // A unit's root: visited as an item.
                return WalkState::Continue;
            }
            if let Some(resume) = self.resume {
                if walk_order(e.path(), resume) == Ordering::Less {
                    // Visited before the threads started; so is all of a directory that does
                    // not hold `resume`.
                    return if resume.starts_with(e.path()) {
                        WalkState::Continue
                    } else {
                        WalkState::Skip
                    };
                }
            }
        }
        if let Some(out) = self.visitor.visit(&mut self.state, &entry) {
            self.weight = self.weight.saturating_add(self.visitor.weight(&out));
            self.found.push(Found::new(&entry, out));
            if self.weight >= self.limit.saturating_mul(2) {
                // Only this thread's first results up to the limit can be taken.
                prune(self.visitor, &mut self.found, self.limit);
                self.weight = self
                    .found
                    .iter()
                    .fold(0, |w, f| w.saturating_add(self.visitor.weight(&f.out)));
            }
        }
        WalkState::Continue
    }
}

impl<V: Visitor> Drop for GroupVisitor<'_, V> {
    fn drop(&mut self) {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(&mut self.found);
    }
}

/// An entry of the plan.
struct Item {
    entry: Entry,
    /// Levels below the search root.
    depth: usize,
    /// A directory whose contents the plan does not list: walked by the thread that owns it.
    unit: bool,
    /// A directory that holds the first entry not visited yet: itself and what comes before
    /// that entry inside it were visited already.
    holds_resume: bool,
}

/// `items` without what comes before `resume` in walk order (already visited).
fn skip_before(items: Vec<Item>, resume: &Path) -> Vec<Item> {
    let mut before = true;
    items
        .into_iter()
        .filter_map(|mut item| {
            if !before {
                return Some(item);
            }
            match &item.entry {
                Ok(e) if e.path() >= resume => {
                    before = false;
                    Some(item)
                }
                Ok(e) if item.is_dir_at(item.depth) && resume.starts_with(e.path()) => {
                    item.holds_resume = true;
                    Some(item)
                }
                // Visited already, or an error met while listing what was.
                _ => None,
            }
        })
        .collect()
}

impl Item {
    fn new(entry: Entry, depth: usize) -> Item {
        Item {
            entry,
            depth,
            unit: false,
            holds_resume: false,
        }
    }

    fn path(&self) -> Option<&Path> {
        self.entry.as_ref().ok().map(DirEntry::path)
    }

    /// A directory (not a link to one: the walk does not follow links) at `depth`.
    fn is_dir_at(&self, depth: usize) -> bool {
        self.depth == depth
            && self
                .entry
                .as_ref()
                .is_ok_and(|e| e.file_type().is_some_and(|t| t.is_dir()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::cancel_pair;
    use ignore::overrides::OverrideBuilder;

    /// A repository-shaped tree whose ignore rules differ at every level: nested `.gitignore`s
    /// with negations and anchored patterns, `.ignore`, `.rgignore`, `.fdignore`,
    /// `.git/info/exclude`, a nested repository, a directory outside the repository rules'
    /// reach (`require_git`), symlinks, and enough directories to make many units.
    fn tree(root: &Path) {
        let file = |p: &str, text: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        file("repo/.git/HEAD", "ref: refs/heads/main\n");
        file("repo/.git/info/exclude", "*.excluded\n");
        file(
            "repo/.gitignore",
            "target/\n*.log\n/top-only.txt\nbuild\n!keep.log\npkg*/gen/\n",
        );
        file("repo/.ignore", "*.tmp\n");
        file("repo/.rgignore", "*.rgskip\n");
        file("repo/.fdignore", "*.fdskip\n");
        file("repo/top-only.txt", "x\n");
        file("repo/keep.log", "x\n");
        file("repo/a.log", "x\n");
        for p in 0..12 {
            let pkg = format!("repo/packages/pkg{p:02}");
            file(&format!("{pkg}/package.json"), "{}\n");
            file(
                &format!("{pkg}/.gitignore"),
                "coverage/\n!important.tmp\n/local.txt\n",
            );
            for m in 0..3 {
                for f in 0..4 {
                    file(&format!("{pkg}/src/m{m}/f{f}.rs"), "fn main() {}\n");
                    file(&format!("{pkg}/src/m{m}/f{f}.tmp"), "x\n");
                }
                file(&format!("{pkg}/src/m{m}/deep/er/x.excluded"), "x\n");
                file(&format!("{pkg}/src/m{m}/deep/er/y.rgskip"), "x\n");
                file(&format!("{pkg}/src/m{m}/deep/er/z.fdskip"), "x\n");
                file(&format!("{pkg}/src/m{m}/deep/er/top-only.txt"), "x\n");
            }
            file(&format!("{pkg}/important.tmp"), "x\n");
            file(&format!("{pkg}/local.txt"), "x\n");
            file(&format!("{pkg}/sub/local.txt"), "x\n");
            file(&format!("{pkg}/coverage/c.json"), "{}\n");
            file(&format!("{pkg}/gen/g.rs"), "x\n");
            file(&format!("{pkg}/build/b.rs"), "x\n");
            file(&format!("{pkg}/target/t.rs"), "x\n");
        }
        // A nested repository: the outer `.gitignore` stops at its boundary.
        file("repo/vendor/inner/.git/HEAD", "ref: refs/heads/main\n");
        file("repo/vendor/inner/.gitignore", "secret/\n");
        file("repo/vendor/inner/target/t.rs", "x\n");
        file("repo/vendor/inner/secret/s.rs", "x\n");
        file("repo/vendor/inner/build/b.rs", "x\n");
        // Outside any repository: `.gitignore` applies to fd only.
        file("plain/.gitignore", "out/\n");
        file("plain/out/o.rs", "x\n");
        file("plain/src/a/b/c/d.rs", "x\n");
        std::os::unix::fs::symlink("../repo/packages", root.join("plain/link")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("plain/dangling")).unwrap();
    }

    struct Paths;

    impl Visitor for Paths {
        type State = ();
        type Out = String;
        fn state(&self) {}
        fn visit(&self, _: &mut (), entry: &Entry) -> Option<String> {
            Some(match entry {
                Ok(e) => e.path().display().to_string(),
                Err(e) => format!("error: {e}"),
            })
        }
        fn weight(&self, _: &String) -> usize {
            1
        }
    }

    fn walk(
        root: &Path,
        flavor: Flavor,
        (threads, units, budget): (usize, usize, usize),
        limit: usize,
    ) -> Vec<String> {
        let mut w = Walker::new(root, root, flavor, limit);
        w.threads = threads;
        w.units_per_thread = units;
        w.sequential_budget = budget;
        w.sequential_time = Duration::MAX;
        let mut out = Vec::new();
        w.run(&Paths, &CancelToken::never(), &mut |p| {
            out.push(p);
            out.len() >= limit
        });
        out
    }

    fn flavors(root: &Path) -> Vec<(&'static str, Flavor)> {
        let mut globs = OverrideBuilder::new(root);
        globs.add("*.rs").unwrap();
        globs.add("!**/m1/**").unwrap();
        vec![
            ("fd", Flavor::Fd),
            (
                "rg",
                Flavor::Rg(OverrideBuilder::new(root).build().unwrap()),
            ),
            ("rg --glob", Flavor::Rg(globs.build().unwrap())),
        ]
    }

    #[test]
    fn parallel_walk_is_the_sequential_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        tree(&root);
        for search in [
            root.clone(),
            root.join("repo"),
            root.join("repo/packages/pkg03"),
        ] {
            for (name, flavor) in flavors(&root) {
                let want = walk(&search, flavor.clone(), (1, 8, 0), usize::MAX);
                assert!(want.len() > 10, "{name}: {want:?}");
                // Units at every plan depth, from many threads to a few, the threads starting
                // at the first entry or anywhere later (inside a unit, between units).
                for budget in [0, 1, 7, 50, 333, want.len() - 1] {
                    for (threads, units) in [(2, 8), (3, 1), (7, 40)] {
                        let got = walk(
                            &search,
                            flavor.clone(),
                            (threads, units, budget),
                            usize::MAX,
                        );
                        assert_eq!(
                            got, want,
                            "{name} {search:?} threads {threads} units {units} budget {budget}"
                        );
                    }
                }
                // A limit stops at the sequential walk's first results.
                for limit in [1, 5, 37, want.len() - 1]
                    .into_iter()
                    .filter(|&l| l < want.len())
                {
                    for budget in [0, 3, 30] {
                        let got = walk(&search, flavor.clone(), (3, 1, budget), limit);
                        assert_eq!(got, want[..limit], "{name} {search:?} limit {limit}");
                    }
                }
            }
        }
    }

    #[test]
    fn walk_order_is_the_component_order() {
        let paths = [
            "/r",
            "/r/a",
            "/r/a b",
            "/r/a.x",
            "/r/a/b",
            "/r/a/b.c",
            "/r/a/b/c",
            "/r/a-",
            "/r/a0",
            "/r/aa",
            "/r/\u{e9}",
            "/r/B",
            "/r/_",
            "/r/a/\u{ff}",
        ];
        for a in paths {
            for b in paths {
                let (a, b) = (Path::new(a), Path::new(b));
                assert_eq!(walk_order(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn prune_keeps_what_the_limit_can_take() {
        let found = |names: &[&str]| -> Vec<Found<String>> {
            names
                .iter()
                .map(|n| Found {
                    key: Key::At(PathBuf::from(n), 0),
                    out: n.to_string(),
                })
                .collect()
        };
        let mut f = found(&["/r/c", "/r/a/z", "/r/b", "/r/a"]);
        f.push(Found {
            key: Key::Nowhere,
            out: "nowhere".into(),
        });
        f.push(Found {
            key: Key::At(PathBuf::from("/r/a"), 1),
            out: "error at /r/a".into(),
        });
        prune(&Paths, &mut f, 3);
        let outs: Vec<&str> = f.iter().map(|f| f.out.as_str()).collect();
        assert_eq!(outs, ["/r/a", "error at /r/a", "/r/a/z"]);
        prune(&Paths, &mut f, 10);
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn an_abort_stops_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let (mut source, token) = cancel_pair();
        source.cancel();
        let mut w = Walker::new(dir.path(), dir.path(), Flavor::Fd, usize::MAX);
        w.threads = 3;
        w.sequential_budget = 0;
        let mut n = 0;
        w.run(&Paths, &token, &mut |_| {
            n += 1;
            false
        });
        assert_eq!(n, 0);
    }
}
