//! `generated/c/seqbus.h` is what cbindgen makes of this crate today (SEQBUS_UPDATE_HEADER=1
//! rewrites it), and it holds no JNI function (those are the Java runtime's).

use std::path::PathBuf;

#[test]
fn the_committed_header_is_current() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let committed = crate_dir.join("../../../generated/c/seqbus.h");
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut made);
    let made = String::from_utf8(made).expect("UTF-8");
    assert!(!made.contains("Java_"), "a JNI function in the C header");
    assert!(made.contains("int32_t seqbus_node_open("), "{made}");
    if std::env::var_os("SEQBUS_UPDATE_HEADER").is_some() {
        std::fs::create_dir_all(committed.parent().unwrap()).unwrap();
        std::fs::write(&committed, &made).unwrap();
        return;
    }
    let old = std::fs::read_to_string(&committed).unwrap_or_default();
    assert!(
        old == made,
        "{} is not what cbindgen makes of rust/crates/ffi today: regenerate it with \
         SEQBUS_UPDATE_HEADER=1 cargo test -p seqbus-ffi --test header",
        committed.display()
    );
}
