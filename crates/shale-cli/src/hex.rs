//! Keys and values on the command line, stdin and stdout: raw bytes, or
//! lowercase hex with `--hex`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

/// The bytes `text` spells in hex (either case); a message saying what is
/// wrong otherwise.
pub fn decode(text: &[u8]) -> Result<Vec<u8>, String> {
    if text.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", text.len()));
    }
    let digit = |at: usize| -> Result<u8, String> {
        let c = text[at];
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!(
                "{:?} at position {} is not a hex digit",
                char::from(c),
                at + 1
            )),
        }
    };
    (0..text.len() / 2)
        .map(|i| Ok(digit(2 * i)? << 4 | digit(2 * i + 1)?))
        .collect()
}

/// How keys and values are written on the command line and in and out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Codec {
    /// Lowercase hex instead of raw bytes.
    pub hex: bool,
}

impl Codec {
    /// Decodes `text`; `what` names it in the error ("KEY", "line 3 key").
    pub fn decode(&self, what: &str, text: &[u8]) -> Result<Vec<u8>, String> {
        if self.hex {
            decode(text).map_err(|e| format!("bad hex in {what}: {e}"))
        } else {
            Ok(text.to_vec())
        }
    }

    /// Decodes a command-line argument.
    pub fn decode_arg(&self, what: &str, arg: &OsStr) -> Result<Vec<u8>, String> {
        self.decode(what, arg.as_bytes())
    }

    /// Appends `bytes` to `out`, encoded.
    pub fn encode_into(&self, out: &mut Vec<u8>, bytes: &[u8]) {
        if self.hex {
            out.extend_from_slice(encode(bytes).as_bytes());
        } else {
            out.extend_from_slice(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(encode(&all).as_bytes()).unwrap(), all);
        assert_eq!(encode(b"\x00\xffA"), "00ff41");
        assert_eq!(decode(b"00FFab").unwrap(), b"\x00\xff\xab");
        assert_eq!(decode(b"").unwrap(), b"");
        assert!(decode(b"abc").unwrap_err().contains("odd"));
        assert!(decode(b"zz").unwrap_err().contains("'z' at position 1"));
        assert!(decode("é1".as_bytes()).is_err());
    }
}
