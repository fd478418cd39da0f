//! libseqbus_ffi.so gets a SONAME: a C or C++ program linked against it then records the
//! name, not the path it was linked from, and finds it through its RPATH or the loader's path.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libseqbus_ffi.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
