//! loom models under the default policy (`Policy::default()`: learned spins, a yield, the
//! 250 us handoff timeout, readers passing a head writer), in the shapes of the peers' own
//! models of their locks: readers and writers on threads of their own, each driven by
//! `block_on`, borrowed and owned guards. Run as the other models (`loom_models.rs`).
//!
//! Time is an input of these models. The lock's clock is logical under loom
//! ([`crate::loom::Clock`]): it moves only when a model advances it, and loom explores
//! where each advance falls relative to the lock's reads. Here every writer's section
//! takes as long as the handoff timeout (it advances the clock by that much while it
//! holds the lock), so a writer queued behind it is, at the release, due or not due
//! depending on whether it queued before or after that advance, and both are explored:
//! the release's grant to a head due by its timeout (`wake_writer`), and the wake-up of a
//! head that is not due, which then competes. Each model checks, after `loom::model` has
//! returned, that the timed grant was taken in at least one execution. (Without the
//! advances the same shapes run with time standing still: only the lost races' handoffs.)
//!
//! Every model here bounds its own preemptions at 2 ([`model_bounded`]; fewer if
//! `LOOM_MAX_PREEMPTIONS` says so), where the other models run at CI's 3: with three or
//! four threads under a policy that spins, yields and hands off, each took 3.5 to 10
//! minutes at 3 on the 2-core machine (the other models together: about 16), and all
//! four take about 20 s at 2.

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::Policy;
use loom::future::block_on;
use loom::thread;

use super::loom_support::*;

/// How long each writer's section takes: the default handoff timeout.
fn section() -> Duration {
    Policy::default().handoff_timeout
}

/// A writer's section: it bumps the data, and takes [`section`] to do it.
fn write_section(l: &Lock, g: &Data) {
    g.bump();
    l.raw.clock.advance(section());
}

/// The preemption bound of the models too large to explore at CI's bound of 3.
const BOUND: usize = 2;

/// `loom::model`, with at most `bound` preemptions (or fewer, if `LOOM_MAX_PREEMPTIONS`
/// says so).
fn model_bounded<F>(bound: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.map_or(bound, |b| b.min(bound)));
    builder.check(f);
}

/// What one model's executions saw of the handoff timeout, summed over them: how many
/// times the clock said a waiter was due, and how many releases granted a head writer
/// due by its timeout.
#[derive(Default)]
struct Seen {
    dues: StdAtomicUsize,
    timed_grants: StdAtomicUsize,
    woken_timed_grants: StdAtomicUsize,
    executions: StdAtomicUsize,
}

impl Seen {
    /// Adds what the lock `l` saw in one execution.
    fn add(&self, l: &Lock) {
        self.dues.fetch_add(l.raw.clock.dues(), Relaxed);
        self.timed_grants
            .fetch_add(l.raw.clock.timed_grants(), Relaxed);
        self.woken_timed_grants
            .fetch_add(l.raw.clock.woken_timed_grants(), Relaxed);
        self.executions.fetch_add(1, Relaxed);
    }

    /// Some execution granted a head writer the lock at a release because its wait had
    /// passed the timeout.
    #[track_caller]
    fn assert_timed_grant_explored(&self) {
        let (dues, grants, runs) = (
            self.dues.load(Relaxed),
            self.timed_grants.load(Relaxed),
            self.executions.load(Relaxed),
        );
        assert!(
            grants > 0,
            "no execution of {runs} granted a head due by its timeout ({dues} due answers)"
        );
    }

    /// Some execution granted it to a head that an earlier release had woken (to compete)
    /// and that was not polled since.
    #[track_caller]
    fn assert_woken_timed_grant_explored(&self) {
        self.assert_timed_grant_explored();
        let (grants, runs) = (
            self.woken_timed_grants.load(Relaxed),
            self.executions.load(Relaxed),
        );
        assert!(
            grants > 0,
            "no execution of {runs} granted a woken head due by its timeout"
        );
    }
}

/// Which guards a model's writers take.
#[derive(Clone, Copy)]
enum Guards {
    /// `write()`: a guard that borrows the lock.
    Borrowed,
    /// `write_owned()`: a guard that holds an `Arc` of the lock.
    Owned,
}

/// Two writers, each on a thread of its own with `block_on`, each running one
/// [`write_section`] under the guards `guards`.
fn two_writer_threads(l: &Arc<Lock>, guards: Guards) -> Vec<thread::JoinHandle<()>> {
    (0..2)
        .map(|_| {
            let l = Arc::clone(l);
            thread::spawn(move || {
                block_on(async {
                    match guards {
                        Guards::Borrowed => write_section(&l, &*l.write().await),
                        Guards::Owned => write_section(&l, &*Arc::clone(&l).write_owned().await),
                    }
                });
            })
        })
        .collect()
}

/// tokio's shape: two writers and a reader, each on a thread of its own; `main` joins them
/// and reads the sum. Bounded at [`BOUND`] preemptions (at 3: about 10 minutes).
#[test]
fn two_writers_and_a_reader_on_threads() {
    let seen = Arc::new(Seen::default());
    let seen2 = Arc::clone(&seen);
    model_bounded(BOUND, move || {
        let l = lock(Policy::default());
        let writers = two_writer_threads(&l, Guards::Borrowed);
        let l3 = Arc::clone(&l);
        let reader = thread::spawn(move || block_on(async { l3.read().await.get() }));
        for w in writers {
            w.join().unwrap();
        }
        let seen_by_reader = reader.join().unwrap();
        assert!(seen_by_reader <= 2, "reader saw {seen_by_reader}");
        assert_eq!(block_on(l.read()).get(), 2);
        assert_idle(&l);
        seen2.add(&l);
    });
    seen.assert_timed_grant_explored();
}

/// maitake-sync's shape: two writers on threads of their own while `main` reads (a
/// borrowed guard), then joins them and reads the sum. Bounded at [`BOUND`] preemptions
/// (at 3: about 3.5 minutes).
#[test]
fn two_writers_on_threads_main_reads() {
    let seen = Arc::new(Seen::default());
    let seen2 = Arc::clone(&seen);
    model_bounded(BOUND, move || {
        let l = lock(Policy::default());
        let writers = two_writer_threads(&l, Guards::Borrowed);
        {
            let g = block_on(l.read());
            assert!(g.get() <= 2, "main saw {}", g.get());
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(block_on(l.read()).get(), 2);
        assert_idle(&l);
        seen2.add(&l);
    });
    seen.assert_timed_grant_explored();
}

/// As [`two_writers_on_threads_main_reads`], with owned guards (`write_owned`,
/// `read_owned`): each writer's guard holds its own `Arc` of the lock. Bounded at
/// [`BOUND`] preemptions, as that model (at 3: about 4 minutes).
#[test]
fn two_writers_on_threads_main_reads_owned() {
    let seen = Arc::new(Seen::default());
    let seen2 = Arc::clone(&seen);
    model_bounded(BOUND, move || {
        let l = lock(Policy::default());
        let writers = two_writer_threads(&l, Guards::Owned);
        {
            let g = block_on(Arc::clone(&l).read_owned());
            assert!(g.get() <= 2, "main saw {}", g.get());
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(block_on(Arc::clone(&l).read_owned()).get(), 2);
        assert_eq!(Arc::strong_count(&l), 1, "a guard kept its Arc");
        assert_idle(&l);
        seen2.add(&l);
    });
    seen.assert_timed_grant_explored();
}

/// The head writer is woken at a release within its timeout, time passes before its task
/// is polled, and a reader steals the lock meanwhile: the reader's release must grant the
/// head directly (it is due, and it was woken already: `wake_writer` checks the timeout of
/// a woken head too). In other executions the head is due at the first release already
/// (granted there), or runs before the steal, or the reader comes first. Bounded at
/// [`BOUND`] preemptions (at 3: about 4 minutes). The default policy but for the bound in
/// count on passing, which would hand the head the lock at the steal already (that rule's
/// models are in `loom_passing.rs`): here the timeout alone decides.
#[test]
fn woken_head_past_its_timeout_is_granted_after_a_steal() {
    let seen = Arc::new(Seen::default());
    let seen2 = Arc::clone(&seen);
    model_bounded(BOUND, move || {
        let l = lock(Policy::default().pass_bound(u32::MAX));
        let g = l.try_write().unwrap();
        g.bump();
        let l2 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l2.write().await.bump() }));
        let l3 = Arc::clone(&l);
        let r = thread::spawn(move || block_on(async { l3.read().await.get() }));
        drop(g);
        // The head's task waits in its executor's run queue this long.
        l.raw.clock.advance(section());
        w.join().unwrap();
        let seen_by_reader = r.join().unwrap();
        assert!(
            seen_by_reader == 1 || seen_by_reader == 2,
            "reader saw {seen_by_reader}"
        );
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
        seen2.add(&l);
    });
    seen.assert_woken_timed_grant_explored();
}
