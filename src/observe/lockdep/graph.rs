//! The classes, the graph of orders between them, and the chains already validated.
//!
//! The graph is process-wide, behind one mutex, and grows by one entry per class and per
//! order seen. An acquire made while its holder holds other locks forms a *chain* (the
//! classes and modes held, then the one acquired): once a chain has been checked, its
//! hash is kept in a sharded table, and the next acquire that forms it takes no
//! process-wide lock (the kernel's `lock_chains`). A chain is taken as checked for a new
//! holder only once two holders that are not one flow have formed it (the graph keeps,
//! per order, whether more than one flow made it: see [`Edge`]); from then on each
//! thread keeps it in a set of its own, found again without touching shared memory.

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::fmt::{self, Write as _};
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::Location;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError, RwLock};

use super::holders::{shard_of, Holder, WordHasher, WordMap, SHARDS};
use super::{ClassKey, LockClass, Mode};

type Site = &'static Location<'static>;

/// One acquire of an order: by `holder`, holding the first class in `held_mode` (taken
/// at `held_site`), of the second in `mode` at `site` (`upgrade`: by an upgrade).
#[derive(Clone, Copy, Debug)]
struct Order {
    holder: Holder,
    held_mode: Mode,
    held_site: Site,
    mode: Mode,
    site: Site,
    upgrade: bool,
}

/// An order seen: a holder held a lock of the first class and acquired one of the
/// second. The sites and modes are those of the first time; `held_modes` and the flags
/// gather every time.
#[derive(Debug)]
struct Edge {
    held_mode: Mode,
    held_site: Site,
    mode: Mode,
    site: Site,
    /// The first holder that made it.
    holder: Holder,
    /// Whether a holder that is not one flow with `holder` made it too.
    shared: bool,
    /// The modes the first class was held in (bits of [`Mode::bit`]).
    held_modes: u8,
    /// Whether every acquire of the second class in it was an upgrade.
    upgrades_only: bool,
}

impl Edge {
    /// The acquire that made it first.
    fn order(&self) -> Order {
        Order {
            holder: self.holder,
            held_mode: self.held_mode,
            held_site: self.held_site,
            mode: self.mode,
            site: self.site,
            upgrade: self.upgrades_only,
        }
    }
}

#[derive(Debug, Default)]
struct Graph {
    /// The classes, by index.
    classes: Vec<ClassKey>,
    ids: WordMap<ClassKey, u32>,
    /// The orders seen, and the classes each class was seen before.
    edges: WordMap<(u32, u32), Edge>,
    after: Vec<Vec<u32>>,
    /// The recursions reported (the two locations), each reported once.
    recursions: HashSet<(Site, Site)>,
    /// The cycles reported (their classes, from the smallest), each reported once,
    /// whichever holders make their orders again.
    cycles: HashSet<Vec<u32>>,
}

static GRAPH: LazyLock<Mutex<Graph>> = LazyLock::new(Mutex::default);

/// The graph. Nothing panics while it is locked, but a poisoned mutex is taken as it is.
fn graph() -> MutexGuard<'static, Graph> {
    GRAPH.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A chain validated: the first holder that formed it, and whether another flow did.
#[derive(Clone, Copy, Debug)]
struct Chain {
    holder: Holder,
    shared: bool,
}

/// One shard of the validated chains, on a cache line pair of its own.
#[repr(align(128))]
#[derive(Default)]
struct ChainShard(RwLock<WordMap<u64, Chain>>);

static CHAINS: LazyLock<Vec<ChainShard>> =
    LazyLock::new(|| (0..SHARDS).map(|_| ChainShard::default()).collect());

/// The hash of a chain, built one held lock at a time.
#[derive(Default)]
pub(super) struct ChainKey {
    hasher: WordHasher,
    len: usize,
}

impl ChainKey {
    /// A lock of class `class` held in `mode`, next in the chain.
    pub(super) fn push(&mut self, class: u32, mode: Mode) {
        self.hasher.write_u32(class);
        self.hasher.write_u32(u32::from(mode.bit()));
        self.len += 1;
    }

    /// Whether anything is held (else there is no order to check).
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chain's hash, ending with the acquire of class `class` in `mode` (`upgrade`:
    /// by an upgrade).
    pub(super) fn finish(mut self, class: u32, mode: Mode, upgrade: bool) -> u64 {
        self.hasher.write_u32(class);
        self.hasher
            .write_u32(u32::from(mode.bit()) | (u32::from(upgrade) << 8));
        self.hasher.finish()
    }
}

thread_local! {
    /// The chains this thread has found checked for every holder (two flows formed
    /// them): found again with no shared memory touched.
    static KNOWN: RefCell<HashSet<u64, BuildHasherDefault<WordHasher>>> =
        RefCell::new(HashSet::default());
}

/// Whether the chain `key` has been checked, for `holder`: a thread-local lookup for a
/// chain two flows formed, else a shard's read lock.
pub(super) fn validated(key: u64, holder: Holder) -> bool {
    if KNOWN
        .try_with(|known| known.borrow().contains(&key))
        .unwrap_or(false)
    {
        return true;
    }
    let shard = CHAINS[shard_of(key)]
        .0
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    let Some(chain) = shard.get(&key) else {
        return false;
    };
    if chain.shared {
        let _ = KNOWN.try_with(|known| known.borrow_mut().insert(key));
        return true;
    }
    chain.holder.same_flow(holder)
}

fn remember(key: u64, holder: Holder) {
    let mut shard = CHAINS[shard_of(key)]
        .0
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    shard
        .entry(key)
        .and_modify(|chain| chain.shared |= !chain.holder.same_flow(holder))
        .or_insert(Chain {
            holder,
            shared: false,
        });
}

/// The index of `class` in the class table, registered if new (cached in the lock).
#[inline]
pub(super) fn class_id(class: &LockClass) -> u32 {
    match class.id.load(std::sync::atomic::Ordering::Relaxed) {
        0 => register(class),
        cached => cached - 1,
    }
}

/// [`class_id`] of a lock seen for the first time.
#[cold]
fn register(class: &LockClass) -> u32 {
    let key = class.key();
    let mut graph = graph();
    let id = match graph.ids.get(&key) {
        Some(&id) => id,
        None => {
            let id = u32::try_from(graph.classes.len()).expect("fewer than 2^32 classes");
            graph.classes.push(key);
            graph.after.push(Vec::new());
            graph.ids.insert(key, id);
            id
        }
    };
    class.id.store(id + 1, std::sync::atomic::Ordering::Relaxed);
    id
}

/// The name of class `id`, as reports write it.
pub(super) fn class_name(id: u32) -> String {
    graph().classes[id as usize].to_string()
}

/// Whether the recursion of the acquire at `site` on the hold taken at `held_site` is
/// reported for the first time.
pub(super) fn first_recursion(held_site: Site, site: Site) -> bool {
    graph().recursions.insert((held_site, site))
}

/// A lock held when an acquire starts: its class, mode and the site of its acquire.
pub(super) type Held = (u32, Mode, Site);

/// An acquire to check: by `holder`, of class `class` in `mode` at `site` (`upgrade`: by
/// an upgrade).
#[derive(Clone, Copy, Debug)]
pub(super) struct Acquire {
    pub(super) holder: Holder,
    pub(super) class: u32,
    pub(super) mode: Mode,
    pub(super) upgrade: bool,
    pub(super) site: Site,
}

/// How many more of the graph's orders a holder alone has made (see
/// [`holders::sole_orders`](super::holders::sole_orders)), for each holder whose count
/// changed.
pub(super) type SoleOrders = Vec<(Holder, i32)>;

/// `acquire`, made holding `held` and forming chain `key`: adds its orders, and returns
/// the report of the first cycle (or class nesting) it closes, if any, with the changes
/// of the holders' sole orders.
pub(super) fn record(acquire: Acquire, held: &[Held], key: u64) -> (Option<String>, SoleOrders) {
    let mut sole = SoleOrders::new();
    let report = graph().record(acquire, held, &mut sole);
    remember(key, acquire.holder);
    (report, sole)
}

/// Adds `delta` to `holder`'s count in `sole`.
fn count(sole: &mut SoleOrders, holder: Holder, delta: i32) {
    match sole.iter_mut().find(|(h, _)| *h == holder) {
        Some((_, n)) => *n += delta,
        None => sole.push((holder, delta)),
    }
}

impl Graph {
    fn record(&mut self, acquire: Acquire, held: &[Held], sole: &mut SoleOrders) -> Option<String> {
        let Acquire {
            holder,
            class,
            mode,
            upgrade,
            site,
        } = acquire;
        let mut report = None;
        for &(held_class, held_mode, held_site) in held {
            let pair = (held_class, class);
            let changed = match self.edges.get_mut(&pair) {
                Some(edge) => {
                    let mut changed = false;
                    if edge.held_modes & held_mode.bit() == 0 {
                        edge.held_modes |= held_mode.bit();
                        changed = true;
                    }
                    if edge.upgrades_only && !upgrade {
                        edge.upgrades_only = false;
                        changed = true;
                    }
                    if !edge.shared && !edge.holder.same_flow(holder) {
                        edge.shared = true;
                        changed = true;
                        count(sole, edge.holder, -1);
                    }
                    changed
                }
                None => {
                    self.edges.insert(
                        pair,
                        Edge {
                            held_mode,
                            held_site,
                            mode,
                            site,
                            holder,
                            shared: false,
                            held_modes: held_mode.bit(),
                            upgrades_only: upgrade,
                        },
                    );
                    self.after[held_class as usize].push(class);
                    count(sole, holder, 1);
                    true
                }
            };
            if report.is_some() || !changed {
                continue;
            }
            report = if held_class == class {
                self.nesting(class).then(|| {
                    let name = self.classes[class as usize];
                    format!(
                        "async-rwsem lockdep: possible deadlock: two locks of one class held at once\n  \
                         {holder} acquires {name} ({mode}) at {site}\n  \
                         while it holds another lock of that class ({held_mode}, acquired at \
                         {held_site}):\n  lockdep cannot order them; if they nest, give the \
                         inner one another subclass (RwLock::with_lockdep_subclass)"
                    )
                })
            } else {
                let now = Order {
                    holder,
                    held_mode,
                    held_site,
                    mode,
                    site,
                    upgrade,
                };
                self.cycle(held_class, class, now)
            };
        }
        report
    }

    /// Whether the order "`class`, then `class`" (two locks of one class held at once),
    /// just made or changed, is reported now: once, and, as a cycle's, not while one
    /// holder that may be one of several futures of a task made it alone (the
    /// `join_all` of futures each holding a lock of its own looks like one flow that
    /// holds them all).
    fn nesting(&mut self, class: u32) -> bool {
        let edge = &self.edges[&(class, class)];
        let one_flow = !edge.shared && edge.holder.concurrent();
        !one_flow && self.cycles.insert(vec![class])
    }

    /// The report of a cycle that the order `first -> second` closes, if there is one
    /// that may deadlock:
    ///
    /// - an order made only by upgrades (of the second class, while the first was held)
    ///   deadlocks only against a holder of a *read* of the second class (an upgrade
    ///   waits for readers alone, and only one holder has the upgradable read): in the
    ///   cycle, the next order must have been made with the second class read;
    /// - a cycle whose every order one flow made alone, in a holder that may be one of
    ///   several futures of a task, is not reported: lockdep cannot tell a flow's orders
    ///   from those of its siblings (`join!`), and one flow cannot deadlock with itself.
    fn cycle(&mut self, first: u32, second: u32, now: Order) -> Option<String> {
        let closing = &self.edges[&(first, second)];
        let path = self.path(second, first, closing.upgrades_only, closing.held_modes)?;
        let mut classes = vec![first, second];
        classes.extend_from_slice(&path);
        let edges: Vec<&Edge> = classes
            .windows(2)
            .map(|pair| &self.edges[&(pair[0], pair[1])])
            .collect();
        let one_flow = edges.iter().all(|edge| {
            !edge.shared && edge.holder.same_flow(closing.holder) && closing.holder.concurrent()
        });
        if one_flow {
            return None;
        }
        let orders: Vec<Order> = std::iter::once(now)
            .chain(edges[1..].iter().map(|edge| edge.order()))
            .collect();
        // Once per cycle: its classes, from the smallest.
        let mut key = classes[..classes.len() - 1].to_vec();
        let smallest = (0..key.len()).min_by_key(|&i| key[i]).unwrap_or(0);
        key.rotate_left(smallest);
        if !self.cycles.insert(key) {
            return None;
        }
        Some(self.cycle_report(&classes, &orders))
    }

    /// A path of orders from class `from` to class `to`, as the classes after `from`, if
    /// there is one (breadth first: the shortest) that respects the rule of upgrades
    /// ([`cycle`](Self::cycle)): `upgrade_in` says whether the order into `from` was made
    /// by upgrades only, `modes_out` the modes `to` was held in by the order out of it
    /// (back to `from`).
    fn path(&self, from: u32, to: u32, upgrade_in: bool, modes_out: u8) -> Option<Vec<u32>> {
        // A state: a class, and whether the order into it was made by upgrades only.
        let mut parent: WordMap<(u32, bool), (u32, bool)> = WordMap::default();
        let start = (from, upgrade_in);
        let mut queue = VecDeque::from([start]);
        while let Some((class, upgraded)) = queue.pop_front() {
            for &next in &self.after[class as usize] {
                let edge = &self.edges[&(class, next)];
                if upgraded && edge.held_modes & Mode::Read.bit() == 0 {
                    continue;
                }
                let state = (next, edge.upgrades_only);
                if state == start || parent.contains_key(&state) {
                    continue;
                }
                parent.insert(state, (class, upgraded));
                if next == to && (!edge.upgrades_only || modes_out & Mode::Read.bit() != 0) {
                    let mut path = vec![to];
                    let mut at = state;
                    while let Some(&before) = parent.get(&at) {
                        if before == start {
                            break;
                        }
                        path.push(before.0);
                        at = before;
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(state);
            }
        }
        None
    }

    /// The report of the cycle through `classes` (the acquire now first), made of
    /// `orders`.
    fn cycle_report(&self, classes: &[u32], orders: &[Order]) -> String {
        let names: Vec<String> = classes
            .iter()
            .map(|&class| self.classes[class as usize].to_string())
            .collect();
        let mut report = format!(
            "async-rwsem lockdep: possible deadlock: lock order cycle of {} classes: {}\n",
            classes.len() - 1,
            names.join(" -> ")
        );
        for (i, edge) in orders.iter().enumerate() {
            let when = if i == 0 { "now" } else { "seen before" };
            let how = if edge.upgrade {
                "upgraded to"
            } else {
                "then acquired"
            };
            let _ = writeln!(
                report,
                "  {} -> {} ({when}, {}): held {} ({}, acquired at {}), {how} {} ({}) at {}",
                names[i],
                names[i + 1],
                edge.holder,
                names[i],
                edge.held_mode,
                edge.held_site,
                names[i + 1],
                edge.mode,
                edge.site,
            );
        }
        report.pop();
        report
    }
}

impl fmt::Display for ClassKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.base {
            super::KeyBase::Site(file, line, column) => {
                write!(f, "RwLock created at {file}:{line}:{column}")?;
            }
            super::KeyBase::Name(name) => write!(f, "\"{name}\"")?,
        }
        if self.subclass != 0 {
            write!(f, "/{}", self.subclass)?;
        }
        Ok(())
    }
}
