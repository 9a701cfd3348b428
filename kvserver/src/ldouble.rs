//! `INCRBYFLOAT`'s arithmetic as Redis does it on x86-64: numbers read with `strtold` into an
//! 80-bit x87 `long double` (64-bit significand, round to nearest even), added in that
//! precision, printed with `%.17Lf` and trailing zeros trimmed. Emulated exactly with big
//! integers, so that the replies are the same text as Redis', digit for digit (`1000.1` reads
//! back as `1000.09999999999999998` there, and here).

use num_bigint::{BigInt, BigUint, Sign};

/// A finite x87 extended value: `(-1)^neg * m * 2^e`, `m` with its top bit set (or 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ld {
    neg: bool,
    m: u64,
    e: i64,
}

/// Largest exponent of a finite value's significand scale (`m * 2^e < 2^16384`).
const MAX_E: i64 = 16384 - 64;
/// Smallest (subnormals are not modelled: anything smaller reads as an underflow).
const MIN_E: i64 = -16382 - 63;

/// What `strtold` read, as Redis' `string2ld` accepts it.
pub enum Parsed {
    Finite(Ld),
    /// `inf`, `infinity` (any case, signed): accepted, but any sum with it is refused.
    Infinite,
}

/// `n / d * 2^scale` (n, d > 0) rounded to the nearest `Ld` (ties to even); `None` on
/// overflow or underflow.
fn round(neg: bool, n: &BigUint, d: &BigUint, scale: i64) -> Option<Ld> {
    if n.bits() == 0 {
        return Some(Ld {
            neg: false,
            m: 0,
            e: 0,
        });
    }
    // Find k with 2^63 <= n / d / 2^k < 2^64.
    let mut k = n.bits() as i64 - d.bits() as i64 - 63;
    loop {
        let (num, den) = if k >= 0 {
            (n.clone(), d << (k as usize))
        } else {
            (n << ((-k) as usize), d.clone())
        };
        let q = &num / &den;
        let bits = q.bits();
        if bits < 64 {
            k -= 1;
            continue;
        }
        if bits > 64 {
            k += 1;
            continue;
        }
        let r = num - &q * &den;
        let twice = r << 1usize;
        let mut m: u64 = q.try_into().expect("64 bits");
        let round_up = match twice.cmp(&den) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => m & 1 == 1,
            std::cmp::Ordering::Less => false,
        };
        let mut e = k + scale;
        if round_up {
            match m.checked_add(1) {
                Some(v) => m = v,
                None => {
                    m = 1 << 63;
                    e += 1;
                }
            }
        }
        if !(MIN_E..=MAX_E).contains(&e) {
            return None;
        }
        return Some(Ld { neg, m, e });
    }
}

/// Reads a number as Redis' `string2ld` does (`strtold` over the whole string, no leading
/// space, no NaN, no overflow or underflow). Hexadecimal floats, which `strtold` also reads,
/// are not accepted here.
pub fn parse(s: &[u8]) -> Option<Parsed> {
    if s.is_empty() || s.len() >= 5 * 1024 {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(Parsed::Infinite);
    }
    let mut digits = Vec::new();
    let mut frac = 0i64;
    let mut i = 0;
    let mut seen_digit = false;
    while i < body.len() && body[i].is_ascii_digit() {
        digits.push(body[i] - b'0');
        seen_digit = true;
        i += 1;
    }
    if i < body.len() && body[i] == b'.' {
        i += 1;
        while i < body.len() && body[i].is_ascii_digit() {
            digits.push(body[i] - b'0');
            frac += 1;
            seen_digit = true;
            i += 1;
        }
    }
    if !seen_digit {
        return None;
    }
    let mut exp10 = 0i64;
    if i < body.len() && (body[i] == b'e' || body[i] == b'E') {
        let mut j = i + 1;
        let eneg = match body.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        let start = j;
        let mut v = 0i64;
        while j < body.len() && body[j].is_ascii_digit() {
            v = (v * 10 + (body[j] - b'0') as i64).min(1_000_000);
            j += 1;
        }
        if j == start {
            return None; // "5e": strtold stops before the 'e', the rest is garbage
        }
        exp10 = if eneg { -v } else { v };
        i = j;
    }
    if i != body.len() {
        return None;
    }
    let n = BigUint::from_radix_be(&digits, 10).unwrap_or_default();
    if n.bits() == 0 {
        return Some(Parsed::Finite(Ld {
            neg: false,
            m: 0,
            e: 0,
        }));
    }
    let p = exp10 - frac;
    // Far outside the range whatever the digits: overflow or underflow.
    if p + digits.len() as i64 > 5000 || p + (digits.len() as i64) < -5000 {
        return None;
    }
    let ten = BigUint::from(10u32);
    let one = BigUint::from(1u32);
    let ld = if p >= 0 {
        round(neg, &(n * ten.pow(p as u32)), &one, 0)?
    } else {
        round(neg, &n, &ten.pow((-p) as u32), 0)?
    };
    Some(Parsed::Finite(ld))
}

fn signed(x: Ld, shift: i64) -> BigInt {
    let v = BigInt::from(x.m) << (shift as usize);
    if x.neg {
        -v
    } else {
        v
    }
}

/// `a + b` in extended precision; `None` if it overflows.
pub fn add(a: Ld, b: Ld) -> Option<Ld> {
    if a.m == 0 {
        return Some(b);
    }
    if b.m == 0 {
        return Some(a);
    }
    let e = a.e.min(b.e);
    let sum = signed(a, a.e - e) + signed(b, b.e - e);
    let (sign, mag) = sum.into_parts();
    round(sign == Sign::Minus, &mag, &BigUint::from(1u32), e)
}

/// `%.17Lf` with the trailing zeros (and a trailing point) removed, `-0` as `0`: Redis'
/// `ld2string(..., LD_STR_HUMAN)`.
pub fn format(x: Ld) -> String {
    let ten17 = BigUint::from(10u32).pow(17);
    let q = if x.e >= 0 {
        (BigUint::from(x.m) << (x.e as usize)) * &ten17
    } else {
        let sh = (-x.e) as usize;
        let scaled = BigUint::from(x.m) * &ten17;
        let q = &scaled >> sh;
        let r = scaled - (&q << sh);
        let half = BigUint::from(1u32) << (sh - 1);
        match r.cmp(&half) {
            std::cmp::Ordering::Greater => q + 1u32,
            std::cmp::Ordering::Equal if q.bit(0) => q + 1u32,
            _ => q,
        }
    };
    let int = &q / &ten17;
    let frac = &q % &ten17;
    let mut s = String::new();
    if x.neg {
        s.push('-');
    }
    s.push_str(&int.to_string());
    let f = format!("{:0>17}", frac.to_string());
    let f = f.trim_end_matches('0');
    if !f.is_empty() {
        s.push('.');
        s.push_str(f);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        let (Some(Parsed::Finite(a)), Some(Parsed::Finite(b))) =
            (parse(a.as_bytes()), parse(b.as_bytes()))
        else {
            panic!("parse")
        };
        format(add(a, b).unwrap())
    }

    #[test]
    fn like_redis_on_x86_64() {
        // redis-server 7.0.15's replies
        assert_eq!(incr("0", "0.1"), "0.1");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("0", "1000.1"), "1000.09999999999999998");
        assert_eq!(
            incr("1000.09999999999999998", "0.2"),
            "1000.29999999999999999"
        );
        assert_eq!(incr("0", "3.0e3"), "3000");
        assert_eq!(incr("3000", "0.2"), "3000.19999999999999996");
        assert_eq!(incr("0", "123456.789"), "123456.78900000000000148");
        assert_eq!(incr("0", "0.000001"), "0.000001");
        assert_eq!(incr("0", "1e20"), "100000000000000000000");
        assert_eq!(incr("0", "1.5e-10"), "0.00000000015");
        assert_eq!(incr("-0.1", "0.2"), "0.1");
        assert_eq!(incr("10.50", "0.1"), "10.6");
        assert_eq!(incr("0.1", "-0.1"), "0");
        assert!(parse(b" 1").is_none() && parse(b"1 ").is_none() && parse(b"").is_none());
        assert!(parse(b"nan").is_none() && parse(b"5e").is_none() && parse(b"abc").is_none());
        assert!(parse(b"1e5000").is_none() && parse(b"1e-5000").is_none());
        assert!(matches!(parse(b"-Infinity"), Some(Parsed::Infinite)));
    }
}
