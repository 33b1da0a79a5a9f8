//! A probe inside `Engine::sync` for tests: counts completed fdatasyncs and can stall or fail one.

use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;

/// Runs on the blocking pool right after the real `fdatasync`, before the sync counts as done.
pub type Hook = Arc<dyn Fn() -> io::Result<()> + Send + Sync>;

#[derive(Default)]
pub struct SyncProbe {
    syncs: AtomicU64,
    hook: Mutex<Option<Hook>>,
}

impl SyncProbe {
    /// How many `Engine::sync` calls have completed their fdatasync.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    pub fn set_hook(&self, hook: Option<Hook>) {
        *self.hook.lock().unwrap_or_else(PoisonError::into_inner) = hook;
    }

    pub(super) fn synced(&self) -> io::Result<()> {
        let hook = self.hook.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(hook) = hook {
            hook()?;
        }
        self.syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}
