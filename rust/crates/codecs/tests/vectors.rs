//! The shared test vectors (`schemas/vectors/<package>/<Message>.<n>.bin` and `.json`, made by
//! the Python codecs): the Rust codecs must decode each to the same value and encode it back to
//! the same bytes.

use std::fs;
use std::path::{Path, PathBuf};

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../schemas/vectors")
}

fn check(package: &str, bin: &[u8]) -> Result<(String, String, Vec<u8>), String> {
    macro_rules! via {
        ($m:ident) => {{
            let msg = seqbus_codecs::$m::Message::decode(bin).map_err(|e| e.to_string())?;
            let again = msg.encode().map_err(|e| e.to_string())?;
            Ok((msg.name().to_string(), msg.to_json(), again))
        }};
    }
    match package {
        "bus" => via!(bus),
        "exchange" => via!(exchange),
        "pingpong" => via!(pingpong),
        other => Err(format!("no Rust codec for package {other}")),
    }
}

#[test]
fn every_vector_decodes_to_its_json_and_encodes_to_its_bytes() {
    let mut seen = 0;
    for pkg in fs::read_dir(vectors_dir()).expect("schemas/vectors exists") {
        let pkg = pkg.unwrap().path();
        let package = pkg.file_name().unwrap().to_str().unwrap().to_string();
        let mut files: Vec<_> = fs::read_dir(&pkg)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for bin_path in files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        {
            let bin = fs::read(bin_path).unwrap();
            let json = fs::read_to_string(bin_path.with_extension("json")).unwrap();
            let (name, got_json, again) =
                check(&package, &bin).unwrap_or_else(|e| panic!("{}: {e}", bin_path.display()));
            let stem = bin_path.file_stem().unwrap().to_str().unwrap();
            assert!(
                stem.starts_with(&format!("{name}.")),
                "{}: decoded as {name}",
                bin_path.display()
            );
            assert_eq!(
                got_json,
                json.trim_end(),
                "{}: value differs",
                bin_path.display()
            );
            assert_eq!(
                again,
                bin,
                "{}: re-encoded bytes differ",
                bin_path.display()
            );
            seen += 1;
        }
    }
    assert!(seen >= 10, "only {seen} vectors found");
}

#[test]
fn every_truncation_of_a_vector_is_an_error_not_a_panic() {
    let path = vectors_dir().join("exchange");
    for entry in fs::read_dir(path).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "bin") {
            let bin = fs::read(&p).unwrap();
            for n in 0..bin.len() {
                assert!(
                    seqbus_codecs::exchange::Message::decode(&bin[..n]).is_err(),
                    "{}[..{n}]",
                    p.display()
                );
            }
            for i in 0..bin.len() {
                for v in [0u8, 1, 0x7f, 0xff] {
                    let mut b = bin.clone();
                    b[i] = v;
                    let _ = seqbus_codecs::exchange::Message::decode(&b);
                }
            }
        }
    }
}

#[test]
fn encode_refuses_what_does_not_fit() {
    use seqbus_codecs::exchange::{OrderAccepted, Price, Side, Trade};
    let t = Trade {
        trade_id: 1,
        symbol: "TOO-LONG-SYMBOL".into(),
        price: Price {
            mantissa: 1,
            exponent: 0,
        },
        quantity: 1,
        buy_order_id: 1,
        sell_order_id: 2,
        aggressor: Side::Buy,
        at: 0,
    };
    let err = t.encode().unwrap_err();
    assert_eq!(err.field, "Trade.symbol");
    let ok = OrderAccepted { order_id: 1, at: 2 }.encode().unwrap();
    assert_eq!(&ok[..8], &[16, 0, 2, 0, 7, 0, 2, 0]);
}
