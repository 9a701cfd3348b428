//! `SORT` and `SORT_RO` (Redis' `sort.c`): the elements of a list, set or sorted set, sorted
//! numerically or (`ALPHA`) as strings, by themselves or by the keys a `BY` pattern names,
//! with `LIMIT`, `GET` patterns (`#` the element, `key*` a string, `key*->field` a hash field)
//! and `STORE` (the result as a list; an empty result deletes the destination).
//!
//! The whole command runs as one critical section: over every shard when a `BY` or `GET`
//! pattern may name any key, else over the shards of the key and the destination; its write
//! is one log record, as an `EXEC`'s.

use std::cmp::Ordering as Cmp;
use std::sync::Arc;

use super::{NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{Change, Entry, Shard};
use crate::value::{Value, WRONGTYPE};

struct Options<'a> {
    desc: bool,
    alpha: bool,
    /// `LIMIT offset count`.
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

fn parse<'a>(args: &'a Args, readonly: bool) -> Result<Options<'a>, &'static str> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit: None,
        by: None,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j].to_ascii_uppercase();
        match &a[..] {
            b"ASC" => o.desc = false,
            b"DESC" => o.desc = true,
            b"ALPHA" => o.alpha = true,
            b"LIMIT" if left >= 2 => {
                let (Some(off), Some(count)) = (parse_int(&args[j + 1]), parse_int(&args[j + 2]))
                else {
                    return Err(NOT_INT);
                };
                o.limit = Some((off, count));
                j += 2;
            }
            b"STORE" if left >= 1 && !readonly => {
                o.store = Some(&args[j + 1]);
                j += 1;
            }
            b"BY" if left >= 1 => {
                o.by = Some(&args[j + 1]);
                j += 1;
            }
            b"GET" if left >= 1 => {
                o.gets.push(&args[j + 1]);
                j += 1;
            }
            _ => return Err(SYNTAX),
        }
        j += 1;
    }
    Ok(o)
}

/// The key (and hash field) a pattern names for element `subst`; `None` if the pattern has no
/// `*` (a constant names nothing).
fn pattern_key(pattern: &[u8], subst: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&p| p + 2 < after.len());
    let (suffix, field) = match arrow {
        Some(p) => (&after[..p], Some(after[p + 2..].to_vec())),
        None => (after, None),
    };
    let key = [&pattern[..star], subst, suffix].concat();
    Some((key, field))
}

/// What a `BY` or `GET` pattern finds for element `elem` (`#`: the element itself).
async fn lookup<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    pattern: &[u8],
    elem: &[u8],
) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(elem.to_vec());
    }
    let (key, field) = pattern_key(pattern, elem)?;
    shared
        .store
        .read(&key, |v| match (v?, field) {
            (Value::Str(s), None) => Some(s.clone()),
            (Value::Hash(h), Some(f)) => h.get(&f).cloned(),
            _ => None,
        })
        .await
}

/// A string read as `SORT` reads it: C's `strtod` over the whole of it (an empty one is 0),
/// `None` if it is not a number, is NaN or is out of range.
fn score(s: &[u8]) -> Option<f64> {
    let (v, n, erange) = crate::value::strtod(s);
    let whole = if n == 0 { s.is_empty() } else { n == s.len() };
    (whole && !erange && !v.is_nan()).then_some(v)
}

struct Item {
    elem: Vec<u8>,
    score: f64,
    by: Option<Vec<u8>>,
}

/// Runs `SORT` or `SORT_RO` (the dispatcher checked the arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let o = match parse(args, name == b"SORT_RO") {
        Ok(o) => o,
        Err(e) => return resp::error(out, e),
    };
    let store = &shared.store;
    let patterns = o.by.is_some_and(|b| b.contains(&b'*')) || !o.gets.is_empty();
    let shards: Vec<usize> = if patterns {
        (0..store.shard_count()).collect()
    } else {
        store.shards_of(std::iter::once(&args[1][..]).chain(o.store))
    };
    if let Some(dst) = o.store {
        // Before it runs, as for every write: the watchers of the destination.
        shared.watches.touch(std::iter::once(dst));
        shared.raw_strings.forget(Some(std::iter::once(dst)));
    }
    let mut inner_seq = 0;
    let before = out.len();
    let done = store
        .transaction(
            &shards,
            false,
            sort(shared, &args[1], &o, out, &mut inner_seq),
        )
        .await;
    match done {
        Ok(((), record)) if record != 0 => *seq = record,
        Ok(_) => {}
        Err(e) => {
            out.truncate(before);
            resp::error(out, &e)
        }
    }
}

async fn sort<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    key: &[u8],
    o: &Options<'_>,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let start_len = out.len();
    // The elements, in the value's own order (a sorted set's by score).
    let (elems, kind) = match shared
        .store
        .read(key, |v| match v {
            None => Ok((Vec::new(), "list")),
            Some(Value::List(l)) => Ok((l.iter().cloned().collect(), "list")),
            Some(Value::Set(s)) => Ok((s.iter().cloned().collect(), "set")),
            Some(Value::ZSet(z)) => Ok((z.iter().map(|(m, _)| m.to_vec()).collect(), "zset")),
            Some(_) => Err(()),
        })
        .await
    {
        Ok(x) => x,
        Err(()) => return resp::error(out, WRONGTYPE),
    };
    let mut by = o.by;
    let mut alpha = o.alpha;
    let mut dontsort = by.is_some_and(|b| !b.contains(&b'*'));
    if dontsort && kind == "set" && o.store.is_some() {
        // A set stored unsorted would depend on its hash order: sorted as strings instead.
        dontsort = false;
        alpha = true;
        by = None;
    }
    let len = elems.len() as i64;
    let (off, count) = o.limit.unwrap_or((0, -1));
    let mut start = off.max(0).min(len);
    let count = count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    let mut items: Vec<Item> = elems
        .into_iter()
        .map(|elem| Item {
            elem,
            score: 0.0,
            by: None,
        })
        .collect();
    if dontsort {
        if o.desc && kind != "set" {
            items.reverse();
        }
    } else {
        let mut bad = false;
        for it in items.iter_mut() {
            let val = match by {
                Some(p) => match lookup(shared, p, &it.elem).await {
                    Some(v) => Some(v),
                    None => continue,
                },
                None => None,
            };
            if alpha {
                it.by = val;
            } else {
                match score(val.as_deref().unwrap_or(&it.elem)) {
                    Some(s) => it.score = s,
                    None => bad = true,
                }
            }
        }
        if bad {
            return resp::error(out, "ERR One or more scores can't be converted into double");
        }
        let bypattern = by.is_some();
        items.sort_by(|a, b| {
            let c = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Cmp::Equal)
                    .then_with(|| a.elem.cmp(&b.elem))
            } else if bypattern {
                a.by.cmp(&b.by) // a missing value (None) sorts first
            } else {
                a.elem.cmp(&b.elem)
            };
            if o.desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    let picked: &[Item] = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    let mut result: Vec<Option<Vec<u8>>> = Vec::new();
    for it in picked {
        if o.gets.is_empty() {
            result.push(Some(it.elem.clone()));
        }
        for g in &o.gets {
            result.push(lookup(shared, g, &it.elem).await);
        }
    }
    let Some(dst) = o.store else {
        resp::array_header(out, result.len());
        for r in &result {
            resp::opt_bulk(out, r.as_deref());
        }
        return;
    };
    let n = result.len();
    let change = if n == 0 {
        Change::Del
    } else {
        Change::Put(Entry {
            value: Value::List(result.into_iter().map(Option::unwrap_or_default).collect()),
            expire_at: 0,
        })
    };
    match shared.store.update(dst, seq, |_, _| Ok((change, ()))).await {
        Ok(()) => resp::integer(out, n as i64),
        Err(e) => {
            out.truncate(start_len);
            resp::error(out, &e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert_eq!(pattern_key(b"w_*", b"3"), Some((b"w_3".to_vec(), None)));
        assert_eq!(
            pattern_key(b"h*->f", b"1"),
            Some((b"h1".to_vec(), Some(b"f".to_vec())))
        );
        // An arrow with nothing after it is part of the key name.
        assert_eq!(pattern_key(b"h*->", b"1"), Some((b"h1->".to_vec(), None)));
        assert_eq!(pattern_key(b"nosort", b"1"), None);
    }

    #[test]
    fn scores_read_as_strtod() {
        assert_eq!(score(b" 1.5"), Some(1.5));
        assert_eq!(score(b""), Some(0.0));
        assert_eq!(score(b"1x"), None);
        assert_eq!(score(b"nan"), None);
        assert_eq!(score(b"-inf"), Some(f64::NEG_INFINITY));
    }
}
