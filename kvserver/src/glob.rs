//! Redis-style glob matching for `KEYS`, `SCAN MATCH` and `CONFIG GET`, with Redis' own rules
//! (`stringmatchlen` in Redis' `util.c`), byte-wise:
//!
//! - `*` any run of bytes, `?` one byte, `\x` the byte `x`;
//! - `[...]` one byte from a class: `^` first negates it; `\x` is `x`; `a-z` is a range (its
//!   ends may be given in either order, and the end can be any byte, `]` included: `[a-]`
//!   is the range from `]` to `a`, and the class goes on after it); a `]` right after `[` (or
//!   `[^`) closes an empty class; a class that never closes takes the rest of the pattern;
//! - an empty text matches only the empty pattern (callers treat a lone `*` as "everything").
//! - a pattern with more than 1000 runs of `*` followed by more pattern matches nothing, as
//!   Redis' recursive matcher gives up at that depth.
//!
//! Matching is iterative with a single backtrack point for the last `*` (every other token
//! matches exactly one byte, so this is exact), so a hostile pattern such as `*a*a*a*a*b`
//! cannot take exponential time (it is O(pattern × text) at worst).

/// Redis' matcher recurses once per `*` that more pattern follows and gives up (no match)
/// deeper than this.
const MAX_NESTING: usize = 1000;

/// Whether `text` matches the glob `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    if text.is_empty() {
        return pattern.is_empty();
    }
    if star_groups(pattern) > MAX_NESTING {
        // Every match passes each of them: Redis finds none.
        return false;
    }
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the last '*': (pattern index after the star, text index).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            let (hit, next) = match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => (true, p + 1),
                b'[' => class(pattern, p, text[t]),
                b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == text[t], p + 2),
                c => (c == text[t], p + 1),
            };
            if hit {
                p = next;
                t += 1;
                continue;
            }
        }
        // mismatch: let the last star swallow one more byte
        match star {
            Some((sp, st)) => {
                star = Some((sp, st + 1));
                p = sp;
                t = st + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The runs of `*` that some other pattern byte follows (a lone trailing run ends the match
/// at once in Redis, without recursing). Counted roughly as Redis scans: a `*` escaped by `\\`
/// or inside a class is not one.
fn star_groups(pattern: &[u8]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < pattern.len() {
        match pattern[i] {
            b'\\' => i += 2,
            b'[' => i = class(pattern, i, 0).1,
            b'*' => {
                while i < pattern.len() && pattern[i] == b'*' {
                    i += 1;
                }
                if i < pattern.len() {
                    n += 1;
                }
            }
            _ => i += 1,
        }
    }
    n
}

/// Matches byte `c` against the class starting at `pattern[p] == b'['`, read as Redis reads
/// it; returns whether it matched and the index after the class.
fn class(pattern: &[u8], p: usize, c: u8) -> (bool, usize) {
    let len = pattern.len();
    let mut i = p + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    loop {
        if i >= len {
            // unterminated: the class took the rest of the pattern
            return (hit != negate, len);
        }
        let b = pattern[i];
        if b == b'\\' && len - i >= 2 {
            hit |= pattern[i + 1] == c;
            i += 2;
        } else if b == b']' {
            return (hit != negate, i + 1);
        } else if len - i >= 3 && pattern[i + 1] == b'-' {
            let (mut lo, mut hi) = (b, pattern[i + 2]);
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            hit |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            hit |= b == c;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn past_redis_nesting_limit_nothing_matches() {
        let text = vec![b'a'; 3000];
        let deep = b"*?".repeat(1001);
        assert!(!matches(&deep, &text));
        // 1000 groups are within the limit; a trailing star is no group.
        let within = [b"*?".repeat(1000), b"*".to_vec()].concat();
        assert!(matches(&within, &text));
        // Escaped stars and stars in a class are not groups.
        let escaped = [b"\\*".repeat(1001), b"x".to_vec()].concat();
        let star_text = [b"*".repeat(1001), b"x".to_vec()].concat();
        assert!(matches(&escaped, &star_text));
    }

    #[test]
    fn basics() {
        assert!(matches(b"*", b"abc"));
        assert!(matches(b"a*c", b"abbbc"));
        assert!(!matches(b"a*c", b"abbb"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-b]llo", b"hbllo"));
        assert!(matches(b"key:\\*", b"key:*"));
        assert!(!matches(b"key:\\*", b"key:x"));
        assert!(matches(
            b"*a*a*a*a*a*a*a*a*b",
            &[b'a'; 64].iter().chain(b"b").copied().collect::<Vec<_>>()
        ));
        assert!(!matches(b"*a*a*a*a*a*a*a*a*b", &[b'a'; 4096]));
        assert!(matches(b"user:*:name", b"user:42:name"));
        // Redis' class rules
        assert!(
            !matches(b"[", b"["),
            "an unterminated class: here, an empty one"
        );
        assert!(
            matches(b"[ab", b"b"),
            "an unterminated class takes the rest"
        );
        assert!(!matches(b"[]a]", b"]"), "] first closes an empty class");
        assert!(!matches(b"[]a]", b"a]"), "...which matches no byte");
        assert!(matches(b"[^]a]", b"xa]"));
        assert!(matches(b"[^]x", b"zx"));
        assert!(matches(b"[a-]", b"_"), "a range from ] to a");
        assert!(!matches(b"[a-]", b"-"));
        assert!(matches(b"[z-a]", b"q"));
        assert!(matches(b"[\\]]", b"]"));
        assert!(!matches(b"*", b""));
        assert!(matches(b"", b""));
    }
}
