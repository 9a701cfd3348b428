//! async-rwsem's `Policy` from a command-line string, for the benchmark's `--policy` and
//! the demo server's `--rwsem-policy`: so that a run under another policy is one flag,
//! and every figure made with one can be made again from the repository.
//!
//! The string is a comma-separated list: optionally a base first, `default` or `fifo`
//! (`Policy::fifo()`), then settings `name=value` applied in order on top of it:
//!
//! | name | value | `Policy` field |
//! |---|---|---|
//! | `writer-spin` | a duration | `writer_spin` |
//! | `reader-spin` | a duration | `reader_spin` |
//! | `adaptive-spin` | `true` or `false` | `adaptive_spin` |
//! | `writer-yields` | a number | `writer_yields` |
//! | `handoff-timeout` | a duration, or `never` | `handoff_timeout` (`never`: `Duration::MAX`) |
//! | `pass-bound` | a number, or `none` | `pass_bound` (`none`: `u32::MAX`) |
//! | `strict-order` | `true` or `false` | `strict_order` |
//! | `crowded-handoff` | `true` or `false` | `crowded_handoff` |
//! | `reader-wake-batch` | a number from 1 | `reader_wake_batch` |
//!
//! A duration is a number with a unit, `ns`, `us`, `ms` or `s` (`0` alone is zero), e.g.
//! `fifo`, `handoff-timeout=25us,pass-bound=none`, `default,writer-spin=0,reader-spin=0`.

use std::time::Duration;

use async_rwsem::Policy;

/// Parses a policy string (see the module documentation).
pub fn parse_policy(spec: &str) -> Result<Policy, String> {
    let mut items = spec.split(',').map(str::trim).peekable();
    let mut policy = match items.peek() {
        Some(&"default") => {
            items.next();
            Policy::new()
        }
        Some(&"fifo") => {
            items.next();
            Policy::fifo()
        }
        _ => Policy::new(),
    };
    for item in items {
        if item.is_empty() {
            return Err(format!(
                "`{spec}`: an empty item (two commas, or a comma at an end)"
            ));
        }
        let (name, value) = item.split_once('=').ok_or_else(|| {
            format!("`{item}`: expected `name=value` (`default` and `fifo` only come first)")
        })?;
        let (name, value) = (name.trim(), value.trim());
        policy = match name {
            "writer-spin" => policy.writer_spin(duration(value)?),
            "reader-spin" => policy.reader_spin(duration(value)?),
            "adaptive-spin" => policy.adaptive_spin(boolean(value)?),
            "writer-yields" => policy.writer_yields(number(value)?),
            "handoff-timeout" => policy.handoff_timeout(match value {
                "never" => Duration::MAX,
                v => duration(v)?,
            }),
            "pass-bound" => policy.pass_bound(parse_pass_bound(value)?),
            "strict-order" => policy.strict_order(boolean(value)?),
            "crowded-handoff" => policy.crowded_handoff(boolean(value)?),
            "reader-wake-batch" => {
                let batch: u32 = number(value)?;
                if batch == 0 {
                    return Err("`reader-wake-batch=0`: a batch is at least 1".into());
                }
                policy.reader_wake_batch(batch as usize)
            }
            _ => {
                return Err(format!(
                    "`{name}`: not a policy setting (writer-spin, reader-spin, adaptive-spin, \
                     writer-yields, handoff-timeout, pass-bound, strict-order, crowded-handoff, \
                     reader-wake-batch)"
                ))
            }
        };
    }
    Ok(policy)
}

/// A `Policy::pass_bound`: a number, or `none` (`u32::MAX`, no bound in count). Also the
/// benchmark's `--pass-bound`.
pub fn parse_pass_bound(value: &str) -> Result<u32, String> {
    match value.trim() {
        "none" => Ok(u32::MAX),
        n => n
            .parse()
            .map_err(|e| format!("`{n}`: not a number of passes, nor `none` ({e})")),
    }
}

fn number(value: &str) -> Result<u32, String> {
    value
        .parse()
        .map_err(|e| format!("`{value}`: not a number ({e})"))
}

fn boolean(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("`{value}`: expected `true` or `false`")),
    }
}

fn duration(value: &str) -> Result<Duration, String> {
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{value}`: a duration needs a unit (ns, us, ms, s)"))?;
    let (digits, unit) = value.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{value}`: a duration is a whole number and a unit, e.g. 25us"))?;
    match unit {
        "ns" => Ok(Duration::from_nanos(n)),
        "us" => Ok(Duration::from_micros(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(format!(
            "`{value}`: a duration is a whole number and a unit (ns, us, ms, s), e.g. 25us"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_and_settings() {
        assert_eq!(parse_policy("default").unwrap(), Policy::new());
        assert_eq!(parse_policy("fifo").unwrap(), Policy::fifo());
        assert_eq!(
            parse_policy("fifo,pass-bound=none").unwrap(),
            Policy::fifo().pass_bound(u32::MAX)
        );
        assert_eq!(
            parse_policy(" handoff-timeout = 25us , writer-spin=0,reader-spin=2ms").unwrap(),
            Policy::new()
                .handoff_timeout(Duration::from_micros(25))
                .writer_spin(Duration::ZERO)
                .reader_spin(Duration::from_millis(2))
        );
        assert_eq!(
            parse_policy(
                "handoff-timeout=never,adaptive-spin=false,strict-order=true,crowded-handoff=false"
            )
            .unwrap(),
            Policy::new()
                .handoff_timeout(Duration::MAX)
                .adaptive_spin(false)
                .strict_order(true)
                .crowded_handoff(false)
        );
        assert_eq!(
            parse_policy("writer-yields=0,reader-wake-batch=2,pass-bound=4").unwrap(),
            Policy::new()
                .writer_yields(0)
                .reader_wake_batch(2)
                .pass_bound(4)
        );
        assert_eq!(
            parse_policy("writer-spin=500ns").unwrap(),
            Policy::new().writer_spin(Duration::from_nanos(500))
        );
    }

    #[test]
    fn errors_name_the_item() {
        for (spec, needle) in [
            ("", "empty item"),
            ("fifo,", "empty item"),
            ("pass-bound", "name=value"),
            ("default,fifo", "name=value"),
            ("spin=1us", "`spin`: not a policy setting"),
            ("writer-spin=10", "needs a unit"),
            ("writer-spin=10 parsecs", "whole number and a unit"),
            ("writer-spin=1.5us", "whole number"),
            ("writer-yields=-1", "not a number"),
            (
                "pass-bound=lots",
                "`lots`: not a number of passes, nor `none`",
            ),
            ("strict-order=yes", "`true` or `false`"),
            ("reader-wake-batch=0", "at least 1"),
        ] {
            let err = parse_policy(spec).unwrap_err();
            assert!(err.contains(needle), "{spec:?}: {err}");
        }
    }
}
