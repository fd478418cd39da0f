//! Every kind of field (the compiler's `ok_all_types` case, generated for Rust only): what seqc
//! writes for each compiles, and a value of every kind encodes and decodes back to itself,
//! struct fields of every kind inside a struct and an optional struct included.

use seqbus_codecs::alltypes::{
    Color, Everything, EverythingEmpty, EverythingItems, EverythingItemsSub, Inner, Outer, Perm,
};

fn outer(tag: &str, raw: [u8; 2]) -> Outer {
    Outer {
        inner: Inner { a: 255, b: -1.5 },
        tag: tag.into(),
        raw: raw.to_vec(),
        ok: true,
    }
}

fn everything() -> Everything {
    Everything {
        b: true,
        u8v: u8::MAX,
        u16v: u16::MAX,
        u32v: u32::MAX,
        u64v: u64::MAX,
        i8v: i8::MIN,
        i16v: i16::MIN,
        i32v: i32::MIN,
        i64v: i64::MIN,
        f32v: 3.5,
        f64v: -0.25,
        name: "ABCDEF".into(),
        raw: vec![0, 1, 0xfe, 0xff],
        color: Color::Blue,
        perm: Perm(1 | 1 << 31),
        outer: outer("XYZ", [0xab, 0xcd]),
        o_u64: Some(7),
        o_color: Some(Color::Red),
        o_outer: Some(outer("Q", [1, 2])),
        o_f64: None,
        o_char: Some("hi".into()),
        items: vec![
            EverythingItems {
                id: 1,
                label: "é ✓".into(),
                sub: vec![
                    EverythingItemsSub {
                        v: -1,
                        blob: vec![9; 300],
                    },
                    EverythingItemsSub { v: 2, blob: vec![] },
                ],
                note: Some(-3),
            },
            EverythingItems {
                id: 2,
                label: String::new(),
                sub: vec![],
                note: None,
            },
        ],
        text: "text".into(),
        data: vec![1, 2, 3],
        empty: vec![EverythingEmpty {}, EverythingEmpty {}],
    }
}

#[test]
fn every_kind_of_field_round_trips() {
    let v = everything();
    let bytes = v.encode().unwrap();
    assert_eq!(Everything::decode(&bytes).unwrap(), v);
}

#[test]
fn a_char_text_that_ends_in_padding_is_refused() {
    // readers strip trailing spaces and NULs: such a text would not read back as written
    for tag in ["A ", "A\0"] {
        let mut v = everything();
        v.outer.tag = tag.into();
        let e = v.encode().unwrap_err().to_string();
        assert!(e.contains("ends in padding"), "{e}");
    }
    let mut v = everything();
    v.outer.tag = "A B".into();
    assert!(v.encode().is_ok());
}
