//! The "held too long" and "waited too long" warnings (features `lock_stat` and
//! `tracing`), `tracing::warn!` events of target `async_rwsem::lock_stat`. Called only
//! where foreign code may run: the lock's state is consistent, and nothing is held that
//! an unwind would leave locked.

use super::{Access, HoldStat, Site};
use crate::raw::list::WaiterKind;
use crate::raw::RawRwLock;

/// The hold's current mode began with a wait past the lock's threshold: the waiter's
/// own report, at the grant. `site`: the waiting call's location, if not the hold's
/// (an upgrade's).
#[inline]
pub(crate) fn waited(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, site: Option<Site>) {
    if hold.wait_ns != 0 && hold.wait_ns > raw.warn_waited_ns() {
        if let Some(site) = site.or(hold.site) {
            waited_too_long(raw, kind, hold, site);
        }
    }
}

#[cold]
#[inline(never)]
fn waited_too_long(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, site: Site) {
    tracing::warn!(
        target: "async_rwsem::lock_stat",
        lock = ?std::ptr::from_ref(raw),
        access = %Access::of(kind),
        location = %site,
        waited_us = hold.wait_ns / 1000,
        "waited too long for the lock"
    );
}

/// The hold `hold` of `held_ns` ended (the lock is released): report it if it lasted
/// past the lock's threshold, and the head of the queue if it has waited past its
/// own (once per waiter), naming this holder. (Out of line but for the two checks.)
#[inline]
pub(crate) fn released(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, held_ns: u64) {
    if held_ns > raw.warn_held_ns() {
        held_too_long(raw, kind, hold, held_ns);
    }
    let threshold = raw.warn_waited_ns();
    if threshold != u64::MAX {
        head_waiting(raw, kind, hold, threshold);
    }
}

#[cold]
#[inline(never)]
fn held_too_long(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, held_ns: u64) {
    tracing::warn!(
        target: "async_rwsem::lock_stat",
        lock = ?std::ptr::from_ref(raw),
        access = %Access::of(kind),
        location = hold.site.map(tracing::field::display),
        held_us = held_ns / 1000,
        "held the lock too long"
    );
}

#[cold]
#[inline(never)]
fn head_waiting(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, threshold: u64) {
    if let Some(head) = raw.head_waiting_past(threshold, super::now_ns()) {
        let location = head.site.map(tracing::field::display);
        tracing::warn!(
            target: "async_rwsem::lock_stat",
            lock = ?std::ptr::from_ref(raw),
            access = %Access::of(head.kind),
            location,
            waited_us = head.waited_ns / 1000,
            holder = hold.site.map(tracing::field::display),
            holder_access = %Access::of(kind),
            "waiting too long for the lock"
        );
    }
}
