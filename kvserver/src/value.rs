//! The values a key can hold (a string, a list, a hash, a set, a sorted set) and the changes
//! ([`Mutation`]) the aggregate commands make to them.
//!
//! A command on an aggregate decides, under its shard's write lock, the exact change it makes
//! (a `ZADD ... INCR` its resulting score, an `SPOP` the members it took): that change is the
//! log record (replayed by [`apply`] exactly as it ran), and applying it returns its inverse,
//! kept as undo information until the record is written. So a write to a large aggregate logs
//! and keeps only what it changed, never the whole value.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// A hash: its fields in insertion order, as Redis keeps a small (listpack) hash, so that
/// `HGETALL`, `HKEYS`, `HVALS` and `HSCAN` reply in Redis' order (a field set again keeps its
/// place; a deleted one leaves the others in order). Past [`ORDERED_HASH_MAX`] fields a
/// delete moves the last field into the hole instead (Redis' order of such a hash, a
/// hashtable, is unspecified anyway).
pub type Hash = indexmap::IndexMap<Vec<u8>, Vec<u8>>;

/// The most fields a hash keeps in insertion order through deletes (far above Redis'
/// `hash-max-listpack-entries`, 128 by default).
pub const ORDERED_HASH_MAX: usize = 4096;

/// A key's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Vec<u8>),
    List(VecDeque<Vec<u8>>),
    Hash(Hash),
    Set(HashSet<Vec<u8>>),
    ZSet(Box<ZSet>),
}

/// `-WRONGTYPE`, as Redis words it.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

impl Value {
    /// The name `TYPE` gives it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// The bytes of a string; `WRONGTYPE` for the other types.
    pub fn bytes(&self) -> Result<&[u8], String> {
        match self {
            Value::Str(v) => Ok(v),
            _ => Err(WRONGTYPE.into()),
        }
    }

    /// The list; `WRONGTYPE` for the other types.
    pub fn list(&self) -> Result<&VecDeque<Vec<u8>>, String> {
        match self {
            Value::List(l) => Ok(l),
            _ => Err(WRONGTYPE.into()),
        }
    }

    /// The hash; `WRONGTYPE` for the other types.
    pub fn hash(&self) -> Result<&Hash, String> {
        match self {
            Value::Hash(h) => Ok(h),
            _ => Err(WRONGTYPE.into()),
        }
    }

    /// The set; `WRONGTYPE` for the other types.
    pub fn set(&self) -> Result<&HashSet<Vec<u8>>, String> {
        match self {
            Value::Set(s) => Ok(s),
            _ => Err(WRONGTYPE.into()),
        }
    }

    /// The sorted set; `WRONGTYPE` for the other types.
    pub fn zset(&self) -> Result<&ZSet, String> {
        match self {
            Value::ZSet(z) => Ok(z),
            _ => Err(WRONGTYPE.into()),
        }
    }

    /// Whether it is an aggregate with no element left (such a key is deleted).
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }
}

/// A sorted set: member -> score, and (score, member) in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {
    scores: HashMap<Vec<u8>, f64>,
    order: BTreeSet<(ScoreKey, Vec<u8>)>,
}

/// A score as an ordered key (NaN never gets in: commands refuse it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScoreKey(u64);

impl ScoreKey {
    pub fn new(f: f64) -> ScoreKey {
        let f = if f == 0.0 { 0.0 } else { f }; // -0 and 0 compare equal, as in Redis
        let b = f.to_bits();
        ScoreKey(if b >> 63 == 1 { !b } else { b | (1 << 63) })
    }
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }
    /// Sets a member's score; returns the old one. A score of -0 is kept as 0, as Redis 7.0
    /// keeps it in a small (listpack) sorted set.
    pub fn insert(&mut self, member: Vec<u8>, score: f64) -> Option<f64> {
        let score = if score == 0.0 { 0.0 } else { score };
        let old = self.remove(&member);
        self.order.insert((ScoreKey::new(score), member.clone()));
        self.scores.insert(member, score);
        old
    }
    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (m, s) = self.scores.remove_entry(member)?;
        self.order.remove(&(ScoreKey::new(s), m));
        Some(s)
    }
    /// (member, score) in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.order.iter().map(|(_, m)| (&m[..], self.scores[m]))
    }
    /// The members whose scores lie in `lo..=hi` (each bound exclusive if its flag says so),
    /// ascending.
    pub fn range_by_score(
        &self,
        lo: f64,
        lo_ex: bool,
        hi: f64,
        hi_ex: bool,
    ) -> impl Iterator<Item = (&[u8], f64)> + '_ {
        let start = (ScoreKey::new(lo), Vec::new());
        self.order
            .range(start..)
            .map(|(_, m)| (&m[..], self.scores[m]))
            .filter(move |&(_, s)| !(lo_ex && s == lo))
            .take_while(move |&(_, s)| if hi_ex { s < hi } else { s <= hi })
    }
}

/// One deterministic change to a key's aggregate value, as logged and as undone.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    /// Push each item in turn at the head (`left`) or the tail.
    Push {
        left: bool,
        items: Vec<Vec<u8>>,
    },
    /// Remove `count` items from the head (`left`) or the tail.
    Pop {
        left: bool,
        count: u64,
    },
    HSet(Vec<(Vec<u8>, Vec<u8>)>),
    HDel(Vec<Vec<u8>>),
    /// The undo of an `HDel` of an ordered hash: the fields removed, each with the position
    /// it had when it was removed, in the order removed (put back in reverse). Never logged.
    HInsertAt(Vec<(usize, Vec<u8>, Vec<u8>)>),
    SAdd(Vec<Vec<u8>>),
    SRem(Vec<Vec<u8>>),
    /// Set each member's score.
    ZAdd(Vec<(f64, Vec<u8>)>),
    ZRem(Vec<Vec<u8>>),
}

impl Mutation {
    /// An empty value of the type this change applies to (for a key that does not exist).
    pub fn empty_value(&self) -> Value {
        match self {
            Mutation::Push { .. } | Mutation::Pop { .. } => Value::List(VecDeque::new()),
            Mutation::HSet(_) | Mutation::HDel(_) | Mutation::HInsertAt(_) => {
                Value::Hash(Hash::new())
            }
            Mutation::SAdd(_) | Mutation::SRem(_) => Value::Set(HashSet::new()),
            Mutation::ZAdd(_) | Mutation::ZRem(_) => Value::ZSet(Box::default()),
        }
    }
}

/// Applies `m` to `v` (which has the type `m` is for: the commands check it) and returns the
/// changes that undo it, to be applied in order. `None`: `v` is not of `m`'s type (a damaged
/// log; commands never ask for it).
pub fn apply(v: &mut Value, m: Mutation) -> Option<Vec<Mutation>> {
    let mut undo = Vec::new();
    match (v, m) {
        (Value::List(l), Mutation::Push { left, items }) => {
            let count = items.len() as u64;
            for it in items {
                if left {
                    l.push_front(it)
                } else {
                    l.push_back(it)
                }
            }
            undo.push(Mutation::Pop { left, count });
        }
        (Value::List(l), Mutation::Pop { left, count }) => {
            let mut items = Vec::new();
            for _ in 0..count {
                let it = if left { l.pop_front() } else { l.pop_back() };
                match it {
                    Some(it) => items.push(it),
                    None => break,
                }
            }
            items.reverse();
            undo.push(Mutation::Push { left, items });
        }
        (Value::Hash(h), Mutation::HSet(pairs)) => {
            let (mut back, mut gone) = (Vec::new(), Vec::new());
            for (f, val) in pairs {
                let fc = f.clone();
                match h.insert(f, val) {
                    Some(old) => back.push((fc, old)),
                    None => gone.push(fc),
                }
            }
            // Restore in reverse: a field set twice gets its first old value back last.
            back.reverse();
            undo.push(Mutation::HSet(back));
            undo.push(Mutation::HDel(gone));
        }
        (Value::Hash(h), Mutation::HDel(fields)) if h.len() <= ORDERED_HASH_MAX => {
            let back: Vec<_> = fields
                .into_iter()
                .filter_map(|f| h.shift_remove_full(&f))
                .collect();
            undo.push(Mutation::HInsertAt(back));
        }
        (Value::Hash(h), Mutation::HDel(fields)) => {
            let back: Vec<_> = fields
                .into_iter()
                .filter_map(|f| h.swap_remove_entry(&f))
                .collect();
            undo.push(Mutation::HSet(back));
        }
        (Value::Hash(h), Mutation::HInsertAt(items)) => {
            let mut fields = Vec::with_capacity(items.len());
            for (at, f, v) in items.into_iter().rev() {
                fields.push(f.clone());
                h.shift_insert(at.min(h.len()), f, v);
            }
            undo.push(Mutation::HDel(fields));
        }
        (Value::Set(s), Mutation::SAdd(members)) => {
            let mut added = Vec::new();
            for m in members {
                if !s.contains(&m) {
                    added.push(m.clone());
                    s.insert(m);
                }
            }
            undo.push(Mutation::SRem(added));
        }
        (Value::Set(s), Mutation::SRem(members)) => {
            let back: Vec<_> = members.into_iter().filter_map(|m| s.take(&m)).collect();
            undo.push(Mutation::SAdd(back));
        }
        (Value::ZSet(z), Mutation::ZAdd(pairs)) => {
            let (mut back, mut gone) = (Vec::new(), Vec::new());
            for (score, m) in pairs {
                let mc = m.clone();
                match z.insert(m, score) {
                    Some(old) => back.push((old, mc)),
                    None => gone.push(mc),
                }
            }
            back.reverse();
            undo.push(Mutation::ZAdd(back));
            undo.push(Mutation::ZRem(gone));
        }
        (Value::ZSet(z), Mutation::ZRem(members)) => {
            let back: Vec<_> = members
                .into_iter()
                .filter_map(|m| z.remove(&m).map(|s| (s, m)))
                .collect();
            undo.push(Mutation::ZAdd(back));
        }
        _ => return None,
    }
    Some(undo)
}

/// A double as Redis 7.0 prints it in replies (`%.17g`: 17 significant digits, trailing zeros
/// dropped; `inf`, `-inf`).
pub fn format_double(f: f64) -> String {
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.16e}", f); // d.dddddddddddddddde[-]x
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent");
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if !(-4..17).contains(&exp) {
        let d = digits.trim_end_matches('0');
        s.push_str(&d[..1]);
        if d.len() > 1 {
            s.push('.');
            s.push_str(&d[1..]);
        }
        s.push_str(&format!(
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        ));
    } else if exp < 0 {
        s.push_str("0.");
        for _ in 0..(-exp - 1) {
            s.push('0');
        }
        s.push_str(digits.trim_end_matches('0'));
    } else {
        let point = exp as usize + 1;
        s.push_str(&digits[..point]);
        let frac = digits[point..].trim_end_matches('0');
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
    }
    s
}

/// A double as Redis reads an argument (`string2d`: `strtod` over the whole argument, which
/// may not start with white space, be NaN, or overflow to infinity or underflow to zero).
/// Hexadecimal floats (`0x1p3`) are read, as `strtod` reads them.
pub fn parse_double(b: &[u8]) -> Option<f64> {
    let (f, n, erange) = strtod(b);
    let whole = !b.is_empty() && !is_c_space(b[0]) && n == b.len();
    (whole && !(erange && (f.is_infinite() || f == 0.0)) && !f.is_nan()).then_some(f)
}

/// A bound of a score range as Redis reads it (`zslParseRange`: `strtod`, nothing may
/// follow): leading white space is skipped, an empty bound is 0, an overflow is infinite.
pub fn parse_range_double(b: &[u8]) -> Option<f64> {
    let (f, n, _) = strtod(b);
    match n {
        0 => b.is_empty().then_some(0.0),
        n => (n == b.len() && !f.is_nan()).then_some(f),
    }
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// glibc's `strtod`: the value of the longest prefix of `b` (after white space) that reads as
/// a number (decimal, hexadecimal, `inf`, `infinity`, `nan`), the bytes it took (0: no
/// number), and whether the value was out of range (`ERANGE`: an overflow to infinity, an
/// underflow to zero).
pub fn strtod(b: &[u8]) -> (f64, usize, bool) {
    let mut i = b.iter().take_while(|&&c| is_c_space(c)).count();
    let neg = matches!(b.get(i), Some(b'-'));
    if matches!(b.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let sign = |f: f64| if neg { -f } else { f };
    let rest = &b[i..];
    let word =
        |w: &str| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w.as_bytes());
    if word("infinity") {
        return (sign(f64::INFINITY), i + 8, false);
    }
    if word("inf") {
        return (sign(f64::INFINITY), i + 3, false);
    }
    if word("nan") {
        let mut n = i + 3;
        // "nan(chars)"
        if b.get(n) == Some(&b'(') {
            let inner = b[n + 1..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_');
            let close = n + 1 + inner.count();
            if b.get(close) == Some(&b')') {
                n = close + 1;
            }
        }
        return (f64::NAN, n, false);
    }
    let digits = |from: usize, hex: bool| {
        b[from.min(b.len())..]
            .iter()
            .take_while(|c| {
                if hex {
                    c.is_ascii_hexdigit()
                } else {
                    c.is_ascii_digit()
                }
            })
            .count()
    };
    let hex = rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x';
    let m0 = if hex { i + 2 } else { i };
    let int = digits(m0, hex);
    let mut end = m0 + int;
    let mut frac = 0;
    if b.get(end) == Some(&b'.') {
        frac = digits(end + 1, hex);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        // "0x" with no digit after it reads as the 0 before the x
        return if hex {
            (sign(0.0), i + 1, false)
        } else {
            (0.0, 0, false)
        };
    }
    let mantissa = &b[m0..end];
    let mut exp: i64 = 0;
    let marker = if hex { b'p' } else { b'e' };
    if b.get(end).is_some_and(|c| c | 0x20 == marker) {
        let mut j = end + 1;
        let eneg = b.get(j) == Some(&b'-');
        if matches!(b.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        let n = digits(j, false);
        if n > 0 {
            let text = std::str::from_utf8(&b[j..j + n]).unwrap_or("0");
            exp = text
                .parse::<i64>()
                .unwrap_or(i64::MAX / 4)
                .min(i64::MAX / 4);
            if eneg {
                exp = -exp;
            }
            end = j + n;
        }
    }
    let nonzero = mantissa.iter().any(|c| c.is_ascii_hexdigit() && *c != b'0');
    let f = if hex {
        // Up to 30 hexadecimal digits (120 bits) exactly; the rest only moves the point.
        let mut m: u128 = 0;
        let mut shift: i64 = 0;
        let mut taken = 0;
        for (k, &c) in mantissa.iter().filter(|c| **c != b'.').enumerate() {
            let d = (c as char).to_digit(16).unwrap_or(0) as u128;
            let in_frac = k >= int;
            if taken < 30 {
                if m != 0 || d != 0 {
                    taken += 1;
                }
                m = m * 16 + d;
                if in_frac {
                    shift -= 4;
                }
            } else if !in_frac {
                shift += 4;
            }
        }
        let e = exp.saturating_add(shift).clamp(-4000, 4000) as i32;
        // 2^e in two steps, so that neither overflows on its own
        (m as f64) * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
    } else {
        let text = std::str::from_utf8(&b[i..end]).unwrap_or("0");
        text.parse::<f64>().unwrap_or(0.0)
    };
    let erange = f.is_infinite() || (f == 0.0 && nonzero);
    (sign(f), end, erange)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each checked against redis-server 7.0.15 (`ZADD z <text> m`, `ZCOUNT z <text> +inf`).
    #[test]
    fn doubles_read_as_redis_reads_them() {
        let inf = f64::INFINITY;
        for (text, arg, bound) in [
            ("1.5", Some(1.5), Some(1.5)),
            ("0x10", Some(16.0), Some(16.0)),
            ("0x1p3", Some(8.0), Some(8.0)),
            ("-0x1.8p1", Some(-3.0), Some(-3.0)),
            ("1e400", None, Some(inf)),
            ("-1e400", None, Some(-inf)),
            ("1e-400", None, Some(0.0)),
            ("0e-400", Some(0.0), Some(0.0)),
            (" 1", None, Some(1.0)),
            ("1 ", None, None),
            ("", None, Some(0.0)),
            ("   ", None, None),
            ("inf", Some(inf), Some(inf)),
            ("-Infinity", Some(-inf), Some(-inf)),
            ("nan", None, None),
            ("1e-310", Some(1e-310), Some(1e-310)),
            ("0x", None, None),
            (".5", Some(0.5), Some(0.5)),
            ("5.", Some(5.0), Some(5.0)),
            ("1e", None, None),
            ("+2e+2", Some(200.0), Some(200.0)),
        ] {
            assert_eq!(parse_double(text.as_bytes()), arg, "{text:?}");
            assert_eq!(
                parse_range_double(text.as_bytes()),
                bound,
                "{text:?} as a bound"
            );
        }
    }

    #[test]
    fn doubles_print_as_redis_does() {
        for (f, s) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (0.1, "0.10000000000000001"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e20, "1e+20"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (123456789.125, "123456789.125"),
            (3.0e-300, "3.0000000000000002e-300"),
        ] {
            assert_eq!(format_double(f), s, "{f}");
        }
    }

    /// A hash replies its fields in insertion order (a field set again keeps its place, a
    /// delete keeps the others' order), and undoing a delete puts the fields back where they
    /// were. (`PartialEq` of a hash ignores the order: compared here field by field.)
    #[test]
    fn hashes_keep_insertion_order_and_undo_restores_it() {
        let pairs = |s: &[(&str, &str)]| -> Vec<(Vec<u8>, Vec<u8>)> {
            s.iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect()
        };
        let order = |v: &Value| -> Vec<(String, String)> {
            v.hash()
                .unwrap()
                .iter()
                .map(|(f, v)| {
                    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    (s(f), s(v))
                })
                .collect()
        };
        let mut v = Value::Hash(Hash::new());
        apply(
            &mut v,
            Mutation::HSet(pairs(&[("a", "1"), ("b", "2"), ("c", "3")])),
        )
        .unwrap();
        apply(
            &mut v,
            Mutation::HSet(pairs(&[("d", "4"), ("b", "5"), ("e", "6")])),
        )
        .unwrap();
        let before = order(&v);
        assert_eq!(
            before,
            pairs_text(&[("a", "1"), ("b", "5"), ("c", "3"), ("d", "4"), ("e", "6")])
        );
        let del = |f: &[&str]| Mutation::HDel(f.iter().map(|f| f.as_bytes().to_vec()).collect());
        let undo = apply(&mut v, del(&["d", "a", "zz", "e"])).unwrap();
        assert_eq!(order(&v), pairs_text(&[("b", "5"), ("c", "3")]));
        for m in undo {
            apply(&mut v, m).unwrap();
        }
        assert_eq!(order(&v), before);
    }

    fn pairs_text(s: &[(&str, &str)]) -> Vec<(String, String)> {
        s.iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn undo_restores_every_mutation() {
        let mut h = Value::Hash(Hash::new());
        apply(&mut h, Mutation::HSet(vec![(b"a".to_vec(), b"1".to_vec())])).unwrap();
        let cases = [
            (
                Value::List(VecDeque::from(vec![b"x".to_vec(), b"y".to_vec()])),
                vec![
                    Mutation::Push {
                        left: true,
                        items: vec![b"a".to_vec(), b"b".to_vec()],
                    },
                    Mutation::Pop {
                        left: false,
                        count: 3,
                    },
                    Mutation::Pop {
                        left: true,
                        count: 9,
                    },
                ],
            ),
            (
                h,
                vec![
                    Mutation::HSet(vec![
                        (b"a".to_vec(), b"2".to_vec()),
                        (b"b".to_vec(), b"3".to_vec()),
                        (b"a".to_vec(), b"4".to_vec()),
                        (b"c".to_vec(), b"5".to_vec()),
                        (b"c".to_vec(), b"6".to_vec()),
                    ]),
                    Mutation::HDel(vec![b"a".to_vec(), b"z".to_vec()]),
                ],
            ),
            (
                Value::ZSet(Box::default()),
                vec![
                    Mutation::ZAdd(vec![(1.0, b"a".to_vec()), (2.0, b"b".to_vec())]),
                    Mutation::ZAdd(vec![(5.0, b"a".to_vec()), (6.0, b"a".to_vec())]),
                    Mutation::ZAdd(vec![(7.0, b"c".to_vec()), (8.0, b"c".to_vec())]),
                    Mutation::ZRem(vec![b"b".to_vec(), b"q".to_vec()]),
                ],
            ),
            (
                Value::Set(HashSet::new()),
                vec![
                    Mutation::SAdd(vec![b"a".to_vec(), b"a".to_vec(), b"b".to_vec()]),
                    Mutation::SRem(vec![b"a".to_vec(), b"c".to_vec()]),
                ],
            ),
        ];
        for (start, muts) in cases {
            let mut v = start.clone();
            let mut states = vec![v.clone()];
            let mut undos = Vec::new();
            for m in muts {
                undos.push(apply(&mut v, m).unwrap());
                states.push(v.clone());
            }
            states.pop();
            for u in undos.into_iter().rev() {
                for m in u {
                    apply(&mut v, m).unwrap();
                }
                assert_eq!(v, states.pop().unwrap());
            }
            assert_eq!(v, start);
        }
    }
}
