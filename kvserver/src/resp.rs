//! The Redis wire protocol: an incremental request parser and reply encoders for RESP2 and
//! RESP3.
//!
//! Pure protocol code: no locks, no store, no I/O. The connection feeds the bytes it has read
//! to [`RequestParser::next`], which hands back whole commands (multibulk arrays of bulk strings,
//! or inline commands as sent by `redis-cli`/telnet, with Redis' quoting rules) and resumes where
//! it stopped when a command is split across reads, so a huge pipelined array costs linear time,
//! not quadratic.
//!
//! # RESP2 and RESP3
//! A connection speaks RESP2 until it sends `HELLO 3`. The encoders whose output differs between
//! the two ([`null`], [`null_array`], [`map_header`], [`set_header`], [`double`], [`boolean`],
//! [`verbatim`]) read the protocol of the connection they run for from a task-local value that
//! the connection sets up ([`with_protocol`]) and `HELLO` changes ([`set_protocol`]); outside
//! such a task they encode RESP2. So a command writes its reply once, for both protocols.

use std::cell::Cell;
use std::fmt;
use std::future::Future;

tokio::task_local! {
    static PROTOCOL: Cell<u8>;
}

/// Runs `fut` (a connection) with its protocol starting at RESP2.
pub fn with_protocol<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    PROTOCOL.scope(Cell::new(2), fut)
}

/// The protocol version (2 or 3) the current connection speaks; 2 outside a connection.
pub fn protocol() -> u8 {
    PROTOCOL.try_with(Cell::get).unwrap_or(2)
}

/// Switches the current connection to protocol `version` (2 or 3), for the replies encoded
/// from now on; no effect outside a connection.
pub fn set_protocol(version: u8) {
    let _ = PROTOCOL.try_with(|p| p.set(version));
}

fn resp3() -> bool {
    protocol() == 3
}

/// Size limits the parser enforces; exceeding one is a protocol error.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk string (one argument), in bytes.
    pub max_bulk_len: usize,
    /// Most elements in one multibulk request.
    pub max_array_len: usize,
    /// Longest inline command line, in bytes.
    pub max_inline_len: usize,
    /// Most bytes one request (all its arguments) may take.
    pub max_request_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 16 * 1024 * 1024,
            max_array_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
            max_request_len: 64 * 1024 * 1024,
        }
    }
}

/// A malformed or oversized request: the server replies `-ERR Protocol error: ...` and closes
/// the connection, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn perr<T>(msg: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(msg.into()))
}

/// One parsed request: its arguments, the command name first.
pub type Args = Vec<Vec<u8>>;

/// Argument buffers a parser keeps for the next requests, at most.
const SPARE_ARGS: usize = 64;
/// The largest argument buffer a parser keeps for reuse.
const SPARE_ARG_BYTES: usize = 4096;

/// Incremental request parser. State survives between calls so that a request split across
/// many reads is parsed once.
///
/// The parser owns the request it hands out ([`RequestParser::args`]) until the next call of
/// [`RequestParser::next`], which refills the same argument buffers with the next request: a
/// stream of short requests allocates nothing once the first few are parsed. A command may
/// take an argument (`std::mem::take`) or the whole request away; the parser then allocates
/// anew.
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    /// Elements the multibulk in progress still expects (`None`: between requests).
    remaining: Option<usize>,
    /// The request: `args[..filled]` are its arguments so far; while a request is in
    /// progress, the buffers after them are the last request's, to be refilled.
    args: Args,
    filled: usize,
    /// Cleared argument buffers, reused for the next arguments.
    spare: Vec<Vec<u8>>,
    /// Bytes of the arguments collected so far, for `max_request_len`.
    request_bytes: usize,
}

impl RequestParser {
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            remaining: None,
            args: Vec::new(),
            filled: 0,
            spare: Vec::new(),
            request_bytes: 0,
        }
    }

    /// The request the last [`RequestParser::next`] returned `true` for.
    pub fn args(&mut self) -> &mut Args {
        &mut self.args
    }

    /// Parses the next whole request out of `buf[*pos..]`.
    ///
    /// Returns `Ok(true)` and advances `*pos` past it (the request is then in
    /// [`RequestParser::args`]); `Ok(false)` when more bytes are needed (`*pos` may have
    /// advanced past elements already taken in); or a protocol error, after which the
    /// connection must be closed. Empty requests (`*0`, `*-1`, blank inline lines) are
    /// skipped, as Redis does.
    pub fn next(&mut self, buf: &[u8], pos: &mut usize) -> Result<bool, ProtocolError> {
        loop {
            let remaining = match self.remaining {
                Some(n) => n,
                None => {
                    let Some(&first) = buf.get(*pos) else {
                        return Ok(false);
                    };
                    if first != b'*' {
                        match self.inline(buf, pos)? {
                            true if self.args.is_empty() => continue,
                            done => return Ok(done),
                        }
                    }
                    if let Some(end) = self.whole(buf, *pos) {
                        *pos = end;
                        return Ok(true);
                    }
                    let Some((n, next)) = length_line(
                        buf,
                        *pos + 1,
                        self.limits.max_inline_len,
                        "invalid multibulk length",
                    )?
                    else {
                        return Ok(false);
                    };
                    *pos = next;
                    if n <= 0 {
                        continue; // Redis ignores empty and null arrays
                    }
                    if n as u64 > self.limits.max_array_len as u64 {
                        return perr("invalid multibulk length");
                    }
                    let n = n as usize;
                    self.args.reserve(n.min(64).saturating_sub(self.args.len()));
                    self.filled = 0;
                    self.request_bytes = 0;
                    self.remaining = Some(n);
                    n
                }
            };
            if remaining == 0 {
                self.remaining = None;
                self.request_bytes = 0;
                self.finish();
                return Ok(true);
            }
            // One bulk string: $<len>\r\n<bytes>\r\n
            let Some(&first) = buf.get(*pos) else {
                return Ok(false);
            };
            if first != b'$' {
                return perr(format!("expected '$', got '{}'", printable(first)));
            }
            let Some((len, data_start)) = length_line(buf, *pos + 1, 32, "invalid bulk length")?
            else {
                return Ok(false);
            };
            let len = match len {
                n if n >= 0 && n as u64 <= self.limits.max_bulk_len as u64 => n as usize,
                _ => return perr("invalid bulk length"),
            };
            if self.request_bytes + len > self.limits.max_request_len {
                return perr("request too large");
            }
            if buf.len() < data_start + len + 2 {
                return Ok(false);
            }
            if &buf[data_start + len..data_start + len + 2] != b"\r\n" {
                return perr("bulk string not terminated by CRLF");
            }
            self.put(&buf[data_start..data_start + len]);
            self.request_bytes += len;
            self.remaining = Some(remaining - 1);
            *pos = data_start + len + 2;
        }
    }

    /// The common case in one go: a whole multibulk request at `buf[at..]`, every length a
    /// short decimal and within the limits. Returns the offset after it, the request in
    /// `args`; `None` (nothing consumed) sends the request the general way, which finds the
    /// same arguments or says what is wrong.
    fn whole(&mut self, buf: &[u8], at: usize) -> Option<usize> {
        let (n, mut i) = short_length(buf, at + 1)?;
        if n == 0 || n > self.limits.max_array_len {
            return None;
        }
        self.filled = 0;
        let mut total = 0;
        for _ in 0..n {
            if buf.get(i) != Some(&b'$') {
                return None;
            }
            let (len, start) = short_length(buf, i + 1)?;
            total += len;
            if len > self.limits.max_bulk_len
                || total > self.limits.max_request_len
                || buf.get(start + len..start + len + 2) != Some(b"\r\n")
            {
                return None;
            }
            self.put(&buf[start..start + len]);
            i = start + len + 2;
        }
        self.finish();
        Some(i)
    }

    /// Appends an argument to the request in progress, into a buffer of an earlier request
    /// when there is one.
    fn put(&mut self, data: &[u8]) {
        if let Some(arg) = self.args.get_mut(self.filled) {
            if arg.capacity() < data.len() || arg.capacity() > SPARE_ARG_BYTES {
                *arg = data.to_vec(); // taken by a command, or too small or big to keep
            } else {
                arg.clear();
                arg.extend_from_slice(data);
            }
        } else {
            let mut arg = self.spare.pop().unwrap_or_default();
            arg.extend_from_slice(data);
            self.args.push(arg);
        }
        self.filled += 1;
    }

    /// Ends the request at `filled` arguments: the buffers of an earlier, longer request go
    /// to the spare ones (a bounded number of small ones is kept).
    fn finish(&mut self) {
        if self.args.len() == self.filled {
            return;
        }
        for mut arg in self.args.drain(self.filled..) {
            if arg.capacity() != 0
                && arg.capacity() <= SPARE_ARG_BYTES
                && self.spare.len() < SPARE_ARGS
            {
                arg.clear();
                self.spare.push(arg);
            }
        }
        if self.args.capacity() > 1024 && self.filled <= 64 {
            self.args.shrink_to(64);
        }
    }

    /// An inline request: one line of words separated by white space, where a word may be
    /// quoted as Redis reads it ([`split_inline`]).
    fn inline(&mut self, buf: &[u8], pos: &mut usize) -> Result<bool, ProtocolError> {
        let Some(nl) = buf[*pos..].iter().position(|&b| b == b'\n') else {
            if buf.len() - *pos > self.limits.max_inline_len {
                return perr("too big inline request");
            }
            return Ok(false);
        };
        if nl > self.limits.max_inline_len {
            return perr("too big inline request");
        }
        let mut line = &buf[*pos..*pos + nl];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        let args = split_inline(line)?;
        if args.len() > self.limits.max_array_len {
            return perr("too many arguments in inline request");
        }
        *pos += nl + 1;
        self.args = args;
        Ok(true)
    }
}

/// Splits an inline command line into its words, with the quoting of `redis-cli` and of Redis'
/// own inline requests: `"..."` takes the escapes `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\a`
/// and `\xHH` (any other escaped byte stands for itself), `'...'` only `\'`; a closing quote
/// must end the word. An unterminated quote, or a closing one followed by anything but white
/// space, is a protocol error.
pub fn split_inline(line: &[u8]) -> Result<Args, ProtocolError> {
    const UNBALANCED: &str = "unbalanced quotes in request";
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let mut args = Args::new();
    let mut i = 0;
    loop {
        while i < line.len() && space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Ok(args);
        }
        let mut word = Vec::new();
        let quote = match line[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                Some(q)
            }
            _ => None,
        };
        loop {
            let Some(&b) = line.get(i) else {
                if quote.is_some() {
                    return perr(UNBALANCED);
                }
                break;
            };
            match quote {
                None if space(b) => break,
                None => word.push(b),
                Some(q) if b == q => {
                    i += 1;
                    if line.get(i).is_some_and(|&n| !space(n)) {
                        return perr(UNBALANCED);
                    }
                    break;
                }
                Some(b'"') if b == b'\\' && i + 1 < line.len() => {
                    let hex = |c: u8| (c as char).to_digit(16);
                    let e = line[i + 1];
                    match (
                        e,
                        line.get(i + 2).and_then(|&c| hex(c)),
                        line.get(i + 3).and_then(|&c| hex(c)),
                    ) {
                        (b'x', Some(h), Some(l)) => {
                            word.push((h * 16 + l) as u8);
                            i += 2;
                        }
                        _ => word.push(match e {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        }),
                    }
                    i += 1;
                }
                Some(_) if b == b'\\' && line.get(i + 1) == Some(&b'\'') => {
                    word.push(b'\'');
                    i += 1;
                }
                Some(_) => word.push(b),
            }
            i += 1;
        }
        args.push(word);
    }
}

/// The line starting at `start`, without its CRLF, and the offset after the CRLF; `None` if the
/// line is not complete yet; an error if it is longer than `max` or not CRLF-terminated.
fn line_at(buf: &[u8], start: usize, max: usize) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    let window = &buf[start.min(buf.len())..buf.len().min(start + max + 2)];
    match window.iter().position(|&b| b == b'\r') {
        Some(i) if i > max => perr("line too long"),
        Some(i) => {
            if i + 1 >= window.len() {
                return Ok(None); // the '\n' has not arrived yet
            }
            if window[i + 1] != b'\n' {
                return perr("line not terminated by CRLF");
            }
            Ok(Some((&window[..i], start + i + 2)))
        }
        None if window.len() >= max + 2 => perr("line too long"),
        None => Ok(None),
    }
}

/// A length of up to 9 digits (no leading zero) followed by CRLF at `buf[start..]`, and the
/// offset after the CRLF; `None` for anything else (longer, negative, cut, malformed), which
/// [`length_line`] then reads.
fn short_length(buf: &[u8], start: usize) -> Option<(usize, usize)> {
    let mut v = 0usize;
    let mut i = start;
    loop {
        let d = *buf.get(i)?;
        if !d.is_ascii_digit() {
            break;
        }
        v = v * 10 + (d - b'0') as usize;
        i += 1;
        if i - start > 9 {
            return None;
        }
    }
    let digits = i - start;
    let ok =
        digits != 0 && (digits == 1 || buf[start] != b'0') && buf.get(i..i + 2) == Some(b"\r\n");
    ok.then_some((v, i + 2))
}

/// The integer line at `start` (`<digits>\r\n`, what follows `*` or `$`) and the offset after
/// its CRLF; `None` if the line is not complete yet; `what` as the error if it is not a
/// strict decimal ([`parse_int`]), and [`line_at`]'s errors.
fn length_line(
    buf: &[u8],
    start: usize,
    max: usize,
    what: &str,
) -> Result<Option<(i64, usize)>, ProtocolError> {
    // The common case at once: up to 18 digits without a leading zero, then CRLF (the value
    // parse_int gives; anything else takes the general path, with its checks and errors).
    let mut v: i64 = 0;
    let mut i = start;
    while let Some(&d) = buf.get(i) {
        if !d.is_ascii_digit() || i - start == 18 {
            break;
        }
        v = v * 10 + (d - b'0') as i64;
        i += 1;
    }
    let digits = i - start;
    if digits != 0
        && digits <= max
        && (digits == 1 || buf[start] != b'0')
        && buf.get(i) == Some(&b'\r')
        && buf.get(i + 1) == Some(&b'\n')
    {
        return Ok(Some((v, i + 2)));
    }
    let Some((line, next)) = line_at(buf, start, max)? else {
        return Ok(None);
    };
    match parse_int(line) {
        Some(n) => Ok(Some((n, next))),
        None => perr(what),
    }
}

/// A strict decimal i64: optional '-', digits only, no overflow.
pub fn parse_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub((d - b'0') as i64)?
        } else {
            v.checked_add((d - b'0') as i64)?
        };
    }
    if neg && v == 0 {
        return None; // "-0"
    }
    Some(v)
}

fn printable(b: u8) -> char {
    if b.is_ascii_graphic() {
        b as char
    } else {
        '?'
    }
}

// ---- reply encoders -------------------------------------------------------------------------

pub fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

/// An error reply; `msg` should start with an error code such as `ERR` and hold no newline.
pub fn error(out: &mut Vec<u8>, msg: &str) {
    out.push(b'-');
    for &b in msg.as_bytes() {
        out.push(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.extend_from_slice(b"\r\n");
}

fn decimal(out: &mut Vec<u8>, v: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&tmp[i..]);
}

pub fn integer(out: &mut Vec<u8>, v: i64) {
    out.push(b':');
    decimal(out, v);
    out.extend_from_slice(b"\r\n");
}

pub fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.reserve(data.len() + 8);
    if data.len() < 10 {
        // the usual short value: its header in one store
        out.extend_from_slice(&[b'$', b'0' + data.len() as u8, b'\r', b'\n']);
    } else {
        out.push(b'$');
        decimal(out, data.len() as i64);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A null: RESP3 `_`, RESP2 a null bulk string.
pub fn null(out: &mut Vec<u8>) {
    out.extend_from_slice(if resp3() { b"_\r\n" } else { b"$-1\r\n" });
}

/// A null array (an aborted `EXEC`): RESP3 `_`, RESP2 `*-1`.
pub fn null_array(out: &mut Vec<u8>) {
    out.extend_from_slice(if resp3() { b"_\r\n" } else { b"*-1\r\n" });
}

fn aggregate(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    decimal(out, len as i64);
    out.extend_from_slice(b"\r\n");
}

/// A map of `len` key-value pairs (the caller writes `2 * len` elements): RESP3 `%`, RESP2 a
/// flat array of `2 * len` elements.
pub fn map_header(out: &mut Vec<u8>, len: usize) {
    if resp3() {
        aggregate(out, b'%', len)
    } else {
        aggregate(out, b'*', 2 * len)
    }
}

/// A set of `len` elements: RESP3 `~`, RESP2 an array.
pub fn set_header(out: &mut Vec<u8>, len: usize) {
    aggregate(out, if resp3() { b'~' } else { b'*' }, len)
}

/// A boolean: RESP3 `#t`/`#f`, RESP2 the integer 1 or 0.
pub fn boolean(out: &mut Vec<u8>, v: bool) {
    if resp3() {
        out.extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" });
    } else {
        integer(out, v as i64)
    }
}

/// A double as Redis 7.0 prints it ([`crate::value::format_double`]): RESP3 `,`, RESP2 a bulk
/// string.
pub fn double(out: &mut Vec<u8>, v: f64) {
    let text = crate::value::format_double(v);
    if resp3() {
        out.push(b',');
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, text.as_bytes())
    }
}

/// A text reply Redis sends as a verbatim string (`INFO`, `CLIENT LIST`): RESP3 `=` with the
/// `txt` format, RESP2 a bulk string.
pub fn verbatim(out: &mut Vec<u8>, text: &[u8]) {
    if resp3() {
        out.push(b'=');
        decimal(out, text.len() as i64 + 4);
        out.extend_from_slice(b"\r\ntxt:");
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, text)
    }
}

pub fn opt_bulk(out: &mut Vec<u8>, data: Option<&[u8]>) {
    match data {
        Some(d) => bulk(out, d),
        None => null(out),
    }
}

pub fn array_header(out: &mut Vec<u8>, len: usize) {
    aggregate(out, b'*', len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Args>, ProtocolError> {
        let mut p = RequestParser::new(Limits::default());
        let mut pos = 0;
        let mut v = Vec::new();
        while p.next(input, &mut pos)? {
            v.push(p.args().clone());
        }
        Ok(v)
    }

    #[test]
    fn split_anywhere() {
        let req = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..req.len() {
            let mut p = RequestParser::new(Limits::default());
            let mut buf = req[..cut].to_vec();
            let mut pos = 0;
            let mut got = Vec::new();
            while p.next(&buf, &mut pos).unwrap() {
                got.push(p.args().clone());
            }
            buf.drain(..pos);
            buf.extend_from_slice(&req[cut..]);
            pos = 0;
            while p.next(&buf, &mut pos).unwrap() {
                got.push(p.args().clone());
            }
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!(got[0][2], b"hello");
        }
    }

    #[test]
    fn errors() {
        assert!(parse_all(b"*x\r\n").is_err());
        assert!(parse_all(b"*1\r\n+PING\r\n").is_err());
        assert!(parse_all(b"*1\r\n$-5\r\n").is_err());
        assert!(parse_all(b"*1\r\n$2\r\nabcd\r\n").is_err());
        assert!(parse_all(b"*99999999999\r\n").is_err());
        assert_eq!(parse_all(b"PING\r\n\r\n*0\r\n").unwrap().len(), 1);
    }

    /// A length line one byte over its limit, its CR the last byte the parser looks at, is
    /// refused (it used to wait for more bytes forever, the buffer growing).
    #[test]
    fn a_length_line_over_its_limit_is_refused() {
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.extend_from_slice(&[b'1'; 33]);
        bulk.extend_from_slice(b"\r");
        assert_eq!(
            parse_all(&bulk).unwrap_err().to_string(),
            "Protocol error: line too long"
        );
        let limits = Limits {
            max_inline_len: 8,
            ..Limits::default()
        };
        let mut p = RequestParser::new(limits);
        assert!(p.next(b"*123456789\r", &mut 0).is_err());
    }

    /// The lengths the fast path reads and those the general path reads agree, and so do their
    /// errors: every line of up to 3 bytes from a small alphabet, complete or cut.
    #[test]
    fn length_lines_read_as_parse_int_reads_them() {
        let alphabet = b"0129-\r\nx";
        let mut lines: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let longer: Vec<Vec<u8>> = lines
                .iter()
                .flat_map(|l| {
                    alphabet.iter().map(move |&c| {
                        let mut l = l.clone();
                        l.push(c);
                        l
                    })
                })
                .collect();
            lines.extend(longer);
        }
        lines.push(b"123456789012345678\r\n".to_vec());
        lines.push(b"1234567890123456789\r\n".to_vec());
        lines.push(b"9223372036854775808\r\n".to_vec());
        for line in lines {
            let got = length_line(&line, 0, 32, "bad");
            let want = match line_at(&line, 0, 32) {
                Err(e) => Err(e),
                Ok(None) => Ok(None),
                Ok(Some((l, next))) => match parse_int(l) {
                    Some(n) => Ok(Some((n, next))),
                    None => Err(ProtocolError("bad".into())),
                },
            };
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&line));
        }
    }

    /// Requests and errors: (the requests parsed, then the error or `None` when more bytes
    /// are needed), with `input` given at once or byte by byte.
    fn outcome(input: &[u8], at_once: bool) -> (Vec<Args>, Option<ProtocolError>) {
        let limits = Limits {
            max_bulk_len: 20,
            max_array_len: 6,
            max_inline_len: 40,
            max_request_len: 50,
        };
        let mut p = RequestParser::new(limits);
        let mut got = Vec::new();
        let mut buf = Vec::new();
        let mut pos = 0;
        let step = if at_once { input.len().max(1) } else { 1 };
        for chunk in input.chunks(step) {
            buf.extend_from_slice(chunk);
            loop {
                match p.next(&buf, &mut pos) {
                    Ok(true) => got.push(p.args().clone()),
                    Ok(false) => break,
                    Err(e) => return (got, Some(e)),
                }
            }
        }
        (got, None)
    }

    /// The one-go path for whole requests and the general one agree: random frames (mostly
    /// well formed, some lengths off, some over the limits) parsed at once and byte by byte
    /// give the same requests and the same error.
    #[test]
    fn whole_requests_parse_as_split_ones() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(30);
        for _ in 0..3000 {
            let mut input = Vec::new();
            for _ in 0..rng.gen_range(1..4) {
                let n: usize = rng.gen_range(0..8);
                let count = match rng.gen_range(0..20) {
                    0 => "-1".to_string(),
                    1 => format!("0{n}"),
                    2 => "x".into(),
                    _ => n.to_string(),
                };
                input.extend_from_slice(format!("*{count}\r\n").as_bytes());
                for _ in 0..n {
                    let len: usize = rng.gen_range(0..24);
                    let data: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect();
                    let said = match rng.gen_range(0..30) {
                        0 => len + 1,
                        1 => len.saturating_sub(1),
                        _ => len,
                    };
                    input.extend_from_slice(format!("${said}\r\n").as_bytes());
                    input.extend_from_slice(&data);
                    input.extend_from_slice(b"\r\n");
                }
            }
            let cut = rng.gen_range(0..=input.len());
            let input = &input[..if rng.gen_bool(0.2) { cut } else { input.len() }];
            assert_eq!(
                outcome(input, true),
                outcome(input, false),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    /// Once warmed up, short requests reuse the argument buffers; an argument a command took
    /// away is replaced.
    #[test]
    fn argument_buffers_are_reused() {
        let req = b"*2\r\n$3\r\nGET\r\n$4\r\nkey1\r\n*2\r\n$3\r\nGET\r\n$4\r\nkey2\r\n";
        let mut p = RequestParser::new(Limits::default());
        let mut pos = 0;
        assert!(p.next(req, &mut pos).unwrap());
        let first: Vec<*const u8> = p.args().iter().map(|a| a.as_ptr()).collect();
        let taken = std::mem::take(&mut p.args()[1]);
        assert!(p.next(req, &mut pos).unwrap());
        assert_eq!(p.args(), &vec![b"GET".to_vec(), b"key2".to_vec()]);
        assert!(p.args().iter().any(|a| a.as_ptr() == first[0]));
        assert_eq!(taken, b"key1");
        assert!(!p.next(req, &mut pos).unwrap());
    }

    #[test]
    fn inline_quoting() {
        let words = |line: &[u8]| {
            split_inline(line).map(|a| {
                a.iter()
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            words(b"set k \"hello world\"").unwrap(),
            ["set", "k", "hello world"]
        );
        assert_eq!(words(b"\"a\\x41b\\x4\"").unwrap(), ["aAbx4"]);
        assert_eq!(words(b"'a\\'b' \"\"").unwrap(), ["a'b", ""]);
        assert_eq!(words(b"'a\\nb'").unwrap(), ["a\\nb"]);
        assert_eq!(words(b" \t a\tb  ").unwrap(), ["a", "b"]);
        for bad in [&b"\"abc"[..], b"'abc", b"\"a\"b", b"'a'b", b"\"a\\\""] {
            assert_eq!(
                split_inline(bad).unwrap_err().to_string(),
                "Protocol error: unbalanced quotes in request"
            );
        }
    }

    #[test]
    fn resp2_encodings() {
        let mut out = Vec::new();
        double(&mut out, 2.5);
        boolean(&mut out, true);
        map_header(&mut out, 2);
        set_header(&mut out, 3);
        null(&mut out);
        null_array(&mut out);
        verbatim(&mut out, b"hi");
        assert_eq!(
            out,
            b"$3\r\n2.5\r\n:1\r\n*4\r\n*3\r\n$-1\r\n*-1\r\n$2\r\nhi\r\n"
        );
    }

    #[tokio::test]
    async fn resp3_encodings_follow_the_connection() {
        let out = with_protocol(async {
            let mut out = Vec::new();
            null(&mut out);
            set_protocol(3);
            double(&mut out, 2.5);
            boolean(&mut out, false);
            map_header(&mut out, 2);
            set_header(&mut out, 3);
            null(&mut out);
            null_array(&mut out);
            verbatim(&mut out, b"hi");
            out
        })
        .await;
        assert_eq!(
            out,
            b"$-1\r\n,2.5\r\n#f\r\n%2\r\n~3\r\n_\r\n_\r\n=6\r\ntxt:hi\r\n"
        );
    }

    #[test]
    fn ints() {
        assert_eq!(parse_int(b"-12"), Some(-12));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_int(b"9223372036854775808"), None);
        assert_eq!(parse_int(b"01"), None);
        assert_eq!(parse_int(b""), None);
        assert_eq!(parse_int(b"1a"), None);
    }
}
