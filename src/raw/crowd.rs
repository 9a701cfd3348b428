//! Is this thread one of a crowded runtime's (`Policy::crowded_handoff`)? A tokio runtime
//! with more worker threads than the machine has cores (`available_parallelism`): its
//! workers take turns on the cores, so a task woken or granted the lock often waits for
//! its worker to be scheduled, and the lock's passing (a steal or a spin while the woken
//! head is not yet running) costs the queue more than it gives (`docs/performance.md`,
//! "Round nine").
//!
//! Each thread answers once, at its first call inside a runtime (tokio's handle, its
//! metrics' worker count), and keeps the answer in a thread-local byte: a runtime's
//! threads stay its own. A thread outside any runtime asks again at each call (one
//! thread-local read of tokio's context), so that a thread which enters a runtime later
//! (`block_on`) gets that runtime's answer. The number of cores is read once per process.
//! No lock, no allocation, no foreign code: it may run under the wait lock.
//!
//! Without the `tokio` feature, and in the loom models, no thread is crowded.
//!
//! The rule applies while a reader is queued (a queue of writers alone keeps its
//! spinners: `Policy::crowded_handoff`), which the wait list says under the wait lock and
//! the count word's `READER_QUEUED` says to a spinner. Beyond that bit, kept in step with
//! the list at every release of the wait lock (and checked there in the tests and the
//! loom models), it adds no state: a crowded thread's release treats the head task as due
//! a handoff (as when its timeout has run out, which the loom models explore with the
//! clock as an input, at any release), grants queued readers in order (as a vetoed pass
//! check or a strict order does) and does not spin past the queue (as with a pass bound
//! of zero). Threads that answer differently on one lock are a head whose timeout runs
//! out at some releases and not at others.

#[cfg(all(feature = "tokio", not(all(test, async_rwsem_loom))))]
mod detect {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Not asked yet, or asked outside a runtime.
    const UNKNOWN: u8 = 0;
    /// A worker (or blocking thread) of a runtime with more workers than cores.
    const CROWDED: u8 = 1;
    /// A thread of a runtime with at most one worker per core.
    const ROOMY: u8 = 2;

    thread_local! {
        static ANSWER: Cell<u8> = const { Cell::new(UNKNOWN) };
    }

    /// The machine's cores, once read (0: not yet).
    static CORES: AtomicUsize = AtomicUsize::new(0);

    fn cores() -> usize {
        match CORES.load(Relaxed) {
            0 => {
                let n = std::thread::available_parallelism().map_or(1, usize::from);
                CORES.store(n, Relaxed);
                n
            }
            n => n,
        }
    }

    /// The answer for a runtime of `workers` worker threads on `cores` cores.
    pub(super) fn crowded_by(workers: usize, cores: usize) -> bool {
        workers > cores
    }

    #[inline]
    pub(crate) fn crowded() -> bool {
        // In a thread-local destructor the byte may be gone: not crowded.
        ANSWER
            .try_with(|answer| match answer.get() {
                CROWDED => true,
                ROOMY => false,
                _ => ask(answer),
            })
            .unwrap_or(false)
    }

    #[cold]
    fn ask(answer: &Cell<u8>) -> bool {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let crowded = crowded_by(handle.metrics().num_workers(), cores());
        answer.set(if crowded { CROWDED } else { ROOMY });
        crowded
    }
}

#[cfg(all(feature = "tokio", not(all(test, async_rwsem_loom))))]
pub(crate) use detect::crowded;

/// Without tokio (or in the loom models) no thread is crowded.
#[cfg(not(all(feature = "tokio", not(all(test, async_rwsem_loom)))))]
#[inline]
pub(crate) fn crowded() -> bool {
    false
}

#[cfg(all(test, feature = "tokio", not(async_rwsem_loom)))]
mod tests {
    use super::crowded;
    use super::detect::crowded_by;
    use crate::raw::tests::support::{cores, on_worker};

    #[test]
    fn more_workers_than_cores_is_crowded() {
        assert!(crowded_by(3, 2));
        assert!(!crowded_by(2, 2));
        assert!(!crowded_by(1, 2));
        assert!(on_worker(cores() + 1, crowded));
        assert!(!on_worker(cores(), crowded));
        assert!(!on_worker(1, crowded));
    }

    #[test]
    fn outside_a_runtime_nothing_is_crowded_and_nothing_is_kept() {
        std::thread::spawn(|| {
            assert!(!crowded());
            // The same thread inside a crowded runtime later: asked again.
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            assert!(
                !rt.block_on(async { crowded() }),
                "one worker is not crowded"
            );
            let crowded_rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores() + 1)
                .build()
                .unwrap();
            // `block_on`'s thread runs inside the runtime too; the answer was kept from
            // the current-thread runtime above, where this thread asked first.
            assert!(!crowded_rt.block_on(async { crowded() }));
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            assert!(!crowded());
            let crowded_rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores() + 1)
                .build()
                .unwrap();
            assert!(
                crowded_rt.block_on(async { crowded() }),
                "a thread that asked outside a runtime asks again inside one"
            );
        })
        .join()
        .unwrap();
    }
}
