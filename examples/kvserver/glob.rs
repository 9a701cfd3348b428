//! Redis-style glob matching for `KEYS`, `SCAN MATCH` and `CONFIG GET`.
//!
//! Supports `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` and `\x` escapes, byte-wise. Matching is
//! iterative with a single backtrack point for the last `*`, so a hostile pattern such as
//! `*a*a*a*a*b` cannot take exponential time (it is O(pattern × text) at worst).

/// Whether `text` matches the glob `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the last '*': (pattern index after the star, text index).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
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
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pattern, p, text[t]) {
                        if hit {
                            p = next;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == b'[' {
                        // an unterminated class matches a literal '['
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if c == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
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

/// Matches byte `c` against the class starting at `pattern[p] == b'['`; returns whether it
/// matched and the index after the closing `]`, or `None` if the class is unterminated.
fn class(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = p + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    loop {
        let b = *pattern.get(i)?;
        if b == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if b == b'\\' && i + 1 < pattern.len() {
            hit |= pattern[i + 1] == c;
            i += 2;
        } else if pattern.get(i + 1) == Some(&b'-')
            && pattern.get(i + 2).is_some_and(|&e| e != b']')
        {
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
    fn basics() {
        assert!(matches(b"*", b""));
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
        assert!(matches(b"[", b"["));
    }
}
