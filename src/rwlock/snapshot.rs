//! [`RwLock::snapshot`]: who is inside the lock and who waits, at one instant.

use std::fmt;
use std::time::Duration;

use super::RwLock;

/// Who holds a [`RwLock`] and who waits for it, at one instant: from
/// [`RwLock::snapshot`].
///
/// The counts come from the count word and the wait list, read together under the wait
/// list's mutex. A reader passing through (a failed fast path on its way to the queue, or
/// spinning for a writer to leave) counts as inside for that instant, and by the time the
/// snapshot is read the lock may have changed hands: it is for diagnostics, not for
/// decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Snapshot {
    /// Plain readers inside (the upgradable reader is not counted here; nor, beside a
    /// writer, readers passing through).
    pub readers: usize,
    /// A writer holds the lock (a write guard, or an upgraded upgradable read).
    pub writer: bool,
    /// The upgradable reader holds the lock (also while its upgrade waits).
    pub upgradable: bool,
    /// Queued read acquires.
    pub queued_readers: usize,
    /// Queued upgradable read acquires.
    pub queued_upgradable: usize,
    /// Queued write acquires.
    pub queued_writers: usize,
    /// The upgradable reader's upgrade waits (at the head of the queue) for the readers
    /// to leave.
    pub upgrade_pending: bool,
    /// How long the head of the queue has waited: known for a writer at the head under a
    /// policy whose handoff timeout is a time (neither zero, as in `Policy::fifo`, nor
    /// `Duration::MAX`: the lock keeps when such a writer is due the handoff, and reads no
    /// clock for it otherwise) and, under `lock_stat`, for any waiter (since its acquire
    /// first had to wait). `None` with nobody queued, or when unknown: also for a writer
    /// that queued on a crowded runtime's thread while readers were queued
    /// ([`Policy::crowded_handoff`](crate::Policy#structfield.crowded_handoff): it was due at every
    /// release, and no clock was read for it), until a release after the rule lapsed
    /// found it at the head (then from that release).
    pub head_waited: Option<Duration>,
    /// The head of the queue has been promised the lock (the handoff bit): nobody else may
    /// take it until the head has it.
    pub handoff_pending: bool,
    /// The writer or upgradable reader holding the lock: where it took it and for how
    /// long it has held it (feature `lock_stat`). Read just after the rest, so that it
    /// can miss a holder that has just come in or show one that has just left.
    #[cfg(feature = "lock_stat")]
    #[cfg_attr(docsrs, doc(cfg(feature = "lock_stat")))]
    pub holder: Option<crate::lock_stat::Holder>,
}

impl Snapshot {
    /// Acquires queued, of every kind (an upgrade included).
    pub fn queued(&self) -> usize {
        self.queued_readers
            + self.queued_upgradable
            + self.queued_writers
            + usize::from(self.upgrade_pending)
    }
}

/// One line: who holds it, who waits, since when, whether a handoff is pending, e.g.
/// `a writer holds it; queued: 2 readers, 1 writer; the head has waited 1.2ms; handoff
/// pending`.
impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize, one: &str, many: &str| -> String {
            format!("{n} {}", if n == 1 { one } else { many })
        };
        if self.writer {
            f.write_str("a writer holds it")?;
        } else if self.upgradable {
            write!(
                f,
                "the upgradable reader and {} hold it",
                plural(self.readers, "reader", "readers")
            )?;
        } else if self.readers > 0 {
            let verb = if self.readers == 1 { "holds" } else { "hold" };
            write!(f, "{} {verb} it", plural(self.readers, "reader", "readers"))?;
        } else {
            f.write_str("free")?;
        }
        #[cfg(feature = "lock_stat")]
        if let Some(holder) = self.holder {
            write!(
                f,
                " ({} at {}, for {:.1?})",
                holder.access, holder.location, holder.held_for
            )?;
        }
        if self.queued() == 0 {
            f.write_str("; nobody queued")?;
        } else {
            let mut parts = Vec::new();
            if self.upgrade_pending {
                parts.push(String::from("the upgrade"));
            }
            if self.queued_readers > 0 {
                parts.push(plural(self.queued_readers, "reader", "readers"));
            }
            if self.queued_upgradable > 0 {
                parts.push(plural(
                    self.queued_upgradable,
                    "upgradable reader",
                    "upgradable readers",
                ));
            }
            if self.queued_writers > 0 {
                parts.push(plural(self.queued_writers, "writer", "writers"));
            }
            write!(f, "; queued: {}", parts.join(", "))?;
            if let Some(waited) = self.head_waited {
                write!(f, "; the head has waited {waited:.1?}")?;
            }
        }
        if self.handoff_pending {
            f.write_str("; handoff pending")?;
        }
        Ok(())
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Who holds the lock and who waits for it, at this instant: readers inside, whether
    /// a writer or the upgradable reader holds it, the queued acquires by kind, how long
    /// the head of the queue has waited, whether a handoff is pending, and under the
    /// feature `lock_stat` where and since when the writer (or upgradable reader) holds
    /// it.
    ///
    /// It takes the wait list's internal mutex for as long as it takes to walk the queue
    /// (the lock's own slow paths take it too, each briefly), and never waits for the
    /// `RwLock` itself: it can be called while the lock is held, from the holder too.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// let r1 = lock.try_read().unwrap();
    /// let r2 = lock.try_read().unwrap();
    /// let s = lock.snapshot();
    /// assert_eq!((s.readers, s.writer, s.queued()), (2, false, 0));
    /// assert_eq!(s.to_string(), "2 readers hold it; nobody queued");
    /// # drop((r1, r2));
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        let raw = self.raw.snapshot();
        Snapshot {
            readers: raw.readers,
            writer: raw.writer,
            upgradable: raw.upgradable,
            queued_readers: raw.queued_readers,
            queued_upgradable: raw.queued_upgradable,
            queued_writers: raw.queued_writers,
            upgrade_pending: raw.queued_upgrade,
            head_waited: head_waited(&raw),
            handoff_pending: raw.handoff,
            #[cfg(feature = "lock_stat")]
            holder: if raw.writer || raw.upgradable {
                self.raw.observe.lock_stat.holder()
            } else {
                None
            },
        }
    }

    /// This lock's statistics with times (feature `lock_stat`): wait and hold histograms
    /// for readers and writers, contentions, the longest hold and where its guard was
    /// taken, and the event counters of [`stats`](Self::stats). The
    /// [`lock_stat`](crate::lock_stat) module says what is counted where.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// drop(lock.try_read());
    /// drop(lock.try_write());
    /// let stat = lock.lock_stat();
    /// assert_eq!(stat.read_hold().count(), 1);
    /// assert_eq!(stat.write_wait().count(), 1);
    /// assert_eq!(stat.write_contentions(), 0);
    /// println!("{stat}"); // a table: count, contended, mean, p50, p99, max
    /// ```
    #[cfg(feature = "lock_stat")]
    #[cfg_attr(docsrs, doc(cfg(feature = "lock_stat")))]
    pub fn lock_stat(&self) -> crate::LockStat {
        self.raw.observe.lock_stat.snapshot(&self.raw.stats)
    }
}

/// How long the head of the queue has waited: from its wait record under `lock_stat`
/// (every waiter's, since its first wait), else a writer's queue time.
fn head_waited(raw: &crate::raw::snapshot::RawSnapshot) -> Option<Duration> {
    #[cfg(feature = "lock_stat")]
    if raw.head_since != 0 {
        let waited = crate::lock_stat::now_ns().saturating_sub(raw.head_since);
        return Some(Duration::from_nanos(waited));
    }
    raw.head_waited
}
