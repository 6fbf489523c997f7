//! What the demo made: the tasks and batches its workloads created, the
//! only ones `POST /v1/demo/tokens` mints page tokens for.
//!
//! The tokens endpoint answers anyone (the demo page has no sign-in), so
//! it must not reach what others made in the demo tenant: before this,
//! it minted a watch token for any batch of the tenant, and every right
//! on any task created through the API with a kind the demo uses (issue
//! 24, N4). A kind or an input can be copied by whoever holds the tenant
//! token; a memory of the ids cannot.
//!
//! Kept in memory, like the demo's minting key: after a restart the key
//! is new too, so a page holding tasks of the last run could not use its
//! tokens anyway, and shows them as unknown. Bounded: past
//! [`MAX_REMEMBERED`] ids the oldest are forgotten (a page that old
//! was long done with them).

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Ids remembered at most (tasks and batches together): ~100 bytes each.
pub const MAX_REMEMBERED: usize = 100_000;

/// The ids the demo made, oldest first.
#[derive(Debug, Default)]
pub struct Made {
    ids: Mutex<Ids>,
}

#[derive(Debug, Default)]
struct Ids {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Made {
    /// Remembers a task the demo created.
    pub fn task(&self, id: &str) {
        self.remember(format!("t:{id}"));
    }

    /// Remembers a batch the demo created.
    pub fn batch(&self, id: &str) {
        self.remember(format!("b:{id}"));
    }

    /// Whether the demo created task `id` (and still remembers it).
    pub fn has_task(&self, id: &str) -> bool {
        self.lock().set.contains(&format!("t:{id}"))
    }

    /// Whether the demo created batch `id` (and still remembers it).
    pub fn has_batch(&self, id: &str) -> bool {
        self.lock().set.contains(&format!("b:{id}"))
    }

    fn remember(&self, key: String) {
        let mut ids = self.lock();
        if !ids.set.insert(key.clone()) {
            return;
        }
        ids.order.push_back(key);
        while ids.order.len() > MAX_REMEMBERED {
            if let Some(old) = ids.order.pop_front() {
                ids.set.remove(&old);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ids> {
        // Nothing is left half-written by a panic here.
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_and_batches_are_told_apart_and_the_oldest_forgotten() {
        let made = Made::default();
        made.task("x");
        assert!(made.has_task("x"));
        assert!(!made.has_batch("x"), "a task id is no batch id");
        made.batch("b");
        assert!(made.has_batch("b"));
        for i in 0..MAX_REMEMBERED {
            made.task(&i.to_string());
        }
        assert!(!made.has_task("x") && !made.has_batch("b"));
        assert!(made.has_task("0") && made.has_task(&(MAX_REMEMBERED - 1).to_string()));
        assert_eq!(made.lock().set.len(), MAX_REMEMBERED);
    }
}
