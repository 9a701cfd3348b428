//! Read, then write only if needed: an upgradable read.
//!
//! An upgradable reader shares the lock with plain readers (at most one upgradable reader
//! at a time) and can turn into a writer without releasing, so that what it read stays
//! true when it writes. Run: `cargo run --example upgrade`.

use std::sync::Arc;

use async_rwsem::{RwLock, RwLockUpgradableReadGuard};

/// Returns the id of `name`, assigning the next free one if it has none yet.
async fn intern(names: &RwLock<Vec<String>>, name: &str) -> usize {
    let guard = names.upgradable_read().await;
    if let Some(id) = guard.iter().position(|n| n == name) {
        return id; // the common case: no writer needed, plain readers ran beside us
    }
    // Waits for the plain readers to leave; no other writer can slip in meanwhile, so the
    // name is still missing when we push it.
    let mut guard = RwLockUpgradableReadGuard::upgrade(guard).await;
    guard.push(name.to_owned());
    guard.len() - 1
}

#[tokio::main]
async fn main() {
    let names = Arc::new(RwLock::new(Vec::new()));
    let tasks: Vec<_> = ["ext4", "xfs", "ext4", "btrfs", "xfs", "ext4"]
        .into_iter()
        .map(|name| {
            let names = names.clone();
            tokio::spawn(async move { (name, intern(&names, name).await) })
        })
        .collect();
    for t in tasks {
        let (name, id) = t.await.unwrap();
        // however the tasks interleaved, a name has exactly one id
        assert_eq!(names.read().await[id], name);
        println!("{name} -> {id}");
    }
    assert_eq!(names.read().await.len(), 3);

    // try_upgrade: take the write lock only if no plain reader is in.
    let guard = names.upgradable_read().await;
    let reader = names.read().await;
    let guard = match RwLockUpgradableReadGuard::try_upgrade(guard) {
        Ok(_) => unreachable!("a reader is inside"),
        Err(still_upgradable) => still_upgradable,
    };
    drop(reader);
    let writer = RwLockUpgradableReadGuard::try_upgrade(guard).expect("no reader left");
    println!("{} names, upgraded with try_upgrade", writer.len());
}
