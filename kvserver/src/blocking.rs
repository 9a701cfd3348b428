//! Clients blocked on keys (`BLPOP`, `BLMOVE`, `BZPOPMIN`, ...), as Redis' `blocked.c` keeps
//! them: per key, the clients waiting for it in the order they blocked.
//!
//! A blocking command that finds nothing to take registers a [`Waiter`] on each of its keys
//! and hands the connection a [`Blocked`], which waits for the reply without holding any
//! lock. A write command that ran on a key with waiters marks the key ready ([`Blocking::signal`]);
//! when that command is over (after `EXEC`, for one inside a transaction), its connection
//! serves the ready keys (`commands::blocking::serve_ready`): for each, the first waiter is
//! claimed, its command runs again in its non-blocking form on its behalf (with its protocol),
//! and the reply, with the log record it depends on, goes to the blocked connection; then the
//! next waiter, until the key has nothing left to take. So the clients blocked on a key are
//! served first blocked, first served, before the writer's next command runs.
//!
//! A waiter is claimed by taking its reply channel, under the registry's lock: whoever takes it
//! (a server, the waiter's own timeout, its connection going away) is the only one that may
//! answer it. This module knows no store: it only keeps the queues.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::oneshot;

use crate::resp::Args;

/// A reply for a blocked client: its bytes and the log record it depends on (0: none; see
/// [`crate::commands::READ`]).
pub struct Reply {
    pub out: Vec<u8>,
    pub seq: u64,
}

/// One blocked client's command.
pub struct Waiter {
    /// The client's id (`CLIENT UNBLOCK`).
    pub client_id: u64,
    /// Its protocol (2 or 3), for the reply a server encodes for it.
    pub resp: u8,
    /// The blocking command as it was sent.
    pub args: Args,
    /// The keys it waits for (distinct).
    pub keys: Vec<Vec<u8>>,
    /// When it times out (`None`: never).
    pub deadline: Option<Instant>,
    /// Taken by whoever answers it.
    reply: Mutex<Option<oneshot::Sender<Reply>>>,
}

impl Waiter {
    /// The reply of a timeout (or `CLIENT UNBLOCK ... TIMEOUT`): a null array, as Redis sends
    /// for every blocking list and sorted-set command.
    pub fn timeout_reply(&self) -> Vec<u8> {
        if self.resp == 3 {
            b"_\r\n".to_vec()
        } else {
            b"*-1\r\n".to_vec()
        }
    }

    /// Whether its deadline is past.
    pub fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

#[derive(Default)]
struct Inner {
    /// The waiters of each key, first blocked first.
    keys: HashMap<Vec<u8>, VecDeque<Arc<Waiter>>>,
    /// Keys written since they were last served, in the order written.
    ready: VecDeque<Vec<u8>>,
    ready_set: HashSet<Vec<u8>>,
}

/// The registry of blocked clients (one per server).
#[derive(Default)]
pub struct Blocking {
    /// The number of blocked clients (`INFO clients`' `blocked_clients`).
    count: AtomicUsize,
    inner: Mutex<Inner>,
}

/// A claim on a waiter: the right to answer it.
pub struct Claim {
    pub waiter: Arc<Waiter>,
    tx: oneshot::Sender<Reply>,
}

impl Claim {
    /// Claims `w` unless somebody claimed it already.
    fn take(w: &Arc<Waiter>) -> Option<Claim> {
        let tx = w.reply.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        Some(Claim {
            waiter: w.clone(),
            tx,
        })
    }
}

impl Blocking {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any client is blocked (a relaxed load: writes check it before anything else).
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// The number of blocked clients.
    pub fn blocked_clients(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Registers a blocked command; the connection waits on the returned handle. Its keys are
    /// marked ready at once, so that a write that ran between the command's attempt and now
    /// is not missed (the caller serves them next).
    pub fn block(
        self: &Arc<Self>,
        client_id: u64,
        resp: u8,
        args: Args,
        keys: Vec<Vec<u8>>,
        deadline: Option<Instant>,
    ) -> Blocked {
        let (tx, rx) = oneshot::channel();
        let mut distinct: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        for k in keys {
            if !distinct.contains(&k) {
                distinct.push(k);
            }
        }
        let waiter = Arc::new(Waiter {
            client_id,
            resp,
            args,
            keys: distinct,
            deadline,
            reply: Mutex::new(Some(tx)),
        });
        let mut inner = self.lock();
        for k in &waiter.keys {
            inner
                .keys
                .entry(k.clone())
                .or_default()
                .push_back(waiter.clone());
            if inner.ready_set.insert(k.clone()) {
                inner.ready.push_back(k.clone());
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        drop(inner);
        Blocked {
            registry: self.clone(),
            waiter,
            rx,
            timed_out: false,
        }
    }

    /// After a write to `keys`: marks those that have waiters ready.
    pub fn signal<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let mut inner = self.lock();
        for k in keys {
            if inner.keys.contains_key(k) && !inner.ready_set.contains(k) {
                inner.ready_set.insert(k.to_vec());
                inner.ready.push_back(k.to_vec());
            }
        }
    }

    /// Whether a key is marked ready.
    pub fn has_ready(&self) -> bool {
        self.any() && !self.lock().ready.is_empty()
    }

    /// The next ready key, unmarked.
    pub fn next_ready(&self) -> Option<Vec<u8>> {
        let mut inner = self.lock();
        let k = inner.ready.pop_front()?;
        inner.ready_set.remove(&k);
        Some(k)
    }

    /// Claims the first waiter of `key` that nobody has claimed yet.
    pub fn claim_first(&self, key: &[u8]) -> Option<Claim> {
        let inner = self.lock();
        inner.keys.get(key)?.iter().find_map(Claim::take)
    }

    /// Claims the waiter of client `id` (`CLIENT UNBLOCK`).
    pub fn claim_client(&self, id: u64) -> Option<Claim> {
        let inner = self.lock();
        let mut mine = inner.keys.values().flatten();
        mine.find_map(|w| (w.client_id == id).then(|| Claim::take(w)).flatten())
    }

    /// Answers a claimed waiter and removes it from every queue.
    pub fn answer(&self, claim: Claim, reply: Reply) {
        self.remove(&claim.waiter);
        let _ = claim.tx.send(reply);
    }

    /// Gives a claim back unanswered (the key had nothing for it after all): the waiter keeps
    /// its place. One whose deadline passed meanwhile gets its timeout reply instead (its own
    /// timer found it claimed and now waits for an answer).
    pub fn release(&self, claim: Claim) {
        if claim.waiter.expired() {
            let out = claim.waiter.timeout_reply();
            return self.answer(claim, Reply { out, seq: 0 });
        }
        *claim.waiter.reply.lock().unwrap_or_else(|e| e.into_inner()) = Some(claim.tx);
    }

    /// Whether the claimed waiter's connection is gone (its reply would be lost).
    pub fn abandoned(claim: &Claim) -> bool {
        claim.tx.is_closed()
    }

    /// Drops an abandoned claim, removing its waiter.
    pub fn discard(&self, claim: Claim) {
        self.remove(&claim.waiter);
    }

    fn remove(&self, w: &Arc<Waiter>) {
        let mut inner = self.lock();
        let mut found = false;
        for k in &w.keys {
            if let Some(q) = inner.keys.get_mut(k) {
                let before = q.len();
                q.retain(|x| !Arc::ptr_eq(x, w));
                found |= q.len() != before;
                if q.is_empty() {
                    inner.keys.remove(k);
                }
            }
        }
        if found {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A connection's blocked command: waits for its reply (served or timed out). Dropped (the
/// client went away), it leaves the queues.
pub struct Blocked {
    registry: Arc<Blocking>,
    waiter: Arc<Waiter>,
    rx: oneshot::Receiver<Reply>,
    /// The deadline passed while a server had it claimed: the server answers it.
    timed_out: bool,
}

impl Blocked {
    /// The reply. Cancel-safe: the connection polls it among its other events.
    pub async fn wait(&mut self) -> Reply {
        loop {
            let deadline = self.waiter.deadline.filter(|_| !self.timed_out);
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = &mut self.rx => match r {
                    Ok(reply) => return reply,
                    // The sender is only dropped after it answered or by `remove`, which
                    // only runs for answered or abandoned waiters.
                    Err(_) => return Reply { out: self.waiter.timeout_reply(), seq: 0 },
                },
                _ = sleep => {
                    let tx = self.waiter.reply.lock().unwrap_or_else(|e| e.into_inner()).take();
                    match tx {
                        Some(_) => {
                            self.registry.remove(&self.waiter);
                            return Reply { out: self.waiter.timeout_reply(), seq: 0 };
                        }
                        // Claimed: the server answers, with the reply or the timeout.
                        None => self.timed_out = true,
                    }
                }
            }
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // Taken first: a server that has not claimed it yet never will.
        self.waiter
            .reply
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        self.registry.remove(&self.waiter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    /// Waiters are claimed in the order they blocked; a released claim keeps its place; a
    /// dropped handle leaves every queue and the count.
    #[tokio::test]
    async fn waiters_are_claimed_first_blocked_first() {
        let reg = Arc::new(Blocking::default());
        let mut a = reg.block(1, 2, vec![], vec![key("k"), key("j")], None);
        let b = reg.block(2, 2, vec![], vec![key("k")], None);
        assert_eq!(reg.blocked_clients(), 2);
        assert_eq!(reg.next_ready(), Some(key("k")));
        assert_eq!(reg.next_ready(), Some(key("j")));
        assert_eq!(reg.next_ready(), None);
        let c = reg.claim_first(b"k").unwrap();
        assert_eq!(c.waiter.client_id, 1);
        // Claimed: the next claim gets the second.
        let c2 = reg.claim_first(b"k").unwrap();
        assert_eq!(c2.waiter.client_id, 2);
        reg.release(c2);
        reg.answer(
            c,
            Reply {
                out: b"+x\r\n".to_vec(),
                seq: 7,
            },
        );
        let r = a.wait().await;
        assert_eq!((r.out, r.seq), (b"+x\r\n".to_vec(), 7));
        assert_eq!(reg.blocked_clients(), 1);
        assert!(reg.claim_first(b"j").is_none());
        reg.signal([&b"k"[..], b"j"].into_iter());
        assert_eq!(reg.next_ready(), Some(key("k")));
        assert_eq!(reg.next_ready(), None);
        drop(b);
        assert_eq!(reg.blocked_clients(), 0);
        assert!(reg.claim_first(b"k").is_none());
        assert!(!reg.any());
    }

    /// A deadline that passes unclaimed gives the timeout reply and leaves the queue; one
    /// that passes while claimed waits for the server, which answers with the timeout when it
    /// gives the claim back.
    #[tokio::test]
    async fn timeouts_answer_once() {
        let reg = Arc::new(Blocking::default());
        let soon = Some(Instant::now() + std::time::Duration::from_millis(5));
        let mut a = reg.block(1, 2, vec![], vec![key("k")], soon);
        assert_eq!(a.wait().await.out, b"*-1\r\n");
        assert_eq!(reg.blocked_clients(), 0);
        let mut b = reg.block(2, 3, vec![], vec![key("k")], soon);
        let claim = reg.claim_first(b"k").unwrap();
        let waiting = tokio::spawn(async move { b.wait().await.out });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        reg.release(claim);
        assert_eq!(waiting.await.unwrap(), b"_\r\n");
        assert_eq!(reg.blocked_clients(), 0);
    }
}
