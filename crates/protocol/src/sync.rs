//! Lock helpers. A std `Mutex` is poisoned when a thread panicked while holding it; the gateway's
//! maps stay consistent under every panic point they have, so a poisoned lock is recovered rather
//! than turned into "allow" or "valid" (failing open) or into a crash.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, recovering the guard of a poisoned lock.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_yields_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
