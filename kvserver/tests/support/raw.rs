//! Raw connections: requests written as RESP arrays, replies read back as the bytes they came
//! in (RESP2 or RESP3), so that tests compare them byte for byte.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{within, DEADLINE};

/// A request as a RESP array of bulk strings.
pub fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// A raw connection to a server.
pub struct Raw(pub TcpStream);

impl Raw {
    pub async fn open(addr: SocketAddr) -> Raw {
        Raw(within("connect", TcpStream::connect(addr)).await.unwrap())
    }

    pub async fn send(&mut self, args: &[&str]) {
        self.send_bytes(&encode(args)).await;
    }

    /// Writes `bytes` as they are (several requests at once, say).
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).await.unwrap();
    }

    /// One whole reply (RESP2 or RESP3), as the bytes it came in.
    pub async fn read(&mut self) -> Vec<u8> {
        within("reply", read_reply(&mut self.0)).await
    }

    /// One whole reply, as text.
    pub async fn reply(&mut self) -> String {
        String::from_utf8_lossy(&self.read().await).into_owned()
    }

    /// Sends `args` and reads one reply, as text.
    pub async fn call(&mut self, args: &[&str]) -> String {
        self.send(args).await;
        self.reply().await
    }

    /// Everything the server still sends until it closes (or resets) the connection.
    pub async fn rest(&mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        let _ = within("drain", self.0.read_to_end(&mut rest)).await;
        rest
    }

    /// Whether the server closes the connection (what it still sends is read and dropped
    /// until the end of file or a reset).
    pub async fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        tokio::time::timeout(DEADLINE, self.0.read_to_end(&mut rest))
            .await
            .is_ok()
    }
}

/// Reads one whole reply off `s`: a line, and as many bulk bodies and nested elements as its
/// type says (`$`, `=`, `!` bodies; `*`, `~`, `>` elements; `%`, `|` pairs).
pub async fn read_reply(s: &mut TcpStream) -> Vec<u8> {
    async fn line(s: &mut TcpStream, out: &mut Vec<u8>) -> String {
        let start = out.len();
        while !out.ends_with(b"\r\n") || out.len() - start < 2 {
            out.push(s.read_u8().await.unwrap());
        }
        String::from_utf8_lossy(&out[start..out.len() - 2]).into_owned()
    }
    let mut out = Vec::new();
    let mut pending = 1usize;
    while pending > 0 {
        pending -= 1;
        let kind = s.read_u8().await.unwrap();
        out.push(kind);
        let text = line(s, &mut out).await;
        match kind {
            b'$' | b'=' | b'!' => {
                let n: i64 = text.parse().unwrap();
                if n >= 0 {
                    let mut body = vec![0u8; n as usize + 2];
                    s.read_exact(&mut body).await.unwrap();
                    out.extend_from_slice(&body);
                }
            }
            b'*' | b'~' | b'>' => pending += text.parse::<i64>().unwrap().max(0) as usize,
            b'%' | b'|' => pending += 2 * text.parse::<usize>().unwrap(),
            _ => {}
        }
    }
    out
}
