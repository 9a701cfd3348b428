//! How the lock works: what it promises, the algorithm behind it, and where each part
//! lives in the source. Nothing here is needed to use the lock; the crate's front page
//! is. Where the design comes from (the kernel's mailing-list threads, with their figures)
//! is in the repository's `docs/background.md`; this lock's own measurements are in
//! `docs/performance.md`.
//!
//! # What it does
//!
//! - **Uncontended paths are one atomic each**: a read lock is one `fetch_add`, its unlock
//!   one `fetch_sub`; a write lock one compare-and-swap. No mutex is taken unless someone
//!   waits.
//! - **No allocation per wait**: the queue node lives inside the acquire future.
//! - **Stealing, bounded by a handoff**: arrivals may take the lock ahead of queued
//!   waiters; when the head waiter has waited past the handoff timeout (250 us by default),
//!   or was woken and lost the race, only it may take the lock next.
//! - **Batch wake of readers**: when the head waiter is a reader, every queued reader (up
//!   to [`MAX_READER_WAKE_BATCH`](crate::MAX_READER_WAKE_BATCH)) is granted in one atomic
//!   add, skipping queued writers, while such passing pays for itself: a pass that cost
//!   a queued writer more than the handoff timeout keeps the queue's order for a while.
//! - **Cancel safe in every state**: a dropped acquire unlinks itself and passes on a
//!   wake-up it was given; one that was granted the lock but never polled releases it.
//! - **Adaptive spinning**: readers and writers spin for the lock while its owner runs, for
//!   a budget each lock learns from its own spins; sections that hold the lock across an
//!   `.await` stop paying for spins after a few misses.
//! - **Upgradable reads**: one upgradable reader beside plain readers; its `upgrade` holds
//!   new readers off while those inside leave, and two upgraders can never deadlock.
//!
//! # When not to use it
//!
//! - If no critical section holds the lock across an `.await`, a synchronous lock
//!   (`parking_lot::RwLock`, `std::sync::RwLock`) used from async code is simpler, and
//!   still faster on short contended sections (the repository's `docs/performance.md` has
//!   the figures): it is the ceiling this lock is measured against.
//! - If every waiter must be served in arrival order whatever it costs, and you want no
//!   knobs: by default this lock lets arrivals steal the lock from the queue for
//!   throughput, and bounds the unfairness with a timed handoff instead. It keeps
//!   `tokio::sync::RwLock`'s strict order when built with
//!   [`Policy::fifo`](crate::Policy::fifo) (every scenario of tokio's own `RwLock` tests
//!   passes against that), at the cost in throughput that `docs/performance.md` gives;
//!   `tokio::sync::RwLock` itself is the simpler choice if that order is all you need.
//!
//! # The algorithm
//!
//! **The count word.** The whole lock state is one `AtomicUsize`, encoded as the kernel
//! encodes `rw_semaphore::count`: bit 0 says a writer owns the lock, bit 1 that the wait
//! queue is not empty, bit 2 that a *handoff* is pending, and the reader count starts at
//! bit 8, with the top bit as an overflow guard (too many readers is a panic, never a
//! wrap-around). Zero means unlocked and idle. A reader's uncontended lock is one
//! `fetch_add` of the reader bias and its unlock one `fetch_sub`; a writer's lock is one
//! compare-and-swap from zero and its unlock one `fetch_sub`. Nothing else is touched
//! unless someone waits: no mutex on the uncontended paths, and no allocation on any path,
//! because each waiter's queue node lives inside its own pinned acquire future.
//!
//! **Stealing and spinning.** A reader whose `fetch_add` finds the waiters bit set does
//! not queue at once: if no writer holds the lock, no handoff is pending and readers do
//! not already own it, it keeps its bias and so *steals* the lock, and then grants the
//! queued readers too. A reader never joins readers that own the lock while someone
//! waits, so a stream of readers cannot starve a queued writer. A reader that finds a
//! writer inside spins on the count word with its bias in it, so that the writer's
//! release leaves the lock to the reader at once. A writer that finds the lock held spins
//! too, then gives its worker thread back to the executor once (the owner may be a task
//! on the same thread), and only then queues. A woken queued writer is not handed the
//! lock: it competes for it, so the lock stays busy while woken tasks are still being
//! scheduled, which is where a strictly first-come-first-served lock loses its
//! throughput.
//!
//! **Adaptive spinning.** The kernel spins only while the owner runs on a CPU. A task
//! holding a guard may instead be suspended in an `.await`, which nothing in an executor
//! reports; but the spins' outcomes do. So each lock learns, for readers and for writers
//! apart, how long a spin may last: a spin that wins after `t` moves the budget halfway to
//! `2t + 1 us`, one that runs out halves it, and at zero one contended acquire in 32
//! probes with a short spin. Sections that never await keep a budget near their length;
//! sections that await (or worker threads descheduled, with more workers than cores) stop
//! paying for spins after a few misses, and the lock notices within milliseconds when the
//! workload changes. No clock is read on the uncontended paths. The policy's
//! `reader_spin` and `writer_spin` cap the budgets (`adaptive_spin(false)` makes the caps
//! fixed budgets). The budget is the tasks': a blocking acquire's thread, which would
//! otherwise park and has nothing else to run, spins the whole cap, as a kernel thread
//! spins while the owner runs (the writer of 1 writer and 4 reader threads had learned
//! zero and paid a park and one or two wake-ups per write).
//!
//! **What differs from the kernel: the convoy.** A woken thread runs within
//! microseconds; a woken task waits in its executor's run queue behind every other ready
//! task. An executor runs as many tasks at once as it has workers: if every task whose
//! section does not await spins while the owner runs, at most `workers` tasks contend, and
//! the queue holds only tasks whose owner was suspended. A rule "do not spin while anyone
//! is queued" turns every acquire into a sleep and a wake-up once one task has queued
//! (measured: 240 writers with tiny sections at 0.50x tokio, every contended acquire
//! asleep). The kernel keeps spinning while the owner is on a CPU whatever the queue
//! holds, and lets the handoff bound what the queued waiters lose; this lock does the
//! same in the async form: a task spins past the queue (one writer at a time, for the
//! learned budget) and stops only for a pending handoff or for an owner known not to run,
//! a queued writer granted the lock at a release whose task has not been polled since (the
//! count word's `OWNER_PENDING`, its one view of `owner->on_cpu`); nor does it yield then,
//! since a retry cannot win. A woken head writer that finds the lock taken asks for the
//! handoff at once and spins for the owner, as the kernel's handoff waiter does, and is
//! granted the lock at the release. Readers queued behind a head writer pass it once, a
//! batch of at most two, and the writer gets the handoff: the queue alternates a few
//! readers and a writer (with every queued reader granted, writers fell to 4% of the
//! operations of mixed-40-40; with none passing, readers to 9-11%). Under
//! [`Policy::fifo`](crate::Policy::fifo) (or a zero handoff timeout) none of this applies:
//! nobody passes the queue; nor on a crowded runtime's threads (below) while a task heads
//! it.
//!
//! **Bounded passing.** Passing the queue is bounded in count as well as in time. While
//! anyone waits, each pass (a reader's steal or spin won while a writer heads the queue,
//! a writer's spin won past queued waiters, a queued writer that takes the lock ahead of
//! the head) is counted, and the pass that reaches the policy's `pass_bound` (one, by
//! default) sets the handoff bit for the head, as an `unlock_fair` would: nobody else gets
//! in, and the passer's release grants the head. A turn of the queue (any queued waiter
//! granted or taking the lock) starts the count again. So the queue gets at least one
//! turn in `pass_bound + 1` and its head waits about `pass_bound + 1` times what a
//! first-come-first-served queue would make it wait; the passes that remain are where the
//! throughput comes from (a running task takes a free lock now instead of leaving it idle
//! until a woken task is polled), and the count lives beside the spin budgets, written only
//! on these slow paths. Under the default's unbounded count (before this bound), two thirds
//! of the reads stole and two thirds of the writes won a spin, so the queue got a third of
//! the turns and its tasks waited three times as long as in tokio's queue. The table of
//! bounds against tokio is in `docs/performance.md` ("Bounded passing").
//!
//! **A parked thread at the head** (a blocking acquire's node: `blocking_write`,
//! `try_read_for` and the rest) is served by the bound in time alone, as the kernel serves
//! its threads and `parking_lot` its (eventual fairness): when the count reaches the bound
//! with such a head, the count pauses until the queue's next turn, and queued readers are
//! not granted past such a head writer. A turn given to a parked thread costs its wake-up,
//! and the lock sits idle until the thread runs, a scheduler's time slice away on a busy
//! machine: with the count in force, every operation of 4 writer and 4 reader threads on 2
//! cores was a wake-up (about 100k operations/s; with the pause 8.9M, both classes near
//! half). A task's turn costs a poll on a worker that is running anyway. And once a
//! release has woken such a head to compete, it is left to claim the lock when it runs
//! (it takes a free lock, or asks for the handoff at once): no release wakes it again or
//! reads the clock for a timed grant meanwhile, which with 4 writer and 4 reader threads
//! had been a clock read at nearly every release, 12% of the time.
//!
//! **A crowded runtime** (a tokio runtime with more worker threads than the machine has
//! cores: `Policy::crowded_handoff`, on by default) gets the handoff at every release while
//! a task heads a queue that holds a reader: a release on such a runtime's thread grants
//! the head, the queued readers are granted in the queue's order, and no writer spins past
//! the queue (so what remains of passing there is a free lock taken in the instant before
//! a release's grant, and the fast paths while nobody waits). Its workers take turns on
//! the cores, so a woken head often waits for its worker to be scheduled, and the passes
//! made meanwhile lengthened the queue's waits more than they added to the throughput. At
//! 4 and 8 workers on 2 cores (three sets of 5 interleaved rounds) mixed ran at
//! 0.91-0.93x tokio's throughput with the writers' p99 wait 1.4-1.5x tokio's, and at
//! 0.98-1.00x with 1.0x under the rule, 8% more in every set; every shape's p99 waits came
//! to 0.8-1.2x tokio's (from up to 1.6x). A queue of writers alone keeps the timed handoff
//! and its spinners: there the lead is the spinners', which keep a lock of tiny sections
//! busy while the woken head waits for its worker (writers-240-tiny at 0.98-1.08x tokio
//! with them in four sets, 0.81-0.86x with the handoff at every release in the same
//! rounds, 0.64x with the timed handoff but no spinner past the queue). The spinner learns whether a reader is queued from `READER_QUEUED`, a bit of
//! the count word kept in step with the list under the wait lock (set in the queueing
//! reader's own add, cleared in the grant of the last queued readers). A writer that
//! queues while the rule holds reads no clock for its handoff deadline: it is due at every
//! release; if the rule lapses before its turn, its timeout starts at the first release
//! that finds it at the head. The rule's cost
//! that stays is randomrw-8-8's (up to 14%, to 1.09-1.24x, in round nine's sets; see
//! `docs/performance.md`, "Round nine" and "Round ten"). With a worker per core the timed
//! handoff measured as well (the every-release handoff was 5-8% behind it in mixed and
//! sysfs at 2 workers), and parked heads keep it for the reason above. The answer is one
//! thread-local byte per thread, read on the slow paths only.
//!
//! **Handoff.** The rest of the unfairness is bounded by a timer. Each queued writer
//! records when it queued (but for the crowded runtime's case above); once the head of the queue has waited longer than the policy's
//! handoff timeout (250 us by default, chosen by measurement; the kernel uses 4 ms),
//! has lost a race after a wake-up, or has been passed `pass_bound` times, the handoff
//! bit is set and the next release grants
//! the head the lock directly (a reader head with every queued reader), while every fast
//! path and every steal fails meanwhile. A guard's `unlock_fair` (`parking_lot`'s name)
//! asks for the handoff on demand: its release hands the lock to the head at once. The
//! kernel's measurement of this bound (240 writers, 5 us sections) is in the repository's
//! `docs/background.md`, this lock's for the same shape in `docs/performance.md`. A
//! cancelled head passes the bit to the next one.
//!
//! **Waking.** A release that leaves the lock free with waiters queued takes the wait
//! lock (a small `Mutex`, never held across a waker call or an `.await`) and looks at the
//! head: a writer is woken alone; a reader means every queued reader, skipping writers,
//! up to the batch limit (256), is granted in one atomic add before any of them is woken
//! (the one reader queued, in one compare-and-swap that also clears what its grant ends:
//! the handoff it may have asked for, and the waiters bit if nobody else waits).
//! A batch of exactly two readers (the two that pass a head writer, at nearly every
//! writer's release in the 40+40 shapes) wakes the first alone; its future holds the
//! second's wake-up and makes it when it sees its grant, or when it is dropped (a
//! *relay*). On a work-stealing executor the second wake-up from one task would push the
//! first to the shared run queue and wake a parked worker to steal it, about 7 us of CPU
//! on a small virtual machine for a section of nanoseconds; relayed, the two run one
//! after the other on the worker that released. In the 40+40 shapes at 2 workers on 2
//! cores this took the lock from 0.88-0.91x tokio's throughput to 0.97-1.03x; with four
//! workers per core it cost 4-6% (mixed, 40+40) in one set, where the releasing worker is
//! more often descheduled while both readers wait for it, and nothing a later set of 15
//! rounds could tell from the noise (`docs/performance.md`, "The relay" and "Round
//! eight").
//! Larger batches are woken at once (one stolen worker then serves many),
//! and parked threads are never relayed (an unpark is slow enough to be worth
//! overlapping).
//!
//! **Passing that pays for itself.** Readers that skip queued writers in a grant, and the
//! two that pass a head writer, help while read sections are short: the writer waits a
//! few more short sections, and the readers share one turn. Where readers hold the lock
//! for milliseconds (a scan of a whole shard, a snapshot written under a read lock, a
//! reader that holds this lock while it queues for another), each pass makes the writer,
//! and everyone queued behind it, wait a long section that a FIFO queue would have served
//! after it: the demo server's lock-sensitive scenario ran at 0.74-0.82x tokio's `SET`
//! rate with twice its `SET` p99 for that alone. Nothing on the fast paths says how long
//! sections are, so the passes are timed: one pass of a head writer in eight notes the
//! time, and when a queued writer next gets the lock, the wait since then is what the
//! pass cost it. A pass that cost more than the handoff timeout turns both kinds of
//! passing off for the next 255 turns of queued writers: grants then keep the queue's
//! order, as under `strict_order`, while arrivals may still steal and spin as before.
//! The veto took the demo server from 0.74-0.82x tokio's rate to 0.89-1.01x (four sets;
//! its `SET` p99 at 0.99-1.12x in the first two), and left `compare`'s tiny sections
//! where they were (a pass there costs about a microsecond); timing every pass, two clock
//! reads under the wait lock, had cost the 40+40 shapes 5-6% (`docs/performance.md`,
//! "Passing that pays for itself"). So every pass is timed only after a veto, until a
//! thousand in a row were cheap: one long reader among short ones is one pass in
//! hundreds, which the sample caught once in eight of its passes, while each pass it was
//! not caught in kept every queued writer waiting out its whole hold (`compare`'s
//! long-reader at 2 workers: writers' p99 at 11 ms, tokio's 0.5 ms, in half the runs).
//! Watched, its next pass vetoes again, and the writers' p99 came within 1.2x tokio's
//! (`docs/performance.md`, "Round fifteen"); 40 readers and 40 writers, whose passes cost
//! microseconds, veto once or twice a second and stay sampled.
//!
//! **Cancellation.** Dropping a pending acquire in any state is safe: a queued node
//! unlinks itself and, if it was the head, wakes the next head; a node that was granted
//! the lock but never polled releases it.
//!
//! **Size.** A lock is 64 bytes on 64-bit targets, one cache line (`tokio::sync::RwLock<()>`
//! is 48): the count word, the wait lock with its wait list (a ring of every waiter, a
//! second ring of its readers alone and the number of its writers, so that a grant of the
//! queued readers costs the readers it grants, never a walk of the writers queued between
//! them), the policy stored in 16 bytes, the reader limit and the learned spin budgets.
//! The `stats` feature adds 8 bytes per counter.
//!
//! # Cooperative scheduling (feature `tokio`, on by default)
//!
//! Inside a tokio runtime a task gets a budget of operations per turn, and tokio's own
//! resources make it yield once the budget is spent, so that a task whose awaits are
//! always ready still lets its neighbours run. An async acquire takes one unit once it
//! owns the lock, and a task whose budget is spent yields there, holding the lock, as
//! tokio's lock does since tokio 1.54. Under the default policy one async acquire in
//! eight of a thread is charged (a thread-local count; the check of tokio's budget cost
//! about as much as the uncontended acquire itself), so a task looping on a free lock
//! yields after eight times as many acquires as with tokio's lock; under
//! [`Policy::fifo`](crate::Policy::fifo) every acquire is charged, as tokio's lock charges
//! it (taking it before the acquire would yield before
//! queueing, and let later arrivals pass a task that already returned `Pending`, against
//! `Policy::fifo()`'s promise). The `try_` acquires take no budget (they cannot yield),
//! nor do upgrades and downgrades (they take no new lock), nor the blocking acquires (a
//! blocked thread cannot yield to tokio; they run their futures unconstrained). Outside a
//! tokio runtime the check is one thread-local read and never yields.
//!
//! It is part of the `tokio` feature rather than a feature of its own because the budget
//! only matters inside a tokio runtime, where the users of that feature already are, and
//! the feature is on by default because a tokio user who swaps the `use` line would
//! otherwise get a loop like `while !*flag.read().await {}` that never yields, and hangs a
//! current-thread runtime (no `tokio::time::timeout` can fire there). Users of other
//! executors turn it off with `default-features = false`, and take no tokio dependency.
//!
//! # Map of the source
//!
//! | file | what lives there |
//! |---|---|
//! | `src/raw/count.rs` | the count word's bits, their invariants, and every place that sets or clears a flag |
//! | `src/raw/list.rs` | the wait-list node and its states, the intrusive ring list, the list of wakers to call |
//! | `src/raw/read.rs` | readers: fast path, release, steal, spin, queue |
//! | `src/raw/write.rs` | writers: fast path, release, spin, queue, `try_write_lock` |
//! | `src/raw/upgradable.rs` | upgradable reads, upgrades, downgrades |
//! | `src/raw/wake.rs` | waking and granting: `mark_wake`, the one grant, the one queued write lock |
//! | `src/raw/waiter.rs` | the lock future, its re-polls and its cancellation |
//! | `src/raw/spin.rs` | the learned spin budgets |
//! | `src/raw/policy.rs`, `src/raw/stats.rs` | the policy and how a lock stores it; the lock-event counters |
//! | `src/raw/snapshot.rs`, `src/rwlock/snapshot.rs` | `RwLock::snapshot`: the count word and the wait list read together; under `lock_stat`, `RwLock::lock_stat` |
//! | `src/observe/lock_stat/` | feature `lock_stat`: the wait and hold histograms (per thread, `local.rs`, folded when read), the precise and coarse clocks (`clock.rs`), the longest hold, the exclusive holder, the "held/waited too long" warnings (with `tracing`) |
//! | `src/raw/tests/` | the transition tests against the count word, the list's tests, the loom models |
//! | `src/rwlock.rs`, `src/rwlock/acquire.rs` | `RwLock<T>`: its state queries, `into_inner` and `get_mut`, the `Send`/`Sync` impls and the variance table; the constructors and every async and `try_` acquire (`acquire.rs`) |
//! | `src/rwlock/token.rs` | lock tokens: the one place the typed layer takes, changes and releases a lock |
//! | `src/rwlock/guard.rs`, `owned.rs`, `upgradable.rs` | the guards (borrowed, owned, upgradable) and the `Upgrade` future |
//! | `src/rwlock/blocking.rs`, `timeout.rs`, `coop.rs` | the blocking acquires; the timed ones and tokio's cooperative budget (feature `tokio`) |
//! | `src/design.rs` | this page |
//! | `src/loom.rs` | where the atomics, the mutex, `UnsafeCell` and the lock's clock come from (std, or loom and a logical clock that the models advance) |
//!
//! # The policy's knobs in detail
//!
//! What each field of [`Policy`](crate::Policy) trades (the crate's front page has the
//! short version):
//!
//! | knob | raise it when | lower it when |
//! |---|---|---|
//! | `handoff_timeout` | throughput matters more than the worst wait | a class of tasks (readers, or writers) falls behind; `ZERO` hands the lock to the head at every release, and queued waiters never pass each other |
//! | `writer_spin` (the cap of the learned budget) | sections are short and never await, and queues are rare | workers are few and busy, or sections await (the learned budget stops most such spins) |
//! | `writer_yields` | owners are often writer tasks on the same worker | writers should queue at once (behind readers they always do) |
//! | `reader_wake_batch` | many readers queue behind writers | a burst of granted readers delays a writer too long |
//! | `reader_spin` (the cap of the learned budget) | short mixed sections, writers leave quickly | readers should queue (the kernel dropped reader spinning in 5.11); `ZERO` turns it off |
//! | `strict_order` ([`Policy::fifo`](crate::Policy::fifo)) | code relies on tokio's first-come-first-served order | throughput matters (stealing is off) |
//! | `pass_bound` | throughput matters more than the queued tasks' tail (`u32::MAX`: no bound in count) | queued tasks wait too long behind running ones; `0`: nobody passes a non-empty queue |
//! | `crowded_handoff` (on or off) | on (the default): a runtime with more workers than cores, where queued tasks' tails matter | off: readers passing queued writers wins on your workload even with workers taking turns on the cores (randomrw-8-8 lost up to 14% to the rule at 4 and 8 workers) |
