use super::shard::{MAP_SPLIT, MAX_BITS};
use super::*;
use crate::value::Value;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::sync::Arc;

/// Issue 30: when the log refuses an `EXEC`'s record (it started refusing while the
/// transaction's commands ran), every change of the transaction is undone before its
/// locks go: a reader waiting for them sees none of it, the transaction gets the log's
/// error, and a store reopened on the directory has none of it either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_whose_record_the_log_refuses_is_undone_before_its_locks_go() {
    let dir = std::env::temp_dir().join(format!(
        "kvserver-txn-refused-{}-{}",
        std::process::id(),
        now_ms()
    ));
    let persistence = Persistence {
        dir: dir.clone(),
        fsync: Fsync::Everysec,
        io: LogIo::Direct,
    };
    let open = || {
        Store::<lock_adapters::Rwsem<Shard>>::open(4, Some(&persistence))
            .unwrap()
            .0
    };
    let opts = SetOpts {
        expiry: Expiry::None,
        nx: false,
        xx: false,
        get: false,
    };
    let store = Arc::new(open());
    let keys: Vec<Vec<u8>> = (0..16).map(|i| format!("k{i}").into_bytes()).collect();
    let mut seq = 0;
    for k in &keys {
        store
            .set(k.clone(), b"1".to_vec(), opts, &mut seq)
            .await
            .unwrap();
    }
    store.log().unwrap().wait(seq).await.unwrap();
    let everything = |store: Arc<Store<lock_adapters::Rwsem<Shard>>>| async move {
        let mut all = Vec::new();
        for k in [&b"k0"[..], b"k7", b"k9", b"k15", b"fresh"] {
            all.push(store.get(k, |v| v.map(<[u8]>::to_vec)).await.unwrap());
        }
        (all, store.dbsize().await)
    };
    let before = everything(store.clone()).await;

    let mut named: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    named.push(b"fresh");
    let shards = store.shards_of(named.into_iter());
    let (running, started) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn({
        let store = store.clone();
        async move {
            started.await.unwrap();
            everything(store).await
        }
    });
    let result = store
        .transaction(&shards, false, async {
            let mut s = 0;
            for k in &keys[..8] {
                store
                    .set(k.clone(), b"new".to_vec(), opts, &mut s)
                    .await
                    .unwrap();
            }
            store
                .set(b"fresh".to_vec(), b"x".to_vec(), opts, &mut s)
                .await
                .unwrap();
            assert_eq!(store.incr_by(b"k9", 5, &mut s).await, Ok(6));
            assert_eq!(store.del(&keys[14..], &mut s).await, Ok(2));
            // A reader queues for the shards; then the log starts refusing.
            running.send(()).unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            store.log().unwrap().refuse_for_test();
        })
        .await;
    let e = result.unwrap_err();
    assert!(e.starts_with("MISCONF"), "{e}");
    assert_eq!(
        reader.await.unwrap(),
        before,
        "a reader waiting for the locks"
    );
    assert_eq!(
        everything(store.clone()).await,
        before,
        "after the transaction"
    );

    drop(store);
    let store = Arc::new(open());
    assert_eq!(everything(store.clone()).await, before, "after a reopen");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A shard's maps, one after another, are in hash order: iterating from any hash gives
/// exactly the shard's hashes at or above it, ascending, whatever the number of shards
/// (and so of splits), and a start outside the shard's range gives all or none.
#[test]
fn a_shards_maps_iterate_in_hash_order() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(30);
    for shards in [1, 3, 4, 5, 64, 4096] {
        let mut all: Vec<Shard> = (0..shards).map(|i| Shard::new(i, shards)).collect();
        let mut hashes: Vec<Vec<u64>> = vec![Vec::new(); shards];
        for n in 0..3000u64 {
            let h = match n % 3 {
                0 => rng.gen(),
                1 => rng.gen::<u64>() >> rng.gen_range(0..64),
                _ => u64::MAX - (rng.gen::<u64>() >> rng.gen_range(0..64)),
            };
            let i = (((h as u128) * shards as u128) >> 64) as usize; // as shard_of
            let entry = Entry {
                value: Value::Str(Vec::new()),
                expire_at: 0,
            };
            if all[i].insert(h, &n.to_le_bytes(), entry).is_none() {
                hashes[i].push(h);
            }
        }
        for (i, shard) in all.iter().enumerate() {
            let mut want = hashes[i].clone();
            want.sort_unstable();
            let mut starts = vec![0, u64::MAX, rng.gen()];
            starts.extend(
                want.iter()
                    .step_by(97)
                    .flat_map(|&h| [h, h.wrapping_add(1)]),
            );
            for from in starts {
                let got: Vec<u64> = shard.iter_from(from).map(|(h, _, _)| h).collect();
                let expect: Vec<u64> = want.iter().copied().filter(|&h| h >= from).collect();
                assert_eq!(got, expect, "{shards} shards, shard {i}, from {from:#x}");
            }
        }
    }
}

/// The directory of a shard's maps after many splits, dense and skewed (hashes crowded
/// near both ends of the range, which splits the same maps over and over): every map of
/// depth d has exactly its 2^(bits - d) aligned entries of `dir`, holds only hashes of
/// that prefix and at most `MAP_SPLIT` of them (unless at `MAX_BITS`, which the hashes
/// crowded near 0 reach); every key is found, short and long, and removals leave
/// the rest found.
#[test]
fn a_shards_maps_split_into_a_consistent_directory() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(31);
    for shards in [1, 3, 4] {
        let mut shard = Shard::new(0, shards);
        let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
        for n in 0..20_000u64 {
            let h = match n % 3 {
                0 => rng.gen::<u64>() / shards as u64,
                1 => (rng.gen::<u64>() >> rng.gen_range(0..64)) / shards as u64,
                // The same hash for two keys now and then: a slot's `more`.
                _ => keys.last().map_or(0, |k| k.0),
            };
            // 8 to 32 bytes: kept in the slot up to `SlotKey::INLINE`, on the heap beyond.
            let key = n.to_le_bytes().repeat(1 + n as usize % 4);
            let entry = Entry {
                value: Value::Str(key.clone()),
                expire_at: 0,
            };
            assert!(shard.insert(h, &key, entry).is_none());
            keys.push((h, key));
        }
        let check = |shard: &Shard, keys: &[(u64, Vec<u8>)]| {
            assert_eq!(shard.dir.len(), 1 << shard.bits);
            let mut i = 0;
            while i < shard.dir.len() {
                let m = shard.dir[i] as usize;
                let (map, d) = &shard.maps[m];
                let span = 1usize << (shard.bits - d);
                assert_eq!(i % span, 0, "map {m} of depth {d} at {i}");
                assert!(shard.dir[i..i + span].iter().all(|&x| x as usize == m));
                assert!(map.len() <= MAP_SPLIT || *d == MAX_BITS);
                for &h in map.keys() {
                    assert_eq!(Shard::prefix(shard.position(h), *d), i / span);
                }
                i += span;
            }
            let listed: usize = shard.maps.iter().map(|(m, _)| m.len()).sum();
            let slots: HashSet<u64> = keys.iter().map(|k| k.0).collect();
            assert_eq!(listed, slots.len(), "each map listed once in dir");
            assert_eq!(shard.len, keys.len());
            for (h, key) in keys {
                let e = shard.get(*h, key).expect("every key is found");
                assert_eq!(e.value.bytes().unwrap(), &key[..]);
            }
            let order: Vec<u64> = shard.iter_from(0).map(|(h, _, _)| h).collect();
            let mut want: Vec<u64> = keys.iter().map(|k| k.0).collect();
            want.sort_unstable();
            assert_eq!(order, want);
        };
        assert_eq!(
            shard.bits, MAX_BITS,
            "{shards} shards: the crowded hashes reach the cap"
        );
        check(&shard, &keys);
        let mut kept = Vec::new();
        for (n, (h, key)) in keys.into_iter().enumerate() {
            if n % 2 == 0 {
                assert!(shard.remove(h, &key).is_some());
            } else {
                kept.push((h, key));
            }
        }
        check(&shard, &kept);
    }
}

/// The memory estimate is kept exactly through every kind of change (whole values set and
/// replaced, changes to aggregates and their inverses, deletes): after a random run it equals
/// the cost of the entries counted afresh, and an emptied shard is back at zero.
#[test]
fn the_memory_estimate_follows_every_change_exactly() {
    use crate::value::Mutation;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(42);
    let mut shard = Shard::new(0, 1);
    let recount = |s: &Shard| -> usize {
        s.entries()
            .map(|(_, k, e)| super::evict::entry_cost(k, e))
            .sum()
    };
    let bytes = |rng: &mut rand::rngs::SmallRng| -> Vec<u8> {
        let n = rng.gen_range(0..60);
        (0..n).map(|_| rng.gen_range(b'a'..b'e')).collect()
    };
    let mut keys: Vec<Vec<u8>> = (0..40)
        .map(|i| format!("key-{i}-{}", "x".repeat(i % 30)).into_bytes())
        .collect();
    keys.push(Vec::new());
    let mut inverses: Vec<(u64, Vec<u8>, Vec<Mutation>)> = Vec::new();
    for step in 0..20_000 {
        let key = &keys[rng.gen_range(0..keys.len())];
        let h = {
            let mut s = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hasher::write(&mut s, key);
            std::hash::Hasher::finish(&s)
        };
        let kind = rng.gen_range(0..4);
        let items: Vec<Vec<u8>> = (0..rng.gen_range(0..5)).map(|_| bytes(&mut rng)).collect();
        let m = match (kind, rng.gen_range(0..2)) {
            (0, 0) => Mutation::Push {
                left: rng.gen(),
                items,
            },
            (0, _) => Mutation::Pop {
                left: rng.gen(),
                count: rng.gen_range(0..4),
            },
            (1, 0) => Mutation::HSet(items.iter().map(|f| (f.clone(), bytes(&mut rng))).collect()),
            (1, _) => Mutation::HDel(items),
            (2, 0) => Mutation::SAdd(items),
            (2, _) => Mutation::SRem(items),
            (_, 0) => Mutation::ZAdd(
                items
                    .into_iter()
                    .map(|m| (rng.gen_range(0..5) as f64, m))
                    .collect(),
            ),
            (_, _) => Mutation::ZRem(items),
        };
        match rng.gen_range(0..10) {
            0 => {
                shard.insert(
                    h,
                    key,
                    Entry {
                        value: Value::Str(bytes(&mut rng)),
                        expire_at: 0,
                    },
                );
            }
            1 => {
                shard.remove(h, key);
            }
            2 => {
                // An inverse applied later, as an undo applies it.
                if let Some((h, key, ops)) = inverses.pop() {
                    for op in ops {
                        shard.apply(h, &key, op);
                    }
                }
            }
            _ => {
                let fits = shard.peek(h, key).is_some_and(|e| {
                    std::mem::discriminant(&e.value) == std::mem::discriminant(&m.empty_value())
                });
                if !fits {
                    shard.insert(
                        h,
                        key,
                        Entry {
                            value: m.empty_value(),
                            expire_at: 0,
                        },
                    );
                }
                let inverse = shard.apply(h, key, m).expect("same type");
                if rng.gen_range(0..3) == 0 {
                    inverses.push((h, key.clone(), inverse));
                }
            }
        }
        if step % 1000 == 0 {
            assert_eq!(shard.mem, recount(&shard), "step {step}");
        }
    }
    assert_eq!(shard.mem, recount(&shard));
    assert!(shard.mem > 0);
    for key in &keys {
        let mut s = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hasher::write(&mut s, key);
        shard.remove(std::hash::Hasher::finish(&s), key);
    }
    assert_eq!(shard.mem, 0, "every entry deleted");
    keys.clear();
}
