//! The one place the crate takes its atomics, its mutex and its `UnsafeCell` from.
//!
//! In the loom models (`cfg(all(test, async_rwsem_loom))`) they come from `loom`, which
//! explores every interleaving of the models in `src/raw/tests/loom_*.rs`; otherwise from
//! `std`. Nothing else in the crate names `std::sync::atomic` or `std::cell::UnsafeCell`
//! directly, so a model checks the code that ships, with two exceptions: the `stats`
//! feature's event counters (`raw/stats.rs`) and the `lock_stat` feature's histograms and
//! slots (`lock_stat.rs`) are `std` atomics under every cfg, since they order nothing of
//! the lock's (relaxed counts and diagnostics, read only by `RwLock::stats`,
//! `RwLock::lock_stat` and `RwLock::snapshot`).

#[cfg(all(test, async_rwsem_loom))]
pub(crate) use loom::{
    cell::UnsafeCell,
    hint::spin_loop,
    sync::{
        atomic::{AtomicU32, AtomicU8, AtomicUsize},
        Mutex, MutexGuard,
    },
};

#[cfg(not(all(test, async_rwsem_loom)))]
pub(crate) use self::std_cell::UnsafeCell;
#[cfg(not(all(test, async_rwsem_loom)))]
pub(crate) use std::{
    hint::spin_loop,
    sync::{
        atomic::{AtomicU32, AtomicU8, AtomicUsize},
        Mutex, MutexGuard,
    },
};

#[cfg(not(all(test, async_rwsem_loom)))]
mod std_cell {
    /// `std::cell::UnsafeCell` with loom's closure-based access API, so that the same code
    /// compiles against both.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        pub(crate) fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    impl<T: ?Sized> UnsafeCell<T> {
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// Locks a `Mutex` whose critical sections never panic; a poisoned guard is taken as is.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A raw pointer to the contents of `cell`, for guards that outlive a closure: the write
/// guard's (loom records a write access). Beyond the call loom does not track the access;
/// the models track the data with cells of their own.
#[inline(always)]
pub(crate) fn cell_ptr<T: ?Sized>(cell: &UnsafeCell<T>) -> *mut T {
    cell.with_mut(|ptr| ptr)
}

/// As [`cell_ptr`], for shared access (a read guard: loom records a read access).
#[inline(always)]
pub(crate) fn cell_ptr_shared<T: ?Sized>(cell: &UnsafeCell<T>) -> *mut T {
    cell.with(|ptr| ptr.cast_mut())
}
