//! Choosing a policy: what the default, a reader batch of one and the strict order each do
//! with the same queue.
//!
//! Eight tasks queue behind a writer, alternating writer and reader (W0 R1 W2 R3 W4 R5 W6
//! R7, in that order), then the writer leaves. Each policy hands the lock out in its own
//! order, printed as the groups that held it together (`[R1 R3]`: granted at one release,
//! holding it at the same time), with the reason on the line below.
//!
//! The example drives the tasks itself, as an executor would: tokio-test mock tasks, each
//! polled once it was woken, every group released before the next poll. Nothing here depends
//! on timing (no handoff timeout can expire: every grant below is made at a release, by the
//! rules alone), so it prints the same on every machine, and checks that it did.
//! Run: `cargo run --example policy`.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use async_rwsem::{Policy, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio_test::task::{spawn, Spawn};

/// What a queued task holds once it gets the lock.
#[allow(dead_code)] // the guards are held, never read: holding is the point
enum Held<'a> {
    /// A reader's guard.
    Read(RwLockReadGuard<'a, ()>),
    /// A writer's guard.
    Write(RwLockWriteGuard<'a, ()>),
}

/// A queued task: its name and its acquire, as a mock task.
type Waiter<'a> = (String, Spawn<Pin<Box<dyn Future<Output = Held<'a>> + 'a>>>);

/// Queues W0 R1 W2 R3 W4 R5 W6 R7 behind a writer, lets the writer go, and returns the
/// groups in which they got the lock (a group holds it together).
fn grant_order(policy: Policy) -> Vec<Vec<String>> {
    let lock = RwLock::with_policy((), policy);
    let held = lock.try_write().expect("a new lock is free");
    let mut queue: Vec<Waiter<'_>> = Vec::new();
    for i in 0..8 {
        let (name, acquire): (String, Pin<Box<dyn Future<Output = Held<'_>>>>) = if i % 2 == 0 {
            (
                format!("W{i}"),
                Box::pin(async { Held::Write(lock.write().await) }),
            )
        } else {
            (
                format!("R{i}"),
                Box::pin(async { Held::Read(lock.read().await) }),
            )
        };
        let mut task = spawn(acquire);
        // Until it sleeps in the queue: a writer first spins, and behind a writer yields
        // once (it wakes itself), as it would on a worker thread.
        loop {
            assert!(task.poll().is_pending(), "{name} got a held lock");
            if !task.is_woken() {
                break;
            }
        }
        queue.push((name, task));
    }
    drop(held);

    let mut groups = Vec::new();
    while !queue.is_empty() {
        assert!(
            queue.iter().any(|(_, task)| task.is_woken()),
            "the lock is free and nobody was woken: {:?}",
            queue.iter().map(|(name, _)| name).collect::<Vec<_>>()
        );
        // One turn of the executor: poll the woken tasks in queue order.
        let mut group = Vec::new();
        let mut guards = Vec::new();
        queue.retain_mut(|(name, task)| {
            if !task.is_woken() {
                return true;
            }
            match task.poll() {
                Poll::Ready(guard) => {
                    group.push(name.clone());
                    guards.push(guard);
                    false
                }
                Poll::Pending => true,
            }
        });
        if !group.is_empty() {
            groups.push(group);
        }
        drop(guards); // the group leaves: the last release hands the lock on
    }
    groups
}

/// `[R1 R3] [W0]`.
fn show(groups: &[Vec<String>]) -> String {
    let groups: Vec<String> = groups
        .iter()
        .map(|g| format!("[{}]", g.join(" ")))
        .collect();
    groups.join(" ")
}

/// `text` in lines of at most `width` columns, each indented by `indent` spaces.
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent + line.len() + 1 + word.len() > width {
            out += &format!("{:indent$}{line}\n", "");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    out + &format!("{:indent$}{line}\n", "")
}

fn main() {
    println!("W0 R1 W2 R3 W4 R5 W6 R7 queue behind a writer, which then leaves.");
    println!("[..] = the tasks one release lets in together, in the order they got the lock.\n");
    let cases: [(&str, Policy, &str, &str); 3] = [
        (
            "default",
            Policy::default(),
            "[R1 R3] [W0] [R5 R7] [W2] [W4] [W6]",
            "the readers queued behind the head writer W0 can share the lock, so the release \
             grants the first of them past it in one batch (at most 2 pass a writer) and \
             gives W0 the handoff: W0 goes next, when they leave, and no one else may take \
             the lock first. R5 and R7 pass the next head writer, W2, the same way. Writers \
             never pass one another. 6 turns instead of fifo's 8: readers wait out a writer \
             in pairs instead of one each, and each head writer is passed once, by at most \
             two readers.",
        ),
        (
            "batch 1",
            Policy::new().reader_wake_batch(1),
            "[R1] [W0] [R3] [W2] [R5] [W4] [R7] [W6]",
            "reader_wake_batch(1): a release grants at most 1 reader, so R1 alone passes \
             W0, R3 passes W2, and so on: 8 turns, as many as fifo's, each reader one \
             place ahead of the writer it queued behind. The batch bounds how many tasks \
             one release wakes (the kernel's 256); below 2 it also bounds the readers \
             that pass a writer.",
        ),
        (
            "fifo",
            Policy::fifo(),
            "[W0] [R1] [W2] [R3] [W4] [R5] [W6] [R7]",
            "Policy::fifo(), tokio's order: nobody passes a waiter queued before it, so a \
             reader shares the lock only with the readers queued right beside it (none \
             here): 8 turns, first come, first served.",
        ),
    ];
    for (name, policy, expected, why) in cases {
        let order = show(&grant_order(policy));
        println!("{name:8} {order}");
        println!("{}", wrap(why, 9, 88));
        // The reason printed above is only true of this order: if the lock's rules change,
        // this example must be told.
        assert_eq!(
            order, expected,
            "{name}: the lock's rules changed; update the example"
        );
    }
}
