//! A value behind a spin lock, for process-wide state that the `pthread_atfork` handlers must
//! hold across `fork()`: the prepare handler takes the lock and both after-fork handlers release
//! it, so no copy is ever made while another thread is changing the value. (A `Mutex` guard
//! cannot be taken in one handler and dropped in another.)

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(crate) struct SpinLocked<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only reached with `locked` held.
unsafe impl<T: Send> Sync for SpinLocked<T> {}

impl<T> SpinLocked<T> {
    pub(crate) const fn new(value: T) -> SpinLocked<T> {
        SpinLocked {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn lock(&self) {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    pub(crate) fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// Run `f` on the value with the lock held. `f` must not take this lock again.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        struct Unlock<'a, T>(&'a SpinLocked<T>);
        impl<T> Drop for Unlock<'_, T> {
            fn drop(&mut self) {
                self.0.unlock();
            }
        }
        self.lock();
        let _unlock = Unlock(self);
        // SAFETY: the lock is held until `_unlock` drops.
        f(unsafe { &mut *self.value.get() })
    }

    /// The value, for a caller that took the lock with [`SpinLocked::lock`] (a fork handler).
    ///
    /// # Safety
    /// The caller holds the lock and keeps no other reference to the value.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn held(&self) -> &mut T {
        // SAFETY: per the contract.
        unsafe { &mut *self.value.get() }
    }
}
