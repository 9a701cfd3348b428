//! Helpers shared by the integration tests, through the public API only.

#![allow(dead_code)] // each test file uses its own subset

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use async_rwsem::RwLock;

#[cfg(all(feature = "lockdep", feature = "tokio"))]
pub mod lockdep;
pub mod probe;

/// Is the lock idle: unlocked, nobody queued, no bias or flag left in the count word?
///
/// `try_write` is one compare-and-swap from the idle value 0, so it succeeds exactly when
/// the whole count word is 0 (no reader, no writer, no waiter, no handoff).
pub fn is_idle<T: ?Sized>(lock: &RwLock<T>) -> bool {
    lock.try_write().is_ok()
}

/// Asserts [`is_idle`].
#[track_caller]
pub fn assert_idle<T: ?Sized>(lock: &RwLock<T>) {
    assert!(
        is_idle(lock),
        "the lock is not idle (held, queued, or a bias left behind)"
    );
}

/// Who is inside the lock, counted from inside the critical sections with atomics of its
/// own, and the exclusion the lock must keep: no reader beside a writer, never two
/// writers, at most one upgradable reader (counted as a reader too).
#[derive(Default)]
pub struct Census {
    readers: AtomicUsize,
    writers: AtomicUsize,
    upgradable: AtomicUsize,
}

impl Census {
    /// A reader got in.
    pub fn enter_read(&self) {
        self.readers.fetch_add(1, SeqCst);
        assert_eq!(self.writers.load(SeqCst), 0, "a reader beside a writer");
    }
    /// A reader leaves.
    pub fn leave_read(&self) {
        self.readers.fetch_sub(1, SeqCst);
    }
    /// The upgradable reader got in.
    pub fn enter_upgradable(&self) {
        assert_eq!(
            self.upgradable.fetch_add(1, SeqCst),
            0,
            "two upgradable readers"
        );
        self.enter_read();
    }
    /// The upgradable reader leaves (or is about to upgrade).
    pub fn leave_upgradable(&self) {
        self.leave_read();
        self.upgradable.fetch_sub(1, SeqCst);
    }
    /// A writer got in (an upgrade included).
    pub fn enter_write(&self) {
        assert_eq!(self.writers.fetch_add(1, SeqCst), 0, "two writers");
        assert_eq!(self.readers.load(SeqCst), 0, "a writer beside readers");
    }
    /// A writer leaves.
    pub fn leave_write(&self) {
        self.writers.fetch_sub(1, SeqCst);
    }
    /// The writer downgrades: from now on a reader, beside the readers it lets in.
    pub fn downgrade(&self) {
        self.readers.fetch_add(1, SeqCst);
        self.writers.fetch_sub(1, SeqCst);
    }
}

/// A small seeded PRNG (splitmix64), so that every run's choices can be reproduced.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Runs `f` and expects it to panic; the panic is caught.
#[track_caller]
pub fn panics(f: impl FnOnce()) {
    assert!(
        catch_unwind(AssertUnwindSafe(f)).is_err(),
        "expected a panic"
    );
}

/// Lockdep's reports off (with the feature `lockdep`, as under `cargo test --all-features`;
/// nothing without it), called first by each test that takes on purpose what lockdep
/// reports: mock tasks polled by hand on the test's thread (`tokio_test::task::spawn`) are
/// one holder to lockdep, so one "task" queueing behind another's lock is a recursive
/// acquire to it. `lockdep::set_report` is process-wide: the test binaries that call this
/// test nothing of lockdep (`tests/lockdep.rs` and `tests/lockdep_report.rs` do, with
/// reports on).
pub fn lockdep_off() {
    #[cfg(feature = "lockdep")]
    async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
}

/// Runs `scenario` in a child process: this test binary again, running only the test
/// `name` (which must be the caller, a top-level `#[test]`), with a variable that tells
/// it to run the scenario. The parent asserts that the child exited normally with its
/// test passed, and returns the child's standard error. For what may abort the process
/// (a panic during an unwind), which would kill every other test of the binary.
pub fn in_child(name: &str, scenario: impl FnOnce()) -> String {
    const CHILD: &str = "ASYNC_RWSEM_TEST_CHILD";
    if std::env::var(CHILD).as_deref() == Ok(name) {
        scenario();
        return String::new();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child running {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stderr
}
