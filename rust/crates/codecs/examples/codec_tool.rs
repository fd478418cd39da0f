//! The codec tool of the Rust codecs, one stage of the cross-language chain test
//! (tests/compiler/test_cross_language.py): `codec_tool PACKAGE` reads one message per stdin
//! line, as lowercase hex (header and body), and writes one line per message:
//! `{"name":…,"json":…,"hex":…}` (the canonical JSON of the decoded value, and the bytes the
//! decoded value encodes to) or `{"error":…}` when the bytes do not decode.

use std::io::{self, BufRead, Write};

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", text.len()));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| format!("not hex at {i}: {:?}", &text[i..i + 2]))
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One output line for the message in `bin`.
fn line(package: &str, bin: &[u8]) -> String {
    macro_rules! via {
        ($m:ident) => {{
            match seqbus_codecs::$m::Message::decode(bin) {
                Err(e) => serde_json::json!({ "error": e.to_string() }).to_string(),
                Ok(msg) => match msg.encode() {
                    Err(e) => serde_json::json!({ "error": format!("re-encoding: {e}") }).to_string(),
                    Ok(again) => format!(
                        "{{\"name\":{},\"json\":{},\"hex\":\"{}\"}}",
                        serde_json::Value::from(msg.name()),
                        msg.to_json(),
                        hex(&again)
                    ),
                },
            }
        }};
    }
    match package {
        "alltypes" => via!(alltypes),
        "bus" => via!(bus),
        "exchange" => via!(exchange),
        "pingpong" => via!(pingpong),
        _ => unreachable!("checked in main"),
    }
}

fn main() {
    let package = std::env::args().nth(1).unwrap_or_default();
    if !["alltypes", "bus", "exchange", "pingpong"].contains(&package.as_str()) {
        eprintln!("usage: codec_tool alltypes|bus|exchange|pingpong (not {package:?})");
        std::process::exit(2);
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for text in io::stdin().lock().lines() {
        let text = text.expect("stdin is readable");
        let reply = match unhex(text.trim()) {
            Ok(bin) => line(&package, &bin),
            Err(e) => serde_json::json!({ "error": e }).to_string(),
        };
        writeln!(out, "{reply}")
            .and_then(|()| out.flush())
            .expect("stdout is writable");
    }
}
